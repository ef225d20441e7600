// Framing shared by the SA's answer paths (sa_server.cc, sa_services.cc, sa_multicast.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mad/mad.h"
#include "sm/sa/sa_server.h"

namespace ibsm::sm {

// Puts `payload` (records packed at the attribute offset) into `out`, an SA response whose
// headers are framed: a Get carries its one record in the MAD; a GetTable travels as RMPP,
// one segment framed here and longer answers left for the transport to segment (counted in
// `counters.rmpp_answers`). Nullopt when the one segment cannot be framed.
std::optional<mad::MadMessage> PackRecords(mad::MadMessage out, bool get,
                                           std::vector<uint8_t> payload, SaCounters& counters);

}  // namespace ibsm::sm
