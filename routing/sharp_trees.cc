#include "routing/sharp_trees.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "fabric/aggregation_node.h"
#include "routing/routing_engine.h"

namespace ibsm::routing {
namespace {


struct Topo {
  std::vector<uint32_t> tier;              // by NodeId; kNone for CAs / unreached
  std::vector<NodeId> an_of;               // switch NodeId -> its usable AN (kNoNode)
  std::vector<std::vector<NodeId>> nbrs;   // switch NodeId -> switch neighbours (dedup, sorted)
  std::vector<std::vector<PortId>> hosts;  // switch NodeId -> host ports, in port order
  uint32_t top = 0;
};

Topo Analyse(const Fabric& f, const SharpInput& in, SharpPlan* plan) {
  Topo t;
  const size_t N = f.node_count();
  t.tier.assign(N, kNone);
  t.an_of.assign(N, kNoNode);
  t.nbrs.assign(N, {});
  t.hosts.assign(N, {});
  for (NodeId n = 0; n < N; ++n) {
    const Node& node = f.node(n);
    if (!node.is_switch()) continue;
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const PortId pid = node.first_port + p;
      const Port& port = f.port(pid);
      if (!port.connected()) continue;
      const NodeId peer = f.port(port.peer).node;
      if (f.node(peer).is_switch()) {
        if (peer != n) t.nbrs[n].push_back(peer);
      } else if (IsHostPort(f, port.peer)) {
        t.hosts[n].push_back(port.peer);
        plan->hosts.push_back(port.peer);
      }
    }
    std::sort(t.nbrs[n].begin(), t.nbrs[n].end());
    t.nbrs[n].erase(std::unique(t.nbrs[n].begin(), t.nbrs[n].end()), t.nbrs[n].end());
  }
  std::sort(plan->hosts.begin(), plan->hosts.end());
  for (const auto& [an, limits] : in.ans) {
    if (an >= N) continue;
    auto sp = AggregationNodeSwitchPort(f, an);
    if (!sp) {
      plan->notes.push_back(fmt::format("AN {} is not cabled to a switch", ToString(f.node(an).guid)));
      continue;
    }
    t.an_of[f.port(*sp).node] = an;
    ++plan->an_count;
  }
  std::vector<NodeId> queue;
  for (NodeId n = 0; n < N; ++n)
    if (!t.hosts[n].empty()) t.tier[n] = 0, queue.push_back(n);
  for (size_t h = 0; h < queue.size(); ++h)
    for (NodeId m : t.nbrs[queue[h]])
      if (t.tier[m] == kNone) t.tier[m] = t.tier[queue[h]] + 1, queue.push_back(m);
  for (NodeId n : queue) t.top = std::max(t.top, t.tier[n]);
  return t;
}

uint16_t NextFreeId(const std::set<uint16_t>& used) {
  uint16_t id = 1;
  while (used.count(id)) ++id;
  return id;
}

}  // namespace

