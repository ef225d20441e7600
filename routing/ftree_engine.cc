#include "routing/ftree_engine.h"
#include "routing/parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <queue>
#include <tuple>
#include <unordered_set>

#include "fabric/aggregation_node.h"

namespace ibsm::routing {
namespace {

constexpr uint16_t kFar = UINT16_MAX;
constexpr uint32_t kMaxDivisor = 1u << 30;

// Switches indexed 0..S-1 in NodeId order; switch-to-switch cables only, each switch's links
// sorted by (remote switch, local port) so that port choices follow the remote's NodeId.
struct FtreeGraph {
  struct Link {
    uint32_t remote;
    uint8_t port;
  };
  std::vector<NodeId> node;
  std::vector<uint32_t> index;  // by NodeId; kNone for non-switches
  std::vector<uint32_t> start;  // CSR offsets into links, size S + 1
  std::vector<Link> links;

  size_t size() const { return node.size(); }
  const Link* begin(uint32_t s) const { return links.data() + start[s]; }
  const Link* end(uint32_t s) const { return links.data() + start[s + 1]; }
};

FtreeGraph BuildGraph(const Fabric& fabric) {
  FtreeGraph g;
  g.index.assign(fabric.node_count(), kNone);
  for (NodeId n = 0; n < fabric.node_count(); ++n)
    if (fabric.node(n).is_switch()) {
      g.index[n] = static_cast<uint32_t>(g.node.size());
      g.node.push_back(n);
    }
  g.start.reserve(g.node.size() + 1);
  g.start.push_back(0);
  for (uint32_t s = 0; s < g.node.size(); ++s) {
    const Node& node = fabric.node(g.node[s]);
    const size_t first = g.links.size();
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = fabric.port(node.first_port + p);
      if (!port.connected()) continue;
      const NodeId r = fabric.port(port.peer).node;
      if (r == g.node[s] || !fabric.node(r).is_switch()) continue;  // loopback cables carry nothing
      g.links.push_back({g.index[r], static_cast<uint8_t>(p)});
    }
    std::sort(g.links.begin() + static_cast<ptrdiff_t>(first), g.links.end(),
              [](const FtreeGraph::Link& a, const FtreeGraph::Link& b) {
                return std::tie(a.remote, a.port) < std::tie(b.remote, b.port);
              });
    g.start.push_back(static_cast<uint32_t>(g.links.size()));
  }
  return g;
}

// A link seen from one end, by the remote's position in the component's order.
struct OLink {
  uint32_t pos;
  uint8_t port;
};

// One connected component of the switch graph, with its total order ("position"): a route is
// legal when the positions along it first fall, then rise (up*/down*, "up" = lower position).
struct Component {
  std::vector<uint32_t> order;  // position -> switch index
  // Oriented CSR by position: up = neighbours at a lower position, down = higher.
  std::vector<uint32_t> up_start, down_start;
  std::vector<OLink> up, down;
  std::vector<uint8_t> level;     // by position: 0 for leaves, +1 per rank above them
  std::vector<uint32_t> divisor;  // by level: D-mod-k divisor
  // The tree's own ranking (rank from the roots, then lower GUID higher), for routes towards
  // switch LIDs. By tier index (0 highest; OLink::pos a tier index here): the position, the
  // oriented CSR, and whether a CA other than an aggregation node is cabled.
  std::vector<uint32_t> tier, tier_of;  // tier index -> position, position -> tier index
  std::vector<uint32_t> tup_start, tdown_start;
  std::vector<OLink> tup, tdown;
  std::vector<uint8_t> hosts;
};

// Where one LID is delivered and how its D-mod-k choice is made.
struct Dest {
  uint16_t lid;
  uint8_t exit_port;  // on the delivering switch (0: the switch itself)
  uint8_t offset;     // LID offset within the port's 2^LMC range
  uint32_t index;     // destination index (leaf-major, then leaf port)
};

// Everything the route phase reads, built once per Route call.
struct Plan {
  FtreeGraph graph;
  std::vector<Component> components;
  std::vector<uint32_t> component_of;    // by switch index
  std::vector<uint32_t> position_of;     // by switch index
  std::vector<std::vector<Dest>> dests;  // by delivering switch index: hosts' LIDs
  std::vector<std::vector<Dest>> own;    // by delivering switch index: its own, its ANs'
};

class Planner {
 public:
  Planner(const Fabric& fabric, const LidMap& lids, const RoutingOptions& options)
      : fabric_(fabric), lids_(lids), options_(options) {}

