// What the benchmarks share: the process's peak memory, elapsed seconds, and the LIDs a fresh
// LID manager would hand out (header-only, benchmark code only).
#pragma once

#include <sys/resource.h>

#include <chrono>

#include "fabric/fabric.h"

namespace ibsm::bench {

// Process high-water mark (getrusage ru_maxrss): a later, smaller case reports the peak of an
// earlier, larger one, so run one case per process for its own peak.
inline double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// One LID per switch port 0 and per CA port, in NodeId order, while unicast LIDs last (what
// the LID manager gives a fresh fabric at LMC 0; a 3-tier k=64 tree has more end ports than
// LIDs, and the ports left over stay at LID 0 and are not routed).
inline void AssignLidsInNodeOrder(Fabric& fabric) {
  uint32_t next = 1;
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    const Node& node = fabric.node(n);
    const uint32_t first = node.is_switch() ? 0 : 1;
    const uint32_t last = node.is_switch() ? 0 : node.num_ports;
    for (uint32_t num = first; num <= last && next <= kMaxUnicastLid; ++num)
      fabric.mutable_port(node.first_port + num).lid = Lid(static_cast<uint16_t>(next++));
  }
  fabric.IndexLids();
}

}  // namespace ibsm::bench