SharpPlan BuildSharpTrees(const Fabric& f, const SharpInput& in) {
  SharpPlan plan;
  Topo t = Analyse(f, in, &plan);
  if (plan.hosts.empty()) {
    plan.notes.push_back("no hosts: no SHARP trees");
    return plan;
  }
  plan.switch_tiers = t.top + 1;
  auto guid = [&](NodeId n) { return f.node(n).guid.value(); };
  auto limits = [&](NodeId sw) { return in.ans.at(t.an_of[sw]); };

  std::vector<NodeId> roots;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (t.tier[n] != t.top) continue;
    if (t.an_of[n] == kNoNode) {
      plan.notes.push_back(fmt::format("top-tier switch {} ({}) has no usable aggregation node: "
                                       "no tree rooted there",
                                       ToString(f.node(n).guid), f.node(n).description));
      continue;
    }
    roots.push_back(n);
  }
  std::sort(roots.begin(), roots.end(), [&](NodeId a, NodeId b) { return guid(a) < guid(b); });

  // Tree IDs: the root's earlier ID when it is free, else the lowest free one.
  std::set<uint16_t> used;
  std::vector<uint16_t> ids(roots.size(), 0);
  for (size_t i = 0; i < roots.size(); ++i) {
    auto it = in.previous_ids.find(f.node(roots[i]).guid);
    if (it != in.previous_ids.end() && it->second != 0 && used.insert(it->second).second)
      ids[i] = it->second;
  }
  for (size_t i = 0; i < roots.size(); ++i)
    if (ids[i] == 0) used.insert(ids[i] = NextFreeId(used));

  std::unordered_map<NodeId, uint32_t> trees_of;  // switch -> trees its AN is in
  std::vector<bool> in_some(f.port_count(), false);
  std::vector<uint32_t> reached(f.port_count(), 0);
  for (size_t r = 0; r < roots.size(); ++r) {
    const NodeId root = roots[r];
    if (trees_of[root] >= limits(root).tree_table_size) {
      plan.notes.push_back(fmt::format("root {} tree table full: no tree rooted there",
                                       ToString(f.node(root).guid)));
      continue;
    }
    SharpTree tree;
    tree.id = ids[r];
    tree.root_switch = root;
    std::unordered_map<NodeId, uint32_t> index;  // switch -> node index in this tree
    auto add = [&](NodeId sw, int32_t parent) {
      SharpTreeNode node;
      node.an = t.an_of[sw];
      node.sw = sw;
      node.parent = parent;
      node.tier = t.tier[sw];
      index[sw] = static_cast<uint32_t>(tree.nodes.size());
      if (parent >= 0) tree.nodes[parent].children.push_back(static_cast<uint32_t>(tree.nodes.size()));
      tree.nodes.push_back(std::move(node));
    };
    add(root, -1);
    std::vector<NodeId> level = {root};
    for (uint32_t tier = t.top; tier-- > 0;) {
      std::vector<NodeId> cand;
      for (NodeId p : level)
        for (NodeId c : t.nbrs[p])
          if (t.tier[c] == tier && t.an_of[c] != kNoNode && !index.count(c)) cand.push_back(c);
      std::sort(cand.begin(), cand.end(), [&](NodeId a, NodeId b) { return guid(a) < guid(b); });
      cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
      std::vector<NodeId> next;
      for (NodeId c : cand) {
        if (trees_of[c] >= limits(c).tree_table_size) {
          plan.notes.push_back(fmt::format("tree {}: AN of {} left out, its tree table ({}) is full",
                                           tree.id, ToString(f.node(c).guid),
                                           limits(c).tree_table_size));
          continue;
        }
        int32_t best = -1;
        for (NodeId p : t.nbrs[c]) {
          auto it = index.find(p);
          if (it == index.end() || t.tier[p] != tier + 1) continue;
          const SharpTreeNode& pn = tree.nodes[it->second];
          if (pn.children.size() >= limits(p).radix) continue;
          if (best < 0) {
            best = static_cast<int32_t>(it->second);
            continue;
          }
          const SharpTreeNode& bn = tree.nodes[best];
          if (pn.children.size() < bn.children.size() ||
              (pn.children.size() == bn.children.size() && guid(p) < guid(bn.sw)))
            best = static_cast<int32_t>(it->second);
        }
        if (best < 0) {
          plan.notes.push_back(fmt::format("tree {}: AN of {} left out, every parent's radix is used",
                                           tree.id, ToString(f.node(c).guid)));
          continue;
        }
        add(c, best);
        next.push_back(c);
      }
      level = std::move(next);
    }
    uint32_t min_tier = t.top;
    for (SharpTreeNode& n : tree.nodes) {
      min_tier = std::min(min_tier, n.tier);
      if (n.tier != 0) continue;
      const auto& hs = t.hosts[n.sw];
      const size_t room = limits(n.sw).radix;
      for (size_t i = 0; i < hs.size(); ++i) {
        if (i < room) {
          n.hosts.push_back(hs[i]);
        } else if (i == room) {
          plan.notes.push_back(fmt::format("tree {}: leaf {} has {} hosts, radix {}: {} left out",
                                           tree.id, ToString(f.node(n.sw).guid), hs.size(), room,
                                           hs.size() - room));
        }
      }
      tree.host_count += n.hosts.size();
    }
    if (tree.host_count == 0) {
      plan.notes.push_back(fmt::format("tree rooted at {} reaches no host: dropped",
                                       ToString(f.node(root).guid)));
      continue;
    }
    tree.depth = t.top - min_tier + 1;
    for (const SharpTreeNode& n : tree.nodes) {
      ++trees_of[n.sw];
      for (PortId h : n.hosts) ++reached[h], in_some[h] = true;
    }
    plan.trees.push_back(std::move(tree));
  }
  for (SharpTree& tree : plan.trees) {
    std::vector<bool> has(f.port_count(), false);
    for (const SharpTreeNode& n : tree.nodes)
      for (PortId h : n.hosts) has[h] = true;
    for (PortId h : plan.hosts)
      if (!has[h]) tree.missing_hosts.push_back(h);
  }
  for (PortId h : plan.hosts) {
    if (reached[h] < plan.trees.size()) plan.uncovered.push_back(h);
    if (!in_some[h]) plan.never_covered.push_back(h);
  }
  return plan;
}

