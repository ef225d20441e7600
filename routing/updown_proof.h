// A proof that forwarding tables have no credit loop which a repair can renew by reading only
// the LIDs it changed (ARCHITECTURE.md "Repair sweep").
//
// The argument. Rank the switches in one strict order (updn's: hop distance from the tops,
// ties by GUID); a cable is "up" towards the higher switch. Order the channels: every up
// channel before every down channel, up channels by their far end rising, down channels by
// their far end falling. A dependency between two consecutive hops of a route goes forward in
// that order unless the route turns at a switch, arriving down and leaving up. So a cycle of
// the channel dependency graph (what CheckCreditLoops searches) needs such turns, and past a
// turn into up channel (via -> to), before the next turn's down channel (from -> ...), a route
// can only climb from `to` and then descend: that `from` lies in Down(Up(to)), the switches
// reached from `to` by up cables and then by down cables, and the path never goes straight
// back over the cable it came by (a route that did would visit a switch twice, which
// VerifyTables refuses). If no chain of turns leads back to itself under that relation, the
// tables have no credit loop. Tables whose routes are all
// up*/down* (ftree and updn on a fat tree, a re-route's built routes) have no turn at all;
// a re-route's few detours (a core that lost its only cable into a pod) have a handful.
//
// Which routes count is CheckCreditLoops's rule (routing/quality.h): towards a CA or router
// LID every switch's entry, towards a switch or aggregation node LID the entries on routes
// that start at a switch with a CA or router cabled.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "fabric/fabric.h"
#include "routing/routing_engine.h"

namespace ibsm::routing {

// Hop distance over switch-to-switch cables from the nearest switch with a CA or router
// cabled (0: such a switch); kNone for non-switches and for switches in a component without
// one.
std::vector<uint32_t> LeafDistanceRanks(const Fabric& fabric);

// Switch ranks as updn's, per NodeId (kNone: not a switch): hop distance from the tops, which
// are the switches of `root_guids`, else the switches farthest from the CAs (on a fat tree,
// the cores). When that makes every switch a top, the one switch nearest to all others is the
// top. Lower is higher up; ties go to the lower GUID.
std::vector<uint32_t> UpDownRanks(const Fabric& fabric, const std::vector<Guid>& root_guids);

// A route towards `lid` arrives at switch `via` down from `from` and leaves it up to `to`.
struct RouteTurn {
  uint16_t lid = 0;
  NodeId from = 0, via = 0, to = 0;
};

struct UpDownProof {
  std::vector<uint32_t> rank;    // per NodeId of the fabric the tables are for
  std::vector<RouteTurn> turns;  // every turn of the routes that count, by LID
};

// Proves `tables` free of credit loops under `rank` (UpDownRanks of `fabric`), reading every
// LID's column once. FailedPrecondition when the turns might chain into a loop (the tables may
// still be free of one: CheckCreditLoops decides), or when there are too many to relate.
// Routes are not followed to their end: tables that VerifyTables has not passed prove nothing.
Result<UpDownProof> ProveUpDown(const Fabric& fabric, const LidMap& lids,
                                const RoutingTables& tables, std::vector<uint32_t> rank,
                                unsigned threads = 1);

// The same proof for `tables` on `fabric` that differ from tables `prior` proves for `before`
// only in the LIDs of `changed` (ascending), with no cable they use added or moved since: the
// turns of every other LID are `prior`'s, and only the changed columns are read. The ranking
// stays `prior`'s (switches matched by GUID); a switch `prior` does not rank is a
// FailedPrecondition. When a switch has a CA cabled that it had not in `before`, the routes
// towards every switch LID are read again too.
//
// `changes` (beside `changed`; Rerouted::changes) narrows the reading: a changed CA or router
// LID that prior lists no turn for, and whose changed switches it knows, is read only at those
// switches and at the switches above them that lead into them (a turn where neither switch
// changed would have been prior's). The proof is the one reading the whole columns gives.
Result<UpDownProof> ReproveUpDown(const Fabric& fabric, const LidMap& lids,
                                  const RoutingTables& tables, const Fabric& before,
                                  const UpDownProof& prior, const std::vector<uint32_t>& changed,
                                  unsigned threads = 1, const EntryChanges* changes = nullptr);

}  // namespace ibsm::routing
