// Route verification: walks the forwarding tables the way packets would and reports what a
// user would notice -- holes, loops, and host pairs that cannot talk. Runs after every
// routing (the SM refuses to publish tables that fail it) and as a library call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/fabric.h"
#include "routing/routing_engine.h"

namespace ibsm::routing {

inline constexpr unsigned kMaxVerifiedHops = 64;

struct VerifyReport {
  bool ok = true;
  // (switch, LID) pairs where the LID's owner is reachable over cables but the switch has no
  // entry (kDropPort, a missing table, or a table too short for the LID).
  uint64_t missing_entries = 0;
  // Distinct forwarding cycles (each counted once, however many walks run into it).
  uint64_t loops = 0;
  // (switch, LID) entries that lead nowhere useful on their own: an egress port out of range
  // or not cabled, port 0 on a switch that does not own the LID, or a cable to an end port
  // that does not own it.
  uint64_t misrouted_entries = 0;
  // (CA/router port, LID) pairs, with the LID's owner reachable over cables, where following
  // the tables from the port's switch does not deliver to the owner within kMaxVerifiedHops.
  uint64_t unreachable_pairs = 0;
  // The first max_problems findings, readable, in LID order then switch order:
  // "switch leaf-003 (0x0002c90200000003) has no route to LID 17".
  std::vector<std::string> problems;
};

// Checks `tables` against `fabric` for every LID of `lids`. Switch-to-switch cables count as
// usable when connected() (pass a fabric holding only usable cables). LIDs whose owner no
// switch can reach over cables are not checked. Cost O(switches x LIDs): each (switch, LID)
// entry is followed once and its outcome memoised. `threads` workers split the LIDs; the
// report is the same for any thread count.
//
// `only_lids` (ascending) limits the check to those LIDs: after a re-route that kept every
// other LID's entries hop for hop over cables that are all still there (RerouteAround's
// Rerouted::examined), those LIDs are all that can have changed since tables that passed.
//
// `changes` (beside `only_lids`; Rerouted::changes) narrows that further: for a LID whose
// changed switches it knows, only the switches whose route enters one are walked, and the
// report is the one the whole walk gives. That holds when the tables the change started from
// passed this check for every LID, on a fabric whose switches were all connected, and the
// changes are as EntryChanges says: then the route from any other switch is the old one, hop
// for hop over the same cables, to the same owner port, and delivers within as many hops.
VerifyReport VerifyTables(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
                          size_t max_problems = 20, unsigned threads = 1,
                          const std::vector<uint32_t>* only_lids = nullptr,
                          const EntryChanges* changes = nullptr);

}  // namespace ibsm::routing
