// Rate limit for log lines that outside input can trigger (a flood must not
// fill the log). The counter beside each such line keeps the true number.
#pragma once

#include <cstdint>

namespace ibsm::sm {

// True for the first ten occurrences of an event and every thousandth after: log only then.
// `count` is the event's counter after this occurrence was counted.
inline bool LogWorthy(uint64_t count) { return count <= 10 || count % 1000 == 0; }

}  // namespace ibsm::sm
