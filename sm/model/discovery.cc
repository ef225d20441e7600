#include "sm/model/discovery.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/log.h"
#include "mad/attr/node_description.h"

namespace ibsm::sm {
namespace {

NodeKind KindOf(mad::NodeType t) {
  switch (t) {
    case mad::NodeType::kSwitch: return NodeKind::kSwitch;
    case mad::NodeType::kRouter: return NodeKind::kRouter;
    default: return NodeKind::kCa;
  }
}

}  // namespace

Discovery::Discovery(SmpPipeline& pipeline) : pipeline_(pipeline) {}

void Discovery::Run(std::function<void(DiscoveryResult)> done) {
  result_ = DiscoveryResult{};
  done_ = std::move(done);
  start_ = std::chrono::steady_clock::now();
  running_ = true;
  growing_ = false;
  const uint64_t walk = ++walk_;
  DrPath root;
  Get(root, mad::attr::kNodeInfo, 0,
      [this, root](Result<mad::Smp> r) { OnNodeInfo(root, kNoNode, 0, std::move(r)); });
  pipeline_.WhenIdle([this, walk] {
    if (walk == walk_) Finish();
  });
}

void Discovery::Get(const DrPath& path, uint16_t attr_id, uint32_t attr_mod,
                    std::function<void(Result<mad::Smp>)> cb) {
  ++result_.smps_sent;
  pipeline_.Get(
      path, attr_id, attr_mod,
      [this, walk = walk_, cb = std::move(cb)](Result<mad::Smp> r) {
        if (walk != walk_) return;  // a cancelled walk's answer
        if (!r.ok()) ++result_.smps_failed;
        cb(std::move(r));
      },
      this);
}

void Discovery::Cancel() {
  if (!running_) return;
  ++walk_;
  running_ = false;
  growing_ = false;
  done_ = nullptr;
  grown_ = nullptr;
  met_.clear();
  pipeline_.DropQueued(this);
}

void Discovery::Issue(std::string id, std::string message) {
  Log(LogName::kSm).warn("{} {}", id, message);
  result_.issues.push_back({std::move(id), std::move(message)});
}

void Discovery::OnNodeInfo(const DrPath& path, NodeId from_node, uint8_t from_port,
                           Result<mad::Smp> r) {
  if (!r.ok()) {
    Issue("SM-DISC-001", fmt::format("NodeInfo at DR path {} failed: {}", PathString(path),
                                     r.status().ToString()));
    return;
  }
  auto ni = mad::Decode<mad::NodeInfo>(r->data);
  if (!ni.ok()) return;  // cannot happen for 64 data bytes; kept for the contract
  Fabric& f = result_.fabric;
  Guid guid{ni->node_guid};
  uint8_t arrival = ni->local_port_num;
  bool is_switch = ni->node_type == mad::NodeType::kSwitch;
  if (ni->node_type == mad::NodeType::kUnknown || ni->num_ports == 0 ||
      (!is_switch && (arrival == 0 || arrival > ni->num_ports)) || arrival > ni->num_ports) {
    Issue("SM-DISC-002", fmt::format("node {} at DR path {} reports an impossible NodeInfo "
                                     "(type {}, {} ports, arrival port {}); ignored",
                                     ToString(guid), PathString(path),
                                     static_cast<int>(ni->node_type), ni->num_ports, arrival));
    return;
  }

  NodeId id;
  bool is_new = false;
  // Grow: the cable the walk just crossed, in the model; a cable either end had elsewhere
  // goes (that end faces another port now).
  auto cable = [this, &f](NodeId a, uint8_t pa, NodeId b, uint8_t pb) {
    const PortId x = f.port_id(a, PortNum{pa}), y = f.port_id(b, PortNum{pb});
    if (f.port(x).connected() && f.port(x).peer == y) return;
    for (PortId end : {x, y}) {
      if (!f.port(end).connected()) continue;
      f.Disconnect(end);
      ++grow_stats_.cables_moved;
    }
    if (f.Connect(a, PortNum{pa}, b, PortNum{pb}).ok()) ++grow_stats_.cables_added;
  };
  if (auto existing = f.FindNode(guid)) {
    id = *existing;
    const Node& n = f.node(id);
    if (n.num_ports != ni->num_ports || n.kind != KindOf(ni->node_type)) {
      Issue("SM-DISC-003",
            fmt::format("duplicate node GUID {}: DR path {} answers as a {} with {} ports, "
                        "DR path {} as a {} with {} ports; the second is ignored",
                        ToString(guid), PathString(result_.nodes[id].path),
                        NodeKindName(n.kind), n.num_ports, PathString(path),
                        NodeKindName(KindOf(ni->node_type)), ni->num_ports));
      return;
    }
    if (growing_) {
      if (from_node != kNoNode) cable(from_node, from_port, id, arrival);
      OnKnownNode(path, id, arrival);
      return;
    }
  } else {
    auto added = f.AddNode(KindOf(ni->node_type), guid, ni->num_ports, "", "");
    if (!added.ok()) return;
    id = *added;
    is_new = true;
    Node& n = f.mutable_node(id);
    n.system_image_guid = Guid{ni->system_image_guid};
    n.vendor_id = ni->vendor_id;
    n.device_id = ni->device_id;
    n.revision = ni->revision;
    DiscoveredNode dn;
    dn.path = path;
    dn.node_info = *ni;
    dn.port_info.resize(ni->num_ports + 1u);
    dn.port_info_valid.assign(ni->num_ports + 1u, false);
    result_.nodes.push_back(std::move(dn));
    if (is_switch) (void)f.SetPortGuid(f.port_id(id, PortNum{0}), Guid{ni->port_guid});
    if (growing_) {
      met_.resize(f.node_count());
      met_[id] = Met{.read = true, .all_ports = true, .added = true, .path = path,
                     .arrival = arrival, .arrivals = {}};
      ++grow_stats_.nodes_added;
    }
  }
  if (!is_switch) {
    Status s = f.SetPortGuid(f.port_id(id, PortNum{arrival}), Guid{ni->port_guid});
    if (!s.ok()) {
      Issue("SM-DISC-004", fmt::format("port GUID {} of node {} port {} is also used by "
                                       "another port: {}",
                                       ToString(Guid{ni->port_guid}), ToString(guid), arrival,
                                       s.message()));
    }
  }
  if (from_node != kNoNode && growing_) {
    cable(from_node, from_port, id, arrival);
  } else if (from_node != kNoNode) {
    Status s = f.Connect(from_node, PortNum{from_port}, id, PortNum{arrival});
    if (!s.ok()) {
      Issue("SM-DISC-005", fmt::format("link {}[{}] -> {}[{}] contradicts an earlier "
                                       "answer: {}",
                                       ToString(f.node(from_node).guid), from_port,
                                       ToString(guid), arrival, s.message()));
    }
  }
  if (is_new) {
    ExploreNode(id);
  } else if (!is_switch) {
    // A known CA reached through another port: read that port too.
    Get(path, mad::attr::kPortInfo, arrival, [this, id, arrival](Result<mad::Smp> r) { OnPortInfo(id, arrival, std::move(r)); });
  }
}

void Discovery::GetSwitchInfo(const DrPath& path, NodeId id,
                              std::function<void(const mad::SwitchInfo&)> then) {
  Get(path, mad::attr::kSwitchInfo, 0, [this, id, then = std::move(then)](Result<mad::Smp> r) {
    if (!r.ok()) {
      Issue("SM-DISC-007", fmt::format("SwitchInfo of {} failed: {}",
                                       ToString(result_.fabric.node(id).guid),
                                       r.status().ToString()));
      return;
    }
    auto si = mad::Decode<mad::SwitchInfo>(r->data);
    if (!si.ok()) return;
    result_.nodes[id].switch_info = *si;
    then(*si);
  });
}

void Discovery::ExploreNode(NodeId id) {
  const DrPath path = result_.nodes[id].path;
  Get(path, mad::attr::kNodeDescription, 0, [this, id](Result<mad::Smp> r) {
             if (!r.ok()) {
               Issue("SM-DISC-006", fmt::format("NodeDescription of {} failed: {}",
                                                ToString(result_.fabric.node(id).guid),
                                                r.status().ToString()));
               return;
             }
             auto nd = mad::Decode<mad::NodeDescription>(r->data);
             if (nd.ok()) result_.fabric.mutable_node(id).description = nd->str();
           });
  const mad::NodeInfo& ni = result_.nodes[id].node_info;
  if (ni.node_type == mad::NodeType::kSwitch) {
    GetSwitchInfo(path, id, [](const mad::SwitchInfo&) {});
    for (uint32_t p = 0; p <= ni.num_ports; ++p) {
      uint8_t port = static_cast<uint8_t>(p);
      Get(path, mad::attr::kPortInfo, port, [this, id, port](Result<mad::Smp> r) { OnPortInfo(id, port, std::move(r)); });
    }
  } else {
    uint8_t port = ni.local_port_num;
    Get(path, mad::attr::kPortInfo, port, [this, id, port](Result<mad::Smp> r) { OnPortInfo(id, port, std::move(r)); });
  }
}

void Discovery::OnPortInfo(NodeId id, uint8_t port, Result<mad::Smp> r) {
  Fabric& f = result_.fabric;
  if (!r.ok()) {
    Issue("SM-DISC-008", fmt::format("PortInfo of {} port {} failed: {}",
                                     ToString(f.node(id).guid), port, r.status().ToString()));
    return;
  }
  auto pi = mad::Decode<mad::PortInfo>(r->data);
  if (!pi.ok()) return;
  DiscoveredNode& dn = result_.nodes[id];
  const PortId pid = f.port_id(id, PortNum{port});
  // Grow, a node the model held: what the model had at this port.
  const bool known = growing_ && id < met_.size() && !met_[id].added;
  const PortState was = f.port(pid).state;
  if (known && port != 0 && f.port(pid).connected() &&
      pi->port_state == static_cast<uint8_t>(PortState::kDown)) {
    // Its cable went: both ends DOWN in the model, as a repair takes a cable out.
    const Port& peer = f.port(f.port(pid).peer);
    DiscoveredNode& pn = result_.nodes[peer.node];
    if (peer.num.value() < pn.port_info.size())
      pn.port_info[peer.num.value()].port_state = static_cast<uint8_t>(PortState::kDown);
    f.mutable_port(f.port(pid).peer).state = PortState::kDown;
    f.Disconnect(pid);
    ++grow_stats_.cables_down;
  }
  dn.port_info[port] = *pi;
  dn.port_info_valid[port] = true;
  Port& fp = f.mutable_port(pid);
  fp.lid = Lid{pi->lid};
  fp.lmc = pi->lmc;
  fp.state = static_cast<PortState>(pi->port_state <= 4 ? pi->port_state : 0);
  if (auto w = pi->link_width_active; w == 1 || w == 2 || w == 4 || w == 8 || w == 16)
    fp.width = static_cast<LinkWidth>(w);
  if (pi->link_speed_ext_active == 1) fp.speed = LinkSpeed::kFdr;
  else if (pi->link_speed_ext_active == 2) fp.speed = LinkSpeed::kEdr;
  else if (pi->link_speed_ext_active == 4) fp.speed = LinkSpeed::kHdr;
  else if (pi->link_speed_ext_active == 8) fp.speed = LinkSpeed::kNdr;
  else if (pi->link_speed_active == 1) fp.speed = LinkSpeed::kSdr;
  else if (pi->link_speed_active == 2) fp.speed = LinkSpeed::kDdr;
  else if (pi->link_speed_active == 4) fp.speed = LinkSpeed::kQdr;

  const Node& n = f.node(id);
  bool link_up = pi->port_state >= 2 && pi->port_state <= 4;
  // Switch port 0 is the management port, never cabled. CAs do not forward DR SMPs, so a
  // CA's port is followed only from the SM's own node (an empty path).
  bool forwards = n.is_switch() || dn.path.empty();
  if (!forwards || (n.is_switch() && port == 0) || !link_up) return;
  if (growing_) {
    const Met& m = met_[id];
    if (port == m.arrival && !m.path.empty()) return;
    // A known node's cable that stayed up is the model's; one that trained again (INIT where
    // the model had it up) may face another port now.
    const bool retrained = pi->port_state == static_cast<uint8_t>(PortState::kInit) &&
                           was != PortState::kInit;
    if (known && fp.connected() && !retrained) return;
    Follow(m.path, id, port);
    return;
  }
  // Do not walk back out of the port this switch was reached by.
  if (!dn.path.empty() && port == dn.node_info.local_port_num) return;
  Follow(dn.path, id, port);
}

void Discovery::Follow(const DrPath& path, NodeId id, uint8_t port) {
  if (path.size() >= mad::kMaxDrHops) {
    Issue("SM-DISC-009", fmt::format("DR path {} is at the 63-hop limit; port {} not followed",
                                     PathString(path), port));
    return;
  }
  DrPath next = path;
  next.push_back(port);
  Get(next, mad::attr::kNodeInfo, 0, [this, next, id, port](Result<mad::Smp> r) {
             OnNodeInfo(next, id, port, std::move(r));
           });
}

void Discovery::Grow(DiscoveryResult base, const std::vector<GrowFrom>& from,
                     std::function<void(DiscoveryResult, GrowStats)> done) {
  result_ = std::move(base);
  result_.issues.clear();
  result_.smps_sent = 0;
  result_.smps_failed = 0;
  grown_ = std::move(done);
  start_ = std::chrono::steady_clock::now();
  running_ = true;
  growing_ = true;
  const uint64_t walk = ++walk_;
  grow_stats_ = GrowStats{};
  met_.assign(result_.fabric.node_count(), Met{});
  for (const GrowFrom& g : from) {
    Met& m = met_[g.node];
    m.read = m.all_ports = true;
    m.path = result_.nodes[g.node].path;
    m.arrival = result_.nodes[g.node].node_info.local_port_num;
  }
  for (const GrowFrom& g : from) Follow(met_[g.node].path, g.node, g.port);
  pipeline_.WhenIdle([this, walk] {
    if (walk == walk_) Finish();
  });
}

void Discovery::OnKnownNode(const DrPath& path, NodeId id, uint8_t arrival) {
  Met& m = met_[id];
  if (m.read) {
    // Met again by another cable: that port trained again too, and is read (unless all were).
    if (m.all_ports || m.added || std::count(m.arrivals.begin(), m.arrivals.end(), arrival) ||
        arrival == m.arrival)
      return;
    m.arrivals.push_back(arrival);
    Get(path, mad::attr::kPortInfo, arrival, [this, id, arrival](Result<mad::Smp> r) {
      OnPortInfo(id, arrival, std::move(r));
    });
    return;
  }
  m.read = true;
  m.path = path;
  m.arrival = arrival;
  ++grow_stats_.nodes_reread;
  const Fabric& f = result_.fabric;
  Get(path, mad::attr::kPortInfo, arrival, [this, id, arrival](Result<mad::Smp> r) {
    OnPortInfo(id, arrival, std::move(r));
  });
  if (!f.node(id).is_switch()) return;
  // What the model says the switch holds; a switch that answers otherwise rebooted (or
  // another SM programmed it), and all its ports are read.
  const uint16_t top = result_.nodes[id].switch_info.linear_fdb_top;
  const Lid lid = f.port(id, PortNum{0}).lid;
  GetSwitchInfo(path, id, [this, id, top](const mad::SwitchInfo& si) {
    if (si.linear_fdb_top != top) ReadAllPorts(id);
  });
  Get(path, mad::attr::kPortInfo, 0, [this, id, lid](Result<mad::Smp> r) {
    const bool ok = r.ok();
    OnPortInfo(id, 0, std::move(r));
    if (ok && result_.fabric.port(id, PortNum{0}).lid != lid) ReadAllPorts(id);
  });
}

void Discovery::ReadAllPorts(NodeId id) {
  Met& m = met_[id];
  if (m.all_ports) return;
  m.all_ports = true;
  ++grow_stats_.forgot;
  const uint32_t ports = result_.fabric.node(id).num_ports;
  for (uint32_t p = 1; p <= ports; ++p) {
    if (p == m.arrival) continue;
    const uint8_t port = static_cast<uint8_t>(p);
    Get(m.path, mad::attr::kPortInfo, port,
        [this, id, port](Result<mad::Smp> r) { OnPortInfo(id, port, std::move(r)); });
  }
}

std::optional<DrPath> PathToPort(const Fabric& f, const std::vector<DiscoveredNode>& nodes,
                                 PortId p) {
  const Port& port = f.port(p);
  const DiscoveredNode& dn = nodes[port.node];
  if (f.node(port.node).is_switch() || dn.node_info.local_port_num == port.num.value())
    return dn.path;
  if (!port.connected()) return std::nullopt;
  const Port& peer = f.port(port.peer);
  // A CA forwards no DR SMP; only the SM's own node (the empty path) sends out of any port.
  if (!f.node(peer.node).is_switch() && !nodes[peer.node].path.empty()) return std::nullopt;
  DrPath path = nodes[peer.node].path;
  if (path.size() >= mad::kMaxDrHops) return std::nullopt;
  path.push_back(peer.num.value());
  return path;
}

// Gives every node the DR path a breadth-first walk of the discovered fabric meets it by
// first (nodes in walk order, their ports ascending) and the arrival port that path implies:
// NodeInfo's LocalPortNum, every PortInfo's LocalPortNum for a switch, NodeInfo's PortGUID
// for a CA. The walk keeps the path whose answer came back first, which depends on load
// with many SMPs in flight; after this, what the SA reports (PortInfoRecord LocalPortNum)
// and the paths later SMPs take follow from the topology alone. Paths at the 63-hop limit
// end the walk there; nodes past it keep the path the walk found.
void CanonicalPaths(DiscoveryResult& r) {
  const Fabric& f = r.fabric;
  NodeId root = kNoNode;
  for (NodeId n = 0; n < r.nodes.size(); ++n)
    if (r.nodes[n].path.empty()) root = n;
  if (root == kNoNode) return;
  std::vector<bool> seen(f.node_count(), false);
  std::deque<NodeId> queue{root};
  seen[root] = true;
  while (!queue.empty()) {
    NodeId n = queue.front();
    queue.pop_front();
    const DrPath& from = r.nodes[n].path;
    if (from.size() >= mad::kMaxDrHops) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      const Port& port = f.port(n, PortNum{static_cast<uint8_t>(p)});
      if (!port.connected()) continue;
      const Port& peer = f.port(port.peer);
      if (seen[peer.node]) continue;
      seen[peer.node] = true;
      DiscoveredNode& dn = r.nodes[peer.node];
      dn.path = from;
      dn.path.push_back(static_cast<uint8_t>(p));
      dn.node_info.local_port_num = peer.num.value();
      if (f.node(peer.node).is_switch()) {
        // A switch answers PortInfo of every port with the port the SMP came in by.
        for (mad::PortInfo& pi : dn.port_info) pi.local_port_num = peer.num.value();
        queue.push_back(peer.node);
      } else if (peer.guid.value() != 0) {
        dn.node_info.port_guid = peer.guid.value();
      }
    }
  }
}

