#include "fabric/aggregation_node.h"

namespace ibsm {

bool IsAggregationNode(const Node& node) {
  return node.kind == NodeKind::kCa &&
         node.description.find(kAggregationNodeText) != std::string::npos;
}

std::optional<PortId> AggregationNodeSwitchPort(const Fabric& f, NodeId an) {
  const Node& n = f.node(an);
  if (!IsAggregationNode(n)) return std::nullopt;
  for (uint32_t p = 1; p <= n.num_ports; ++p) {
    const Port& port = f.port(n.first_port + p);
    if (port.connected() && f.node(f.port(port.peer).node).is_switch()) return port.peer;
  }
  return std::nullopt;
}

bool IsHostPort(const Fabric& f, PortId p) {
  const Port& port = f.port(p);
  const Node& n = f.node(port.node);
  if (n.kind != NodeKind::kCa || IsAggregationNode(n) || port.num.value() == 0 ||
      !port.connected())
    return false;
  return f.node(f.port(port.peer).node).is_switch();
}

Result<Fabric> WithAggregationNodes(const Fabric& in,
                                    const std::function<bool(const Node&)>& capable,
                                    std::vector<AggregationNodeLink>* links) {
  Fabric out;
  std::vector<bool> gets_an(in.node_count(), false);
  size_t added = 0;
  for (NodeId n = 0; n < in.node_count(); ++n) {
    const Node& node = in.node(n);
    gets_an[n] = node.is_switch() && node.num_ports < 254 && capable(node);
    added += gets_an[n];
  }
  out.Reserve(in.node_count() + added, in.port_count() + 3 * added);
  auto copy_node = [&](const Node& src, uint8_t ports) -> Result<NodeId> {
    IBSM_ASSIGN_OR_RETURN(NodeId id,
                          out.AddNode(src.kind, src.guid, ports, src.name, src.description));
    Node& dst = out.mutable_node(id);
    dst.system_image_guid = src.system_image_guid;
    dst.vendor_id = src.vendor_id;
    dst.device_id = src.device_id;
    dst.revision = src.revision;
    return id;
  };
  for (NodeId n = 0; n < in.node_count(); ++n) {
    const Node& src = in.node(n);
    IBSM_ASSIGN_OR_RETURN(NodeId id, copy_node(src, static_cast<uint8_t>(src.num_ports + gets_an[n])));
    for (uint32_t p = 0; p <= src.num_ports; ++p) {
      const Port& sp = in.port(src.first_port + p);
      PortId dp = out.port_id(id, PortNum{static_cast<uint8_t>(p)});
      Port& d = out.mutable_port(dp);
      d.lid = sp.lid;
      d.lmc = sp.lmc;
      d.state = sp.state;
      d.width = sp.width;
      d.speed = sp.speed;
      if (sp.guid.value() == 0) continue;
      if (src.is_switch() && p != 0) {
        d.guid = sp.guid;  // switch ports share port 0's GUID; only port 0 is indexed
      } else {
        IBSM_RETURN_IF_ERROR(out.SetPortGuid(dp, sp.guid));
      }
    }
  }
  for (PortId p = 0; p < in.port_count(); ++p) {
    const Port& sp = in.port(p);
    if (!sp.connected() || sp.peer < p) continue;
    const Port& q = in.port(sp.peer);
    IBSM_RETURN_IF_ERROR(out.Connect(sp.node, sp.num, q.node, q.num));
  }
  for (NodeId n = 0; n < in.node_count(); ++n) {
    if (!gets_an[n]) continue;
    const Node& sw = out.node(n);
    uint64_t g = sw.guid.value() | (uint64_t{1} << 60);
    while (out.FindNode(Guid{g}) || out.FindPort(Guid{g + 1}) || out.FindNode(Guid{g + 1})) ++g;
    const std::string name = sw.name.empty() ? ToString(sw.guid) : sw.name;
    IBSM_ASSIGN_OR_RETURN(NodeId an, out.AddNode(NodeKind::kCa, Guid{g}, 1, name + "-an",
                                                 std::string(kAggregationNodeText) + " " + name));
    Node& an_node = out.mutable_node(an);
    an_node.system_image_guid = sw.system_image_guid;
    an_node.vendor_id = sw.vendor_id;
    PortId ap = out.port_id(an, PortNum{1});
    IBSM_RETURN_IF_ERROR(out.SetPortGuid(ap, Guid{g + 1}));
    const PortNum sw_port{out.node(n).num_ports};
    PortId last = out.port_id(n, sw_port);
    out.mutable_port(last).guid = out.port(n, PortNum{0}).guid;
    out.mutable_port(ap).width = out.port(last).width;
    out.mutable_port(ap).speed = out.port(last).speed;
    IBSM_RETURN_IF_ERROR(out.Connect(n, sw_port, an, PortNum{1}));
    if (links) links->push_back({n, an});
  }
  return out;
}

}  // namespace ibsm
