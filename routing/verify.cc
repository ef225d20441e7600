#include "routing/verify.h"
#include "routing/parallel.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

namespace ibsm::routing {
namespace {


// Where an egress port leads: another switch, an end port, or nowhere.
struct Target {
  uint32_t sw = kNone;    // switch index of the peer, if the peer is a switch
  PortId end = kNoPort;   // peer port, if the peer is a CA or router
};

enum : uint8_t {
  kUnknown = 0,
  kOnStack,
  kDelivered,
  kFailed,       // dead end, missing entry or wrong destination somewhere on the way
  kLooped,
  kNotReachable  // owner not reachable over cables: nothing to check
};

class Verifier {
 public:
  Verifier(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
           size_t max_problems)
      : fabric_(fabric), lids_(lids), max_problems_(max_problems) {
    index_.assign(fabric.node_count(), kNone);
    for (NodeId n = 0; n < fabric.node_count(); ++n)
      if (fabric.node(n).is_switch()) {
        index_[n] = static_cast<uint32_t>(nodes_.size());
        nodes_.push_back(n);
      }
    const size_t S = nodes_.size();
    target_start_.push_back(0);
    lft_.resize(S);
    for (uint32_t s = 0; s < S; ++s) {
      const Node& node = fabric.node(nodes_[s]);
      for (uint32_t num = 0; num <= node.num_ports; ++num) {
        const Port& port = fabric.port(node.first_port + num);
        Target t;
        if (num != 0 && port.connected()) {
          const uint32_t remote = index_[fabric.port(port.peer).node];
          if (remote != kNone) t.sw = remote;
          else t.end = port.peer;
        }
        targets_.push_back(t);
      }
      target_start_.push_back(static_cast<uint32_t>(targets_.size()));
      if (const SwitchTable* table = tables.table(nodes_[s])) lft_[s] = &table->lft;
    }
    // Connected components of the switch graph decide which LIDs a switch must reach.
    component_.assign(S, kNone);
    std::vector<uint32_t> queue;
    for (uint32_t root = 0; root < S; ++root) {
      if (component_[root] != kNone) continue;
      component_[root] = root;
      queue.assign(1, root);
      while (!queue.empty()) {
        const uint32_t u = queue.back();
        queue.pop_back();
        for (uint32_t i = target_start_[u]; i < target_start_[u + 1]; ++i) {
          const uint32_t v = targets_[i].sw;
          if (v != kNone && component_[v] == kNone) component_[v] = root, queue.push_back(v);
        }
      }
    }
    // Who leads into each switch: (switch, port) pairs whose cable ends there.
    pred_start_.assign(S + 1, 0);
    for (const Target& t : targets_)
      if (t.sw != kNone) ++pred_start_[t.sw + 1];
    for (uint32_t s = 0; s < S; ++s) pred_start_[s + 1] += pred_start_[s];
    preds_.resize(pred_start_[S]);
    std::vector<uint32_t> fill(pred_start_.begin(), pred_start_.end() - 1);
    for (uint32_t s = 0; s < S; ++s)
      for (uint32_t i = target_start_[s]; i < target_start_[s + 1]; ++i)
        if (targets_[i].sw != kNone)
          preds_[fill[targets_[i].sw]++] = {s, static_cast<uint8_t>(i - target_start_[s])};
    // End ports (CAs, routers) attached to each switch: the sources of host traffic.
    sources_at_.assign(S, 0);
    for (PortId p : lids.end_ports()) {
      const uint32_t sw = AttachSwitch(p);
      if (sw != kNone && !fabric.node(fabric.port(p).node).is_switch()) ++sources_at_[sw];
    }
  }

