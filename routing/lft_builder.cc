#include "routing/lft_builder.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <unordered_map>

#include "routing/split_mix.h"
#include "routing/parallel.h"

namespace ibsm::routing {

SwitchGraph SwitchGraph::Build(const Fabric& fabric) {
  SwitchGraph g;
  g.index_.assign(fabric.node_count(), kNoSwitch);
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    if (!fabric.node(n).is_switch()) continue;
    g.index_[n] = static_cast<SwitchIdx>(g.switch_nodes_.size());
    g.switch_nodes_.push_back(n);
  }
  g.link_start_.reserve(g.switch_nodes_.size() + 1);
  g.link_start_.push_back(0);
  for (NodeId n : g.switch_nodes_) {
    const Node& node = fabric.node(n);
    for (uint32_t num = 1; num <= node.num_ports; ++num) {
      const Port& port = fabric.port(node.first_port + num);
      if (!port.connected()) continue;
      const SwitchIdx remote = g.index(fabric.port(port.peer).node);
      if (remote == kNoSwitch) continue;
      g.links_.push_back(Link{static_cast<uint8_t>(num), remote});
    }
    g.link_start_.push_back(static_cast<uint32_t>(g.links_.size()));
  }
  return g;
}

namespace {

// Where one end port attaches to the switch fabric.
struct Destination {
  PortId port = kNoPort;
  SwitchIdx sw = kNoSwitch;  // switch that delivers it; kNoSwitch if none (cable to a CA/none)
  uint8_t exit_port = 0;     // egress port on `sw` (0 for the switch's own port 0)
  bool is_switch = false;
  uint16_t base_lid = 0;
  uint32_t lid_count = 0;
};

Destination MakeDestination(const Fabric& fabric, const SwitchGraph& graph, PortId p) {
  const Port& port = fabric.port(p);
  Destination d;
  d.port = p;
  d.base_lid = port.lid.value();
  d.lid_count = 1u << (port.lmc & 7);
  d.is_switch = fabric.node(port.node).is_switch();
  if (d.is_switch) {
    d.sw = graph.index(port.node);
  } else if (port.connected()) {
    const Port& peer = fabric.port(port.peer);
    d.sw = graph.index(peer.node);
    d.exit_port = peer.num.value();
  }
  return d;
}

// guid_routing_order first (first mention wins, unknown GUIDs skipped), then end_ports().
std::vector<Destination> Destinations(const Fabric& fabric, const LidMap& lids,
                                      const SwitchGraph& graph,
                                      const std::vector<Guid>& routing_order) {
  const std::vector<PortId>& ends = lids.end_ports();
  std::vector<size_t> order;
  order.reserve(ends.size());
  std::vector<bool> taken(ends.size(), false);
  if (!routing_order.empty()) {
    std::unordered_map<uint64_t, size_t> by_guid;
    by_guid.reserve(ends.size() * 2);
    for (size_t i = 0; i < ends.size(); ++i) {
      const Port& port = fabric.port(ends[i]);
      by_guid.emplace(port.guid.value(), i);
      const Node& node = fabric.node(port.node);
      if (node.is_switch()) by_guid.emplace(node.guid.value(), i);
    }
    for (Guid g : routing_order) {
      const auto it = by_guid.find(g.value());
      if (it == by_guid.end() || taken[it->second]) continue;
      taken[it->second] = true;
      order.push_back(it->second);
    }
  }
  for (size_t i = 0; i < ends.size(); ++i)
    if (!taken[i]) order.push_back(i);
  std::vector<Destination> out;
  out.reserve(order.size());
  for (size_t i : order) out.push_back(MakeDestination(fabric, graph, ends[i]));
  return out;
}

// The remote end of each egress port of one switch, for the LMC disjointness rule.
struct Remote {
  Guid node{0};
  Guid system_image{0};
};

// One distinct candidate set of the switch being routed, with the state of the fast
// "fewest routes, lowest port" search: every port before `cursor` carries more than `least`
// routes, and `least` is at most the true minimum. Counters only grow, so both stay true
// until a scan finds no port at `least`; then the minimum is recomputed.
struct CandidateSet {
  uint32_t begin = 0;  // into SwitchRouter::pool_
  uint32_t size = 0;
  uint32_t least = 0;
  uint32_t cursor = 0;
  bool valid = false;
};

constexpr uint32_t kNoSet = UINT32_MAX;

class SwitchRouter {
 public:
  SwitchRouter(const Fabric& fabric, const LidMap& lids, const SwitchGraph& graph,
               const CandidateSource& source, const RoutingOptions& options,
               const std::vector<Destination>& dests)
      : fabric_(fabric), lids_(lids), graph_(graph), source_(source), options_(options),
        dests_(dests) {}

