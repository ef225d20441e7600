#include "routing/updn_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "fabric/aggregation_node.h"
#include "routing/lft_builder.h"
#include "routing/parallel.h"

namespace ibsm::routing {
namespace {

// One byte per (source switch, destination switch): how the source routes and in how many
// switch hops. "First" moves are the ones a route starts with (up for updn, down for dnup),
// "second" moves the ones it ends with.
constexpr uint8_t kSecondOnly = 0x00;  // reaches d by second-kind moves only
constexpr uint8_t kFirst = 0x40;       // makes a first-kind move, then follows the rule
constexpr uint8_t kOffRule = 0x80;     // no legal route (switch LIDs only, see the header)
constexpr uint8_t kModeMask = 0xC0;
constexpr uint8_t kDistMask = 0x3F;
constexpr uint8_t kNoRoute = 0xFF;
constexpr uint32_t kMaxHops = 63;

// Ranks, move directions and the distance matrix of one engine run.
class UpDnPlanner {
 public:
  UpDnPlanner(const Fabric& fabric, const RoutingOptions& options, bool dnup)
      : fabric_(fabric), options_(options), dnup_(dnup), graph_(SwitchGraph::Build(fabric)) {}

  // Ranks every component, computes the matrix, falls back to the centre where a detected
  // ranking fails. On success matrix() and ranks() are valid.
  Status Plan(bool keep_matrix) {
    const size_t S = graph_.switch_count();
    FindComponents();
    FindHeights();
    IBSM_RETURN_IF_ERROR(ChooseTops());
    matrix_.assign(keep_matrix ? S * S : 0, kNoRoute);
    keep_matrix_ = keep_matrix;
    std::vector<SwitchIdx> all(S);
    for (SwitchIdx s = 0; s < S; ++s) all[s] = s;
    Orient();
    ComputeDistances(all);
    // Components whose detected ranking fails a CA-carrying destination: one top, the centre.
    std::vector<SwitchIdx> redo;
    for (uint32_t c = 0; c < comps_.size(); ++c) {
      if (bad_dest_[c] == kNoSwitch) continue;
      if (comps_[c].source == UpDnRanks::TopSource::kRootGuids) {
        const SwitchIdx d = bad_dest_[c];
        return FailedPrecondition(fmt::format(
            "root_guid_file roots leave no {} route from {} to {}", dnup_ ? "down*/up*" : "up*/down*",
            DescribeNode(fabric_, graph_.node(bad_src_[d])), DescribeNode(fabric_, graph_.node(d))));
      }
      RankFromCentre(c);
      for (SwitchIdx s : members_[c]) redo.push_back(s);
    }
    if (!redo.empty()) {
      for (uint32_t c = 0; c < comps_.size(); ++c) bad_dest_[c] = kNoSwitch;
      Orient();
      ComputeDistances(redo);
      for (uint32_t c = 0; c < comps_.size(); ++c)
        if (bad_dest_[c] != kNoSwitch)
          return Internal("up*/down* ranking from the graph centre left a pair unrouted");
    }
    if (too_long_.load())
      return FailedPrecondition(
          fmt::format("a legal route would need more than {} switch hops", kMaxHops));
    return Status::Ok();
  }

  UpDnRanks Ranks() const {
    UpDnRanks out;
    out.dnup = dnup_;
    out.rank.assign(fabric_.node_count(), kNoRank);
    for (SwitchIdx s = 0; s < graph_.switch_count(); ++s) out.rank[graph_.node(s)] = rank_[s];
    out.components = comps_;
    for (uint64_t n : off_rule_) out.off_rule_pairs += n;
    return out;
  }

  const SwitchGraph& graph() const { return graph_; }
  const std::vector<uint8_t>& matrix() const { return matrix_; }
  // True when the hop s -> n is a first-kind move.
  bool First(SwitchIdx s, SwitchIdx n) const { return climb_[n] < climb_[s]; }

