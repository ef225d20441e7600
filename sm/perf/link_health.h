// Link health from what discovery read: is a cable running below what both of its ends
// support (fewer lanes or a slower speed)? Shared by the control API (`links --degraded`)
// and, later, the PerfMgr health rules.
#pragma once

#include <optional>
#include <string>

#include "mad/attr/port_info.h"

namespace ibsm::sm {

// Lanes of a LinkWidthActive/Enabled/Supported code (1x=1, 4x=2, 8x=4, 12x=8, 2x=16); 0 if
// none of those bits.
unsigned WidthLanes(uint8_t width_bits);
// Gb/s per lane of the best speed in `speed_bits` (SDR/DDR/QDR: LinkSpeed*) and
// `ext_bits` (FDR/EDR/HDR/NDR: LinkSpeedExt*); 0 if none.
double LaneRate(uint8_t speed_bits, uint8_t ext_bits);

// "width 1x of 4x" / "speed SDR of EDR" / both, when the link is slower than both ends
// support; nullopt when it runs at what both support (or a side did not report it).
std::optional<std::string> DegradedReason(const mad::PortInfo& a, const mad::PortInfo& b);

}  // namespace ibsm::sm
