// ftree: fat-tree routing (OpenSM's ftree, extended). Each connected component of the switch
// graph (one plane of a rail-optimized fabric, say) is routed as its own fat tree.
//
// Ranks. Roots come from RoutingOptions::root_guids; without them the leaves (switches with
// compute nodes: the CA ports in cn_guids, else every CA port not in io_guids) are found and
// the switches farthest from every leaf become the roots. Rank = hops from the nearest root.
// The engine declines (non-OK Status, the chain tries the next engine) when the component is
// not tree-like: leaves at different ranks, or two leaves cabled to each other.
//
// Turn rule. Every route obeys up*/down* over one total order of the component's switches,
// so the channel dependency graph is acyclic (deadlock-free on one VL) for every LFT entry,
// switch LIDs and routes between roots included. The order is the tree's own (roots first)
// except around one "hub" leaf: the hub and all its ancestors come first, nearest the hub
// first. On a full fat tree every shortest up-then-down route of the tree stays legal under
// that order, and every switch reaches every other (through the hub if need be), which the
// plain rank order cannot give between two roots or around a missing link. Missing links and
// switches need no special case: a destination takes the shortest legal route that is left.
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