  // LIDs are independent: workers claim blocks of 64 (one cache line of every table) from a
  // shared cursor; block reports are merged in LID order, so the result does not depend on
  // the schedule.
  // `only`: the LIDs to verify, ascending (all when null); they are split into blocks of 64
  // the same way. `changes` (beside `only`): for a LID whose changed switches it knows, only
  // the switches whose route runs into one are walked (verify.h), reading their entries
  // straight from the tables; a block's tile is gathered only for the LIDs walked whole.
  VerifyReport Run(unsigned threads, const std::vector<uint32_t>* only,
                   const EntryChanges* changes) {
    const uint32_t max_lid = lids_.max_lid();
    const uint32_t count = only ? static_cast<uint32_t>(only->size()) : max_lid + 1;
    const uint32_t blocks = count / 64 + 1;
    std::vector<VerifyReport> block_reports(blocks);
    std::atomic<uint32_t> next{0};
    auto worker = [&] {
      Scratch scratch;
      scratch.state.resize(nodes_.size());
      scratch.hops.resize(nodes_.size());
      scratch.tile.resize(nodes_.size() * 64);
      scratch.mark.resize(nodes_.size());
      for (uint32_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
        scratch.report = &block_reports[b];
        const uint32_t first = b * 64, n = std::min(count, first + 64) - first;
        auto lid_at = [&](uint32_t j) { return only ? (*only)[first + j] : first + j; };
        auto known = [&](uint32_t j) { return changes && only && changes->known[first + j]; };
        bool gather = false;
        for (uint32_t j = 0; j < n && !gather; ++j) gather = !known(j);
        // The block's entries of every switch, gathered row by row: the tables are row-major,
        // and a walk reading them column-wise missed the cache at every switch.
        for (size_t sw = 0; sw < nodes_.size() && gather; ++sw) {
          const std::vector<uint8_t>* lft = lft_[sw];
          uint8_t* row = &scratch.tile[sw * 64];
          for (uint32_t j = 0; j < n; ++j) {
            const uint32_t lid = lid_at(j);
            row[j] = lft && lid < lft->size() ? (*lft)[lid] : kDropPort;
          }
        }
        for (uint32_t j = 0; j < n; ++j) {
          const uint32_t lid = lid_at(j);
          if (lid == 0 || lid > max_lid) continue;
          const PortId owner = lids_.owner(Lid(static_cast<uint16_t>(lid)));
          scratch.col = j;
          if (owner == kNoPort) continue;
          scratch.direct = known(j);
          if (known(j)) {
            const uint32_t* nb = changes->nodes.data();
            VerifyLidPartly(static_cast<uint16_t>(lid), owner, nb + changes->begin[first + j],
                            nb + changes->begin[first + j + 1], scratch);
          } else {
            VerifyLid(static_cast<uint16_t>(lid), owner, scratch);
          }
        }
      }
    };
    RunWorkers(threads, blocks, [&worker](size_t) { worker(); });
    VerifyReport out;
    for (VerifyReport& r : block_reports) {
      out.missing_entries += r.missing_entries;
      out.loops += r.loops;
      out.misrouted_entries += r.misrouted_entries;
      out.unreachable_pairs += r.unreachable_pairs;
      for (auto& p : r.problems)
        if (out.problems.size() < max_problems_) out.problems.push_back(std::move(p));
    }
    out.ok = out.missing_entries == 0 && out.loops == 0 && out.misrouted_entries == 0 &&
             out.unreachable_pairs == 0 && out.problems.empty();
    return out;
  }

 private:
  // The switch that delivers end port `p` (itself for port 0), or kNone.
  uint32_t AttachSwitch(PortId p) const {
    const Port& port = fabric_.port(p);
    if (fabric_.node(port.node).is_switch()) return index_[port.node];
    if (!port.connected()) return kNone;
    return index_[fabric_.port(port.peer).node];
  }

  std::string SwitchName(uint32_t s) const {
    const Node& n = fabric_.node(nodes_[s]);
    return fmt::format("switch {} ({})", n.name.empty() ? n.description : n.name, n.guid);
  }
  std::string PortName(PortId p) const {
    const Port& port = fabric_.port(p);
    const Node& n = fabric_.node(port.node);
    return fmt::format("{} port {}", n.name.empty() ? n.description : n.name, port.num);
  }

  // What one worker thread owns.
  struct Scratch {
    std::vector<uint8_t> state;  // per switch, for the LID being verified
    std::vector<uint8_t> hops;
    std::vector<uint32_t> stack;
    std::vector<uint8_t> tile;  // the block's entries, switch-major (64 a switch)
    size_t col = 0;             // the LID being verified: its column of the tile
    VerifyReport* report = nullptr;  // of the LID block being verified
    // Walking only where a change can reach (VerifyLidPartly): entries read from the tables,
    // not the tile; the switches to start from; every switch given a state, to clear after.
    bool direct = false;
    bool dirty = false;  // `state` holds a whole walk's outcomes (a partial walk clears its own)
    std::vector<uint8_t> mark;
    std::vector<uint32_t> closure, visited;
  };

