#include "sm/sweep/client_reregister.h"

#include <algorithm>

namespace ibsm::sm {

bool ClientReregister::ShouldTell(Guid guid, bool first_sweep, bool took_over,
                                  uint16_t named_master_lid, uint16_t sm_lid) const {
  if (told_.count(guid)) return false;
  if (first_sweep) return !(complete_ && !took_over && named_master_lid == sm_lid);
  return !std::binary_search(known_.begin(), known_.end(), guid);
}

void ClientReregister::SweepClosed(std::vector<Guid> ports, bool found, bool up_as_master) {
  if (found) {
    known_ = std::move(ports);
    std::sort(known_.begin(), known_.end());
  }
  told_.clear();
  if (up_as_master) complete_ = true;
}

}  // namespace ibsm::sm