  Result<Plan> Build() {
    plan_.graph = BuildGraph(fabric_);
    const size_t S = plan_.graph.size();
    for (Guid g : options_.root_guids) roots_.insert(g.value());
    for (Guid g : options_.cn_guids) cns_.insert(g.value());
    for (Guid g : options_.io_guids) ios_.insert(g.value());
    FindComputePorts();
    plan_.component_of.assign(S, kNone);
    plan_.position_of.assign(S, kNone);
    rank_.assign(S, kNone);
    for (uint32_t s = 0; s < S; ++s) {
      if (plan_.component_of[s] != kNone) continue;
      IBSM_RETURN_IF_ERROR(PlanComponent(s));
    }
    IndexDestinations();
    return std::move(plan_);
  }

 private:
  bool IsComputeNode(const Port& ca_port) const {
    // A SHARP aggregation node sits on every tier: it never makes a switch a leaf.
    if (IsAggregationNode(fabric_.node(ca_port.node))) return false;
    const Guid node_guid = fabric_.node(ca_port.node).guid;
    auto listed = [&](const std::unordered_set<uint64_t>& set) {
      return set.count(ca_port.guid.value()) || set.count(node_guid.value());
    };
    if (!cns_.empty()) return listed(cns_);
    return !listed(ios_);
  }

  // Per switch: its ports cabled to compute-node CA ports, in port order (their rank is the
  // host's slot on the leaf). A switch with any is a leaf.
  void FindComputePorts() {
    const FtreeGraph& g = plan_.graph;
    cn_ports_.assign(g.size(), {});
    hosts_.assign(g.size(), 0);
    for (uint32_t s = 0; s < g.size(); ++s) {
      const Node& node = fabric_.node(g.node[s]);
      for (uint32_t p = 1; p <= node.num_ports; ++p) {
        const Port& port = fabric_.port(node.first_port + p);
        if (!port.connected()) continue;
        const Port& peer = fabric_.port(port.peer);
        const Node& remote = fabric_.node(peer.node);
        if (!remote.is_switch() && !IsAggregationNode(remote)) hosts_[s] = 1;
        if (fabric_.node(peer.node).is_switch() || !IsComputeNode(peer)) continue;
        cn_ports_[s].push_back(static_cast<uint8_t>(p));
      }
    }
  }

  // Multi-source BFS over the component; returns hops from the nearest source.
  void Bfs(const std::vector<uint32_t>& sources, std::vector<uint32_t>& dist) {
    const FtreeGraph& g = plan_.graph;
    for (uint32_t s : members_) dist[s] = kNone;
    std::vector<uint32_t> queue;
    for (uint32_t s : sources) {
      dist[s] = 0;
      queue.push_back(s);
    }
    for (size_t head = 0; head < queue.size(); ++head) {
      const uint32_t w = queue[head];
      for (const auto* l = g.begin(w); l != g.end(w); ++l)
        if (dist[l->remote] == kNone) {
          dist[l->remote] = dist[w] + 1;
          queue.push_back(l->remote);
        }
    }
  }

  uint32_t UpLinks(uint32_t s) const {
    uint32_t n = 0;
    for (const auto* l = plan_.graph.begin(s); l != plan_.graph.end(s); ++l)
      n += rank_[l->remote] + 1 == rank_[s];
    return n;
  }

