// SubnetManager, traps from the fabric and the notices it publishes: trap 128-131 handling,
// babbling-port policy, traps 64-67 and 144 to InformInfo subscribers (ARCHITECTURE.md
// section 2, "Traps").
#include "sm/sweep/subnet_manager.h"

#include <algorithm>
#include <iterator>
#include <unordered_set>

#include <fmt/format.h>

#include "base/log.h"
#include "base/log_limit.h"

namespace ibsm::sm {

// The switch of the model whose port 0 has `lid`. A heavy sweep's fresh model has no LID
// index until its LIDs are set, so the last published one (the SA's) answers meanwhile.
std::optional<Guid> SubnetManager::SwitchOfLid(uint16_t lid) const {
  const Fabric& f = discovered_->fabric;
  if (auto p = f.FindPortByLid(Lid{lid}); p && f.node(f.port(*p).node).is_switch())
    return f.node(f.port(*p).node).guid;
  if (auto snap = sa_.snapshot(); snap && snap->discovery) {
    const Fabric& g = snap->fabric();
    if (auto p = g.FindPortByLid(Lid{lid}); p && g.node(g.port(*p).node).is_switch()) {
      const Guid guid = g.node(g.port(*p).node).guid;
      if (auto n = f.FindNode(guid); n && f.node(*n).is_switch()) return guid;
    }
  }
  return std::nullopt;
}

void SubnetManager::HandleTrap(const mad::Smp& req, const mad::MadMessage& msg) {
  ++counters_.traps_received;
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
  const TrapVerdict v = trap_tracker_.Record(key, port_health, clock_.Now());
  if (v.disable_port && options_.babbling_port_policy) {
    // Only a port of the sender itself: the details' LIDADDR must be the source LID, or any
    // host could have the SM disable any port by naming it.
    const uint16_t named = TrapTracker::DetailsLid(trap, notice->data_details);
    auto same_port = [this](uint16_t x, uint16_t y) {
      if (x == y) return true;
      if (!discovered_) return false;
      auto px = discovered_->fabric.FindPortByLid(Lid{x});
      auto py = discovered_->fabric.FindPortByLid(Lid{y});
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
    if (trap == mad::trap::kLinkStateChanged && discovered_) {
      if (auto g = SwitchOfLid(source)) NoteSwitchReport(*g);
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
  if (trap == mad::trap::kLocalChanges && sm_lid_.value() != 0 && source == sm_lid_.value()) {
    ++counters_.own_traps_ignored;
    sweep_trap = false;
  }
  if (sweep_trap && options_.sweep_on_trap) {
    // A link change a known switch reports is repaired from that switch's ports alone.
    std::optional<Guid> reporter;
    if (trap == mad::trap::kLinkStateChanged && discovered_) reporter = SwitchOfLid(source);
    if (reporter) {
      NoteSwitchReport(*reporter);
      RequestRepair(*reporter, fmt::format("trap {} from LID {}", trap, source));
    } else {
      RequestHeavySweep(fmt::format("trap {} from LID {}", trap, source));
    }
  }
  // Subscribers get the trap as a Report from the master, its issuer GID filled in (an SMP
  // Trap has none). Traps 64-67 are the SM's own to issue (ReportPortChanges,
  // ReportMulticastGroup).
  if (state() != mad::SmState::kMaster) return;
  if (notice->is_generic && trap >= mad::trap::kGidInService &&
      trap <= mad::trap::kMcastGroupDeleted)
    return;
  if (discovered_) {
    if (auto p = discovered_->fabric.FindPortByLid(Lid{source}))
      notice->issuer_gid = PortGid(discovered_->fabric.port(*p).guid);
  }
  sa_.inform().Publish(*notice);
}

// babbling_port_policy: the port a health trap keeps naming is disabled (OpenSM's
// shutup_noisy_port); the link goes down, so the next heavy sweep routes around it.
void SubnetManager::DisableBabblingPort(const TrapKey& key, uint32_t count) {
  if (state() != mad::SmState::kMaster || !discovered_) return;
  const Fabric& f = discovered_->fabric;
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
  const DiscoveredNode& dn = discovered_->nodes[at];
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
  pipeline_.Set(PortInfoPath(p), mad::attr::kPortInfo, num, data,
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

// --- notices the SM issues (IBA 13.4.8.2 traps 64-67) --------------------------------

std::array<uint8_t, 16> SubnetManager::PortGid(Guid port_guid) const {
  std::array<uint8_t, 16> gid{};
  for (size_t i = 0; i < 8; ++i) {
    gid[i] = static_cast<uint8_t>(options_.subnet_prefix >> (56 - 8 * i));
    gid[8 + i] = static_cast<uint8_t>(port_guid.value() >> (56 - 8 * i));
  }
  return gid;
}

void SubnetManager::PublishSmNotice(uint16_t trap, const std::array<uint8_t, 16>& gid) {
  if (state() != mad::SmState::kMaster) return;  // only the master reports
  mad::Notice n = mad::MakeTrap64(trap, gid, sm_lid_.value());
  n.issuer_gid = PortGid(sm_port_guid_);
  sa_.inform().Publish(n);
}

// Trap 64 for every end port this sweep found that the last one did not, 65 for every one
// it lost (as OpenSM reports new ports and dropped ones after a heavy sweep).
void SubnetManager::ReportPortChanges(const std::vector<Guid>& before) {
  std::vector<Guid> now = known_ports_, old = before;
  std::sort(now.begin(), now.end());
  std::sort(old.begin(), old.end());
  std::vector<Guid> added, removed;
  std::set_difference(now.begin(), now.end(), old.begin(), old.end(), std::back_inserter(added));
  std::set_difference(old.begin(), old.end(), now.begin(), now.end(),
                      std::back_inserter(removed));
  for (Guid g: removed) PublishSmNotice(mad::trap::kGidOutOfService, PortGid(g));
  for (Guid g: added) PublishSmNotice(mad::trap::kGidInService, PortGid(g));
}

void SubnetManager::ReportMulticastGroup(bool created, const std::array<uint8_t, 16>& mgid) {
  PublishSmNotice(created ? mad::trap::kMcastGroupCreated: mad::trap::kMcastGroupDeleted, mgid);
}

// --- outputs -------------------------------------------------------------------------

}  // namespace ibsm::sm
