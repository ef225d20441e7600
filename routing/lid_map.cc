#include "routing/routing_engine.h"

#include <algorithm>

namespace ibsm::routing {

LidMap::LidMap(const Fabric& fabric) {
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    const Node& node = fabric.node(n);
    if (node.first_port == kNoPort) continue;
    // Switches: port 0 only. CAs and routers: every physical port (port 0 is unused).
    const uint32_t first = node.is_switch() ? 0 : 1;
    const uint32_t last = node.is_switch() ? 0 : node.num_ports;
    for (uint32_t num = first; num <= last; ++num) {
      const PortId p = node.first_port + num;
      const Port& port = fabric.port(p);
      if (!IsUnicast(port.lid)) continue;
      end_ports_.push_back(p);
      const uint32_t count = 1u << (port.lmc & 7);
      const uint32_t end = std::min<uint32_t>(port.lid.value() + count - 1, kMaxUnicastLid);
      if (owner_.size() <= end) owner_.resize(end + 1, kNoPort);
      for (uint32_t lid = port.lid.value(); lid <= end; ++lid) {
        if (owner_[lid] != kNoPort) {
          ++conflicts_;
          continue;
        }
        owner_[lid] = p;
        if (lid > max_lid_) max_lid_ = static_cast<uint16_t>(lid);
      }
    }
  }
  // end_ports_ is in PortId order because nodes' port ranges are allocated in NodeId order.
  owner_.resize(max_lid_ + 1u, kNoPort);
}

}  // namespace ibsm::routing
