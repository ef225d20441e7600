// ftree: fat-tree routing (OpenSM's ftree, extended). Each connected component of the switch
// graph (one plane of a rail-optimized fabric, say) is routed as its own fat tree.
//
// Ranks. Roots come from RoutingOptions::root_guids; without them the leaves (switches with
// compute nodes: the CA ports in cn_guids, else every CA port not in io_guids) are found and
// the switches farthest from every leaf become the roots. Rank = hops from the nearest root.
// The engine declines (non-OK Status, the chain tries the next engine) when the component is
// not tree-like: leaves at different ranks, or two leaves cabled to each other.
//
// Turn rule. Towards a host's LID every route obeys up*/down* over one total order of the
// component's switches, so those routes' channel dependency graph is acyclic (deadlock-free
// on one VL). The order is the tree's own (roots first) except around one "hub" leaf: the hub
// and all its ancestors come first, nearest the hub first. On a full fat tree every shortest
// up-then-down route of the tree stays legal under that order, and every switch reaches every
// host (through the hub if need be), which the plain rank order cannot give around a missing
// link. Missing links and switches need no special case: a destination takes the shortest
// legal route that is left.
//
// Towards a switch's own LID (or a SHARP aggregation node's) only the routes from switches
// with a host cabled carry credit-controlled traffic (CheckCreditLoops's rule,
// routing/quality.h): those are up*/down* under the tree's own ranking (roots first, lower
// GUID first within a rank, as UpDownRanks ranks a fat tree), which every leaf of a fat tree
// has towards every switch. A switch with no such route (a core towards another core, an
// aggregation switch towards another group's switches) takes a shortest route of any kind
// into those that have one, spread over its ports by destination: such routes turn in the
// pods they cross, not in the hub's. So a dead switch changes the switch-to-switch routes that
// crossed it, not every route that turned next to the hub (at 3-tier k=48, a dead aggregation
// switch: 176 switch LIDs re-routed instead of 1,798). Where a switch with a host has no
// up*/down* route under that ranking (a degraded tree), that switch LID is routed under the
// hub's order, as hosts' LIDs are.
//
// Port choice. Among the shortest legal egress ports of a switch (ordered by the remote
// switch's NodeId), LID offset `o` of the destination with index `i` takes
// ((i / d) + o) mod (number of ports), where d is the product of the nominal up-degrees of
// the levels below the switch (D-mod-k). Destinations are indexed by leaf (NodeId order),
// then leaf port; every leaf counts as full (a missing host leaves a gap: OpenSM's "dummy"
// destinations). On FatTree2/FatTree3 this is non-blocking for every shift permutation, and
// the 2^LMC LIDs of a host climb through different spines and roots. Unlike OpenSM, LMC > 0 is
// routed, and degraded trees are not refused.
//
// io_guids: those CAs are I/O nodes; they do not make their switch a leaf, so an I/O node on
// a spine does not break the rank check. Routes to and from them obey the same turn rule,
// so max_reverse_hops is never needed (it is accepted and ignored).
//
// Every LFT entry is a pure function of the fabric, the LIDs and the options: the tables do
// not depend on options.threads. Work is split over destination switches.
#pragma once

#include <memory>

#include "routing/routing_engine.h"

namespace ibsm::routing {

class FTreeEngine : public RoutingEngine {
 public:
  std::string_view name() const override { return "ftree"; }
  Result<RoutingTables> Route(const Fabric& fabric, const LidMap& lids,
                              const RoutingOptions& options) const override;
};

std::unique_ptr<RoutingEngine> MakeFTree();

}  // namespace ibsm::routing
