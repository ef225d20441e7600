#include "routing/quality.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <utility>

#include "fabric/aggregation_node.h"
#include "routing/channel_graph.h"
#include "routing/split_mix.h"
#include "routing/parallel.h"

namespace ibsm::routing {
namespace {

// Longest route followed, in switches; VerifyTables uses the same limit.
constexpr uint32_t kMaxSwitches = 64;

// The switches, their tables and the cables as dense arrays for the hot loops.
struct SwitchView {
  std::vector<NodeId> nodes;        // switch index -> NodeId (NodeId order)
  std::vector<uint32_t> index;      // NodeId -> switch index, kNone for other nodes
  std::vector<const uint8_t*> lft;  // per switch; nullptr without a table
  std::vector<uint32_t> lft_size;
  std::vector<uint8_t> num_ports;
  std::vector<PortId> first_port;
  std::vector<PortId> peer;       // by PortId: the port at the other end, or kNoPort
  std::vector<uint32_t> peer_sw;  // by PortId: switch index at the other end, or kNone

  SwitchView(const Fabric& fabric, const RoutingTables& tables) {
    index.assign(fabric.node_count(), kNone);
    for (NodeId n = 0; n < fabric.node_count(); ++n) {
      const Node& node = fabric.node(n);
      if (!node.is_switch() || node.first_port == kNoPort) continue;
      index[n] = static_cast<uint32_t>(nodes.size());
      nodes.push_back(n);
      const SwitchTable* t = tables.table(n);
      lft.push_back(t && !t->lft.empty() ? t->lft.data() : nullptr);
      lft_size.push_back(t ? static_cast<uint32_t>(t->lft.size()) : 0);
      num_ports.push_back(node.num_ports);
      first_port.push_back(node.first_port);
    }
    peer.assign(fabric.port_count(), kNoPort);
    peer_sw.assign(fabric.port_count(), kNone);
    for (PortId p = 0; p < fabric.port_count(); ++p) {
      const Port& port = fabric.port(p);
      if (!port.connected() || port.num.value() == 0 || port.peer >= fabric.port_count()) continue;
      peer[p] = port.peer;
      const NodeId remote = fabric.port(port.peer).node;
      if (remote < index.size()) peer_sw[p] = index[remote];
    }
  }

  size_t size() const { return nodes.size(); }
  // The egress port of switch `s` for `lid`, or kDropPort when the table has none.
  uint8_t Entry(uint32_t s, uint32_t lid) const {
    return lid < lft_size[s] ? lft[s][lid] : kDropPort;
  }
  // The channel (egress PortId) of switch s's port p, or kNoPort when p is 0, out of range
  // or uncabled.
  PortId Channel(uint32_t s, uint8_t p) const {
    if (p == 0 || p > num_ports[s]) return kNoPort;
    const PortId c = first_port[s] + p;
    return peer[c] == kNoPort ? kNoPort : c;
  }
};

std::string NodeLabel(const Fabric& fabric, NodeId n) {
  const Node& node = fabric.node(n);
  return fmt::format("{} ({})", node.name.empty() ? node.description : node.name, node.guid);
}

// ---- Credit loops ---------------------------------------------------------------------

using PortSet = ChannelGraph::PortSet;

class CreditLoopChecker {
 public:
  CreditLoopChecker(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables)
      : fabric_(fabric),
        view_(fabric, tables),
        graph_(std::vector<uint32_t>(view_.num_ports.begin(), view_.num_ports.end())) {
    owned_.assign(static_cast<size_t>(lids.max_lid()) + 1, 0);
    switch_lid_.assign(owned_.size(), kNone);
    for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid) {
      const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
      if (owner == kNoPort) continue;
      owned_[lid] = 1;
      const Node& on = fabric.node(fabric.port(owner).node);
      if (on.is_switch() || IsAggregationNode(on)) switch_lid_[lid] = switch_lids_++;
    }
    MarkHostRoutesToSwitches();
  }

