// updn and dnup: deadlock-free routing by the up*/down* turn rule (Schroeder et al., Autonet;
// OpenSM's osm_ucast_updn.c and osm_ucast_dnup.c), on any connected or disconnected fabric.
//
// Ranking, per connected component of switches:
//   - updn: roots are options.root_guids (switch node GUIDs; unknown GUIDs are ignored) or, for
//     a component with none of them, the switches of maximum height, where a switch's height
//     is its hop distance from the nearest switch with a CA attached (3-tier fat tree: the
//     cores; 2-tier: the spines). rank = hop distance from the nearest root.
//   - dnup (OpenSM's DNUP): rank = height itself, so the "tops" are the switches farthest from
//     the CAs and a CA attached to a high switch does not distort the ranking; root_guids are
//     not used.
//   A hop is "up" when it goes to the lower (rank, node GUID): a total order, so the up
//   direction has no cycle. updn routes are up* then down*; dnup routes down* then up*
//   (OpenSM's naming: with rank = height, dnup also climbs away from the CAs first).
//   If a detected ranking leaves some switch with CAs without a legal route to another switch
//   with CAs (so some CA pair could not talk), the component falls back to one top: the graph
//   centre (least eccentricity over switch hops, ties to the lowest node GUID), under which
//   every pair has a legal route.
//   Roots given in options.root_guids are never replaced: the engine declines instead.
//
// Routes, per destination switch d: a switch that reaches d by legal moves of the second kind
// only (down for updn) uses those, by the fewest such hops; any other switch makes a move of
// the first kind towards a neighbour with the fewest remaining hops under this same rule. A
// packet that made a second-kind move only meets switches that keep making them, so every
// route obeys the turn rule and the channel dependency graph of the CA routes is acyclic.
//
// Pairs without a legal route. CA traffic enters the fabric at switches with CAs, and every
// switch on a legal route has a legal route itself, so CA traffic only ever uses legal
// entries. A switch without CAs may still lack a legal route to some destination switch:
// two tops that no cable joins (two cores of a fat tree, spines of different planes) cannot
// reach each other's port 0 under any ranking that keeps the tree's balance, since every path
// from one local minimum of the order to another turns down->up; and a core that lost its one
// cable into a pod cannot reach that pod going down only. OpenSM leaves such entries unrouted
// (connect_roots routes root LIDs by min-hop). ibsm routes them, over a shortest path into the
// region that has a legal route, with a single candidate (the lowest port) so that this
// switch-originated (management) traffic concentrates on one path. They are counted in
// UpDnRanks::off_rule_pairs; only packets that switches send themselves can take them.
//
// Port choice, LMC, guid_routing_order, port_shifting and scatter_ports: see lft_builder.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "routing/routing_engine.h"

namespace ibsm::routing {

inline constexpr uint32_t kNoRank = UINT32_MAX;

struct UpDnRanks {
  enum class TopSource {
    kRootGuids,    // options.root_guids
    kMaxHeight,    // switches farthest from the CAs (updn roots; dnup tops)
    kGraphCentre,  // fallback: one switch
  };
  struct Component {
    uint32_t switches = 0;
    std::vector<NodeId> tops;  // updn: roots (rank 0); dnup: the switches of highest rank
    TopSource source = TopSource::kMaxHeight;
  };

  bool dnup = false;
  std::vector<uint32_t> rank;        // by NodeId; kNoRank for non-switches
  std::vector<Component> components; // by lowest NodeId
  // (switch, destination switch) pairs routed off the turn rule because the switch, which has
  // no CA, has no legal route to the destination (see above). 0 with a single top.
  uint64_t off_rule_pairs = 0;

  // True when the hop from switch `from` to its neighbour `to` is "up": towards the lower
  // (rank, node GUID).
  bool IsUp(const Fabric& fabric, NodeId from, NodeId to) const {
    return rank[to] != rank[from] ? rank[to] < rank[from]
                                  : fabric.node(to).guid.value() < fabric.node(from).guid.value();
  }
};

// The ranking the engine routes by. Non-OK when root_guids names no switch, when the given
// roots leave a pair of switches with CAs without a legal route, or when a route would exceed
// 63 switch hops.
Result<UpDnRanks> ComputeUpDnRanks(const Fabric& fabric, const RoutingOptions& options,
                                   bool dnup = false);

class UpDnEngine : public RoutingEngine {
 public:
  explicit UpDnEngine(bool dnup) : dnup_(dnup) {}
  std::string_view name() const override { return dnup_ ? "dnup" : "updn"; }
  // Uses options.threads workers for the distance matrix and for the tables; the result does
  // not depend on the number of threads.
  Result<RoutingTables> Route(const Fabric& fabric, const LidMap& lids,
                              const RoutingOptions& options) const override;

 private:
  bool dnup_;
};

std::unique_ptr<RoutingEngine> MakeUpDn();
std::unique_ptr<RoutingEngine> MakeDnUp();

}  // namespace ibsm::routing
