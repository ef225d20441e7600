// Dump files in OpenSM's formats (osm_dump.c), so ibdmchk, check_lft_balance-style scripts
// and operators' habits keep working: opensm-subnet.lst (every cabled port, both ends) and
// opensm-lfts.dump (every switch's unicast table).
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "base/status.h"
#include "fabric/fabric.h"
#include "routing/routing_engine.h"
#include "sm/model/multicast_tree.h"

namespace ibsm::sm {

// One line per cabled port of every node, nodes in node GUID order, as OpenSM writes it,
// streamed to `out` (never held whole: 16 MB at 3-tier k=24). `sm_lid` marks the SM's
// node "-SM".
void WriteSubnetLst(const Fabric& fabric, Lid sm_lid, std::FILE* out);

// "Unicast lids [0-N] of switch Lid L guid 0x... ('desc'):" then "0xLID PORT # ..." lines,
// streamed to `out` (the file has a line per switch and LID: 12 million at 3-tier k=32).
void WriteLftsDump(const Fabric& fabric, const routing::RoutingTables& tables, std::FILE* out);

// OpenSM's opensm.fdbs (dump_ucast_routes): per switch in GUID order, "0xLID : PORT : HOPS :
// yes" for every LID 1..max, where HOPS is the hop count to the LID's port through that egress
// port and "yes" says no other port is shorter. ibdmchk reads it with opensm-subnet.lst to
// check every CA-to-CA path and prove credit-loop freedom.
void WriteFdbsDump(const Fabric& fabric, const routing::RoutingTables& tables, std::FILE* out);

// OpenSM's opensm.mcfdbs (dump_mcast_routes): for each switch (node GUID order) that
// forwards any MLID, "Switch 0x<guid>" and "LID    : Out Port(s)", then one line per MLID,
// "0xC001 : 0x001  0x003 ". Empty when no switch forwards multicast.
void WriteMcfdbsDump(const Fabric& fabric, const MftPlan& mfts, std::FILE* out);

// Writes a dump to `path` through `write` via a temporary file, fsync and rename, so a reader
// never sees half a file.
Status WriteDumpFile(const std::string& path, const std::function<void(std::FILE*)>& write);

}  // namespace ibsm::sm