  CreditLoopReport Run(unsigned threads) {
    BuildDependencies(threads);
    CreditLoopReport report;
    for (uint32_t s = 0; s < view_.size(); ++s)
      for (uint32_t p = 1; p <= view_.num_ports[s]; ++p)
        report.channels += view_.peer_sw[view_.first_port[s] + p] != kNone;
    report.dependencies = graph_.dependencies();
    std::vector<uint32_t> cycle =
        graph_.FindCycle([this](uint32_t c) { return NextSwitch(c); });
    if (cycle.empty()) return report;
    report.acyclic = false;
    for (size_t i = 0; i < cycle.size(); ++i) {
      const uint32_t c = cycle[i];
      const uint32_t s = graph_.switch_of(c);
      report.cycle.push_back(
          fmt::format("{} port {}", NodeLabel(fabric_, view_.nodes[s]), graph_.port_of(c)));
      report.cycle_lids.push_back(WitnessLid(c, cycle[(i + 1) % cycle.size()]));
    }
    return report;
  }

 private:
  // The switch at the far end of channel c.
  uint32_t NextSwitch(uint32_t c) const {
    const uint32_t s = graph_.switch_of(c);
    return view_.peer_sw[view_.first_port[s] + graph_.port_of(c)];
  }

  // Whether switch a's entry for `lid` carries credit-controlled traffic (see the header).
  bool Carries(uint32_t a, uint32_t lid) const {
    if (!owned_[lid]) return false;
    const uint32_t i = switch_lid_[lid];
    return i == kNone || (used_[a * words_ + (i >> 6)] >> (i & 63) & 1);
  }

  // used_[a] gets bit i when a route from a switch with a CA or router cabled towards the i-th
  // switch LID crosses switch a. Each walk stops at a switch already marked for that LID.
  void MarkHostRoutesToSwitches() {
    const size_t S = view_.size();
    words_ = (switch_lids_ + 63) / 64;
    used_.assign(S * words_, 0);
    std::vector<uint32_t> leaves;
    for (uint32_t s = 0; s < S; ++s)
      for (uint32_t p = 1; p <= view_.num_ports[s]; ++p) {
        const PortId c = view_.first_port[s] + p;
        if (view_.peer[c] != kNoPort && view_.peer_sw[c] == kNone &&
            !IsAggregationNode(fabric_.node(fabric_.port(view_.peer[c]).node))) {
          leaves.push_back(s);
          break;
        }
      }
    for (uint32_t lid = 1; lid < switch_lid_.size(); ++lid) {
      const uint32_t i = switch_lid_[lid];
      if (i == kNone) continue;
      const uint64_t bit = uint64_t{1} << (i & 63);
      for (uint32_t s : leaves)
        for (uint32_t cur = s, n = 0; cur != kNone && n < kMaxSwitches; ++n) {
          uint64_t& w = used_[cur * words_ + (i >> 6)];
          if (w & bit) break;
          w |= bit;
          const PortId c = view_.Channel(cur, view_.Entry(cur, lid));
          cur = c == kNoPort ? kNone : view_.peer_sw[c];
        }
    }
  }