 private:
  void FindComponents() {
    const size_t S = graph_.switch_count();
    comp_.assign(S, UINT32_MAX);
    std::vector<SwitchIdx> queue;
    for (SwitchIdx s = 0; s < S; ++s) {
      if (comp_[s] != UINT32_MAX) continue;
      const uint32_t c = static_cast<uint32_t>(members_.size());
      queue.assign(1, s);
      comp_[s] = c;
      for (size_t head = 0; head < queue.size(); ++head)
        for (auto* l = graph_.links_begin(queue[head]); l != graph_.links_end(queue[head]); ++l)
          if (comp_[l->remote] == UINT32_MAX) comp_[l->remote] = c, queue.push_back(l->remote);
      std::sort(queue.begin(), queue.end());
      members_.push_back(queue);
    }
    comps_.assign(members_.size(), {});
    for (uint32_t c = 0; c < members_.size(); ++c)
      comps_[c].switches = static_cast<uint32_t>(members_[c].size());
  }

  // height = hops from the nearest switch with a CA (or router) attached.
  void FindHeights() {
    const size_t S = graph_.switch_count();
    leaf_.assign(S, 0);
    height_.assign(S, kNoRank);
    std::vector<SwitchIdx> queue;
    for (SwitchIdx s = 0; s < S; ++s) {
      const Node& node = fabric_.node(graph_.node(s));
      for (uint32_t num = 1; num <= node.num_ports && !leaf_[s]; ++num) {
        const Port& p = fabric_.port(node.first_port + num);
        // A SHARP aggregation node (on every tier) does not make a switch a leaf.
        leaf_[s] = p.connected() && !fabric_.node(fabric_.port(p.peer).node).is_switch() &&
                   !IsAggregationNode(fabric_.node(fabric_.port(p.peer).node));
      }
      if (leaf_[s]) height_[s] = 0, queue.push_back(s);
    }
    Bfs(queue, height_);
  }

  // Multi-source BFS over switch cables; `dist` holds 0 at the sources, kNoRank elsewhere.
  void Bfs(std::vector<SwitchIdx>& queue, std::vector<uint32_t>& dist) const {
    for (size_t head = 0; head < queue.size(); ++head) {
      const SwitchIdx u = queue[head];
      for (auto* l = graph_.links_begin(u); l != graph_.links_end(u); ++l)
        if (dist[l->remote] == kNoRank) dist[l->remote] = dist[u] + 1, queue.push_back(l->remote);
    }
  }

  Status ChooseTops() {
    const size_t S = graph_.switch_count();
    rank_.assign(S, kNoRank);
    std::vector<uint8_t> is_root(S, 0);
    if (!dnup_ && !options_.root_guids.empty()) {
      size_t known = 0;
      std::string unknown;
      for (Guid g : options_.root_guids) {
        const auto n = fabric_.FindNode(g);
        const SwitchIdx s = n ? graph_.index(*n) : kNoSwitch;
        if (s == kNoSwitch) {
          if (!unknown.empty()) unknown += ", ";
          unknown += fmt::format("0x{:016x}", g.value());
          continue;
        }
        is_root[s] = 1;
        ++known;
      }
      if (known == 0)
        return FailedPrecondition(
            fmt::format("none of the root GUIDs names a switch in the fabric: {}", unknown));
    }
    bad_dest_.assign(members_.size(), kNoSwitch);
    std::vector<SwitchIdx> queue;
    for (uint32_t c = 0; c < members_.size(); ++c) {
      UpDnRanks::Component& comp = comps_[c];
      queue.clear();
      for (SwitchIdx s : members_[c])
        if (is_root[s]) queue.push_back(s);
      uint32_t top_height = 0;
      for (SwitchIdx s : members_[c])
        if (height_[s] != kNoRank) top_height = std::max(top_height, height_[s]);
      const bool has_leaf = height_[members_[c].front()] != kNoRank;
      if (!queue.empty()) {
        comp.source = UpDnRanks::TopSource::kRootGuids;
      } else if (!has_leaf) {
        RankFromCentre(c);
        continue;
      } else {
        comp.source = UpDnRanks::TopSource::kMaxHeight;
        for (SwitchIdx s : members_[c])
          if (height_[s] == top_height) queue.push_back(s);
      }
      comp.tops.clear();
      for (SwitchIdx s : queue) comp.tops.push_back(graph_.node(s));
      if (dnup_) {
        for (SwitchIdx s : members_[c]) rank_[s] = height_[s];
      } else {
        for (SwitchIdx s : queue) rank_[s] = 0;
        Bfs(queue, rank_);
      }
    }
    return Status::Ok();
  }