// Renumbers nodes in ascending node GUID order, so NodeIds (and everything computed from
// them, such as routing tie-breaks) do not depend on the order answers arrived in.
namespace {

// `r` rebuilt with the nodes of `order` only, numbered in that order; links to a node not in
// `order` are dropped. Then CanonicalPaths.
void Rebuild(DiscoveryResult& r, const std::vector<NodeId>& order) {
  const Fabric& f = r.fabric;
  Fabric g;
  g.Reserve(f.node_count(), f.port_count());
  std::vector<NodeId> new_id(f.node_count(), kNoNode);
  std::vector<DiscoveredNode> nodes;
  nodes.reserve(r.nodes.size());
  for (NodeId old : order) {
    const Node& n = f.node(old);
    auto added = g.AddNode(n.kind, n.guid, n.num_ports, n.name, n.description);
    if (!added.ok()) continue;  // GUIDs are unique in `f`
    NodeId id = *added;
    new_id[old] = id;
    Node& m = g.mutable_node(id);
    m.system_image_guid = n.system_image_guid;
    m.vendor_id = n.vendor_id;
    m.device_id = n.device_id;
    m.revision = n.revision;
    for (uint32_t p = 0; p <= n.num_ports; ++p) {
      PortNum pn{static_cast<uint8_t>(p)};
      const Port& from = f.port(old, pn);
      Port& to = g.mutable_port(g.port_id(id, pn));
      to.lid = from.lid;
      to.lmc = from.lmc;
      to.state = from.state;
      to.width = from.width;
      to.speed = from.speed;
      if (from.guid.value() != 0) (void)g.SetPortGuid(g.port_id(id, pn), from.guid);
    }
    nodes.push_back(std::move(r.nodes[old]));
  }
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& a = f.port(p);
    if (!a.connected() || a.peer < p) continue;
    const Port& b = f.port(a.peer);
    if (new_id[a.node] == kNoNode || new_id[b.node] == kNoNode) continue;
    (void)g.Connect(new_id[a.node], a.num, new_id[b.node], b.num);
  }
  r.fabric = std::move(g);
  r.nodes = std::move(nodes);
  CanonicalPaths(r);
}

}  // namespace