  // deps_[channel (a, pa)] gets port pb of b = peer of (a, pa) for every LID that a sends out
  // of pa and b forwards out of pb to another switch. The LIDs of `a` are first grouped by
  // egress port, so that b's table is then read as one ascending stream per neighbour
  // instead of up to 64 interleaved ones (5x faster on a k=64 fat tree). Each worker owns
  // whole switches `a`, so it writes only its own channels' sets.
  void BuildDependencies(unsigned threads) {
    const size_t S = view_.size();
    const uint32_t lid_end = static_cast<uint32_t>(owned_.size());
    std::atomic<size_t> next{0};
    RunWorkers(threads, S, [&](size_t) {
      std::vector<uint32_t> start(257), by_port(lid_end);
      for (size_t a; (a = next.fetch_add(1, std::memory_order_relaxed)) < S;) {
        const uint8_t* lft_a = view_.lft[a];
        if (!lft_a) continue;
        const uint32_t end = std::min(view_.lft_size[a], lid_end);
        const uint8_t np_a = view_.num_ports[a];
        const PortId fp_a = view_.first_port[a];
        auto counts = [&](uint32_t lid) {
          const uint8_t pa = lft_a[lid];
          return pa != 0 && pa <= np_a && view_.peer_sw[fp_a + pa] != kNone &&
                 Carries(static_cast<uint32_t>(a), lid);
        };
        std::fill(start.begin(), start.end(), 0);
        for (uint32_t lid = 1; lid < end; ++lid)
          if (counts(lid)) ++start[lft_a[lid]];
        uint32_t sum = 0;
        for (uint32_t p = 0; p <= np_a; ++p) sum += std::exchange(start[p], sum);
        start[np_a + 1u] = sum;
        for (uint32_t lid = 1; lid < end; ++lid)
          if (counts(lid)) by_port[start[lft_a[lid]]++] = lid;
        // start[p] is now the end of port p's LIDs, and start[p - 1] their beginning.
        for (uint32_t pa = 1; pa <= np_a; ++pa) {
          const uint32_t first = start[pa - 1], last = start[pa];
          if (first == last) continue;
          const uint32_t b = view_.peer_sw[fp_a + pa];
          const uint8_t* lft_b = view_.lft[b];
          if (!lft_b) continue;
          const uint32_t size_b = view_.lft_size[b];
          const uint8_t np_b = view_.num_ports[b];
          const PortId fp_b = view_.first_port[b];
          PortSet& out = graph_.deps(graph_.channel(static_cast<uint32_t>(a), pa));
          for (uint32_t i = first; i < last; ++i) {
            const uint32_t lid = by_port[i];
            if (lid >= size_b) break;  // ascending
            const uint8_t pb = lft_b[lid];
            if (pb == 0 || pb > np_b || view_.peer_sw[fp_b + pb] == kNone) continue;
            out[pb >> 6] |= uint64_t{1} << (pb & 63);
          }
        }
      }
    });
  }

  // A LID routed over channel `from` and then over channel `to`.
  uint16_t WitnessLid(uint32_t from, uint32_t to) const {
    const uint32_t a = graph_.switch_of(from), b = graph_.switch_of(to);
    const uint32_t pa = graph_.port_of(from), pb = graph_.port_of(to);
    for (uint32_t lid = 1; lid < owned_.size(); ++lid)
      if (Carries(a, lid) && view_.Entry(a, lid) == pa && view_.Entry(b, lid) == pb)
        return static_cast<uint16_t>(lid);
    return 0;
  }

  const Fabric& fabric_;
  SwitchView view_;
  std::vector<uint8_t> owned_;        // by LID: some end port owns it
  std::vector<uint32_t> switch_lid_;  // by LID: index among switch LIDs, or kNone
  uint32_t switch_lids_ = 0;
  size_t words_ = 0;            // of used_ per switch
  std::vector<uint64_t> used_;  // per switch: bitset over switch LIDs
  ChannelGraph graph_;          // channels and their dependencies
};

// ---- Quality --------------------------------------------------------------------------

struct Host {
  PortId port = kNoPort;
  uint32_t leaf = kNone;  // switch index
  uint16_t lid = 0;
};

class QualityMeter {
 public:
  QualityMeter(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
               const QualityOptions& options)
      : fabric_(fabric), options_(options), view_(fabric, tables) {
    sources_at_.assign(view_.size(), 0);
    for (uint32_t s = 0; s < view_.size(); ++s)
      for (uint32_t p = 1; p <= view_.num_ports[s]; ++p) {
        const PortId c = view_.first_port[s] + p;
        const PortId q = view_.peer[c];
        if (q == kNoPort || view_.peer_sw[c] != kNone) continue;
        const Port& port = fabric.port(q);
        if (!IsUnicast(port.lid) || lids.owner(port.lid) != q) continue;
        hosts_.push_back({q, s, port.lid.value()});
        ++sources_at_[s];
      }
  }

  QualityReport Run() {
    QualityReport report;
    report.hosts = hosts_.size();
    RoutesPerLink(report);
    if (!Cancelled()) Permutations(report);
    report.cancelled = Cancelled();
    return report;
  }

 private:
  bool Cancelled() const {
    return options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed);
  }

