// Multicast groups to and from the state file's rows (ha::McGroupRow), so a restarted SM
// restores every group on the MLID it had.
#pragma once

#include <vector>

#include "base/status.h"
#include "ha/state_rows.h"
#include "sm/model/multicast.h"

namespace ibsm::sm {

std::vector<ha::McGroupRow> ToRows(const std::map<mad::Gid, McGroup>& groups);
// Corrupt for a row whose record does not decode or disagrees with its key columns.
Result<std::vector<McGroup>> FromRows(const std::vector<ha::McGroupRow>& rows);

}  // namespace ibsm::sm