  Status PlanComponent(uint32_t seed) {
    const FtreeGraph& g = plan_.graph;
    const uint32_t c = static_cast<uint32_t>(plan_.components.size());
    members_.clear();
    members_.push_back(seed);
    plan_.component_of[seed] = c;
    for (size_t head = 0; head < members_.size(); ++head)
      for (const auto* l = g.begin(members_[head]); l != g.end(members_[head]); ++l)
        if (plan_.component_of[l->remote] == kNone) {
          plan_.component_of[l->remote] = c;
          members_.push_back(l->remote);
        }
    std::sort(members_.begin(), members_.end());

    std::vector<uint32_t> leaves, roots;
    for (uint32_t s : members_) {
      if (!cn_ports_[s].empty()) leaves.push_back(s);
      if (roots_.count(fabric_.node(g.node[s]).guid.value())) roots.push_back(s);
    }
    if (roots.empty()) {
      if (leaves.empty()) {
        roots.push_back(members_.front());
      } else {
        // The switches farthest from every leaf are the roots.
        std::vector<uint32_t>& level = rank_;  // scratch; overwritten below
        Bfs(leaves, level);
        uint32_t top = 0;
        for (uint32_t s : members_) top = std::max(top, level[s]);
        for (uint32_t s : members_)
          if (level[s] == top) roots.push_back(s);
      }
    }
    Bfs(roots, rank_);

    // A fat tree has all its leaves at one rank and no cable between two leaves.
    uint32_t height = 0;
    if (!leaves.empty()) {
      const auto [lo, hi] =
          std::minmax_element(leaves.begin(), leaves.end(),
                              [&](uint32_t a, uint32_t b) { return rank_[a] < rank_[b]; });
      if (rank_[*lo] != rank_[*hi])
        return FailedPrecondition(
            fmt::format("not a fat tree: leaf {} at rank {} and leaf {} at rank {}",
                        DescribeNode(fabric_, g.node[*hi]), rank_[*hi], DescribeNode(fabric_, g.node[*lo]),
                        rank_[*lo]));
      height = rank_[*lo];
      for (uint32_t s : leaves)
        for (const auto* l = g.begin(s); l != g.end(s); ++l)
          if (!cn_ports_[l->remote].empty())
            return FailedPrecondition(fmt::format(
                "not a fat tree: leaves {} and {} are cabled to each other (port {})",
                DescribeNode(fabric_, g.node[s]), DescribeNode(fabric_, g.node[l->remote]), l->port));
    } else {
      for (uint32_t s : members_) height = std::max(height, rank_[s]);
    }

    // The hub: the leaf with the most up-links (first in NodeId order among equals).
    uint32_t hub = leaves.empty() ? roots.front() : leaves.front();
    for (uint32_t s : leaves)
      if (UpLinks(s) > UpLinks(hub)) hub = s;

    // The order: the hub, then its ancestors nearest first, then the rest root-first as they
    // become adjacent to what is already ordered.
    Component comp;
    std::vector<uint32_t>& pos = plan_.position_of;
    auto place = [&](uint32_t s) {
      pos[s] = static_cast<uint32_t>(comp.order.size());
      comp.order.push_back(s);
    };
    place(hub);
    for (size_t head = 0; head < comp.order.size(); ++head) {
      const uint32_t w = comp.order[head];
      for (const auto* l = g.begin(w); l != g.end(w); ++l)
        if (pos[l->remote] == kNone && rank_[l->remote] + 1 == rank_[w]) place(l->remote);
    }
    {
      // Nearest first (rank descending), NodeId order within a rank.
      std::sort(comp.order.begin() + 1, comp.order.end(), [&](uint32_t a, uint32_t b) {
        return rank_[a] != rank_[b] ? rank_[a] > rank_[b] : a < b;
      });
      for (size_t i = 0; i < comp.order.size(); ++i) pos[comp.order[i]] = static_cast<uint32_t>(i);
    }
    using Key = std::pair<uint32_t, uint32_t>;  // (rank, switch index)
    std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
    auto offer = [&](uint32_t w) {
      for (const auto* l = g.begin(w); l != g.end(w); ++l)
        if (pos[l->remote] == kNone) ready.emplace(rank_[l->remote], l->remote);
    };
    for (uint32_t s : comp.order) offer(s);
    while (!ready.empty()) {
      const uint32_t s = ready.top().second;
      ready.pop();
      if (pos[s] != kNone) continue;
      place(s);
      offer(s);
    }

    // Oriented adjacency by position.
    const uint32_t n = static_cast<uint32_t>(comp.order.size());
    comp.up_start.reserve(n + 1);
    comp.down_start.reserve(n + 1);
    comp.up_start.push_back(0);
    comp.down_start.push_back(0);
    for (uint32_t v = 0; v < n; ++v) {
      const uint32_t s = comp.order[v];
      for (const auto* l = g.begin(s); l != g.end(s); ++l) {
        const uint32_t u = pos[l->remote];
        (u < v ? comp.up : comp.down).push_back({u, l->port});
      }
      comp.up_start.push_back(static_cast<uint32_t>(comp.up.size()));
      comp.down_start.push_back(static_cast<uint32_t>(comp.down.size()));
    }

    // The tree's own ranking, for the routes towards switch LIDs.
    comp.tier.resize(n);
    for (uint32_t v = 0; v < n; ++v) comp.tier[v] = v;
    auto tree_key = [&](uint32_t v) {
      return std::make_pair(rank_[comp.order[v]], fabric_.node(g.node[comp.order[v]]).guid.value());
    };
    std::sort(comp.tier.begin(), comp.tier.end(),
              [&](uint32_t a, uint32_t b) { return tree_key(a) < tree_key(b); });
    comp.tier_of.resize(n);
    for (uint32_t i = 0; i < n; ++i) comp.tier_of[comp.tier[i]] = i;
    comp.tup_start.reserve(n + 1);
    comp.tdown_start.reserve(n + 1);
    comp.tup_start.push_back(0);
    comp.tdown_start.push_back(0);
    comp.hosts.assign(n, 0);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t s = comp.order[comp.tier[i]];
      comp.hosts[i] = hosts_[s];
      for (const auto* l = g.begin(s); l != g.end(s); ++l) {
        const uint32_t u = comp.tier_of[pos[l->remote]];
        (u < i ? comp.tup : comp.tdown).push_back({u, l->port});
      }
      comp.tup_start.push_back(static_cast<uint32_t>(comp.tup.size()));
      comp.tdown_start.push_back(static_cast<uint32_t>(comp.tdown.size()));
    }

