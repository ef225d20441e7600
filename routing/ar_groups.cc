#include "routing/ar_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <optional>
#include <set>

#include "fabric/aggregation_node.h"
#include "routing/channel_graph.h"

namespace ibsm::routing {
namespace {

constexpr size_t kMaxProblems = 20;

// The leaf switch that delivers end port `p` (a CA or router port), or kNoNode.
// The leaf switch of a host port; kNoNode for a switch port and for a SHARP aggregation node,
// whose LID stays static like a switch LID: only hosts and the ANs one cable away talk to it
// (routing/quality.h), and a group towards a spine's AN would spread traffic over
// down-then-up routes.
NodeId LeafOf(const Fabric& f, PortId p) {
  const Port& port = f.port(p);
  if (f.node(port.node).is_switch() || IsAggregationNode(f.node(port.node)) || !port.connected())
    return kNoNode;
  const NodeId peer = f.port(port.peer).node;
  return f.node(peer).is_switch() ? peer : kNoNode;
}

std::string Label(const Fabric& f, NodeId n) {
  const Node& node = f.node(n);
  return fmt::format("{} ({})", node.name.empty() ? node.description : node.name, node.guid);
}

// Group IDs: the previous map first (IDs below the cap, each once), then the lowest free ID
// for each new leaf in NodeId order; when the IDs run out, those of leaves absent from the
// fabric are reused, lowest first.
Result<std::map<Guid, uint16_t>> AllocateIds(const std::vector<Guid>& leaves,
                                             const ArOptions& o) {
  std::map<Guid, uint16_t> ids;
  std::vector<bool> used(o.group_cap, false);
  for (const auto& [g, id] : o.previous_ids) {
    if (id >= o.group_cap || used[id]) continue;
    used[id] = true;
    ids[g] = id;
  }
  std::set<Guid> present(leaves.begin(), leaves.end());
  uint32_t next = 0;
  for (Guid leaf : leaves) {
    if (ids.count(leaf)) continue;
    while (next < o.group_cap && used[next]) ++next;
    if (next >= o.group_cap) {
      // Reclaim the lowest ID held by a leaf not in the fabric.
      auto victim = ids.end();
      for (auto it = ids.begin(); it != ids.end(); ++it)
        if (!present.count(it->first) && (victim == ids.end() || it->second < victim->second))
          victim = it;
      if (victim == ids.end())
        return ResourceExhausted(fmt::format(
            "{} destination leaves need more AR group IDs than GroupCap {}", leaves.size(),
            o.group_cap));
      const uint16_t id = victim->second;
      ids.erase(victim);
      ids[leaf] = id;
      continue;
    }
    used[next] = true;
    ids[leaf] = static_cast<uint16_t>(next);
  }
  return ids;
}

// The tree rule's port sets, one destination leaf at a time (ar_groups.h): the ports to
// neighbours one hop closer to the leaf, less those that would let AR turn a packet from
// down to up. Such turns are in the static tables only where the routes had no up*/down* way
// left (a core whose cable into the leaf's pod is cut sends that pod's traffic down into
// another pod and up again; routing/reroute.h): each is proven free of credit loops as it
// is, but spreading traffic over every minimal port at or after one closes loops with the
// other turns (the static routes to switch LIDs among them). "Up" and "down" are by height:
// hops from the nearest destination leaf.
//  - a port down to a neighbour that reaches the leaf only by going up again is left out;
//  - a switch that the static routes enter from above for the leaf (a detour's turn) keeps
//    only its ports down.
class TreeRule {
 public:
  TreeRule(const Fabric& f, const LidMap& lids, const RoutingTables& static_tables)
      : st_(static_tables), sidx_(f.node_count(), kNone) {
    for (NodeId n = 0; n < f.node_count(); ++n)
      if (f.node(n).is_switch()) {
        sidx_[n] = static_cast<uint32_t>(snode_.size());
        snode_.push_back(n);
      }
    const size_t S = snode_.size();
    links_.resize(S);
    remote_.resize(S);
    for (uint32_t s = 0; s < S; ++s) {
      const Node& node = f.node(snode_[s]);
      remote_[s].assign(size_t{node.num_ports} + 1, kNone);
      for (uint32_t p = 1; p <= node.num_ports; ++p) {
        const Port& port = f.port(node.first_port + p);
        if (!port.connected()) continue;
        const uint32_t r = sidx_[f.port(port.peer).node];
        if (r == kNone) continue;
        links_[s].push_back({static_cast<uint8_t>(p), r});
        remote_[s][p] = r;
      }
    }
    lids_of_leaf_.resize(f.node_count());
    for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid) {
      const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
      if (owner == kNoPort) continue;
      const NodeId leaf = LeafOf(f, owner);
      if (leaf != kNoNode) lids_of_leaf_[leaf].push_back(lid);
    }
    for (NodeId n = 0; n < f.node_count(); ++n)
      if (!lids_of_leaf_[n].empty()) leaves_.push_back(n);
    // Heights: hops from the nearest destination leaf.
    height_.assign(S, kNone);
    std::vector<uint32_t> queue;
    for (NodeId leaf : leaves_) {
      height_[sidx_[leaf]] = 0;
      queue.push_back(sidx_[leaf]);
    }
    Bfs(queue, height_, [](uint32_t, uint32_t) { return true; });
    dist_.resize(S);
    down_dist_.resize(S);
    from_above_.resize(S);
  }

