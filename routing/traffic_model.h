// A flow-level traffic model over programmed tables: for a traffic
// matrix (shift, seeded random permutation, all-to-all) it computes the load of every
// directed link with the static LFT routes and with adaptive routing over the AR tables, and
// reports the worst link load and the effective bisection bandwidth. Pure and deterministic.
//
// Model. Hosts are the CA/router ports with a LID cabled to a switch, in fabric order (by
// leaf switch in NodeId order, then leaf port; as routing/quality.h). Every host sends one
// unit of traffic: a permutation gives each flow 1 unit, all-to-all gives each of the N - 1
// flows of a host 1 / (N - 1). A link's load is the sum of the traffic crossing it (1.0 = its
// capacity). Flows are placed in source order, each at every switch it reaches:
//   - static: the LFT port;
//   - AR bounded: the whole flow on the least-loaded port of the entry's group at the time
//     the flow starts (ties: the default port, then the lowest port number);
//   - AR free: the flow is split over the group's ports by water-filling the current loads
//     (per-packet spraying towards the least-loaded ports), so parts of one flow may take
//     different paths.
// Static entries of the AR tables (and switches without AR) use their default port.
//
// Effective bisection bandwidth (EBB): each flow gets rate min(1, 1 / L), L the largest load
// on any link that carries some of it (its bottleneck under fair sharing); the EBB of a matrix
// is the mean rate over its flows, and the report's is the mean over matrices. 1.0 means every
// flow runs at full link speed.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "fabric/fabric.h"
#include "routing/ar_groups.h"
#include "routing/routing_engine.h"

namespace ibsm::routing {

enum class TrafficPattern: uint8_t { kShift, kRandom, kAllToAll };
std::string_view TrafficPatternName(TrafficPattern p);
// "shift", "random", "alltoall"; InvalidArgument otherwise.
Result<TrafficPattern> ParseTrafficPattern(std::string_view s);

struct TrafficOptions {
  TrafficPattern pattern = TrafficPattern::kRandom;
  // Matrices: shift uses shifts 1..count (capped at hosts - 1); random uses `count` seeded
  // permutations (permutation r is SplitMix64-driven from seed and r, as in quality.h);
  // all-to-all is one matrix whatever the count.
  uint32_t count = 1;
  uint64_t seed = 1;
  // When set and true, the run stops before its next matrix and the report says `cancelled`
  // (figures over the matrices done). REQUIRES: outlives the call.
  const std::atomic<bool>* cancel = nullptr;
};

struct LoadFigures {
  double max_link_load = 0;  // worst over links and matrices
  double ebb = 0;            // see the header comment
  uint64_t flows = 0;        // flows placed, over all matrices
  uint64_t unrouted = 0;     // flows the tables do not deliver (left out of the figures)
};

struct TrafficReport {
  uint64_t hosts = 0;
  uint32_t matrices = 0;
  LoadFigures static_routes;
  LoadFigures ar;  // equal to static_routes when `ar` is null or has no AR entry
  bool cancelled = false;  // options.cancel stopped it before every matrix was run
};

// `ar` may be null (no AR programmed): the AR figures then repeat the static ones.
TrafficReport RunTraffic(const Fabric& fabric, const LidMap& lids,
                         const RoutingTables& static_tables, const ArTables* ar,
                         const TrafficOptions& options);

}  // namespace ibsm::routing
