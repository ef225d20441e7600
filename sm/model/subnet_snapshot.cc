// The subnet snapshot a sweep publishes (sm/model/subnet_snapshot.h).
#include "sm/model/subnet_snapshot.h"

namespace ibsm::sm {

bool SubnetSnapshot::SharePartition(PortId a, PortId b) const {
  if (!partitioned || !pkeys || a == b) return true;
  auto x = pkeys->members.find(a);
  auto y = pkeys->members.find(b);
  if (x == pkeys->members.end() || y == pkeys->members.end()) return false;
  return SharedPKey(x->second, y->second, std::nullopt).has_value();
}

bool SubnetSnapshot::HoldsPKey(PortId p, uint16_t pkey) const {
  if (!partitioned || !pkeys) return true;
  auto x = pkeys->members.find(p);
  return x != pkeys->members.end() && x->second.count(pkey & 0x7FFF) > 0;
}

const Fabric& SubnetSnapshot::fabric() const {
  static const Fabric* const kEmpty = new Fabric();  // never destroyed: read by workers
  return discovery ? discovery->fabric : *kEmpty;
}

const std::vector<DiscoveredNode>& SubnetSnapshot::nodes() const {
  static const auto* const kEmpty = new std::vector<DiscoveredNode>();
  return discovery ? discovery->nodes : *kEmpty;
}

uint16_t SubnetSnapshot::RecordLid(NodeId n, PortNum port) const {
  if (n >= fabric().node_count()) return 0;
  const Node& node = fabric().node(n);
  if (node.is_switch()) return fabric().port(n, PortNum{0}).lid.value();
  if (port.value() == 0 || port.value() > node.num_ports) return 0;
  return fabric().port(n, port).lid.value();
}

}  // namespace ibsm::sm