void Canonicalize(DiscoveryResult& r) {
  const Fabric& f = r.fabric;
  std::vector<NodeId> order(f.node_count());
  for (NodeId i = 0; i < order.size(); ++i) order[i] = i;
  auto by_guid = [&](NodeId a, NodeId b) { return f.node(a).guid < f.node(b).guid; };
  if (std::is_sorted(order.begin(), order.end(), by_guid)) {
    // In GUID order already (a repair's growth that met no new node): the rebuild would make
    // the same fabric again, its indexes with it (at 3-tier k=48, 30 ms of a cable put back).
    r.fabric.IndexLids();
    CanonicalPaths(r);
    return;
  }
  std::sort(order.begin(), order.end(), by_guid);
  Rebuild(r, order);
}

void KeepNodes(DiscoveryResult& r, const std::vector<bool>& keep) {
  // In place (Fabric::KeepNodes): what Rebuild would give for these nodes in their order,
  // without adding every node and port GUID to new indexes (a dead switch's repair).
  const size_t before = r.fabric.node_count();
  r.fabric.KeepNodes(keep);
  size_t kept = 0;
  for (NodeId n = 0; n < before; ++n) {
    if (n >= keep.size() || !keep[n]) continue;
    if (kept != n) r.nodes[kept] = std::move(r.nodes[n]);
    ++kept;
  }
  r.nodes.resize(kept);
  CanonicalPaths(r);
}