  // Appends the channels of the flow src -> dst to `path`; false (path partly appended) if
  // the tables do not deliver it.
  bool Walk(const Host& src, const Host& dst, std::vector<uint32_t>& path) const {
    path.push_back(src.port);
    uint32_t cur = src.leaf;
    for (uint32_t n = 0; n < kMaxSwitches; ++n) {
      const PortId c = view_.Channel(cur, view_.Entry(cur, dst.lid));
      if (c == kNoPort) return false;
      path.push_back(c);
      if (view_.peer[c] == dst.port) return true;
      cur = view_.peer_sw[c];
      if (cur == kNone) return false;
    }
    return false;
  }

  // Switch tiers: multi-source BFS from the switches with a CA or router cabled.
  std::vector<uint32_t> SwitchTiers() const {
    const size_t S = view_.size();
    std::vector<uint32_t> tier(S, kNone), queue;
    for (uint32_t s = 0; s < S; ++s)
      for (uint32_t p = 1; p <= view_.num_ports[s]; ++p) {
        const PortId c = view_.first_port[s] + p;
        if (view_.peer[c] != kNoPort && view_.peer_sw[c] == kNone) {
          tier[s] = 0;
          queue.push_back(s);
          break;
        }
      }
    for (size_t head = 0; head < queue.size(); ++head) {
      const uint32_t s = queue[head];
      for (uint32_t p = 1; p <= view_.num_ports[s]; ++p) {
        const uint32_t r = view_.peer_sw[view_.first_port[s] + p];
        if (r != kNone && tier[r] == kNone) tier[r] = tier[s] + 1, queue.push_back(r);
      }
    }
    for (uint32_t& t : tier)
      if (t == kNone) t = 0;
    return tier;
  }