  void Route(SwitchIdx s, SwitchTable& table) {
    const Node& node = fabric_.node(graph_.node(s));
    table.node = graph_.node(s);
    table.lft.assign(static_cast<size_t>(lids_.max_lid()) + 1, kDropPort);
    routes_.assign(node.num_ports + 1u, 0);
    remote_.assign(node.num_ports + 1u, Remote{});
    for (const SwitchGraph::Link* l = graph_.links_begin(s); l != graph_.links_end(s); ++l) {
      const Node& r = fabric_.node(graph_.node(l->remote));
      // A zero SystemImageGUID means "not part of a larger system": the node is its own image.
      remote_[l->port] = Remote{r.guid, r.system_image_guid.value() ? r.system_image_guid : r.guid};
    }
    CollectSets(s);
    SplitMix64 rng(options_.scatter_ports * 0xD1B54A32D192ED03ull ^ node.guid.value());
    const bool scatter = options_.scatter_ports != 0;

    for (const Destination& d : dests_) {
      if (d.sw == kNoSwitch) continue;
      if (d.sw == s) {
        for (uint32_t i = 0; i < d.lid_count; ++i) {
          const uint32_t lid = d.base_lid + i;
          if (lid < table.lft.size() && lids_.owner(Lid(static_cast<uint16_t>(lid))) == d.port)
            table.lft[lid] = d.exit_port;
        }
        continue;
      }
      const uint32_t set_id = set_of_[d.sw];
      if (set_id == kNoSet) continue;
      CandidateSet& set = sets_[set_id];
      const uint8_t* ports = pool_.data() + set.begin;
      used_systems_.clear();
      used_nodes_.clear();
      for (uint32_t i = 0; i < d.lid_count; ++i) {
        const uint32_t lid = d.base_lid + i;
        if (lid >= table.lft.size() || lids_.owner(Lid(static_cast<uint16_t>(lid))) != d.port)
          continue;
        const bool disjoint = i != 0;
        uint8_t port;
        if (!disjoint && !scatter && !options_.port_shifting)
          port = PickLeast(set, ports);
        else
          port = Choose(ports, set.size, disjoint, scatter ? &rng : nullptr);
        table.lft[lid] = port;
        if (!d.is_switch || i == 0) ++routes_[port];
        if (d.lid_count > 1) {
          used_systems_.push_back(remote_[port].system_image);
          used_nodes_.push_back(remote_[port].node);
        }
      }
    }
  }

 private:
  // Asks the source for s's candidate masks and gives every destination switch the id of its
  // (deduplicated) candidate set, so that each distinct set keeps one search state.
  void CollectSets(SwitchIdx s) {
    const size_t S = graph_.switch_count();
    const uint32_t W = CandidateMaskWords(graph_.link_count(s));
    masks_.assign(S * W, 0);
    source_.Candidates(s, masks_.data());
    const SwitchGraph::Link* links = graph_.links_begin(s);
    set_of_.assign(S, kNoSet);
    sets_.clear();
    pool_.clear();
    set_masks_.clear();
    slots_.assign(64, kNoSet);
    const uint64_t* prev = nullptr;
    uint32_t prev_id = kNoSet;
    for (size_t d = 0; d < S; ++d) {
      const uint64_t* m = masks_.data() + d * W;
      bool any = false;
      for (uint32_t w = 0; w < W; ++w) any |= m[w] != 0;
      if (!any) continue;
      if (prev && std::equal(m, m + W, prev)) {
        set_of_[d] = prev_id;
        continue;
      }
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (uint32_t w = 0; w < W; ++w) h = (h ^ m[w]) * 0xFF51AFD7ED558CCDull;
      size_t mask = slots_.size() - 1;
      size_t slot = (h ^ (h >> 29)) & mask;
      while (slots_[slot] != kNoSet &&
             !std::equal(m, m + W, set_masks_.data() + size_t{slots_[slot]} * W))
        slot = (slot + 1) & mask;
      uint32_t id = slots_[slot];
      if (id == kNoSet) {
        id = static_cast<uint32_t>(sets_.size());
        CandidateSet set;
        set.begin = static_cast<uint32_t>(pool_.size());
        for (uint32_t w = 0; w < W; ++w)
          for (uint64_t bits = m[w]; bits; bits &= bits - 1)
            pool_.push_back(links[w * 64 + std::countr_zero(bits)].port);
        set.size = static_cast<uint32_t>(pool_.size()) - set.begin;
        sets_.push_back(set);
        set_masks_.insert(set_masks_.end(), m, m + W);
        slots_[slot] = id;
        if (sets_.size() * 2 > slots_.size()) Rehash(W);
      }
      set_of_[d] = id;
      prev = m;
      prev_id = id;
    }
  }

