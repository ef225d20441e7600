// Traps from the fabric: repress, tracker, babbling ports, sweeps, subscribers
// (ARCHITECTURE.md section 2, "Traps").
#include "sm/sweep/trap_handler.h"

#include <fmt/format.h>

#include "base/log.h"
#include "base/log_limit.h"
#include "sm/sa/inform.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {

TrapHandler::TrapHandler(mad::Transport& transport, SmpPipeline& pipeline, const Clock& clock,
                         const SubnetManagerOptions& options, SmCounters& counters, Host& host)
    : transport_(transport),
      pipeline_(pipeline),
      clock_(clock),
      options_(options),
      counters_(counters),
      host_(host) {}

void TrapHandler::HandleTrap(const mad::Smp& req, const mad::MadMessage& msg) {
  ++counters_.traps_received;
  const DiscoveryResult* disc = host_.TrapDiscovered();
  mad::Notice notice_value;
  mad::Notice* notice = &notice_value;
  if (!mad::DecodeSmpNotice(req.data, notice).ok()) {
    ++counters_.traps_malformed;
    return;
  }
  // TrapRepress: same TID, back to the issuer (IBA 13.4.9).
  mad::Smp repress = req;
  repress.method = mad::method::kTrapRepress;
  mad::MadMessage out = mad::ToMessage(repress, msg.addr.lid);
  out.addr = msg.addr;
  (void)transport_.Post(std::move(out));
  uint16_t trap = notice->trap_number_or_device_id;
  // Who sent it is the LID the MAD came from, which the sender's HCA sets; IssuerLID and the
  // details are bytes the sender chose. A trap whose IssuerLID names another port is taken as
  // the source's own (OpenSM uses the source LID as well).
  const uint16_t source = msg.addr.lid.value();
  if (notice->issuer_lid != source) {
    ++counters_.traps_issuer_mismatch;
    Log(LogName::kSm).debug("trap {} from LID {} claims IssuerLID {}", trap, source,
                            notice->issuer_lid);
    notice->issuer_lid = source;
  }
  // A trap repeated within seconds says nothing new: after the 10th it is ignored until it
  // pauses, so a flapping port cannot keep the SM sweeping or flood subscribers.
  const bool port_health = notice->is_generic && TrapTracker::IsPortHealthTrap(trap);
  const TrapKey key = TrapTracker::KeyOf(source, trap, notice->data_details);
  const TrapVerdict v = tracker_.Record(key, port_health, clock_.Now());
  if (v.disable_port && options_.babbling_port_policy) {
    // Only a port of the sender itself: the details' LIDADDR must be the source LID, or any
    // host could have the SM disable any port by naming it.
    const uint16_t named = TrapTracker::DetailsLid(trap, notice->data_details);
    auto same_port = [disc](uint16_t x, uint16_t y) {
      if (x == y) return true;
      if (!disc) return false;
      auto px = disc->fabric.FindPortByLid(Lid{x});
      auto py = disc->fabric.FindPortByLid(Lid{y});
      return px && py && *px == *py;  // two LIDs of one LMC range
    };
    if (same_port(named, source)) {
      DisableBabblingPort(key, v.consecutive);
    } else {
      const uint64_t n = ++counters_.issues_by_id["SM-TRAP-004"];
      if (ShouldLogOccurrence(n)) {
        Log(LogName::kSm).warn("SM-TRAP-004 trap {} from LID {} names LID {} port {}: a port "
                               "of another node is not disabled (babbling_port_policy; {} so "
                               "far)",
                               trap, source, TrapTracker::DetailsLid(trap, notice->data_details),
                               key.port, n);
      }
    }
  }
  if (v.suppressed) {
    ++counters_.traps_suppressed;
    if (v.first_suppressed) {
      ++counters_.issues_by_id["SM-TRAP-001"];
      Log(LogName::kSm).warn("SM-TRAP-001 trap {} from LID {} (port {}) repeated {} times within "
                             "{} s: ignored until it pauses that long",
                             trap, key.lid, key.port, v.consecutive - 1, port_health ? 60 : 5);
    }
    Log(LogName::kSm).debug("trap {} from LID {} suppressed ({} in a row)", trap, source,
                            v.consecutive);
    // A switch still reporting link changes may be flapping a cable: counted for damping
    // even while its traps are ignored, so a flapping cable is damped and not brought back
    // while they are.
    if (trap == mad::trap::kLinkStateChanged && disc) {
      if (auto g = host_.TrapSwitchOfLid(source)) host_.TrapSwitchReported(*g, false, {});
    }
    return;
  }
  // The first of a run at info, its repeats at debug: a sender cannot flood the log.
  if (v.consecutive == 1) {
    Log(LogName::kSm).info("trap {} from LID {}", trap, source);
  } else {
    Log(LogName::kSm).debug("trap {} from LID {} ({} in a row)", trap, source, v.consecutive);
  }
  bool sweep_trap = trap == mad::trap::kLinkStateChanged || trap == mad::trap::kLocalChanges ||
                    trap == mad::trap::kGidInService || trap == mad::trap::kGidOutOfService;
  // Our own port reports the IsSM capability bit we set when claiming the SM role: nothing
  // on the fabric changed, so no sweep (ibsim sends it on every start).
  if (trap == mad::trap::kLocalChanges && host_.TrapSmLid().value() != 0 &&
      source == host_.TrapSmLid().value()) {
    ++counters_.own_traps_ignored;
    sweep_trap = false;
  }
  if (sweep_trap && options_.sweep_on_trap) {
    // A link change a known switch reports is repaired from that switch's ports alone.
    std::optional<Guid> reporter;
    if (trap == mad::trap::kLinkStateChanged && disc) reporter = host_.TrapSwitchOfLid(source);
    if (reporter) {
      host_.TrapSwitchReported(*reporter, true, fmt::format("trap {} from LID {}", trap, source));
    } else {
      host_.TrapRequestHeavySweep(fmt::format("trap {} from LID {}", trap, source));
    }
  }
  // Subscribers get the trap as a Report from the master, its issuer GID filled in (an SMP
  // Trap has none). Traps 64-67 are the SM's own to issue (ReportPortChanges,
  // ReportMulticastGroup).
  if (host_.TrapSmState() != mad::SmState::kMaster) return;
  if (notice->is_generic && trap >= mad::trap::kGidInService &&
      trap <= mad::trap::kMcastGroupDeleted)
    return;
  // Asked again: a sweep requested above may have replaced the model.
  if (const DiscoveryResult* now = host_.TrapDiscovered()) {
    if (auto p = now->fabric.FindPortByLid(Lid{source}))
      notice->issuer_gid = PortGid(options_.subnet_prefix, now->fabric.port(*p).guid);
  }
  host_.TrapPublish(*notice);
}