    // D-mod-k divisors: level = height - rank (leaves 0); a level's nominal up-degree is the
    // most up-links any of its switches has.
    const uint32_t top_level = std::min<uint32_t>(height, 255);
    std::vector<uint32_t> up_degree(top_level + 1, 1);
    auto level_of = [&](uint32_t s) {
      return rank_[s] >= height ? 0u : std::min(height - rank_[s], top_level);
    };
    for (uint32_t s : members_) {
      const uint32_t lv = level_of(s);
      up_degree[lv] = std::max(up_degree[lv], UpLinks(s));
    }
    comp.divisor.assign(top_level + 1, 1);
    for (uint32_t lv = 1; lv <= top_level; ++lv)
      comp.divisor[lv] = static_cast<uint32_t>(
          std::min<uint64_t>(uint64_t{comp.divisor[lv - 1]} * up_degree[lv - 1], kMaxDivisor));
    comp.level.resize(n);
    for (uint32_t v = 0; v < n; ++v) comp.level[v] = static_cast<uint8_t>(level_of(comp.order[v]));

    leaf_ordinal_.resize(plan_.graph.size(), kNone);
    uint32_t slots = 0;
    for (uint32_t i = 0; i < leaves.size(); ++i) {
      leaf_ordinal_[leaves[i]] = i;
      slots = std::max<uint32_t>(slots, static_cast<uint32_t>(cn_ports_[leaves[i]].size()));
    }
    slots_.push_back(slots);
    extra_index_.push_back(static_cast<uint32_t>(leaves.size()) * slots);
    plan_.components.push_back(std::move(comp));
    return Status::Ok();
  }

