// minhop: OpenSM's default engine. Every switch forwards every LID along a minimal-hop path;
// among the minimal-hop egress ports it takes the one that carries the fewest routes so far
// on that switch (ties: lowest port number). For the extra LIDs of an LMC > 0 port it prefers
// a port leading to a remote system image, then a remote node, that no earlier LID of the
// same destination port uses on that switch (disjoint multipath, OpenSM's rule).
//
// Counting follows OpenSM: every CA/router LID counts on the port it leaves by; a switch's
// LIDs count once (its base LID). Destinations are routed in LidMap::end_ports() order
// (PortId order), LIDs of a port consecutively.
//
// Not deadlock-free on irregular fabrics (no turn rule); it never declines.
#pragma once

#include <memory>

#include "routing/hop_table.h"
#include "routing/routing_engine.h"

namespace ibsm::routing {

class MinHopEngine : public RoutingEngine {
 public:
  std::string_view name() const override { return "minhop"; }
  // Uses options.threads workers; each owns whole switches (the route counters are per
  // switch), so the tables do not depend on the number of threads.
  Result<RoutingTables> Route(const Fabric& fabric, const LidMap& lids,
                              const RoutingOptions& options) const override;
};

// Same, over a hop table the caller already built for `fabric`.
RoutingTables RouteMinHop(const Fabric& fabric, const LidMap& lids, const HopTable& hops,
                          unsigned threads);

std::unique_ptr<RoutingEngine> MakeMinHop();

}  // namespace ibsm::routing