  // One top for component c: the switch of least eccentricity (ties: lowest node GUID).
  // updn ranks by distance from it; dnup by (eccentricity - distance), so that it is the one
  // highest switch.
  void RankFromCentre(uint32_t c) {
    const std::vector<SwitchIdx>& members = members_[c];
    std::vector<uint32_t> ecc(members.size(), 0);
    const size_t S = graph_.switch_count();
    ParallelFor(members.size(), options_.threads, [&](size_t i) {
      thread_local std::vector<uint32_t> dist;
      thread_local std::vector<SwitchIdx> queue;
      dist.assign(S, kNoRank);
      queue.assign(1, members[i]);
      dist[members[i]] = 0;
      Bfs(queue, dist);
      ecc[i] = dist[queue.back()];
    });
    size_t best = 0;
    for (size_t i = 1; i < members.size(); ++i) {
      const Guid g = fabric_.node(graph_.node(members[i])).guid;
      const Guid bg = fabric_.node(graph_.node(members[best])).guid;
      if (ecc[i] < ecc[best] || (ecc[i] == ecc[best] && g.value() < bg.value())) best = i;
    }
    const SwitchIdx centre = members[best];
    for (SwitchIdx s : members) rank_[s] = kNoRank;
    std::vector<SwitchIdx> queue(1, centre);
    rank_[centre] = 0;
    Bfs(queue, rank_);
    if (dnup_)
      for (SwitchIdx s : members) rank_[s] = ecc[best] - rank_[s];
    comps_[c].source = UpDnRanks::TopSource::kGraphCentre;
    comps_[c].tops.assign(1, graph_.node(centre));
  }

  // climb_[s]: position in the order of first-kind moves (a first-kind move goes to a lower
  // climb_). updn: ascending (rank, GUID); dnup: descending. Then, per switch, the neighbours
  // that reach it by a first-kind move (climbers) and by a second-kind move (descenders).
  void Orient() {
    const size_t S = graph_.switch_count();
    std::vector<SwitchIdx> order(S);
    for (SwitchIdx s = 0; s < S; ++s) order[s] = s;
    auto key = [&](SwitchIdx s) {
      return std::pair(rank_[s], fabric_.node(graph_.node(s)).guid.value());
    };
    std::sort(order.begin(), order.end(), [&](SwitchIdx a, SwitchIdx b) { return key(a) < key(b); });
    climb_.assign(S, 0);
    for (uint32_t i = 0; i < S; ++i) climb_[order[i]] = dnup_ ? static_cast<uint32_t>(S - 1 - i) : i;
    climber_start_.assign(S + 1, 0);
    descender_start_.assign(S + 1, 0);
    climbers_.clear();
    descenders_.clear();
    for (SwitchIdx v = 0; v < S; ++v) {
      for (auto* l = graph_.links_begin(v); l != graph_.links_end(v); ++l)
        (First(l->remote, v) ? climbers_ : descenders_).push_back(l->remote);
      climber_start_[v + 1] = static_cast<uint32_t>(climbers_.size());
      descender_start_[v + 1] = static_cast<uint32_t>(descenders_.size());
    }
  }

  // Fills the matrix columns of `dests` (blocks of 64 destinations per task, written back
  // transposed so that each source's row is contiguous).
  void ComputeDistances(const std::vector<SwitchIdx>& dests) {
    const size_t S = graph_.switch_count();
    bad_src_.resize(S, kNoSwitch);
    off_rule_.resize(S, 0);
    constexpr size_t kBlock = 64;
    const size_t blocks = (dests.size() + kBlock - 1) / kBlock;
    std::vector<std::atomic<SwitchIdx>> bad(comps_.size());
    for (auto& b : bad) b.store(kNoSwitch);
    ParallelFor(blocks, options_.threads, [&](size_t b) {
      thread_local std::vector<uint8_t> cols;
      thread_local std::vector<SwitchIdx> q1, q2, q3, popped;
      const size_t first = b * kBlock, n = std::min(kBlock, dests.size() - first);
      cols.assign(n * S, kNoRoute);
      for (size_t j = 0; j < n; ++j) {
        const SwitchIdx d = dests[first + j];
        Column(d, cols.data() + j * S, q1, q2, q3, popped);
        if (bad_src_[d] != kNoSwitch) {
          // Keep the lowest failing destination of the component, for a stable message.
          std::atomic<SwitchIdx>& slot = bad[comp_[d]];
          SwitchIdx cur = slot.load();
          while (d < cur && !slot.compare_exchange_weak(cur, d)) {
          }
        }
      }
      if (!keep_matrix_) return;
      for (size_t s = 0; s < S; ++s) {
        uint8_t* row = matrix_.data() + s * S;
        for (size_t j = 0; j < n; ++j) row[dests[first + j]] = cols[j * S + s];
      }
    });
    for (uint32_t c = 0; c < comps_.size(); ++c)
      if (bad[c].load() != kNoSwitch) bad_dest_[c] = bad[c].load();
  }