  // Groups every LID by the switch that delivers it and gives it its D-mod-k index: compute
  // nodes leaf-major (a missing host keeps its slot empty), then other CAs, then switches.
  void IndexDestinations() {
    const FtreeGraph& g = plan_.graph;
    plan_.dests.assign(g.size(), {});
    plan_.own.assign(g.size(), {});
    std::vector<uint32_t> next_extra = extra_index_;
    for (PortId p : lids_.end_ports()) {
      const Port& port = fabric_.port(p);
      const Node& node = fabric_.node(port.node);
      uint32_t sw = kNone;
      uint8_t exit = 0;
      uint32_t index = 0;
      const bool own = node.is_switch() || IsAggregationNode(node);
      if (node.is_switch()) {
        sw = g.index[port.node];
        // Spread switch LIDs over the ports too.
        index = plan_.position_of[sw];
      } else {
        if (!port.connected()) continue;
        const Port& peer = fabric_.port(port.peer);
        sw = g.index[peer.node];
        if (sw == kNone) continue;  // CA cabled to a CA: no switch routes it
        exit = peer.num.value();
        const uint32_t c = plan_.component_of[sw];
        const auto& cp = cn_ports_[sw];
        const auto slot = std::find(cp.begin(), cp.end(), exit);
        if (slot != cp.end() && leaf_ordinal_[sw] != kNone)
          index = leaf_ordinal_[sw] * slots_[c] + static_cast<uint32_t>(slot - cp.begin());
        else
          index = next_extra[c]++;
      }
      const uint32_t count = 1u << (port.lmc & 7);
      for (uint32_t o = 0; o < count; ++o) {
        const uint32_t lid = port.lid.value() + o;
        if (lid > lids_.max_lid() || lids_.owner(Lid(static_cast<uint16_t>(lid))) != p) continue;
        (own ? plan_.own : plan_.dests)[sw].push_back(
            {static_cast<uint16_t>(lid), exit, static_cast<uint8_t>(o), index});
      }
    }
  }

  const Fabric& fabric_;
  const LidMap& lids_;
  const RoutingOptions& options_;
  std::unordered_set<uint64_t> roots_, cns_, ios_;
  std::vector<std::vector<uint8_t>> cn_ports_;
  std::vector<uint8_t> hosts_;  // by switch index: a CA other than an aggregation node cabled
  std::vector<uint32_t> rank_;
  std::vector<uint32_t> members_;
  std::vector<uint32_t> leaf_ordinal_;
  std::vector<uint32_t> slots_, extra_index_;  // by component
  Plan plan_;
};

struct Scratch {
  std::vector<uint16_t> dist;
  std::vector<uint8_t> down_set;  // 1: reaches the destination moving down only
  std::vector<uint32_t> queue;
  std::vector<uint32_t> quotient;  // [level][dest]: index / divisor + offset
  std::vector<uint16_t> lid;       // [dest]
};

// The down set of `tp` (the switches that reach it moving down only: those above it, found
// climbing from it over `up`), with their hop distances; every other switch kFar.
void DownSet(uint32_t tp, uint32_t n, const std::vector<uint32_t>& up_start,
             const std::vector<OLink>& up, Scratch& sc) {
  sc.dist.assign(n, kFar);
  sc.down_set.assign(n, 0);
  sc.queue.clear();
  sc.dist[tp] = 0;
  sc.down_set[tp] = 1;
  sc.queue.push_back(tp);
  for (size_t head = 0; head < sc.queue.size(); ++head) {
    const uint32_t w = sc.queue[head];
    for (uint32_t e = up_start[w]; e < up_start[w + 1]; ++e) {
      const uint32_t u = up[e].pos;
      if (sc.down_set[u]) continue;
      sc.down_set[u] = 1;
      sc.dist[u] = static_cast<uint16_t>(sc.dist[w] + 1);
      sc.queue.push_back(u);
    }
  }
}

