// Simulator traps: trap 128 from a switch whose PortStateChange is set, resent until
// TrapRepress or the send cap, and traps injected as a host would forge them.
#include "sim/simulator.h"

#include "base/log.h"
#include "mad/attr/notice.h"
#include "sim/simulator_internal.h"

namespace ibsm::sim {

// ---------------------------------------------------------------------------------------
// Traps (14.2.5.1, 13.4.9): a switch whose PortStateChange got set sends trap 128 to its
// master SM LID, LID-routed from port 0, repeating until TrapRepress or the send cap.

void Simulator::SendTrap128(NodeId n) {
  SimNode& sn = nodes_[n];
  SimSwitch& sw = switches_[sn.sw];
  const mad::PortInfo& p0 = ports_[sn.first_port].info;
  if (p0.lid == 0 || p0.master_sm_base_lid == 0) return;  // nobody to tell yet
  for (const auto& t: sw.traps)
    if (t.trap_num == mad::trap::kLinkStateChanged) return;  // still repeating
  sw.traps.push_back(PendingTrap{next_trap_tid_++, mad::trap::kLinkStateChanged, 0});
  SendTrap(n, sw.traps.back());
  ArmTrapTimer();
}

void Simulator::SendTrap(NodeId n, PendingTrap& t) {
  SimNode& sn = nodes_[n];
  PortId p0 = sn.first_port;
  const mad::PortInfo& pi = ports_[p0].info;
  ++t.sends;
  ++counters_.traps_sent;
  mad::Smp smp = mad::MakeLidSmp(mad::method::kTrap, mad::attr::kNotice, 0);
  smp.tid = t.tid;
  mad::Notice notice = mad::MakeTrap128(pi.lid);
  mad::EncodeSmpNotice(notice, smp.data);
  mad::MadMessage msg = mad::ToMessage(smp, Lid{pi.master_sm_base_lid});
  Log(LogName::kSim).trace("trap {} from {} to SM LID {}", t.trap_num, ToString(Guid{sn.guid}),
                           pi.master_sm_base_lid);
  uint32_t hops = 0;
  PortId dest = RouteLid(p0, pi.master_sm_base_lid, true, &hops);
  if (dest == kNoPort || sn.traps_lost) return;
  msg.addr.lid = Lid{pi.lid};
  if (options_.profile == SimProfile::kStrict) {
    // Switches send a trap twice back to back as often as once (a retransmission inside
    // the switch): the SM must take the second as the same trap.
    ++counters_.traps_sent;
    mad::MadMessage copy = msg;
    DeliverTo(dest, copy, hops);
  }
  DeliverTo(dest, msg, hops);
}

Status Simulator::InjectTrap(PortId from, const mad::Notice& notice) {
  if (from >= ports_.size()) return InvalidArgument("no such port");
  const SimNode& sn = nodes_[ports_[from].node];
  // A switch sends from port 0 (the port its LID is on).
  PortId src = sn.sw != kNoSwitch ? sn.first_port: from;
  const mad::PortInfo& pi = ports_[src].info;
  if (pi.lid == 0 || pi.master_sm_base_lid == 0)
    return InvalidArgument("the port has no LID or no SM LID yet");
  mad::Smp smp = mad::MakeLidSmp(mad::method::kTrap, mad::attr::kNotice, 0);
  smp.tid = next_trap_tid_++;
  mad::EncodeSmpNotice(notice, smp.data);
  mad::MadMessage msg = mad::ToMessage(smp, Lid{pi.master_sm_base_lid});
  ++counters_.traps_sent;
  uint32_t hops = 0;
  PortId dest = RouteLid(src, pi.master_sm_base_lid, true, &hops);
  if (dest == kNoPort) return Unavailable("no route to the SM LID");
  msg.addr.lid = Lid{pi.lid};
  DeliverTo(dest, msg, hops);
  return Status::Ok();
}

void Simulator::SmaTrapRepress(PortId arrival, uint64_t tid) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  if (sn.sw == kNoSwitch) return;
  auto& traps = switches_[sn.sw].traps;
  std::erase_if(traps, [tid](const PendingTrap& t) { return t.tid == tid; });
}

size_t Simulator::ResendTraps() {
  size_t sent = 0;
  for (NodeId n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].sw == kNoSwitch || !nodes_[n].present) continue;
    auto& traps = switches_[nodes_[n].sw].traps;
    for (auto& t: traps) {
      if (t.sends < options_.trap_max_sends) {
        SendTrap(n, t);
        ++sent;
      }
    }
    std::erase_if(traps, [this](const PendingTrap& t) { return t.sends >= options_.trap_max_sends; });
  }
  return sent;
}

void Simulator::ArmTrapTimer() {
  if (!trap_timer_ || trap_timer_armed_) return;
  trap_timer_armed_ = true;
  trap_timer_->expires_after(options_.trap_resend_interval);
  trap_timer_->async_wait([this](const boost::system::error_code& ec) {
    trap_timer_armed_ = false;
    if (ec) return;
    ResendTraps();
    if (pending_traps() > 0) ArmTrapTimer();
  });
}

}  // namespace ibsm::sim