  uint32_t index(NodeId n) const { return sidx_[n]; }
  NodeId node(uint32_t s) const { return snode_[s]; }
  size_t switches() const { return snode_.size(); }
  // Destination leaves: switches delivering a CA/router LID, in NodeId order.
  const std::vector<NodeId>& leaves() const { return leaves_; }
  const std::vector<uint32_t>& lids_of(NodeId leaf) const { return lids_of_leaf_[leaf]; }

  // Prepares Ports for destination leaf `leaf`.
  void ForLeaf(NodeId leaf) {
    const uint32_t l = sidx_[leaf];
    std::fill(dist_.begin(), dist_.end(), kNone);
    std::fill(down_dist_.begin(), down_dist_.end(), kNone);
    dist_[l] = down_dist_[l] = 0;
    std::vector<uint32_t> queue{l};
    Bfs(queue, dist_, [](uint32_t, uint32_t) { return true; });
    queue = {l};  // from the leaf upwards only: who reaches it going down all the way
    Bfs(queue, down_dist_, [this](uint32_t u, uint32_t v) {
      return height_[v] != kNone && height_[u] != kNone && height_[v] > height_[u];
    });
    std::fill(from_above_.begin(), from_above_.end(), false);
    for (uint32_t u = 0; u < snode_.size(); ++u) {
      const SwitchTable* t = st_.table(snode_[u]);
      if (!t) continue;
      for (uint32_t lid : lids_of_leaf_[leaf]) {
        if (lid >= t->lft.size() || t->lft[lid] >= remote_[u].size()) continue;
        const uint32_t r = remote_[u][t->lft[lid]];
        if (r != kNone && Down(u, r)) from_above_[r] = true;
      }
    }
  }

  // The group of switch `s` towards the leaf of the last ForLeaf, ascending (may be empty
  // or one port: no group then).
  void Ports(uint32_t s, std::vector<uint8_t>& out) const {
    out.clear();
    if (dist_[s] == kNone) return;
    for (const Link& link : links_[s]) {
      const uint32_t r = link.remote;
      if (dist_[r] == kNone || dist_[r] + 1 != dist_[s]) continue;
      if (Down(s, r) ? down_dist_[r] != dist_[r] : from_above_[s]) continue;
      out.push_back(link.port);
    }
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }

 private:
  struct Link {
    uint8_t port;
    uint32_t remote;
  };
  bool Down(uint32_t from, uint32_t to) const {
    return height_[from] != kNone && height_[to] != kNone && height_[to] < height_[from];
  }
  template <typename Step>
  void Bfs(std::vector<uint32_t>& queue, std::vector<uint32_t>& dist, Step step) const {
    for (size_t head = 0; head < queue.size(); ++head) {
      const uint32_t u = queue[head];
      for (const Link& link : links_[u])
        if (dist[link.remote] == kNone && step(u, link.remote)) {
          dist[link.remote] = dist[u] + 1;
          queue.push_back(link.remote);
        }
    }
  }

