#include "sm/model/multicast_tree.h"

#include <algorithm>
#include <deque>
#include <limits>

namespace ibsm::sm {
namespace {

constexpr uint32_t kFar = std::numeric_limits<uint32_t>::max();

// Hop counts from `from` to every switch over switch-to-switch links.
std::vector<uint32_t> SwitchHops(const Fabric& f, NodeId from, std::vector<NodeId>* parent,
                                 std::vector<PortId>* parent_port) {
  std::vector<uint32_t> dist(f.node_count(), kFar);
  if (parent) parent->assign(f.node_count(), kNoNode);
  if (parent_port) parent_port->assign(f.node_count(), kNoPort);
  std::deque<NodeId> q{from};
  dist[from] = 0;
  while (!q.empty()) {
    NodeId n = q.front();
    q.pop_front();
    const Node& node = f.node(n);
    for (uint8_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = f.port(n, PortNum{p});
      if (!port.connected()) continue;
      NodeId m = f.port(port.peer).node;
      if (!f.node(m).is_switch() || dist[m] != kFar) continue;
      dist[m] = dist[n] + 1;
      if (parent) (*parent)[m] = n;
      if (parent_port) (*parent_port)[m] = port.peer;  // m's port towards its parent
      q.push_back(m);
    }
  }
  return dist;
}

void SetBit(SwitchMft& sw, uint16_t mlid, uint8_t port) {
  auto& v = sw.masks[mlid];
  v.resize(sw.positions, 0);
  v[port / 16] = static_cast<uint16_t>(v[port / 16] | (1u << (port % 16)));
}

}  // namespace

uint32_t MftPositions(uint8_t num_ports) { return (uint32_t{num_ports} + 1 + 15) / 16; }

bool SwitchMft::Forwards(uint16_t mlid, uint8_t port) const {
  auto it = masks.find(mlid);
  if (it == masks.end() || port / 16 >= it->second.size()) return false;
  return (it->second[port / 16] >> (port % 16)) & 1;
}

std::vector<uint8_t> SwitchMft::Ports(uint16_t mlid) const {
  std::vector<uint8_t> out;
  auto it = masks.find(mlid);
  if (it == masks.end()) return out;
  for (size_t k = 0; k < it->second.size(); ++k)
    for (unsigned b = 0; b < 16; ++b)
      if ((it->second[k] >> b) & 1) out.push_back(static_cast<uint8_t>(16 * k + b));
  return out;
}

MftPlan PlanMfts(const Fabric& f, const std::map<mad::Gid, McGroup>& groups) {
  MftPlan plan;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).is_switch()) plan.switches[n].positions = MftPositions(f.node(n).num_ports);

  for (const auto& [mgid, g] : groups) {
    // Member switches, and the switch ports that lead to receiving members.
    std::map<NodeId, std::vector<uint8_t>> attach;  // switch -> receiving ports
    for (const auto& [guid, m] : g.members) {
      auto p = f.FindPort(guid);
      if (!p) continue;
      const Port& port = f.port(*p);
      const bool receives =
          (m.join_state & (mad::join_state::kFull | mad::join_state::kNon)) != 0;
      if (f.node(port.node).is_switch()) {
        auto& ports = attach[port.node];
        if (receives) ports.push_back(0);
        continue;
      }
      if (!port.connected()) continue;
      const Port& peer = f.port(port.peer);
      if (!f.node(peer.node).is_switch()) continue;  // CA to CA: no switch to program
      auto& ports = attach[peer.node];
      if (receives) ports.push_back(static_cast<uint8_t>(peer.num.value()));
    }
    if (attach.empty()) continue;

    // Root: the switch minimising the greatest hop count to a member switch (among the
    // switches reaching most member switches), lowest GUID on a tie.
    std::vector<std::vector<uint32_t>> from_members;
    for (const auto& [sw, ports] : attach) from_members.push_back(SwitchHops(f, sw, nullptr, nullptr));
    NodeId root = kNoNode;
    size_t best_reach = 0;
    uint32_t best_depth = kFar;
    for (NodeId n = 0; n < f.node_count(); ++n) {
      if (!f.node(n).is_switch()) continue;
      size_t reach = 0;
      uint32_t depth = 0;
      for (const auto& d : from_members) {
        if (d[n] == kFar) continue;
        ++reach;
        depth = std::max(depth, d[n]);
      }
      bool better = reach > best_reach || (reach == best_reach && depth < best_depth) ||
                    (reach == best_reach && depth == best_depth && root != kNoNode &&
                     f.node(n).guid < f.node(root).guid);
      if (reach > 0 && better) {
        root = n;
        best_reach = reach;
        best_depth = depth;
      }
    }
    if (root == kNoNode) continue;

    McTree tree;
    tree.mlid = g.mlid;
    tree.root = root;
    std::vector<NodeId> parent;
    std::vector<PortId> up_port;
    std::vector<uint32_t> dist = SwitchHops(f, root, &parent, &up_port);
    std::vector<bool> on_tree(f.node_count(), false);
    on_tree[root] = true;
    tree.switches.push_back(root);
    for (const auto& [sw, ports] : attach) {
      if (dist[sw] == kFar) {
        ++tree.unreachable;
        continue;
      }
      tree.depth = std::max(tree.depth, dist[sw]);
      // Climb to the root, marking both ends of every edge on the way.
      for (NodeId n = sw; n != root && !on_tree[n]; n = parent[n]) {
        on_tree[n] = true;
        tree.switches.push_back(n);
        const Port& up = f.port(up_port[n]);
        const Port& down = f.port(up.peer);
        SetBit(plan.switches[n], g.mlid, static_cast<uint8_t>(up.num.value()));
        SetBit(plan.switches[parent[n]], g.mlid, static_cast<uint8_t>(down.num.value()));
      }
      for (uint8_t p : ports) SetBit(plan.switches[sw], g.mlid, p);
    }
    // A switch on the tree with nothing to forward still holds the MLID (all zero), so a
    // lone member switch is programmed, and so nothing stale stays there.
    for (NodeId n : tree.switches) plan.switches[n].masks[g.mlid].resize(plan.switches[n].positions, 0);
    plan.max_mlid = std::max(plan.max_mlid, g.mlid);
    plan.trees.push_back(std::move(tree));
  }
  return plan;
}

}  // namespace ibsm::sm
