// Which occurrences of a repeated event get a log line, for events outside input can trigger
// at will (a refused request, a failing accept): the first `first`, then every `every`-th,
// so a flood costs the log a bounded trickle. The pattern SA-KEY-001 set (sm/sa/sa_server.cc).
//
// `n` is the event's own counter after counting this occurrence (1-based): the counter that
// status or the metrics already show, so this keeps no state of its own. A line it lets
// through should print `n` ("... (1234 so far)"), so a reader knows how many were not logged.
//
// Pure; thread-safe.
#pragma once

#include <cstdint>

namespace ibsm {

inline constexpr uint64_t kLogFirstOccurrences = 10;
inline constexpr uint64_t kLogEveryOccurrence = 1000;

constexpr bool ShouldLogOccurrence(uint64_t n, uint64_t first = kLogFirstOccurrences,
                                   uint64_t every = kLogEveryOccurrence) {
  return n != 0 && (n <= first || (every != 0 && n % every == 0));
}

}  // namespace ibsm