std::vector<std::string> CheckSharpPlan(const Fabric& f, const SharpInput& in,
                                        const SharpPlan& plan, bool require_full_span) {
  std::vector<std::string> problems;
  std::unordered_map<NodeId, uint32_t> trees_of;
  std::set<uint16_t> ids;
  for (const SharpTree& tree : plan.trees) {
    const std::string name = fmt::format("tree {}", tree.id);
    if (!ids.insert(tree.id).second) problems.push_back(name + ": ID used twice");
    if (tree.nodes.empty()) {
      problems.push_back(name + ": no nodes");
      continue;
    }
    std::set<NodeId> seen_an;
    std::set<PortId> hosts;
    uint32_t min_tier = UINT32_MAX, max_tier = 0;
    for (size_t i = 0; i < tree.nodes.size(); ++i) {
      const SharpTreeNode& n = tree.nodes[i];
      if (!seen_an.insert(n.an).second) problems.push_back(fmt::format("{}: AN {} twice (cycle)", name, n.an));
      if ((i == 0) != (n.parent < 0)) problems.push_back(name + ": root is not the only parentless node");
      if (n.parent >= static_cast<int32_t>(i)) problems.push_back(name + ": a parent after its child (cycle)");
      auto lim = in.ans.find(n.an);
      if (lim == in.ans.end()) {
        problems.push_back(fmt::format("{}: AN {} is not a usable AN", name, n.an));
        continue;
      }
      if (n.children.size() + n.hosts.size() > lim->second.radix)
        problems.push_back(fmt::format("{}: AN {} has {} children, radix {}", name, n.an,
                                       n.children.size() + n.hosts.size(), lim->second.radix));
      auto sp = AggregationNodeSwitchPort(f, n.an);
      if (!sp || f.port(*sp).node != n.sw) problems.push_back(fmt::format("{}: AN {} is not its switch's", name, n.an));
      if (n.parent >= 0) {
        const SharpTreeNode& p = tree.nodes[n.parent];
        bool cabled = false;
        const Node& sw = f.node(n.sw);
        for (uint32_t q = 1; q <= sw.num_ports && !cabled; ++q) {
          const Port& port = f.port(sw.first_port + q);
          cabled = port.connected() && f.port(port.peer).node == p.sw;
        }
        if (!cabled || p.tier != n.tier + 1)
          problems.push_back(fmt::format("{}: edge {} -> {} is not a cable one tier up", name,
                                         ToString(f.node(n.sw).guid), ToString(f.node(p.sw).guid)));
        if (std::find(p.children.begin(), p.children.end(), i) == p.children.end())
          problems.push_back(name + ": parent does not list its child");
      }
      for (PortId h : n.hosts) {
        if (!IsHostPort(f, h) || f.port(f.port(h).peer).node != n.sw)
          problems.push_back(fmt::format("{}: host port {} is not on leaf {}", name, h, n.sw));
        if (!hosts.insert(h).second) problems.push_back(fmt::format("{}: host port {} twice", name, h));
      }
      min_tier = std::min(min_tier, n.tier);
      max_tier = std::max(max_tier, n.tier);
      ++trees_of[n.an];
    }
    const uint32_t depth = max_tier - min_tier + 1;
    if (depth != tree.depth || depth != plan.switch_tiers)
      problems.push_back(fmt::format("{}: depth {} (says {}), the fabric has {} switch tiers", name,
                                     depth, tree.depth, plan.switch_tiers));
    if (hosts.size() != tree.host_count) problems.push_back(name + ": host count wrong");
    size_t expected = plan.hosts.size() - tree.missing_hosts.size();
    if (hosts.size() != expected)
      problems.push_back(fmt::format("{}: spans {} hosts, {} of {} not listed missing", name,
                                     hosts.size(), plan.hosts.size() - expected, plan.hosts.size()));
    for (PortId h : tree.missing_hosts)
      if (hosts.count(h)) problems.push_back(name + ": a host listed missing is in the tree");
    if (require_full_span && !tree.missing_hosts.empty())
      problems.push_back(fmt::format("{}: misses {} of {} hosts", name, tree.missing_hosts.size(),
                                     plan.hosts.size()));
  }
  for (const auto& [an, count] : trees_of) {
    auto lim = in.ans.find(an);
    if (lim != in.ans.end() && count > lim->second.tree_table_size)
      problems.push_back(fmt::format("AN {} is in {} trees, tree table {}", an, count,
                                     lim->second.tree_table_size));
  }
  return problems;
}

}  // namespace ibsm::routing
