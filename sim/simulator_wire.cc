// Simulator wire: endpoints, MAD injection, directed-route walks (out and back), LID
// routing through the LFTs, link crossing and delivery (duplicated and reordered replies).
#include "sim/simulator.h"

#include <chrono>
#include <utility>

#include "mad/attr/linear_forwarding_table.h"
#include "sim/simulator_internal.h"

namespace ibsm::sim {
namespace {

bool OwnsLid(const mad::PortInfo& pi, uint16_t lid) {
  if (pi.lid == 0) return false;
  uint32_t span = 1u << pi.lmc;
  return lid >= pi.lid && lid < pi.lid + span;
}

}  // namespace

Status Simulator::Bind(PortId port, Endpoint* ep) {
  if (port >= ports_.size() || ep == nullptr) return InvalidArgument("SIM-BND-001 no such port");
  if (endpoints_[port] != nullptr) return AlreadyExists("SIM-BND-002 port already bound");
  endpoints_[port] = ep;
  return Status::Ok();
}

void Simulator::Unbind(PortId port) {
  if (port < endpoints_.size()) endpoints_[port] = nullptr;
}

PortId Simulator::CrossLink(PortId out, uint8_t min_state) {
  const SimPort& o = ports_[out];
  if (o.info.port_phys_state != kPhysLinkUp || o.peer == kNoPort) {
    Drop(DropReason::kLinkDown);
    return kNoPort;
  }
  if (o.info.port_state < min_state || ports_[o.peer].info.port_state < min_state) {
    Drop(DropReason::kPortState);
    return kNoPort;
  }
  PortId in = o.peer;
  CountHop(out, in);
  return RollDrop(ports_[in].node) ? in: kNoPort;
}

// ---------------------------------------------------------------------------------------
// Routing.

void Simulator::Inject(PortId from, mad::MadMessage msg) {
  ++counters_.injected;
  if (from >= ports_.size() || !nodes_[ports_[from].node].present) {
    Drop(DropReason::kBadSource);
    return;
  }
  if (msg.bytes.size() != mad::kMadSize) {
    Drop(DropReason::kMalformed);
    return;
  }
  std::span<const uint8_t> b(msg.bytes);
  if (Get(b, kBaseVersion) != 1) {
    Drop(DropReason::kMalformed);
    return;
  }
  if (drop_rate_ > 0 && (drop_rate_ >= 1.0 || Unit(rng_) < drop_rate_)) {
    Drop(DropReason::kRandom);
    return;
  }
  if (Get(b, kMgmtClass) == static_cast<uint8_t>(mad::MgmtClass::kSubnDirected)) {
    HandleDr(from, msg);
  } else {
    HandleLid(from, msg);
  }
}

// Directed route, IBA 14.2.2.2 (outbound, D = 0) and 14.2.2.4 (return, D = 1). The walk
// applies the C14-9 / C14-13 rules at each node in turn; hop_pointer and return_path are
// updated in the bytes exactly as the nodes on the path would.
void Simulator::HandleDr(PortId from, mad::MadMessage& msg) {
  std::span<uint8_t> b(msg.bytes);
  if (Get(b, kDrSlid) != 0xFFFF || Get(b, kDrDlid) != 0xFFFF) {
    Drop(DropReason::kMixedDr);  // TODO: LID-routed legs of a DR SMP
    return;
  }
  uint64_t method = Get(b, kMethod);
  bool returning = Get(b, kDirection) == 1 || (method & mad::method::kResponseBit) != 0;
  if (returning) {
    ReturnDr(from, msg, 0);
    return;
  }
  uint32_t hop_count = static_cast<uint32_t>(Get(b, kHopCount));
  if (hop_count > mad::kMaxDrHops || Get(b, kHopPointer) != 0) {
    Drop(DropReason::kBadPath);
    return;
  }
  PortId at = from;  // the port the SMP is at (arrival port once it has moved)
  NodeId node = ports_[from].node;
  for (uint32_t hp = 1; hp <= hop_count; ++hp) {
    // C14-9:2: only a switch forwards; the source may be a CA.
    if (hp > 1 && nodes_[node].sw == kNoSwitch) {
      Drop(DropReason::kNotSwitch);
      return;
    }
    uint32_t egress = static_cast<uint32_t>(Get(b, kInitialPath, hp));
    if (egress == 0 || egress > nodes_[node].num_ports) {
      Drop(DropReason::kBadPath);
      return;
    }
    at = CrossLink(nodes_[node].first_port + egress, 0);
    if (at == kNoPort) return;
    node = ports_[at].node;
    Put(b, kReturnPath, ports_[at].info.local_port_num, hp);
    Put(b, kHopPointer, hp);
  }
  ArriveAt(at, msg, 0, hop_count, true);
}

// Walks a DR response back along return_path from `from` (the responder's port) to the
// requester. The responder may leave hop_pointer anywhere; the walk sets it.
void Simulator::ReturnDr(PortId from, mad::MadMessage& msg, uint32_t hops_so_far) {
  std::span<uint8_t> b(msg.bytes);
  uint32_t hop_count = static_cast<uint32_t>(Get(b, kHopCount));
  if (hop_count > mad::kMaxDrHops) {
    Drop(DropReason::kBadPath);
    return;
  }
  Put(b, kDirection, 1);
  PortId at = from;
  NodeId node = ports_[from].node;
  for (uint32_t hp = hop_count; hp >= 1; --hp) {
    if (hp < hop_count && nodes_[node].sw == kNoSwitch) {
      Drop(DropReason::kNotSwitch);
      return;
    }
    uint32_t egress = static_cast<uint32_t>(Get(b, kReturnPath, hp));
    // The responder itself answers through the port the request arrived on.
    if (hp == hop_count && nodes_[node].sw == kNoSwitch) egress = ports_[at].info.local_port_num;
    if (egress == 0 || egress > nodes_[node].num_ports) {
      Drop(DropReason::kBadPath);
      return;
    }
    at = CrossLink(nodes_[node].first_port + egress, 0);
    if (at == kNoPort) return;
    node = ports_[at].node;
    Put(b, kHopPointer, hp - 1);
  }
  // Back at the requesting node: the SM sits at the port the path left from (a switch's
  // SM at port 0).
  if (hop_count > 0 && nodes_[node].sw != kNoSwitch) at = nodes_[node].first_port;
  DeliverTo(at, msg, hops_so_far + hop_count);
}

void Simulator::HandleLid(PortId from, mad::MadMessage& msg) {
  std::span<const uint8_t> b(msg.bytes);
  bool is_smp = Get(b, kMgmtClass) == static_cast<uint8_t>(mad::MgmtClass::kSubnLid);
  uint16_t slid = ports_[from].info.lid;
  if (nodes_[ports_[from].node].sw != kNoSwitch) slid = ports_[nodes_[ports_[from].node].first_port].info.lid;
  uint32_t hops = 0;
  PortId dest = RouteLid(from, msg.addr.lid.value(), is_smp, &hops);
  if (dest == kNoPort) return;
  ArriveAt(dest, msg, slid, hops, false);
}

// LID routing through the LFTs (IBA 18.2.4.3): a CA sends out of its port; a switch
// forwards by LFT[dlid]. SMPs need every link at INIT or above, GMPs ACTIVE (7.2: only
// SMPs may use a link before it is Active).
PortId Simulator::RouteLid(PortId from, uint16_t dlid, bool is_smp, uint32_t* hops) {
  uint8_t min_state = is_smp ? kStateInit: kStateActive;
  if (dlid == 0 || dlid > kMaxUnicastLid) {
    Drop(DropReason::kNoRoute);  // multicast/permissive LID routing not modelled
    return kNoPort;
  }
  PortId at = from;
  NodeId node = ports_[from].node;
  auto cross = [&](PortId out) -> bool {
    at = CrossLink(out, min_state);
    if (at == kNoPort) return false;
    node = ports_[at].node;
    ++*hops;
    return true;
  };
  if (nodes_[node].sw == kNoSwitch) {
    if (OwnsLid(ports_[from].info, dlid)) return from;
    if (!cross(from)) return kNoPort;
  }
  for (uint32_t h = 0;; ++h) {
    const SimNode& sn = nodes_[node];
    if (sn.sw == kNoSwitch) {
      if (OwnsLid(ports_[at].info, dlid)) return at;
      Drop(DropReason::kWrongDest);
      return kNoPort;
    }
    PortId mgmt = sn.first_port;
    if (OwnsLid(ports_[mgmt].info, dlid)) return mgmt;
    if (h >= kMaxLidHops) {
      Drop(DropReason::kLoop);
      return kNoPort;
    }
    const auto& lft = switches_[sn.sw].lft;
    uint8_t egress = dlid < lft.size() ? lft[dlid] : mad::kLftDropPort;
    if (egress == 0 || egress > sn.num_ports) {
      Drop(DropReason::kNoRoute);
      return kNoPort;
    }
    if (!cross(sn.first_port + egress)) return kNoPort;
  }
}

// The MAD reached `dest`. Responses and anything that is not the SMA's go to the endpoint
// bound there; SMPs for the SMA are answered and the answer routed back.
void Simulator::ArriveAt(PortId dest, mad::MadMessage& msg, uint16_t slid, uint32_t hops,
                         bool directed) {
  std::span<uint8_t> b(msg.bytes);
  uint8_t mclass = static_cast<uint8_t>(Get(b, kMgmtClass));
  uint8_t method = static_cast<uint8_t>(Get(b, kMethod));
  uint16_t attr_id = static_cast<uint16_t>(Get(b, kAttrId));
  bool is_smp = mclass == static_cast<uint8_t>(mad::MgmtClass::kSubnDirected) ||
                mclass == static_cast<uint8_t>(mad::MgmtClass::kSubnLid);
  msg.addr.lid = Lid{slid};
  if (mclass == static_cast<uint8_t>(mad::MgmtClass::kPerfMgt) &&
      (method & mad::method::kResponseBit) == 0 && method != mad::method::kTrap) {
    // The node's PMA answers, whoever is bound at the port (a real HCA's PMA sits beside
    // the user's QP1 agents); its answer is a GMP and needs an ACTIVE path back.
    if (!Pma(dest, b)) return;
    ReturnGmp(dest, slid, msg, hops);
    return;
  }
  if (!is_smp && (method & mad::method::kResponseBit) == 0 && method != mad::method::kTrap &&
      !extensions_.empty()) {
    // A class the simulator does not model itself (SHARP's 0x0B): the node's extension
    // answers; its answer is a GMP and needs an ACTIVE path back.
    NodeId dn = ports_[dest].node;
    PortNum at{ports_[dest].info.local_port_num};
    for (NodeExtension* ext: extensions_) {
      if (!ext->HandleGmp(dn, at, b)) continue;
      ReturnGmp(dest, slid, msg, hops);
      return;
    }
  }
  bool to_endpoint = (method & mad::method::kResponseBit) != 0 || !is_smp ||
                     method == mad::method::kTrap || attr_id == mad::attr::kSmInfo;
  if (to_endpoint) {
    // A switch's SM (enhanced port 0) is bound at port 0 whatever port the MAD entered.
    NodeId dn = ports_[dest].node;
    PortId ep_port = nodes_[dn].sw != kNoSwitch ? nodes_[dn].first_port: dest;
    if (endpoints_[ep_port] != nullptr) {
      DeliverTo(ep_port, msg, hops);
      return;
    }
    if (!is_smp || method == mad::method::kTrap || (method & mad::method::kResponseBit)) {
      Drop(DropReason::kNoAgent);
      return;
    }
    // SMInfo at a port with no SM: the SMA answers "unsupported" below.
  }
  if (!Sma(dest, b)) return;
  if (directed) {
    ReturnDr(dest, msg, hops);
    return;
  }
  uint32_t back_hops = 0;
  PortId back = RouteLid(dest, slid, true, &back_hops);
  if (back == kNoPort) return;
  uint16_t responder = ports_[dest].info.lid;
  msg.addr.lid = Lid{responder};
  DeliverTo(back, msg, hops + back_hops);
}

void Simulator::ReturnGmp(PortId dest, uint16_t slid, mad::MadMessage& msg, uint32_t hops) {
  uint32_t back_hops = 0;
  PortId back = RouteLid(dest, slid, false, &back_hops);
  if (back == kNoPort) return;
  msg.addr.lid = Lid{ports_[dest].info.lid};
  DeliverTo(back, msg, hops + back_hops);
}

void Simulator::DeliverTo(PortId p, mad::MadMessage& msg, uint32_t hops) {
  Endpoint* ep = endpoints_[p];
  if (ep == nullptr) {
    Drop(DropReason::kNoAgent);
    return;
  }
  // Loss on the way back as on the way out (SetDropRate: every MAD, responses included): a
  // Set can take effect and its reply still be lost.
  if (drop_rate_ > 0 && (drop_rate_ >= 1.0 || Unit(rng_) < drop_rate_)) {
    Drop(DropReason::kRandom);
    return;
  }
  ++counters_.delivered;
  std::chrono::nanoseconds latency = Latency(hops);
  const bool response = msg.bytes.size() >= mad::kMadSize &&
                        (msg.bytes[3] & mad::method::kResponseBit) != 0;
  if (response && options_.profile == SimProfile::kStrict) {
    // A late duplicate (a retransmission the fabric kept, or the switch's own resend), and
    // answers that overtake one another: the SM matches by TID and must drop the extra copy.
    if (options_.duplicate_rate > 0 && Unit(rng_) < options_.duplicate_rate) {
      ++counters_.duplicated;
      ep->Deliver(msg, latency + 2 * options_.reorder_delay);
    }
    if (options_.reorder_rate > 0 && Unit(rng_) < options_.reorder_rate) {
      ++counters_.reordered;
      latency += options_.reorder_delay;
    }
  }
  ep->Deliver(std::move(msg), latency);
}

}  // namespace ibsm::sim