  // Per destination host, the in-tree of routes towards its base LID: every switch's next
  // hop, its distance to delivery, and the number of source hosts whose flows pass it,
  // accumulated from the far end inwards. Workers own destinations (in chunks of adjacent
  // ones, whose LIDs share cache lines) and keep private counters, summed at the end.
  void RoutesPerLink(QualityReport& report) {
    const size_t S = view_.size(), H = hosts_.size();
    struct Scratch {
      std::vector<uint64_t> routes;          // by PortId
      std::vector<uint64_t> delivered_from;  // by switch: destinations its hosts reach
      uint64_t unrouted = 0;
    };
    constexpr size_t kChunk = 64;
    const size_t chunks = (H + kChunk - 1) / kChunk;
    const size_t workers = std::clamp<size_t>(options_.threads == 0 ? 1 : options_.threads, 1,
                                              std::max<size_t>(chunks, 1));
    std::vector<Scratch> scratch(workers);
    std::vector<uint8_t> self_delivered(H, 0);
    std::atomic<size_t> next{0};
    RunWorkers(static_cast<unsigned>(workers), chunks, [&](size_t w) {
      Scratch& out = scratch[w];
      out.routes.assign(fabric_.port_count(), 0);
      out.delivered_from.assign(S, 0);
      constexpr uint32_t kDeliver = kNone - 1, kFail = kNone;
      std::vector<uint32_t> nxt(S), depth(S), stack;
      std::vector<PortId> chan(S);
      std::vector<uint8_t> state(S);  // 0 unknown, 1 on the walk, 2 delivered, 3 failed
      std::vector<uint64_t> flow(S);
      std::vector<uint32_t> bucket_start(kMaxSwitches + 2), order(S);
      for (size_t chunk; !Cancelled() &&
                         (chunk = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
        for (size_t j = chunk * kChunk; j < std::min(H, (chunk + 1) * kChunk); ++j) {
          const Host& d = hosts_[j];
          for (uint32_t s = 0; s < S; ++s) {
            const PortId c = view_.Channel(s, view_.Entry(s, d.lid));
            chan[s] = c;
            nxt[s] = c == kNoPort                ? kFail
                     : view_.peer[c] == d.port   ? kDeliver
                     : view_.peer_sw[c] != kNone ? view_.peer_sw[c]
                                                 : kFail;
          }
          std::fill(state.begin(), state.end(), 0);
          for (uint32_t start = 0; start < S; ++start) {
            if (state[start] != 0) continue;
            stack.clear();
            uint32_t cur = start, result = 3, tail = 0;
            while (true) {
              if (state[cur] == 1) break;  // a forwarding loop: failed
              if (state[cur] >= 2) {
                result = state[cur];
                tail = depth[cur];
                break;
              }
              state[cur] = 1;
              stack.push_back(cur);
              if (nxt[cur] == kDeliver) {
                result = 2;
                break;
              }
              if (nxt[cur] == kFail) break;
              cur = nxt[cur];
            }
            // The walk's last switch delivers itself (depth 1) or inherits a known outcome.
            for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
              if (result == 2 && ++tail > kMaxSwitches) result = 3;
              state[*it] = static_cast<uint8_t>(result);
              depth[*it] = result == 2 ? tail : 0;
            }
          }
          // Counting sort of the delivering switches by depth, farthest first.
          std::fill(bucket_start.begin(), bucket_start.end(), 0);
          uint32_t delivering = 0;
          for (uint32_t s = 0; s < S; ++s) {
            const uint64_t own = sources_at_[s] - (s == d.leaf ? 1 : 0);
            if (state[s] == 2) {
              ++delivering;
              ++bucket_start[kMaxSwitches + 1 - depth[s]];
              flow[s] = own;
              if (sources_at_[s]) ++out.delivered_from[s];
            } else {
              flow[s] = 0;
              out.unrouted += own;
            }
          }
          for (size_t i = 1; i < bucket_start.size(); ++i) bucket_start[i] += bucket_start[i - 1];
          for (uint32_t s = 0; s < S; ++s)
            if (state[s] == 2) order[--bucket_start[kMaxSwitches + 1 - depth[s]]] = s;
          for (uint32_t i = 0; i < delivering; ++i) {
            const uint32_t s = order[i];
            if (flow[s] == 0) continue;
            out.routes[chan[s]] += flow[s];
            if (nxt[s] != kDeliver) flow[nxt[s]] += flow[s];
          }
          self_delivered[j] = state[d.leaf] == 2;
        }
      }
    });
    std::vector<uint64_t> routes(fabric_.port_count(), 0);
    std::vector<uint64_t> delivered_from(S, 0);
    for (const Scratch& sc : scratch) {
      for (size_t c = 0; c < routes.size(); ++c) routes[c] += sc.routes[c];
      for (size_t s = 0; s < S; ++s) delivered_from[s] += sc.delivered_from[s];
      report.unrouted_flows += sc.unrouted;
    }
    for (size_t j = 0; j < H; ++j)
      routes[hosts_[j].port] = delivered_from[hosts_[j].leaf] - self_delivered[j];

    // Every cable with a switch at one end or both, in both directions.
    const std::vector<uint32_t> tier = SwitchTiers();
    struct Acc {
      uint64_t n = 0, min = UINT64_MAX, max = 0;
      double sum = 0, sum_sq = 0;
    };
    std::vector<Acc> acc;
    auto add = [&](uint32_t t, uint64_t r) {
      if (acc.size() <= t) acc.resize(t + 1);
      Acc& a = acc[t];
      ++a.n;
      a.min = std::min(a.min, r);
      a.max = std::max(a.max, r);
      a.sum += static_cast<double>(r);
      a.sum_sq += static_cast<double>(r) * static_cast<double>(r);
    };
    for (uint32_t s = 0; s < S; ++s)
      for (uint32_t p = 1; p <= view_.num_ports[s]; ++p) {
        const PortId c = view_.first_port[s] + p;
        const PortId q = view_.peer[c];
        if (q == kNoPort) continue;
        const uint32_t r = view_.peer_sw[c];
        if (r == kNone) {
          add(0, routes[c]);  // switch -> CA
          add(0, routes[q]);  // CA -> switch
        } else {
          add(1 + std::min(tier[s], tier[r]), routes[c]);
        }
      }
    for (uint32_t t = 0; t < acc.size(); ++t) {
      const Acc& a = acc[t];
      if (a.n == 0) continue;
      TierLinkStats st;
      st.tier = t;
      st.channels = a.n;
      st.min_routes = a.min;
      st.max_routes = a.max;
      st.mean_routes = a.sum / static_cast<double>(a.n);
      st.stddev_routes = std::sqrt(
          std::max(0.0, a.sum_sq / static_cast<double>(a.n) - st.mean_routes * st.mean_routes));
      report.routes_per_link.push_back(st);
    }
  }