void Discovery::Finish() {
  running_ = false;
  Canonicalize(result_);
  result_.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start_);
  if (growing_) {
    growing_ = false;
    met_.clear();
    auto done = std::move(grown_);
    done(std::move(result_), grow_stats_);
    return;
  }
  auto done = std::move(done_);
  done(std::move(result_));
}

std::string FormatFabric(const Fabric& f) {
  std::vector<NodeId> order(f.node_count());
  for (NodeId i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](NodeId a, NodeId b) { return f.node(a).guid < f.node(b).guid; });
  std::string out;
  for (NodeId id : order) {
    const Node& n = f.node(id);
    out += fmt::format("{} {} ports {} \"{}\"\n", NodeKindName(n.kind), ToString(n.guid),
                       n.num_ports, n.description);
    for (uint32_t p = 1; p <= n.num_ports; ++p) {
      const Port& port = f.port(id, PortNum{static_cast<uint8_t>(p)});
      if (!port.connected()) continue;
      const Port& peer = f.port(port.peer);
      out += fmt::format("  [{}] {} -> {}[{}]\n", p,
                         n.is_switch() ? std::string("-") : ToString(port.guid),
                         ToString(f.node(peer.node).guid), peer.num.value());
    }
  }
  return out;
}

}  // namespace ibsm::sm
