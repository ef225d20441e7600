#include "routing/ar_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <set>

#include "fabric/aggregation_node.h"
#include "routing/channel_graph.h"
#include "routing/hop_table.h"

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
  // Switches as dense indices, their switch-to-switch links.
  std::vector<uint32_t> sidx(N, kNone);
  std::vector<NodeId> snode;
  for (NodeId n = 0; n < N; ++n)
    if (fabric.node(n).is_switch()) {
      sidx[n] = static_cast<uint32_t>(snode.size());
      snode.push_back(n);
    }
  const size_t S = snode.size();
  struct Link {
    uint8_t port;
    uint32_t remote;
  };
  std::vector<std::vector<Link>> links(S);
  for (uint32_t s = 0; s < S; ++s) {
    const Node& node = fabric.node(snode[s]);
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = fabric.port(node.first_port + p);
      if (!port.connected()) continue;
      const uint32_t r = sidx[fabric.port(port.peer).node];
      if (r != kNone) links[s].push_back({static_cast<uint8_t>(p), r});
    }
  }

  // Destination leaves: switches delivering a CA/router LID, in NodeId order.
  std::vector<NodeId> owner_leaf(size_t{lids.max_lid()} + 1, kNoNode);
  std::vector<bool> is_leaf(N, false);
  for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid) {
    const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
    if (owner == kNoPort) continue;
    const NodeId leaf = LeafOf(fabric, owner);
    if (leaf == kNoNode) continue;
    owner_leaf[lid] = leaf;
    is_leaf[leaf] = true;
  }
  std::vector<NodeId> leaves;
  std::vector<Guid> leaf_guids;
  for (NodeId n = 0; n < N; ++n)
    if (is_leaf[n]) {
      leaves.push_back(n);
      leaf_guids.push_back(fabric.node(n).guid);
    }
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

  // One BFS per destination leaf: dist to the leaf; a switch's group is its ports to
  // neighbours one hop closer.
  std::vector<uint32_t> dist(S), queue(S);
  std::vector<std::vector<uint8_t>> group_of(S);  // per switch, for the current leaf
  std::vector<std::vector<uint32_t>> lids_of_leaf(N);
  for (uint32_t lid = 1; lid < owner_leaf.size(); ++lid)
    if (owner_leaf[lid] != kNoNode) lids_of_leaf[owner_leaf[lid]].push_back(lid);
  for (NodeId leaf : leaves) {
    const uint16_t gid = out.group_ids.at(fabric.node(leaf).guid);
    std::fill(dist.begin(), dist.end(), kNone);
    size_t head = 0, tail = 0;
    dist[sidx[leaf]] = 0;
    queue[tail++] = sidx[leaf];
    while (head < tail) {
      const uint32_t u = queue[head++];
      for (const Link& l : links[u])
        if (dist[l.remote] == kNone) {
          dist[l.remote] = dist[u] + 1;
          queue[tail++] = l.remote;
        }
    }
    for (uint32_t s = 0; s < S; ++s) {
      const size_t ti = out.switch_index[snode[s]];
      if (ti == SIZE_MAX || s == sidx[leaf] || dist[s] == kNone) continue;
      std::vector<uint8_t> ports;
      for (const Link& l : links[s])
        if (dist[l.remote] + 1 == dist[s]) ports.push_back(l.port);
      ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
      if (ports.size() < 2) continue;
      ArSwitchTable& t = out.switches[ti];
      bool used = false;
      for (uint32_t lid : lids_of_leaf[leaf]) {
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
      t.groups[gid] = std::move(ports);
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
  const HopTable hops = HopTable::Build(fabric, 1);
  std::vector<uint8_t> minimal;
  // ID per destination leaf, as the entries name it.
  std::map<NodeId, uint16_t> leaf_id;
  for (const ArSwitchTable& t : ar.switches) {
    const SwitchTable* st = static_tables.table(t.node);
    const SwitchIdx s = hops.index(t.node);
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
      if (leaf == kNoNode || leaf == t.node) {
        if (e.mode != ArLidMode::kStatic) {
          ++r.group_mismatches;
          problem(fmt::format("{} LID {}: adaptive entry for a destination it delivers itself "
                              "or a switch LID",
                              Label(fabric, t.node), lid));
        }
        continue;
      }
      hops.MinHopPorts(s, hops.index(leaf), minimal);
      if (e.mode == ArLidMode::kStatic) {
        if (minimal.size() >= 2 &&
            std::find(minimal.begin(), minimal.end(), e.default_port) != minimal.end()) {
          ++r.missing_groups;
          problem(fmt::format("{} LID {}: static although {} minimal-hop ports exist",
                              Label(fabric, t.node), lid, minimal.size()));
        }
        continue;
      }
      const std::vector<uint8_t>* g = e.group < t.groups.size() ? &t.groups[e.group] : nullptr;
      if (!g || *g != minimal) {
        ++r.group_mismatches;
        problem(fmt::format("{} LID {}: group {} has {} ports, the minimal-hop set {}",
                            Label(fabric, t.node), lid, e.group, g ? g->size() : 0,
                            minimal.size()));
      }
      auto [it, inserted] = leaf_id.emplace(leaf, e.group);
      if (!inserted && it->second != e.group) {
        ++r.id_mismatches;
        problem(fmt::format("destination leaf {} is group {} on one switch and {} on {}",
                            Label(fabric, leaf), it->second, e.group, Label(fabric, t.node)));
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