// Fills every switch's entries for the LIDs that switch `t` delivers. Legal routes: a switch
// that can reach t moving down only (the down set) moves down, to a down-set neighbour one hop
// nearer; any other switch moves up, to a neighbour one hop nearer. Both are shortest among
// legal routes, and each switch's entry for a LID is the same for every packet through it,
// so every route in the tables is legal.
void RouteTo(const Plan& plan, uint32_t t, const std::vector<Dest>& dests, Scratch& sc,
             const std::vector<uint8_t*>& rows) {
  if (dests.empty()) return;
  const Component& comp = plan.components[plan.component_of[t]];
  const uint32_t n = static_cast<uint32_t>(comp.order.size());
  const uint32_t tp = plan.position_of[t];

  DownSet(tp, n, comp.up_start, comp.up, sc);
  const size_t nd = dests.size();
  const size_t levels = comp.divisor.size();
  sc.quotient.resize(levels * nd);
  for (size_t lv = 0; lv < levels; ++lv)
    for (size_t d = 0; d < nd; ++d)
      sc.quotient[lv * nd + d] = dests[d].index / comp.divisor[lv] + dests[d].offset;
  sc.lid.resize(nd);
  for (size_t d = 0; d < nd; ++d) sc.lid[d] = dests[d].lid;

  // One pass in position order. A switch in the down set already has its distance; any other
  // finds it from its up-neighbours, which come earlier (position 0, the hub, is in every down
  // set, and every other switch has a neighbour at a lower position).
  uint16_t* const dist = sc.dist.data();
  const uint8_t* const down_set = sc.down_set.data();
  const uint16_t* const lid = sc.lid.data();
  const OLink* const up = comp.up.data();
  const OLink* const down = comp.down.data();
  const uint32_t* const up_start = comp.up_start.data();
  const uint32_t* const down_start = comp.down_start.data();
  uint8_t cand[256];
  for (uint32_t v = 0; v < n; ++v) {
    uint8_t* const row = rows[comp.order[v]];
    uint32_t nc = 0;
    if (down_set[v]) {
      if (v == tp) {
        for (const Dest& d : dests) row[d.lid] = d.exit_port;
        continue;
      }
      const uint16_t want = static_cast<uint16_t>(dist[v] - 1);
      for (uint32_t e = down_start[v]; e < down_start[v + 1]; ++e)
        if (down_set[down[e].pos] && dist[down[e].pos] == want) cand[nc++] = down[e].port;
    } else {
      uint16_t best = kFar;
      for (uint32_t e = up_start[v]; e < up_start[v + 1]; ++e) {
        const uint16_t d = dist[up[e].pos];
        if (d < best) best = d, nc = 0;
        if (d == best) cand[nc++] = up[e].port;
      }
      if (best == kFar) continue;
      dist[v] = static_cast<uint16_t>(best + 1);
    }
    if (nc == 0) continue;
    if (nc == 1) {
      for (size_t d = 0; d < nd; ++d) row[lid[d]] = cand[0];
    } else {
      const uint32_t* const q = sc.quotient.data() + size_t{comp.level[v]} * nd;
      for (size_t d = 0; d < nd; ++d) row[lid[d]] = cand[q[d] % nc];
    }
  }
}