// babbling_port_policy: the port a health trap keeps naming is disabled (OpenSM's
// shutup_noisy_port); the link goes down, so the next heavy sweep routes around it.
void TrapHandler::DisableBabblingPort(const TrapKey& key, uint32_t count) {
  const DiscoveryResult* disc = host_.TrapDiscovered();
  if (host_.TrapSmState() != mad::SmState::kMaster || !disc) return;
  const Fabric& f = disc->fabric;
  auto owner = f.FindPortByLid(Lid{key.lid});
  if (!owner) return;
  const NodeId node = f.port(*owner).node;
  const Node& n = f.node(node);
  if (key.port > n.num_ports || (key.port == 0 && n.is_switch())) return;
  PortId p = n.is_switch() ? f.port_id(node, PortNum{key.port}): *owner;
  // A CA's port is disabled from the switch end of its cable: disabling it at the CA would
  // take down the link the answer comes back on (and the host could bring it up again).
  if (!n.is_switch() && f.port(p).connected() && f.node(f.port(f.port(p).peer).node).is_switch())
    p = f.port(p).peer;
  const NodeId at = f.port(p).node;
  const DiscoveredNode& dn = disc->nodes[at];
  const uint8_t num = f.port(p).num.value();
  if (num >= dn.port_info_valid.size() || !dn.port_info_valid[num]) return;
  mad::PortInfo want = dn.port_info[num];
  want.port_state = 0;       // no change
  want.port_phys_state = 3;  // Disabled
  std::array<uint8_t, 64> data{};
  mad::EncodeTo(want, data);
  const Node& an = f.node(at);
  const std::string what =
      at == node ? fmt::format("{} ({}) port {}", an.description, ToString(an.guid), num)
                 : fmt::format("{} ({}) port {}, the cable of {} ({})", an.description,
                               ToString(an.guid), num, n.description, ToString(n.guid));
  pipeline_.Set(host_.TrapPortInfoPath(p), mad::attr::kPortInfo, num, data,
                [this, what, count](Result<mad::Smp> r) {
                  if (!r.ok()) {
                    ++counters_.issues_by_id["SM-TRAP-003"];
                    Log(LogName::kSm).warn("SM-TRAP-003 disabling babbling {} failed: {}", what,
                                           r.status().ToString());
                    return;
                  }
                  ++counters_.babbling_ports_disabled;
                  ++counters_.issues_by_id["SM-TRAP-002"];
                  Log(LogName::kSm).warn("SM-TRAP-002 {} disabled: its health trap came {} "
                                         "times without a pause (babbling_port_policy)",
                                         what, count);
                });
}

}  // namespace ibsm::sm
