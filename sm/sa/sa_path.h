// PathRecord and MultiPathRecord answers (IBA 15.2.5.16/17, 15.4): pure functions over an
// immutable snapshot of the fabric, its LIDs and the LFTs the SM programmed. No MADs, no
// locks, no clock: the SA server decodes the request, calls QueryPaths / QueryMultiPaths
// on the last published snapshot, and encodes the records (the SA answers from
// the last snapshot, so routing never blocks it).
//
// What a record says, and where it comes from:
//   SLID/DLID  every pair of the two ports' LMC ranges (or the one LID the query names);
//   MTU        the smallest MTU of every port the route crosses (both ends of every link),
//              OpenSM's rule. Fabric has no MTU field, so PathSnapshot::port_mtu carries
//              PortInfo:MTUCap by PortId when the sweep recorded it, default_mtu otherwise;
//   Rate       the slowest link on the route, width x speed of both ends (Port::width/speed),
//              as an IBA rate code (mad::rate::*); a product with no code rounds down;
//   PacketLifeTime  PathSnapshot::packet_life_time (OpenSM: its subnet_timeout option,
//              default 18) for every route, 0 for a loopback path (IBA table 205);
//   HopLimit   0 (on-subnet: no GRH), or the query's value when it names one;
//   SL         the query's SL when it names one, else 0 (QoS is not modelled yet);
//   P_Key      PathSnapshot::partitions decides; without it everyone is in the default
//              partition and the answer is 0xFFFF;
//   Reversible 1 when the LFTs also route DLID's port back to SLID;
//   Preference 0 = shares no inter-switch link with an earlier record of the answer,
//              1 = shares in one direction, 2 = in both directions.
// The route is found by walking the snapshot's LFTs hop by hop, exactly as packets go;
// a LID pair with no route (drop entry, dead end, loop, > 64 switches) has no record.
//
// Order: records of one port pair come most independent first. Starting from the empty
// set, the next record is the LID pair whose forward and reverse routes cross the fewest
// links already used by the records before it, then the fewest such switches, then
// reuses the fewest SLIDs/DLIDs already given out, then has the fewest hops, then the
// lowest (SLID, DLID). OpenSM orders by LID offset alone ((base+i, base+i) first, then the
// rest, "a more advanced implementation would inspect for physical redundancy"); this one
// does, and on a fabric where routes do not differ it falls back to OpenSM's order.
//
// Errors (the SA server maps them with SaStatusForPathError):
//   kInvalidArgument    malformed query: MTU/rate code out of range, SGID/SLID (or
//                       DGID/DLID) naming different ports, no source and no requester, an
//                       empty MultiPathRecord GID list            -> ERR_REQ_INVALID
//   kFailedPrecondition ServiceID with one of its two mask bits, MultiPathRecord without
//                       SGIDCount and DGIDCount                    ->
//                       ERR_REQ_INSUFFICIENT_COMPONENTS
//   kNotFound           a GID that names no port of this subnet    -> ERR_REQ_INVALID_GID
//   kUnsupported        a multicast DGID (the SA answers those from its multicast groups)
//                                                                  -> ERR_REQ_INVALID
//   kUnavailable        the snapshot has no fabric or tables yet   -> ERR_NO_RESOURCES
//   kResourceExhausted  a MultiPathRecord over kMultiPathMaxPortPairs -> ERR_NO_RESOURCES
// An empty vector is not an error: a SubnAdmGet answers it with ERR_NO_RECORDS, a GetTable
// or GetMulti with an empty table. An unknown SLID/DLID gives an empty answer (OpenSM).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "base/status.h"
#include "conf/qos_policy.h"
#include "sm/model/qos_tables.h"
#include "fabric/fabric.h"
#include "mad/attr/path_record.h"
#include "routing/routing_engine.h"