// Fills every switch's entries for the LIDs that count like a switch's own (the switch's, its
// aggregation nodes'): hosts send to them, switches send to each other only on VL15. Under
// the tree's own ranking, a switch that reaches t moving down only moves down, one hop nearer;
// any other switch with an up*/down* route moves up, one hop nearer: every route from a
// switch with hosts is so, as on a full fat tree every one has such a route. A switch with
// none (a core towards another core, an aggregation switch towards another group's) moves
// down, one hop nearer to the nearest switch below that has one, spread over its ports by
// LID; no host's route crosses it. So a route between two switches turns in the pods it
// spans, never in one far-off pod, and a dead switch changes the routes that crossed it
// alone. Returns false when a switch with hosts has no up*/down* route under that ranking,
// or a switch has neither that nor a way down to one (a degraded tree): the caller then
// routes these LIDs under the hub's order, as hosts' LIDs, which writes every switch's entry
// for them again (under that order every switch of the component has a route).
bool RouteOwnTo(const Plan& plan, uint32_t t, const std::vector<Dest>& dests, Scratch& sc,
                const std::vector<uint8_t*>& rows) {
  if (dests.empty()) return true;
  const Component& comp = plan.components[plan.component_of[t]];
  const uint32_t n = static_cast<uint32_t>(comp.order.size());
  const uint32_t tp = comp.tier_of[plan.position_of[t]];  // everything by tier index here
  DownSet(tp, n, comp.tup_start, comp.tup, sc);
  uint16_t* const dist = sc.dist.data();
  uint8_t* const mark = sc.down_set.data();  // bit 0: the down set; bit 1: up*/down* route
  const size_t nd = dests.size();
  uint8_t cand[256];
  auto write = [&](uint32_t v, uint32_t nc, uint32_t divisor) {
    uint8_t* const row = rows[comp.order[comp.tier[v]]];
    for (size_t d = 0; d < nd; ++d)
      row[dests[d].lid] = cand[(dests[d].index / divisor + dests[d].offset) % nc];
  };
  // Highest first: the down set moves down, the rest with an up*/down* route up (D-mod-k).
  for (uint32_t v = 0; v < n; ++v) {
    uint32_t nc = 0;
    if (mark[v]) {
      mark[v] = 3;
      if (v == tp) {
        uint8_t* const row = rows[comp.order[comp.tier[v]]];
        for (const Dest& d : dests) row[d.lid] = d.exit_port;
        continue;
      }
      const uint16_t want = static_cast<uint16_t>(dist[v] - 1);
      for (uint32_t e = comp.tdown_start[v]; e < comp.tdown_start[v + 1]; ++e)
        if ((mark[comp.tdown[e].pos] & 1) && dist[comp.tdown[e].pos] == want)
          cand[nc++] = comp.tdown[e].port;
    } else {
      uint16_t best = kFar;
      for (uint32_t e = comp.tup_start[v]; e < comp.tup_start[v + 1]; ++e) {
        const uint16_t d = dist[comp.tup[e].pos];
        if (d < best) best = d, nc = 0;
        if (d == best && d != kFar) cand[nc++] = comp.tup[e].port;
      }
      if (best == kFar) {
        if (comp.hosts[v]) return false;
        continue;
      }
      dist[v] = static_cast<uint16_t>(best + 1);
      mark[v] = 2;
    }
    if (nc > 0) write(v, nc, comp.divisor[comp.level[comp.tier[v]]]);
  }
  // Lowest first: a switch without an up*/down* route moves down, one hop nearer to the
  // nearest switch below that has one, spread by the destination's index alone.
  for (uint32_t v = n; v-- > 0;) {
    if (mark[v]) continue;
    uint16_t best = kFar;
    uint32_t nc = 0;
    for (uint32_t e = comp.tdown_start[v]; e < comp.tdown_start[v + 1]; ++e) {
      const uint16_t d = dist[comp.tdown[e].pos];
      if (d < best) best = d, nc = 0;
      if (d == best && d != kFar) cand[nc++] = comp.tdown[e].port;
    }
    if (best == kFar) return false;
    dist[v] = static_cast<uint16_t>(best + 1);
    write(v, nc, 1);
  }
  return true;
}

}  // namespace

Result<RoutingTables> FTreeEngine::Route(const Fabric& fabric, const LidMap& lids,
                                         const RoutingOptions& options) const {
  IBSM_ASSIGN_OR_RETURN(Plan plan, Planner(fabric, lids, options).Build());
  const size_t S = plan.graph.size();

  RoutingTables out;
  out.engine = "ftree";
  out.switches.resize(S);
  out.switch_index.assign(fabric.node_count(), SIZE_MAX);
  for (size_t s = 0; s < S; ++s) out.switch_index[plan.graph.node[s]] = s;
  const size_t lft_size = static_cast<size_t>(lids.max_lid()) + 1;
  ParallelFor(
      S, options.threads, [] { return 0; },
      [&](int, size_t s) {
        out.switches[s].node = plan.graph.node[s];
        out.switches[s].lft.assign(lft_size, kDropPort);
      });
  std::vector<uint8_t*> rows(S);
  for (size_t s = 0; s < S; ++s) rows[s] = out.switches[s].lft.data();
  ParallelFor(
      S, options.threads, [] { return Scratch{}; },
      [&](Scratch& sc, size_t t) {
        const uint32_t ti = static_cast<uint32_t>(t);
        RouteTo(plan, ti, plan.dests[t], sc, rows);
        if (!RouteOwnTo(plan, ti, plan.own[t], sc, rows)) RouteTo(plan, ti, plan.own[t], sc, rows);
      });
  return out;
}

std::unique_ptr<RoutingEngine> MakeFTree() { return std::make_unique<FTreeEngine>(); }

}  // namespace ibsm::routing
