// Simulator faults: links failed and restored, nodes removed, added and rebooted, MAD loss
// (fabric-wide and per node) and the latency model.
#include "sim/simulator.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "sim/simulator_internal.h"

namespace ibsm::sim {

Status Simulator::LinkDown(PortId port) {
  if (port >= ports_.size()) return InvalidArgument("SIM-FLT-001 no such port");
  if (ports_[port].peer == kNoPort) return FailedPrecondition("SIM-FLT-002 port has no cable");
  ports_[port].cable_ok = false;
  ports_[ports_[port].peer].cable_ok = false;
  RefreshLink(port);
  return Status::Ok();
}

Status Simulator::LinkUp(PortId port) {
  if (port >= ports_.size()) return InvalidArgument("SIM-FLT-001 no such port");
  if (ports_[port].peer == kNoPort) return FailedPrecondition("SIM-FLT-002 port has no cable");
  ports_[port].cable_ok = true;
  ports_[ports_[port].peer].cable_ok = true;
  RefreshLink(port);
  return Status::Ok();
}

Status Simulator::RemoveNode(NodeId node) {
  if (node >= nodes_.size()) return InvalidArgument("SIM-FLT-003 no such node");
  SimNode& sn = nodes_[node];
  if (!sn.present) return FailedPrecondition("SIM-FLT-004 node already removed");
  sn.present = false;
  for (uint32_t p = 1; p <= sn.num_ports; ++p) {
    PortId id = sn.first_port + p;
    ports_[id].info.port_phys_state = kPhysPolling;
    ports_[id].info.port_state = kStateDown;
    if (ports_[id].peer != kNoPort) RefreshLink(id);
  }
  return Status::Ok();
}

Status Simulator::AddNode(NodeId node) {
  if (node >= nodes_.size()) return InvalidArgument("SIM-FLT-003 no such node");
  SimNode& sn = nodes_[node];
  if (sn.present) return FailedPrecondition("SIM-FLT-005 node is present");
  sn.present = true;
  ResetNodeState(node);
  for (uint32_t p = 1; p <= sn.num_ports; ++p) {
    PortId id = sn.first_port + p;
    // ResetPort already trained this end; bring the peer up to match.
    PortId q = ports_[id].peer;
    if (q != kNoPort && nodes_[ports_[q].node].present) SetLinkState(q, LinkShouldBeUp(id));
  }
  return Status::Ok();
}

Status Simulator::RebootSwitch(NodeId node) {
  if (node >= nodes_.size() || nodes_[node].sw == kNoSwitch) {
    return InvalidArgument("SIM-FLT-006 not a switch");
  }
  if (!nodes_[node].present) return FailedPrecondition("SIM-FLT-004 node is removed");
  // Power off: links drop (neighbours see DOWN), then the switch comes back fresh.
  IBSM_RETURN_IF_ERROR(RemoveNode(node));
  return AddNode(node);
}

Status Simulator::SwapCables(PortId x, PortId y) {
  if (x >= ports_.size() || y >= ports_.size()) return InvalidArgument("SIM-FLT-001 no such port");
  const PortId px = ports_[x].peer, py = ports_[y].peer;
  if (px == kNoPort || py == kNoPort) return FailedPrecondition("SIM-FLT-002 port has no cable");
  if (x == y || px == y) return InvalidArgument("SIM-FLT-007 the two ports hold one cable");
  for (PortId p : {x, y}) {
    ports_[p].cable_ok = false;
    ports_[ports_[p].peer].cable_ok = false;
    RefreshLink(p);
  }
  ports_[x].peer = py;
  ports_[py].peer = x;
  ports_[y].peer = px;
  ports_[px].peer = y;
  for (PortId p : {x, y}) {
    ports_[p].cable_ok = true;
    ports_[ports_[p].peer].cable_ok = true;
    RefreshLink(p);
  }
  return Status::Ok();
}

void Simulator::SetDropRate(double p) { drop_rate_ = std::clamp(p, 0.0, 1.0); }

Status Simulator::SetNodeDropRate(NodeId node, double p) {
  if (node >= nodes_.size()) return InvalidArgument("SIM-FLT-003 no such node");
  nodes_[node].drop_rate = std::clamp(p, 0.0, 1.0);
  return Status::Ok();
}

Status Simulator::SetNodeTrapsLost(NodeId node, bool lost) {
  if (node >= nodes_.size()) return InvalidArgument("SIM-FLT-003 no such node");
  nodes_[node].traps_lost = lost;
  return Status::Ok();
}

void Simulator::SetLatency(std::chrono::nanoseconds per_hop, std::chrono::nanoseconds jitter) {
  options_.per_hop = per_hop;
  options_.jitter = jitter;
}

bool Simulator::Drop(DropReason r) {
  ++counters_.dropped;
  ++counters_.by_reason[static_cast<size_t>(r)];
  Log(LogName::kSim).trace("MAD dropped: {}", DropReasonName(r));
  return false;
}

// True if the MAD survives entering node `n`.
bool Simulator::RollDrop(NodeId n) {
  double nd = nodes_[n].drop_rate;
  if (nd > 0 && (nd >= 1.0 || Unit(rng_) < nd)) return Drop(DropReason::kNodeDrop);
  return true;
}

std::chrono::nanoseconds Simulator::Latency(uint32_t hops) {
  auto l = options_.per_hop * hops;
  if (options_.jitter.count() > 0 && hops > 0) {
    l += std::chrono::nanoseconds(static_cast<int64_t>(rng_() % static_cast<uint64_t>(
                                                          options_.jitter.count())));
  }
  return l;
}

}  // namespace ibsm::sim