namespace ibsm::sm {

// Decides the P_Key of a path (the partitions hook). Returns the P_Key the path between
// `src` and `dst` uses, or nullopt if no partition lets `requester`, `src` and `dst`
// talk (then the pair has no record). `requested` is the query's P_Key when its mask
// names one; the answer must then be that P_Key or nullopt.
using PKeyResolver = std::function<std::optional<uint16_t>(PortId requester, PortId src, PortId dst,
                                                           std::optional<uint16_t> requested)>;

// What QueryPaths reads. Borrowed, not owned: REQUIRES the three pointees outlive every
// call and do not change during it (the SA holds the published snapshot's shared_ptrs).
struct PathSnapshot {
  const Fabric* fabric = nullptr;
  const routing::LidMap* lids = nullptr;  // built from *fabric
  const routing::RoutingTables* tables = nullptr;
  uint64_t subnet_prefix = 0xfe80000000000000ull;
  uint8_t packet_life_time = 18;          // OpenSM's subnet_timeout default
  uint8_t default_mtu = mad::mtu::k4096;  // for ports whose MTUCap is not known
  std::vector<uint8_t> port_mtu;          // PortInfo:MTUCap by PortId; 0 or absent = default
  PKeyResolver partitions;                // empty: one default partition, P_Key 0xFFFF
  // The SL of a path without one in the request, by its P_Key (a partition's sl=); empty: 0.
  std::function<uint8_t(uint16_t pkey)> partition_sl;
  // The QoS policy's qos-ulps (qos TRUE and a qos_policy_file loaded; null: none). As in
  // OpenSM (docs/qos.md, "QoS policy file"): a request that names an SL gets it only when
  // the policy gives that SL too (else no record); one that names none gets the policy's,
  // which wins over the partition's sl=. The rules see the request's service ID and P_Key
  // only when its component mask names them.
  const conf::QosPolicy* qos_policy = nullptr;
  // qos TRUE: the SL2VL tables as programmed (null: qos FALSE). As OpenSM's PathRecord does,
  // an SL that some hop's table (the source port's, then each switch's input-to-output
  // table) maps to VL 15 is not valid on that path: a path with no valid SL has no record,
  // nor does one whose chosen SL (requested, the policy's, the partition's) is not valid;
  // with none of those, SL 0 if valid, else the lowest valid one. A table not read (a
  // device without SL2VL) drops no SL. The reverse path is reversible only when the chosen
  // SL is valid on it too.
  const QosMap* sl2vl = nullptr;
};

struct PathQueryOptions {
  // SubnAdmGet: one record at most (IBA 1.2 erratum: NumbPath is 1). Else GetTable.
  bool get = false;
  // A query naming neither SGID nor SLID asks for paths from the requester's port. true
  // makes it "from every port" instead, as OpenSM answers.
  bool all_sources_when_unspecified = false;
  // Stop after this many records (the SA's response cap); 0 = no cap.
  size_t max_records = 0;
};

// PathRecord query (SubnAdmGet / SubnAdmGetTable of attribute 0x0035). `comp_mask` uses
// mad::path_comp bits. `requester` is the end port the query came from (the SA finds it
// by the MAD's source LID), or kNoPort when unknown.
Result<std::vector<mad::PathRecord>> QueryPaths(const PathSnapshot& snapshot,
                                                const mad::PathRecord& request, uint64_t comp_mask,
                                                PortId requester,
                                                const PathQueryOptions& options = {});

// What one MultiPathRecord request may cost. A request names up to 255 SGIDs and 255
// DGIDs (one RMPP request of about 8 KB), and every port pair adds 2^LMC x 2^LMC LID pairs,
// each routed both ways through the LFTs and then ranked against the others on the io
// thread; these caps bound that work whatever the request says.
//   kMultiPathMaxPortPairs   distinct (source port, destination port) pairs: more is
//                            refused (kResourceExhausted -> ERR_NO_RESOURCES). OpenSM reads
//                            at most 11 GIDs in all (IB_MULTIPATH_MAX_GIDS, so at most
//                            5 x 6 = 30 pairs) and silently ignores the rest; every request
//                            OpenSM answers whole fits here.
//   kMultiPathMaxCandidates  LID pairs routed for one request: each port pair gets an equal
//                            share (at least one), taken (base+i, base+i) first and then by
//                            shifted diagonals, so a trimmed share still spreads over every
//                            LID of both ports. Up to LMC 2 on 64 pairs nothing is trimmed.
inline constexpr size_t kMultiPathMaxPortPairs = 64;
inline constexpr size_t kMultiPathMaxCandidates = 1024;

// What a MultiPathRecord query cost, counted in the units the caps above bound.
struct MultiPathStats {
  size_t port_pairs = 0;  // distinct (source, destination) port pairs the request names
  size_t candidates = 0;  // LID pairs routed
  bool trimmed = false;   // some LID pairs were left out for kMultiPathMaxCandidates
};

// MultiPathRecord query (SubnAdmGetMulti of attribute 0x003A; the answer is PathRecords,
// o15-0.2.7). `comp_mask` uses mad::multipath_comp bits. A GID listed twice (on one side)
// adds nothing. Paths of every SGID x DGID pair are ordered together by independence (so
// with NumbPath 2 and two ports on each side the first two records are the most disjoint
// pair of paths, APM's primary and alternate), and NumbPath (default 127, OpenSM's cap)
// limits the whole answer. More than kMultiPathMaxPortPairs pairs: kResourceExhausted.
// `stats` (may be null) receives what the query cost.
Result<std::vector<mad::PathRecord>> QueryMultiPaths(const PathSnapshot& snapshot,
                                                     const mad::MultiPathRequest& request,
                                                     uint64_t comp_mask, PortId requester,
                                                     MultiPathStats* stats = nullptr);

// The IBA rate code of a link of `width` x `speed` (4x EDR -> mad::rate::k100).
uint8_t RateCode(LinkWidth width, LinkSpeed speed);

// The SA status for a non-OK Status returned above, as it sits in the MAD status word
// (IBA 15.2.1.2: code << 8; the same values as mad::sa_status::k* in sa_records.h).
uint16_t SaStatusForPathError(const Status& status);

}  // namespace ibsm::sm