  // One destination: col[s] for every switch s.
  void Column(SwitchIdx d, uint8_t* col, std::vector<SwitchIdx>& q1, std::vector<SwitchIdx>& q2,
              std::vector<SwitchIdx>& q3, std::vector<SwitchIdx>& popped) {
    bad_src_[d] = kNoSwitch;
    off_rule_[d] = 0;
    // Second-kind moves only: reverse BFS from d over the neighbours that descend into it.
    q1.assign(1, d);
    col[d] = kSecondOnly;
    for (size_t head = 0; head < q1.size(); ++head) {
      const SwitchIdx v = q1[head];
      const uint32_t dist = col[v] & kDistMask;
      for (uint32_t i = descender_start_[v]; i < descender_start_[v + 1]; ++i) {
        const SwitchIdx u = descenders_[i];
        if (col[u] != kNoRoute) continue;
        if (dist + 1 > kMaxHops) {
          too_long_.store(true);
          continue;
        }
        col[u] = static_cast<uint8_t>(kSecondOnly | (dist + 1));
        q1.push_back(u);
      }
    }
    // Everyone else climbs: merge q1 (already in distance order) with the climbers found.
    q2.clear();
    popped.clear();
    size_t i1 = 0, i2 = 0;
    while (i1 < q1.size() || i2 < q2.size()) {
      const bool take1 = i2 == q2.size() ||
                         (i1 < q1.size() && (col[q1[i1]] & kDistMask) <= (col[q2[i2]] & kDistMask));
      const SwitchIdx v = take1 ? q1[i1++] : q2[i2++];
      popped.push_back(v);
      const uint32_t dist = col[v] & kDistMask;
      for (uint32_t i = climber_start_[v]; i < climber_start_[v + 1]; ++i) {
        const SwitchIdx u = climbers_[i];
        if (col[u] != kNoRoute) continue;
        if (dist + 1 > kMaxHops) {
          too_long_.store(true);
          continue;
        }
        col[u] = static_cast<uint8_t>(kFirst | (dist + 1));
        q2.push_back(u);
      }
    }
    if (popped.size() == comps_[comp_[d]].switches) return;
    // CA traffic enters at switches with CAs: each of them needs a legal route to d if d
    // delivers CA LIDs.
    if (leaf_[d]) {
      for (SwitchIdx s : members_[comp_[d]])
        if (col[s] == kNoRoute && leaf_[s]) {
          bad_src_[d] = s;
          return;
        }
    }
    // Switches that only their own management traffic can make use this route: the shortest
    // way into the legal region, any direction.
    q3.clear();
    size_t ip = 0, i3 = 0;
    while (ip < popped.size() || i3 < q3.size()) {
      const bool takep = i3 == q3.size() || (ip < popped.size() && (col[popped[ip]] & kDistMask) <=
                                                                        (col[q3[i3]] & kDistMask));
      const SwitchIdx v = takep ? popped[ip++] : q3[i3++];
      const uint32_t dist = col[v] & kDistMask;
      for (auto* l = graph_.links_begin(v); l != graph_.links_end(v); ++l) {
        const SwitchIdx u = l->remote;
        if (col[u] != kNoRoute) continue;
        if (dist + 1 > kMaxHops) {
          too_long_.store(true);
          continue;
        }
        col[u] = static_cast<uint8_t>(kOffRule | (dist + 1));
        q3.push_back(u);
      }
    }
    off_rule_[d] = q3.size();
  }

