// Which CA ports a sweep tells to re-register (PortInfo ClientReregister): those whose
// clients' SA registrations (ServiceRecords, multicast joins, InformInfo) this SM may not
// hold. Each SM keeps its own registrations, in its own state file, so:
// - on the first sweep of a mastership (start, or takeover after another master served), a
//   port keeps its registrations only if this SM holds all of them (state_complete():
//   restored from its state file, master when it stopped, no other master since) and the
//   port still names this SM master (MasterSMBaseLID = its LID): a port another SM
//   configured may have registered with that SM;
// - on later sweeps, only ports no earlier sweep found (new, or back from a link loss: their
//   registrations were dropped when they left) lose anything;
// - a port told in a sweep is not told again before that sweep closes, though a repair takes
//   the sweep over after its LIDs stage, or a heavy sweep follows a repair that fell back.
// OpenSM sets ClientReregister on every port on its first master sweep (ARCHITECTURE.md
// "HA").
//
// Threading: the io thread only.
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "base/types.h"

namespace ibsm::sm {

class ClientReregister {
 public:
  // At start: every registration was restored from the state file of an SM that was master
  // when it stopped. Becomes true once a sweep as master ends SUBNET UP (clients told then
  // register here), false when this SM leaves MASTER.
  void set_state_complete(bool complete) { complete_ = complete; }
  bool state_complete() const { return complete_; }
  void LeftMaster() { complete_ = false; }
  // A mastership begins: nothing told in an earlier one counts.
  void BeginMastership() { told_.clear(); }

  // Whether a sweep tells CA port `guid` to re-register. `first_sweep`: the mastership's
  // first; `took_over`: it began by taking over from another master; `named_master_lid`:
  // the MasterSMBaseLID the port holds; `sm_lid`: this SM's LID.
  bool ShouldTell(Guid guid, bool first_sweep, bool took_over, uint16_t named_master_lid,
                  uint16_t sm_lid) const;
  // The port answered the Set that told it.
  void NoteTold(Guid guid) { told_.insert(guid); }
  size_t told() const { return told_.size(); }

  // A sweep closed. `ports`: the end ports it found (no change when it found none: it never
  // reached its LIDs); `up_as_master`: it ended SUBNET UP while this SM is master.
  void SweepClosed(std::vector<Guid> ports, bool found, bool up_as_master);
  // The end ports the last sweep found, in GUID order (traps 64 and 65 compare them).
  const std::vector<Guid>& known() const { return known_; }

 private:
  bool complete_ = false;
  std::vector<Guid> known_;  // sorted
  std::unordered_set<Guid> told_;  // since the last sweep closed
};

}  // namespace ibsm::sm