  const RoutingTables& st_;
  std::vector<uint32_t> sidx_;
  std::vector<NodeId> snode_;
  std::vector<std::vector<Link>> links_;
  std::vector<std::vector<uint32_t>> remote_;  // by switch, by port: the switch there
  std::vector<uint32_t> height_;
  std::vector<std::vector<uint32_t>> lids_of_leaf_;
  std::vector<NodeId> leaves_;
  // For the current leaf: hops to it, hops going down only, entered from above.
  std::vector<uint32_t> dist_, down_dist_;
  std::vector<bool> from_above_;
};

}  // namespace

std::string_view ArLidModeName(ArLidMode m) {
  switch (m) {
    case ArLidMode::kBounded: return "bounded";
    case ArLidMode::kFree: return "free";
    case ArLidMode::kStatic: return "static";
  }
  return "?";
}

Result<ArTables> BuildArTables(const Fabric& fabric, const LidMap& lids,
                               const RoutingTables& static_tables, const ArOptions& options) {
  if (options.group_cap == 0) return InvalidArgument("GroupCap 0: no adaptive routing");
  const size_t N = fabric.node_count();
  TreeRule rule(fabric, lids, static_tables);
  std::vector<Guid> leaf_guids;
  for (NodeId leaf : rule.leaves()) leaf_guids.push_back(fabric.node(leaf).guid);
  IBSM_ASSIGN_OR_RETURN(auto ids, AllocateIds(leaf_guids, options));

  ArTables out;
  out.group_ids = std::move(ids);
  out.switch_index.assign(N, SIZE_MAX);
  for (const SwitchTable& st : static_tables.switches) {
    if (st.node >= N || !fabric.node(st.node).is_switch()) continue;
    out.switch_index[st.node] = out.switches.size();
    ArSwitchTable t;
    t.node = st.node;
    t.lft.resize(st.lft.size());
    for (size_t lid = 0; lid < st.lft.size(); ++lid)
      t.lft[lid] = ArEntry{ArLidMode::kStatic, st.lft[lid], st.lft[lid]};
    out.switches.push_back(std::move(t));
  }

  // One pass per destination leaf: each switch's group is its TreeRule ports.
  std::vector<uint8_t> ports;
  for (NodeId leaf : rule.leaves()) {
    const uint16_t gid = out.group_ids.at(fabric.node(leaf).guid);
    rule.ForLeaf(leaf);
    for (uint32_t s = 0; s < rule.switches(); ++s) {
      const size_t ti = out.switch_index[rule.node(s)];
      if (ti == SIZE_MAX || rule.node(s) == leaf) continue;
      rule.Ports(s, ports);
      if (ports.size() < 2) continue;
      ArSwitchTable& t = out.switches[ti];
      bool used = false;
      for (uint32_t lid : rule.lids_of(leaf)) {
        if (lid >= t.lft.size()) continue;
        ArEntry& e = t.lft[lid];
        if (!std::binary_search(ports.begin(), ports.end(), e.default_port)) continue;
        e.mode = options.mode;
        e.group = gid;
        ++t.ar_entries;
        used = true;
      }
      if (!used) continue;
      if (t.groups.size() <= gid) t.groups.resize(size_t{gid} + 1);
      t.groups[gid] = ports;
      ++t.group_count;
      t.group_top = std::max(t.group_top, gid);
    }
  }
  for (const ArSwitchTable& t : out.switches) out.group_top = std::max(out.group_top, t.group_top);
  return out;
}

namespace {

class ArDependencyGraph {
 public:
  ArDependencyGraph(const Fabric& f, const LidMap& lids, const RoutingTables& st,
                    const ArTables& ar)
      : f_(f), lids_(lids), st_(st), ar_(ar) {
    sidx_.assign(f.node_count(), kNone);
    for (NodeId n = 0; n < f.node_count(); ++n)
      if (f.node(n).is_switch()) {
        sidx_[n] = static_cast<uint32_t>(snode_.size());
        snode_.push_back(n);
      }
    std::vector<uint32_t> ports;
    for (NodeId n : snode_) ports.push_back(f.node(n).num_ports);
    graph_ = ChannelGraph(ports);
  }