  const Fabric& fabric_;
  const RoutingOptions& options_;
  const bool dnup_;
  const SwitchGraph graph_;
  bool keep_matrix_ = false;

  std::vector<uint32_t> comp_;                  // by switch
  std::vector<std::vector<SwitchIdx>> members_; // by component, ascending
  std::vector<UpDnRanks::Component> comps_;
  std::vector<uint8_t> leaf_;
  std::vector<uint32_t> height_, rank_, climb_;
  std::vector<uint32_t> climber_start_, descender_start_;
  std::vector<SwitchIdx> climbers_, descenders_;
  std::vector<uint8_t> matrix_;                 // [source][destination]
  std::vector<SwitchIdx> bad_src_;              // by destination: a source without legal route
  std::vector<SwitchIdx> bad_dest_;             // by component
  std::vector<uint64_t> off_rule_;              // by destination
  std::atomic<bool> too_long_{false};
};

class UpDnCandidates final : public CandidateSource {
 public:
  explicit UpDnCandidates(const UpDnPlanner& plan) : plan_(plan) {}

  void Candidates(SwitchIdx s, uint64_t* masks) const override {
    const SwitchGraph& g = plan_.graph();
    const size_t S = g.switch_count();
    const uint32_t words = CandidateMaskWords(g.link_count(s));
    const uint8_t* own = plan_.matrix().data() + s * S;
    uint32_t i = 0;
    for (auto* l = g.links_begin(s); l != g.links_end(s); ++l, ++i) {
      const uint8_t* far = plan_.matrix().data() + size_t{l->remote} * S;
      uint64_t* word = masks + i / 64;
      const uint64_t bit = uint64_t{1} << (i % 64);
      if (plan_.First(s, l->remote)) {
        for (size_t d = 0; d < S; ++d) {
          const uint8_t o = own[d], v = far[d];
          const bool step = (v & kDistMask) + 1 == (o & kDistMask);
          const uint8_t mode = o & kModeMask;
          if (step && ((mode == kFirst && v < kOffRule) || (mode == kOffRule && v != kNoRoute)))
            word[d * words] |= bit;
        }
      } else {
        for (size_t d = 0; d < S; ++d) {
          const uint8_t o = own[d], v = far[d];
          const uint8_t mode = o & kModeMask;
          if ((mode == kSecondOnly && v + 1 == o) ||
              (mode == kOffRule && v != kNoRoute && (v & kDistMask) + 1 == (o & kDistMask)))
            word[d * words] |= bit;
        }
      }
    }
    // Off-rule routes take one path: the lowest candidate port.
    for (size_t d = 0; d < S; ++d) {
      if ((own[d] & kModeMask) != kOffRule || own[d] == kNoRoute) continue;
      uint64_t* m = masks + d * words;
      uint32_t w = 0;
      while (w < words && m[w] == 0) ++w;
      if (w == words) continue;
      m[w] &= ~m[w] + 1;
      for (++w; w < words; ++w) m[w] = 0;
    }
  }

 private:
  const UpDnPlanner& plan_;
};

}  // namespace

Result<UpDnRanks> ComputeUpDnRanks(const Fabric& fabric, const RoutingOptions& options,
                                   bool dnup) {
  UpDnPlanner plan(fabric, options, dnup);
  IBSM_RETURN_IF_ERROR(plan.Plan(/*keep_matrix=*/false));
  return plan.Ranks();
}

Result<RoutingTables> UpDnEngine::Route(const Fabric& fabric, const LidMap& lids,
                                        const RoutingOptions& options) const {
  UpDnPlanner plan(fabric, options, dnup_);
  IBSM_RETURN_IF_ERROR(plan.Plan(/*keep_matrix=*/true));
  return BuildLfts(fabric, lids, plan.graph(), UpDnCandidates(plan), options, name());
}

std::unique_ptr<RoutingEngine> MakeUpDn() { return std::make_unique<UpDnEngine>(false); }
std::unique_ptr<RoutingEngine> MakeDnUp() { return std::make_unique<UpDnEngine>(true); }

}  // namespace ibsm::routing