  void Rehash(uint32_t W) {
    slots_.assign(slots_.size() * 2, kNoSet);
    const size_t mask = slots_.size() - 1;
    for (uint32_t id = 0; id < sets_.size(); ++id) {
      const uint64_t* m = set_masks_.data() + size_t{id} * W;
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (uint32_t w = 0; w < W; ++w) h = (h ^ m[w]) * 0xFF51AFD7ED558CCDull;
      size_t slot = (h ^ (h >> 29)) & mask;
      while (slots_[slot] != kNoSet) slot = (slot + 1) & mask;
      slots_[slot] = id;
    }
  }

  // Fewest routes, then lowest port (ports ascend), in amortised O(1) per call.
  uint8_t PickLeast(CandidateSet& set, const uint8_t* ports) {
    while (true) {
      if (!set.valid) {
        uint32_t least = UINT32_MAX;
        for (uint32_t j = 0; j < set.size; ++j) least = std::min(least, routes_[ports[j]]);
        set.least = least;
        set.cursor = 0;
        set.valid = true;
      }
      for (uint32_t j = set.cursor; j < set.size; ++j) {
        if (routes_[ports[j]] == set.least) {
          set.cursor = j;
          return ports[j];
        }
      }
      set.valid = false;
    }
  }

  // 0: towards a system image no earlier LID of this destination uses; 1: towards an unused
  // node; 2: any.
  uint32_t Tier(uint8_t port) const {
    const Remote& r = remote_[port];
    if (std::find(used_systems_.begin(), used_systems_.end(), r.system_image) ==
        used_systems_.end())
      return 0;
    if (std::find(used_nodes_.begin(), used_nodes_.end(), r.node) == used_nodes_.end()) return 1;
    return 2;
  }

  // The general rule: LMC tiers when `disjoint`, OpenSM's rotated scan under port_shifting,
  // a random least-loaded port when `rng` is given.
  uint8_t Choose(const uint8_t* ports, uint32_t n, bool disjoint, SplitMix64* rng) {
    uint32_t start = 0;
    if (options_.port_shifting && !rng) {
      uint64_t total = 0;
      for (uint32_t j = 0; j < n; ++j) total += routes_[ports[j]];
      start = static_cast<uint32_t>((total / n) % n);
    }
    uint32_t best_tier = 2;
    if (disjoint)
      for (uint32_t j = 0; j < n && best_tier; ++j) best_tier = std::min(best_tier, Tier(ports[j]));
    uint32_t least = UINT32_MAX;
    uint8_t best = 0;
    for (uint32_t k = 0; k < n; ++k) {
      const uint8_t p = ports[(start + k) % n];
      if (disjoint && best_tier < 2 && Tier(p) != best_tier) continue;
      if (routes_[p] < least) least = routes_[p], best = p;
    }
    if (!rng) return best;
    ties_.clear();
    for (uint32_t j = 0; j < n; ++j) {
      const uint8_t p = ports[j];
      if (routes_[p] != least) continue;
      if (disjoint && best_tier < 2 && Tier(p) != best_tier) continue;
      ties_.push_back(p);
    }
    return ties_[rng->Next() % ties_.size()];
  }

  const Fabric& fabric_;
  const LidMap& lids_;
  const SwitchGraph& graph_;
  const CandidateSource& source_;
  const RoutingOptions& options_;
  const std::vector<Destination>& dests_;

  std::vector<uint64_t> masks_;
  std::vector<uint32_t> set_of_;
  std::vector<CandidateSet> sets_;
  std::vector<uint8_t> pool_;
  std::vector<uint64_t> set_masks_;
  std::vector<uint32_t> slots_;
  std::vector<uint32_t> routes_;
  std::vector<Remote> remote_;
  std::vector<Guid> used_systems_, used_nodes_;
  std::vector<uint8_t> ties_;
};

}  // namespace

RoutingTables BuildLfts(const Fabric& fabric, const LidMap& lids, const SwitchGraph& graph,
                        const CandidateSource& candidates, const RoutingOptions& options,
                        std::string_view engine) {
  RoutingTables out;
  out.engine = std::string(engine);
  const size_t S = graph.switch_count();
  out.switches.resize(S);
  out.switch_index.assign(fabric.node_count(), SIZE_MAX);
  for (SwitchIdx s = 0; s < S; ++s) out.switch_index[graph.node(s)] = s;

  const std::vector<Destination> dests =
      Destinations(fabric, lids, graph, options.guid_routing_order);
  // Switches are claimed one at a time from a shared cursor; a switch's table depends only on
  // the switch, so the schedule cannot change the result.
  std::atomic<size_t> next{0};
  auto worker = [&] {
    SwitchRouter router(fabric, lids, graph, candidates, options, dests);
    for (size_t s; (s = next.fetch_add(1, std::memory_order_relaxed)) < S;)
      router.Route(static_cast<SwitchIdx>(s), out.switches[s]);
  };
  RunWorkers(options.threads, S, [&worker](size_t) { worker(); });
  return out;
}

}  // namespace ibsm::routing