  // The switch index behind port `p` of switch s, or kNone (CA, uncabled, out of range).
  uint32_t Next(uint32_t s, uint32_t p) const {
    const Node& node = f_.node(snode_[s]);
    if (p == 0 || p > node.num_ports) return kNone;
    const Port& port = f_.port(node.first_port + p);
    return port.connected() ? sidx_[f_.port(port.peer).node] : kNone;
  }

  // Ports switch s may use for `lid`: the group's for an AR entry, else the static one.
  void Choices(uint32_t s, uint32_t lid, std::vector<uint8_t>& out) const {
    out.clear();
    const ArSwitchTable* t = ar_.table(snode_[s]);
    if (t && lid < t->lft.size()) {
      const ArEntry& e = t->lft[lid];
      if (e.mode != ArLidMode::kStatic && e.group < t->groups.size()) {
        out = t->groups[e.group];
        return;
      }
      out.push_back(static_cast<uint8_t>(e.group));
      return;
    }
    const SwitchTable* x = st_.table(snode_[s]);
    if (x && lid < x->lft.size()) out.push_back(x->lft[lid]);
  }

  void AddHostLid(uint32_t lid) {
    std::vector<uint8_t> pa, pb;
    for (uint32_t a = 0; a < snode_.size(); ++a) {
      Choices(a, lid, pa);
      for (uint8_t p : pa) {
        const uint32_t b = Next(a, p);
        if (b == kNone) continue;
        Choices(b, lid, pb);
        for (uint8_t q : pb)
          if (Next(b, q) != kNone) graph_.Add(graph_.channel(a, p), q);
      }
    }
  }

  // Static routes towards a switch LID, walked from every switch with a CA cabled.
  void AddSwitchLid(uint32_t lid, const std::vector<uint32_t>& host_switches) {
    std::vector<uint8_t> pa, pb;
    for (uint32_t start : host_switches) {
      uint32_t a = start;
      for (int hops = 0; hops < 64; ++hops) {
        Choices(a, lid, pa);
        if (pa.empty()) break;
        const uint32_t b = Next(a, pa[0]);
        if (b == kNone) break;
        Choices(b, lid, pb);
        if (pb.empty() || Next(b, pb[0]) == kNone) break;
        if (!graph_.Add(graph_.channel(a, pa[0]), pb[0])) break;  // walked from here before
        a = b;
      }
    }
  }

  void Build() {
    std::vector<uint32_t> host_switches;
    for (uint32_t s = 0; s < snode_.size(); ++s) {
      const Node& node = f_.node(snode_[s]);
      for (uint32_t p = 1; p <= node.num_ports; ++p) {
        const Port& port = f_.port(node.first_port + p);
        if (port.connected() && sidx_[f_.port(port.peer).node] == kNone &&
            !IsAggregationNode(f_.node(f_.port(port.peer).node))) {
          host_switches.push_back(s);
          break;
        }
      }
    }
    for (uint32_t lid = 1; lid <= lids_.max_lid(); ++lid) {
      const PortId owner = lids_.owner(Lid(static_cast<uint16_t>(lid)));
      if (owner == kNoPort) continue;
      const Node& on = f_.node(f_.port(owner).node);
      if (on.is_switch() || IsAggregationNode(on)) {
        AddSwitchLid(lid, host_switches);
      } else {
        AddHostLid(lid);
      }
    }
  }

  void Report(ArVerifyReport& r) const {
    for (uint32_t s = 0; s < snode_.size(); ++s)
      for (uint32_t p = 1; p <= f_.node(snode_[s]).num_ports; ++p) r.channels += Next(s, p) != kNone;
    r.dependencies += graph_.dependencies();
    std::vector<uint32_t> cycle = graph_.FindCycle([this](uint32_t c) {
      const uint32_t b = Next(graph_.switch_of(c), graph_.port_of(c));
      return b == kNone ? ChannelGraph::kNone : b;
    });
    if (cycle.empty()) return;
    r.acyclic = false;
    for (uint32_t c : cycle) {
      r.cycle.push_back(fmt::format("{} port {}", Label(f_, snode_[graph_.switch_of(c)]),
                                    graph_.port_of(c)));
    }
  }

