// Route quality and deadlock freedom of a set of forwarding tables: the figures an operator
// compares engines by (routes per link, worst link sharing under shift and random
// permutations, effective bisection bandwidth) and the channel-dependency proof that the
// routes cannot deadlock. Pure functions over the fabric model and the tables; no engine
// knowledge, so they judge any engine's output (and OpenSM's, read back from a dump).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "fabric/fabric.h"
#include "routing/routing_engine.h"

namespace ibsm::routing {

// ---- Deadlock freedom -----------------------------------------------------------------
// The channel dependency graph (Dally & Seitz): one vertex per directed switch-to-switch
// channel (switch, egress port); an edge (a->b) -> (b->c) when some LID's route enters b over
// a->b and leaves over b->c. All routes run on one VL (SL2VL maps every SL to VL0 unless QoS
// says otherwise); splitting them per VL is left for when QoS lands.
//
// Which routes carry credit-controlled traffic: towards a CA or router LID, every switch's
// entry (hosts send, and a switch's port 0 answers GMPs such as PerfMgt on a data VL); towards
// a switch LID, only the entries on routes that start at a switch with a CA or router cabled
// (hosts query switches; switches do not talk to each other on data VLs). SMPs travel on
// VL15, which has no credit flow control, so the down-and-up-again routes between switch LIDs
// that minhop uses in a fat tree are not dependencies. (ibdmchk checks the routes from every
// CA to every LID; the switch-to-CA routes are added here.) A SHARP aggregation node
// (fabric/aggregation_node.h) counts like a switch LID and is not a host: hosts talk to it,
// and ANs talk only to their tree neighbours one cable away, which adds no dependency.
//
// Only LIDs that `lids` assigns count (a table entry for a LID nobody owns carries no
// traffic). Entries that lead nowhere (kDropPort, port out of range, uncabled port, port 0)
// end the route there and add no dependency; VerifyTables reports them. Channels into CAs
// and routers are sinks and can never close a cycle, so they are not vertices.
//
// Cost: O(switches x LIDs) table reads split over `threads` workers (0 means 1), plus
// 32 bytes per switch port for the edge sets; the cycle search is an iterative DFS.
struct CreditLoopReport {
  bool acyclic = true;
  uint64_t channels = 0;      // vertices: directed switch-to-switch channels
  uint64_t dependencies = 0;  // distinct edges
  // One cycle when !acyclic, as readable hops in order, each the channel's egress end:
  // {"leaf-001 (0x...) port 5", "spine-002 (0x...) port 3", ...}; the last hop's channel
  // depends on the first's.
  std::vector<std::string> cycle;
  // cycle_lids[i]: one LID whose route crosses hop i and then hop i + 1 (mod size), i.e. a
  // destination that creates that dependency.
  std::vector<uint16_t> cycle_lids;
};
CreditLoopReport CheckCreditLoops(const Fabric& fabric, const LidMap& lids,
                                  const RoutingTables& tables, unsigned threads = 1);

// ---- Quality figures -------------------------------------------------------------------
// Hosts are the CA/router ports that own a LID and are cabled to a switch. A flow from host
// i to host j is routed from i's switch by the tables towards j's base LID (LMC extra LIDs
// are not used); it crosses i's host->switch channel, the switch-to-switch channels and the
// switch->j channel. A flow that the tables do not deliver within 64 switches is unrouted.
//
// A switch's tier is its hop distance from the nearest switch with a CA attached (leaves are
// tier 0; a switch no such switch reaches is tier 0 too). A cable's tier is 0 for
// host<->leaf cables, else 1 + the lower tier of its ends.
struct TierLinkStats {
  uint32_t tier = 0;
  uint64_t channels = 0;  // directed channels (each cable counts twice)
  uint64_t min_routes = 0, max_routes = 0;
  double mean_routes = 0, stddev_routes = 0;
};

struct QualityOptions {
  bool shifts = true;  // every shift permutation 1..hosts-1
  // Seeded random permutations of hosts. Permutation r is a Fisher-Yates shuffle driven by
  // SplitMix64(seed, r): the same on every platform and for any number of threads.
  uint32_t random_permutations = 1000;
  uint64_t seed = 1;
  unsigned threads = 1;  // workers over destinations and permutations
  // When set and true, the measurement stops at the next destination chunk or permutation
  // (each worker looks before taking one) and the report says `cancelled`; its figures then
  // cover only what was done. For callers that must stop promptly (a daemon shutting down).
  // REQUIRES: outlives the call.
  const std::atomic<bool>* cancel = nullptr;
};

struct QualityReport {
  uint64_t hosts = 0;  // CA ports with a LID, in the order used for shifts
  // Routes per directed channel: how many delivered (source host, destination host base LID)
  // routes cross it, over all host pairs; one entry per tier present, ascending. Computed per
  // destination over the forwarding tree (O(LIDs x switches), not O(hosts^2 x hops)).
  std::vector<TierLinkStats> routes_per_link;
  // Worst number of flows sharing one directed channel, over all shift permutations
  // (host i sends to host (i + s) mod N, hosts in fabric order: by leaf switch in NodeId order,
  // then by leaf port), and the first shift reaching it.
  uint64_t shift_max_sharing = 0;
  uint64_t shift_worst = 0;
  uint64_t random_max_sharing = 0;  // worst over the random permutations
  // Mean over random permutations of the mean over flows of 1 / (max sharing on the path).
  // A fixed point (host i drawn to itself) is no flow. 0 when there are no random
  // permutations or fewer than two hosts.
  double effective_bisection_bandwidth = 0;
  // Host pairs (all N x (N - 1) of them) the tables do not deliver; they are left out of
  // every figure above.
  uint64_t unrouted_flows = 0;
  bool cancelled = false;  // options.cancel stopped it; the figures are partial
};
QualityReport MeasureQuality(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
                             const QualityOptions& options = {});

}  // namespace ibsm::routing