  template <typename... Args>
  void Problem(Scratch& w, fmt::format_string<Args...> f, Args&&... args) {
    if (w.report->problems.size() < max_problems_)
      w.report->problems.push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  uint8_t Entry(const Scratch& w, uint32_t s, uint16_t lid) const {
    if (!w.direct) return w.tile[size_t{s} * 64 + w.col];
    const std::vector<uint8_t>* lft = lft_[s];
    return lft && lid < lft->size() ? (*lft)[lid] : kDropPort;
  }

  // Every switch: what following the tables from it gives (one walk each, memoised).
  void VerifyLid(uint16_t lid, PortId owner, Scratch& w) {
    const size_t S = nodes_.size();
    const uint32_t dest = AttachSwitch(owner);
    std::fill(w.state.begin(), w.state.end(), kUnknown);
    w.dirty = true;
    for (uint32_t start = 0; start < S; ++start)
      if (w.state[start] == kUnknown) Walk(start, lid, owner, dest, w);
    for (uint32_t s = 0; s < S; ++s) CountUnreachable(s, owner, dest, w);
  }

  // The same report for a LID whose entries differ from tables that passed, with the owner
  // cabled as before, only at the switches [first, last) (or into a cable that changed there):
  // the route from any other switch that never enters one of them is the old one, over the
  // same cables, and delivers as it did. So only the switches whose route enters one are
  // walked, found backwards from them, in the order the whole walk starts them; the problems
  // and counts come out the same. A change reaching much of the fabric is walked whole.
  void VerifyLidPartly(uint16_t lid, PortId owner, const NodeId* first, const NodeId* last,
                       Scratch& w) {
    const uint32_t S = static_cast<uint32_t>(nodes_.size());
    w.closure.clear();
    bool whole = false;
    for (const NodeId* n = first; n != last; ++n) {
      const uint32_t s = *n < index_.size() ? index_[*n] : kNone;
      if (s == kNone) {
        whole = true;
        break;
      }
      if (!w.mark[s]) w.mark[s] = 1, w.closure.push_back(s);
    }
    for (size_t i = 0; i < w.closure.size() && !whole; ++i) {
      const uint32_t x = w.closure[i];
      for (uint32_t k = pred_start_[x]; k < pred_start_[x + 1]; ++k) {
        const auto [y, port] = preds_[k];
        if (w.mark[y] || Entry(w, y, lid) != port) continue;
        w.mark[y] = 1;
        w.closure.push_back(y);
      }
      whole = w.closure.size() > S / 4;
    }
    for (uint32_t s : w.closure) w.mark[s] = 0;
    if (whole) {
      // Not worth it, or a switch this fabric does not have: every switch, read directly.
      VerifyLid(lid, owner, w);
      return;
    }
    const uint32_t dest = AttachSwitch(owner);
    std::sort(w.closure.begin(), w.closure.end());
    if (w.dirty) std::fill(w.state.begin(), w.state.end(), kUnknown), w.dirty = false;
    w.visited.clear();
    for (uint32_t start : w.closure)
      if (w.state[start] == kUnknown) Walk(start, lid, owner, dest, w);
    for (uint32_t s : w.visited) CountUnreachable(s, owner, dest, w);
    for (uint32_t s : w.visited) w.state[s] = kUnknown;
  }

  void CountUnreachable(uint32_t s, PortId owner, uint32_t dest, Scratch& w) {
    if (w.state[s] == kDelivered || w.state[s] == kNotReachable || sources_at_[s] == 0) return;
    const uint32_t self = (s == dest && !fabric_.node(fabric_.port(owner).node).is_switch());
    w.report->unreachable_pairs += sources_at_[s] - self;
  }

  // Follows the tables from `start` until the walk delivers, fails, loops or meets a switch
  // already walked; every switch on it gets the outcome.
  void Walk(uint32_t start, uint16_t lid, PortId owner, uint32_t dest, Scratch& w) {
    std::vector<uint8_t>& state_ = w.state;
    std::vector<uint8_t>& hops_ = w.hops;
    std::vector<uint32_t>& stack_ = w.stack;
    VerifyReport& report_ = *w.report;
    stack_.clear();
    uint32_t cur = start;
    uint8_t result = kFailed;
    uint32_t tail_hops = 0;  // switches from the walk's end to delivery
    while (true) {
      if (state_[cur] == kOnStack) {
        ++report_.loops;
        std::string cycle;
        auto it = std::find(stack_.begin(), stack_.end(), cur);
        for (; it != stack_.end(); ++it) cycle += fmt::format("{} -> ", fabric_.node(nodes_[*it]).name);
        Problem(w, "LID {} loops: {}{}", lid, cycle, fabric_.node(nodes_[cur]).name);
        result = kLooped;
        break;
      }
      if (state_[cur] != kUnknown) {
        result = state_[cur];
        tail_hops = hops_[cur];
        break;
      }
      if (w.direct && !w.dirty) w.visited.push_back(cur);
      if (dest == kNone || component_[cur] != component_[dest]) {
        state_[cur] = kNotReachable;
        result = kNotReachable;
        break;
      }
      state_[cur] = kOnStack;
      stack_.push_back(cur);
      const uint8_t port = Entry(w, cur, lid);
      const uint32_t num_ports = target_start_[cur + 1] - target_start_[cur] - 1;
      if (port == kDropPort) {
        ++report_.missing_entries;
        Problem(w, "{} has no route to LID {}", SwitchName(cur), lid);
        break;
      }
      if (port > num_ports) {
        ++report_.misrouted_entries;
        Problem(w, "{} routes LID {} to port {}, but has only {} ports", SwitchName(cur), lid,
                port, num_ports);
        break;
      }
      if (port == 0) {
        if (fabric_.node(fabric_.port(owner).node).is_switch() && cur == dest) {
          result = kDelivered;
        } else {
          ++report_.misrouted_entries;
          Problem(w, "{} keeps LID {} (port 0), but it belongs to {}", SwitchName(cur), lid,
                  PortName(owner));
        }
        break;
      }
      const Target& t = targets_[target_start_[cur] + port];
      if (t.sw != kNone) {
        cur = t.sw;
        continue;
      }
      if (t.end == owner) {
        result = kDelivered;
      } else if (t.end == kNoPort) {
        ++report_.misrouted_entries;
        Problem(w, "{} routes LID {} to port {}, which has no cable", SwitchName(cur), lid, port);
      } else {
        ++report_.misrouted_entries;
        Problem(w, "{} routes LID {} to port {}, reaching {} instead of {}", SwitchName(cur), lid,
                port, PortName(t.end), PortName(owner));
      }
      break;
    }
    // Unwind: every switch on the walk shares its outcome; delivered walks also get their
    // distance, and a walk that only delivers after too many hops counts as failed.
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
      const uint32_t s = *it;
      if (result == kDelivered) {
        ++tail_hops;
        if (tail_hops > kMaxVerifiedHops) {
          Problem(w, "{} reaches LID {} only after more than {} hops", SwitchName(s), lid,
                  kMaxVerifiedHops);
          result = kFailed;
        }
      }
      state_[s] = result;
      hops_[s] = static_cast<uint8_t>(std::min<uint32_t>(tail_hops, 255));
    }
  }

  const Fabric& fabric_;
  const LidMap& lids_;
  const size_t max_problems_;
  std::vector<NodeId> nodes_;                 // switch index -> NodeId
  std::vector<uint32_t> index_;               // NodeId -> switch index
  std::vector<uint32_t> target_start_;        // per switch: offset of its port 0 in targets_
  std::vector<Target> targets_;
  std::vector<const std::vector<uint8_t>*> lft_;
  std::vector<uint32_t> pred_start_;                    // per switch: offset into preds_
  std::vector<std::pair<uint32_t, uint8_t>> preds_;     // (switch, its port) leading here
  std::vector<uint32_t> component_;
  std::vector<uint32_t> sources_at_;
};

}  // namespace

VerifyReport VerifyTables(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
                          size_t max_problems, unsigned threads,
                          const std::vector<uint32_t>* only_lids,
                          const EntryChanges* changes) {
  return Verifier(fabric, lids, tables, max_problems).Run(threads, only_lids, changes);
}

}  // namespace ibsm::routing