 private:
  const Fabric& f_;
  const LidMap& lids_;
  const RoutingTables& st_;
  const ArTables& ar_;
  std::vector<uint32_t> sidx_;
  std::vector<NodeId> snode_;
  ChannelGraph graph_{{}};
};

}  // namespace

ArVerifyReport VerifyArTables(const Fabric& fabric, const LidMap& lids,
                              const RoutingTables& static_tables, const ArTables& ar) {
  ArVerifyReport r;
  auto problem = [&r](std::string s) {
    if (r.problems.size() < kMaxProblems) r.problems.push_back(std::move(s));
  };
  // Every entry: its default is the static route; towards a switch LID, or a host on the
  // switch itself, it is static.
  for (const ArSwitchTable& t : ar.switches) {
    const SwitchTable* st = static_tables.table(t.node);
    for (uint32_t lid = 1; lid < t.lft.size(); ++lid) {
      const ArEntry& e = t.lft[lid];
      const uint8_t want = st && lid < st->lft.size() ? st->lft[lid] : kDropPort;
      if (e.default_port != want) {
        ++r.default_mismatches;
        problem(fmt::format("{} LID {}: default port {} but the static route is {}",
                            Label(fabric, t.node), lid, e.default_port, want));
      }
      const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
      if (owner == kNoPort) continue;
      const NodeId leaf = LeafOf(fabric, owner);
      if ((leaf == kNoNode || leaf == t.node) && e.mode != ArLidMode::kStatic) {
        ++r.group_mismatches;
        problem(fmt::format("{} LID {}: adaptive entry for a destination it delivers itself "
                            "or a switch LID",
                            Label(fabric, t.node), lid));
      }
    }
  }
  // Towards each destination leaf: groups are the tree rule's port sets, one ID per leaf.
  TreeRule rule(fabric, lids, static_tables);
  std::vector<uint8_t> allowed;
  for (NodeId leaf : rule.leaves()) {
    rule.ForLeaf(leaf);
    std::optional<uint16_t> leaf_id;
    for (const ArSwitchTable& t : ar.switches) {
      if (t.node == leaf || rule.index(t.node) == kNone) continue;
      rule.Ports(rule.index(t.node), allowed);
      for (uint32_t lid : rule.lids_of(leaf)) {
        if (lid >= t.lft.size()) continue;
        const ArEntry& e = t.lft[lid];
        if (e.mode == ArLidMode::kStatic) {
          if (allowed.size() >= 2 &&
              std::find(allowed.begin(), allowed.end(), e.default_port) != allowed.end()) {
            ++r.missing_groups;
            problem(fmt::format("{} LID {}: static although {} ports qualify",
                                Label(fabric, t.node), lid, allowed.size()));
          }
          continue;
        }
        const std::vector<uint8_t>* g =
            e.group < t.groups.size() ? &t.groups[e.group] : nullptr;
        if (!g || *g != allowed) {
          ++r.group_mismatches;
          problem(fmt::format("{} LID {}: group {} has {} ports, the tree rule {}",
                              Label(fabric, t.node), lid, e.group, g ? g->size() : 0,
                              allowed.size()));
        }
        if (!leaf_id) leaf_id = e.group;
        if (*leaf_id != e.group) {
          ++r.id_mismatches;
          problem(fmt::format("destination leaf {} is group {} on one switch and {} on {}",
                              Label(fabric, leaf), *leaf_id, e.group, Label(fabric, t.node)));
        }
      }
    }
  }
  ArDependencyGraph g(fabric, lids, static_tables, ar);
  g.Build();
  g.Report(r);
  if (!r.acyclic) {
    std::string c;
    for (const auto& hop : r.cycle) c += (c.empty() ? "" : " -> ") + hop;
    problem("credit loop over AR group ports: " + c);
  }
  r.ok = r.acyclic && r.group_mismatches == 0 && r.missing_groups == 0 &&
         r.default_mismatches == 0 && r.id_mismatches == 0;
  return r;
}

}  // namespace ibsm::routing
