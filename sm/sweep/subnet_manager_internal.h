// What the SubnetManager's own files share (sm/subnet_manager*.cc); not for other code.
#pragma once

#include "ha/sm_state_machine.h"
#include "mad/attr/sm_info.h"

namespace ibsm::sm {

inline bool PeerBeats(const mad::SmInfo& a, const mad::SmInfo& b) {
  return ha::IsBetterSm(a.priority, a.guid, b.priority, b.guid);
}

}  // namespace ibsm::sm