  // Shift permutations 1..N-1, then the random ones, claimed one at a time by the workers.
  // Results are stored per permutation and combined in order, so they do not depend on the
  // number of threads.
  void Permutations(QualityReport& report) {
    const uint32_t N = static_cast<uint32_t>(hosts_.size());
    if (N < 2) return;
    const size_t shifts = options_.shifts ? N - 1 : 0;
    const size_t randoms = options_.random_permutations;
    const size_t items = shifts + randoms;
    std::vector<uint32_t> max_sharing(items, 0);
    std::vector<double> ebb(randoms, 0);
    std::vector<uint8_t> has_flows(randoms, 0);
    std::atomic<size_t> next{0};
    RunWorkers(options_.threads, items, [&](size_t) {
      std::vector<uint32_t> load(fabric_.port_count(), 0), path, offsets, touched, dst(N);
      for (size_t item;
           !Cancelled() && (item = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
        const bool random = item >= shifts;
        if (!random) {
          const uint32_t shift = static_cast<uint32_t>(item) + 1;
          for (uint32_t i = 0; i < N; ++i) dst[i] = (i + shift) % N;
        } else {
          RandomPermutation(options_.seed, item - shifts, &dst);
        }
        path.clear();
        offsets.assign(1, 0);
        touched.clear();
        for (uint32_t i = 0; i < N; ++i) {
          if (dst[i] == i) continue;
          const size_t begin = path.size();
          if (!Walk(hosts_[i], hosts_[dst[i]], path)) {
            path.resize(begin);
            continue;
          }
          offsets.push_back(static_cast<uint32_t>(path.size()));
          for (size_t k = begin; k < path.size(); ++k)
            if (load[path[k]]++ == 0) touched.push_back(path[k]);
        }
        uint32_t worst = 0;
        for (uint32_t c : touched) worst = std::max(worst, load[c]);
        max_sharing[item] = worst;
        if (random && offsets.size() > 1) {
          double sum = 0;
          for (size_t f = 0; f + 1 < offsets.size(); ++f) {
            uint32_t m = 1;
            for (uint32_t k = offsets[f]; k < offsets[f + 1]; ++k) m = std::max(m, load[path[k]]);
            sum += 1.0 / m;
          }
          ebb[item - shifts] = sum / static_cast<double>(offsets.size() - 1);
          has_flows[item - shifts] = 1;
        }
        for (uint32_t c : touched) load[c] = 0;
      }
    });
    for (size_t s = 0; s < shifts; ++s)
      if (max_sharing[s] > report.shift_max_sharing) {
        report.shift_max_sharing = max_sharing[s];
        report.shift_worst = s + 1;
      }
    double sum = 0;
    size_t counted = 0;
    for (size_t r = 0; r < randoms; ++r) {
      report.random_max_sharing =
          std::max<uint64_t>(report.random_max_sharing, max_sharing[shifts + r]);
      if (has_flows[r]) sum += ebb[r], ++counted;
    }
    report.effective_bisection_bandwidth = counted ? sum / static_cast<double>(counted) : 0;
  }

  const Fabric& fabric_;
  const QualityOptions& options_;
  SwitchView view_;
  std::vector<Host> hosts_;           // fabric order: by switch index, then switch port
  std::vector<uint32_t> sources_at_;  // by switch: hosts cabled to it
};

}  // namespace

CreditLoopReport CheckCreditLoops(const Fabric& fabric, const LidMap& lids,
                                  const RoutingTables& tables, unsigned threads) {
  return CreditLoopChecker(fabric, lids, tables).Run(threads);
}

QualityReport MeasureQuality(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
                             const QualityOptions& options) {
  return QualityMeter(fabric, lids, tables, options).Run();
}

}  // namespace ibsm::routing
