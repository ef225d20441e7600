// Incremental re-route after a fault: the last tables kept wherever they still deliver, and
// only the entries whose route broke routed again, so a cut cable on a large fat tree changes
// several times fewer LFT blocks than a full engine run rewrites (README "Faults repaired";
// ARCHITECTURE.md "Repair sweep").
//
// Deadlock freedom, where it can be had by construction: switches are ranked as updn ranks
// them (hop distance from the tops: root_guids, else the switches farthest from the CAs; on a
// fat tree, the cores), and every route of the result that CA traffic takes -- kept or new -- is
// checked, or built, to be up* then down* under that one ranking. Such routes cannot form a
// channel dependency cycle (the up*/down* argument), whatever mix of old and new routes the
// switches hold. Towards a switch's own LID only the routes from switches with a CA cabled
// count (as CheckCreditLoops counts them); the others carry what switches send themselves and
// take a shortest route of any kind. Where a route CA traffic takes has no up*/down* way at
// all (after a cut, the core on the far side of the cable, towards that pod; after a dead
// aggregation switch, every core above it), such routes turn at a hub switch (below), or
// where only the LIDs the fault touched are examined, the construction does not cover the
// result: the caller verifies it and proves it (ReproveUpDown) or checks it for credit loops,
// as it does an engine's tables.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "fabric/fabric.h"
#include "routing/routing_engine.h"
#include "routing/updown_proof.h"

namespace ibsm::routing {

struct RerouteStats {
  uint64_t lids_examined = 0;    // destination LIDs whose routes were followed
  uint64_t lids_rerouted = 0;    // of those, LIDs at least one of whose entries changed
  uint64_t entries_changed = 0;  // (switch, LID) entries that differ from the old tables
  uint64_t routes_kept = 0;      // (switch, LID) routes of examined LIDs, kept
  // Of the examined LIDs, those whose old routes were followed only from the switches the
  // fault can have changed (with a proof of the old tables; see RerouteAround).
  uint64_t lids_followed_partly = 0;
  // Some route that CA traffic takes had to be built without an up*/down* route to follow
  // (after a cut, the core on the far side of the cable towards that pod, and back).
  bool unproven = false;
  // Every LID was examined and nothing was unproven: free of credit loops by construction.
  bool proven = false;
};

struct Rerouted {
  RoutingTables tables;  // engine: the old tables' engine
  RerouteStats stats;
  // The LIDs examined, ascending: every other LID's entries are the old ones on every switch.
  std::vector<uint32_t> examined;
  // Per examined LID, which switches' entries may differ from the old ones: known with a
  // proof of the old tables (`before_proof`) for the LIDs whose owner is cabled as before.
  // VerifyTables and ReproveUpDown then read only what the change can have touched.
  EntryChanges changes;
  // Per switch (index of `tables.switches`), the LFT blocks where the re-route set an entry to
  // something other than the old one. Every other block of a switch whose row is as long as
  // its old one holds the old entries: the LFT push compares only these (LftHint).
  BlockSet blocks_changed;
};

// LFT blocks (64 LIDs) of `a`'s tables that differ from `b`'s for the same switch (NodeId), or
// whose switch `b` has no table for: what a switch would have to be sent to go from `b` to `a`.
size_t BlocksDiffering(const RoutingTables& a, const RoutingTables& b);

// Re-routes `fabric` (the model after the fault) from `old`, the tables accepted for
// `before` (switches matched by node GUID, ports by number). For each LID examined, a switch
// keeps its entry when the route the old tables give from it still delivers to the LID's
// owner over the cables of `fabric` and is up*/down* where it must be; every other switch
// gets a shortest up*/down* next hop (pure down wherever the owner is below it), its old
// one where that is among them, else spread over the candidates by LID. A switch with no
// up*/down* route at all (a core whose only cable into a pod is gone, towards that pod; the
// pod towards that core) routes towards a hub when its route counts for credit loops (as
// CheckCreditLoops counts them), and so does every switch on that way without an up*/down*
// route of its own. The hub is the first switch with a CA cabled, by GUID, that every switch
// reaches up* then down* (and so reaches every switch so); where none does (every cable up
// from an aggregation switch cut: it and the cores above it are reached so from different
// pods), up to four such switches, each taken while it covers switches the others do not, and
// a route goes to the first that both its switch and the owner's reach so. Each switch has
// one next hop towards each hub, the same for every LID. Every such route then turns (arrives
// down, leaves up) where it meets an up*/down* route, on a fat tree at its hub, and such
// turns close no loop (ProveUpDown proves it). Routes that do not count, and those no hub
// serves, take a shortest route of any kind, the old next hop where it is one, else the
// lowest port. Without a hub (switches in more than one piece) every such route is of that
// kind. LIDs without an owner, or whose owner is not cabled, get kDropPort.
//
// Without `examine_all` only the LIDs the fault can have changed are examined (an owner gone
// or moved, or an old entry into a port whose cable went); the rest keep their old entries.
// The result then is only as free of credit loops as the old tables and the examined
// routes together: the caller checks it (CheckCreditLoops, VerifyTables), as it checks an
// engine's. With it, RerouteStats::proven says when no check is needed.
//
// With `before_proof` (an UpDownProof of the old tables on `before`), switches are ranked by
// its ranking, so that kept and built routes are up*/down* under the order the old ones were
// proven under, and ReproveUpDown can renew that proof from the examined LIDs alone. Without,
// by UpDownRanks of `fabric`. The proof also says which old routes need not be followed. For
// an examined LID whose owner is cabled as before and which the proof lists no turn for,
// every route CA traffic takes was up*/down*, and every route delivered: `old` must have
// passed VerifyTables on `before` (the SM proves only tables that did). Such a LID, a host's
// or a switch's own, is followed only from the switches whose old route runs into a changed
// cable (found backwards from those with an entry into one), from the switches above the
// owner's (which must route down), and from each switch a built route enters or a kept
// off-rule one leads through; every other switch keeps its entry
// (RerouteStats::lids_followed_partly counts these LIDs). The tables are those following
// every switch gives: towards a switch's own LID, a route from a switch without CAs may be
// off-rule (ftree's are, between cores), and is built again only where a hop down may enter
// it (the switch is above the owner's) or a built route runs into it, whichever way the
// LID is followed.
//
// `start`, when given, is a copy of `old` (CopyTables) that the result is built in: the
// re-route takes over its rows instead of copying the old tables (86 MB at 3-tier k=48), and
// leaves it without them. A row whose length differs from the old one's is copied as usual.
//
// FailedPrecondition (use a full engine run instead) when a switch of `fabric` has no old
// table, or has no route at all to an owner in its component. options: root_guids for the
// ranking, threads.
Result<Rerouted> RerouteAround(const Fabric& fabric, const LidMap& lids, const Fabric& before,
                               const RoutingTables& old, const RoutingOptions& options = {},
                               bool examine_all = false,
                               const UpDownProof* before_proof = nullptr,
                               RoutingTables* start = nullptr);

// A copy of `tables`, its rows copied on `threads` workers: a re-route's `start`.
RoutingTables CopyTables(const RoutingTables& tables, unsigned threads = 1);

}  // namespace ibsm::routing
