// SubnetManager, its side of trap handling (TrapHandler::Host, sm/sweep/trap_handler.h) and
// the notices it publishes: traps 64-67 to InformInfo subscribers (ARCHITECTURE.md section 2,
// "Traps").
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

// --- what the trap handler asks of the sweeps (sm/sweep/trap_handler.h) ----------------

void SubnetManager::TrapSwitchReported(Guid sw, bool repair, const std::string& why) {
  NoteSwitchReport(sw);
  if (repair) RequestRepair(sw, why);
}

void SubnetManager::TrapPublish(const mad::Notice& notice) { sa_.inform().Publish(notice); }

// --- notices the SM issues (IBA 13.4.8.2 traps 64-67) --------------------------------

std::array<uint8_t, 16> SubnetManager::PortGid(Guid port_guid) const {
  return sm::PortGid(options_.subnet_prefix, port_guid);
}

void SubnetManager::PublishSmNotice(uint16_t trap, const std::array<uint8_t, 16>& gid) {
  if (state() != mad::SmState::kMaster) return;  // only the master reports
  mad::Notice n = mad::MakeTrap64(trap, gid, lids_and_ports_.sm_lid().value());
  n.issuer_gid = PortGid(sm_port_guid_);
  sa_.inform().Publish(n);
}

// Trap 64 for every end port this sweep found that the last one did not, 65 for every one
// it lost (as OpenSM reports new ports and dropped ones after a heavy sweep). `before` is
// the last sweep's ClientReregister::known(), in GUID order as the new one is.
void SubnetManager::ReportPortChanges(const std::vector<Guid>& before) {
  const std::vector<Guid>& now = rereg_.known();
  const std::vector<Guid>& old = before;
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
