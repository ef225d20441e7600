// ibsm-routecheck: judges a set of unicast forwarding tables -- ibsm's own, from any engine
// chain, or OpenSM's read back from opensm-lfts.dump / dump_lfts -- by the figures of
// routing/verify.h and routing/quality.h, one line per step:
//
//   ibsm-routecheck (--fat-tree3 K | --fat-tree2 K | --topology FILE)
//                   [--engine CHAIN | --lft-dump FILE] [--lmc N] [--threads N]
//                   [--quality] [--permutations N] [--no-shifts] [--seed S] [--problems N]
//
// LIDs: a topology file keeps the LIDs it records (ibnetdiscover writes them). A fabric
// without LIDs (generated, or a file from gen_topology.py) takes them from the dump's
// "portguid 0x...:" annotations and switch headers when judging a dump (the generators use
// gen_topology.py's GUIDs, so `--fat-tree2 4` matches a dump taken on ibsim from its net
// file), else gets them as the routing benchmark assigns them: in NodeId order from 1, one
// per switch port 0, 2^lmc aligned ones per CA port.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "fabric/fabric.h"
#include "routing/routing_engine.h"

namespace ibsm::tools {

// One switch block of an LFT dump.
struct LftDumpSwitch {
  Guid guid{0};
  uint16_t lid = 0;  // "switch Lid N" of the header; 0 if the header has none
  size_t line = 0;   // of the header, for messages
  // (LID, egress port) in file order.
  std::vector<std::pair<uint16_t, uint8_t>> entries;
  // (LID, port GUID) from the entries' "portguid 0x...:" annotations.
  std::vector<std::pair<uint16_t, Guid>> owners;
};

// Parses OpenSM's opensm-lfts.dump (osm_dump.c, also sm/record/dumps.cc WriteLftsDump) and the
// ibroute output that `dump_lfts` prints:
//   Unicast lids [0x0-0x8] of switch Lid 2 guid 0x0002c90200000001 ('leaf-001'):
//   0x0001 001 # Channel Adapter portguid 0x0002c90300000011: 'node-0001 HCA-1'
//   0x0002 000 : (Switch portguid 0x0002c90200000001: 'leaf-001')
//   14 lids dumped
// and ibroute's column headings ("Lid  Out   Destination", "Port     Info"). A live dump_lfts
// names switches by "DR path slid 0; dlid 0; 0,1,5 guid 0x..." (no Lid: `lid` stays 0) and
// ends with "*** WARNING ***: this command has been replaced by dump_fts". Blank lines,
// '#' comment lines and that notice are skipped. Input is untrusted: any other line, a LID outside the
// unicast range, a port above 255, an entry before the first header, or a switch GUID given
// twice yields Corrupt "file:line: ...".
Result<std::vector<LftDumpSwitch>> ParseLftDump(std::string_view text, std::string_view file_name);

// Gives LIDs to the ports of `fabric` that have none, from the dump: each annotated port
// GUID gets the lowest LID annotated for it (LMC from the count of its LIDs when that is a
// power of two and contiguous, else 0); switch port 0 also from its header's Lid. Returns the
// number of ports given a LID; re-indexes the fabric's LIDs.
size_t LidsFromDump(Fabric& fabric, const std::vector<LftDumpSwitch>& dump);

// Builds tables for the fabric's switches from the dump, matching switches by node GUID.
// Each table is sized max(max_lid, highest dumped LID) + 1, with kDropPort where the dump has
// no entry; a fabric switch absent from the dump gets no table. NotFound "file:line: ..." for
// a dumped switch the fabric does not have.
Result<routing::RoutingTables> TablesFromDump(const Fabric& fabric,
                                              const std::vector<LftDumpSwitch>& dump,
                                              uint16_t max_lid, std::string_view file_name);

// LIDs as the routing benchmark assigns them: switch port 0 one LID, CA/router ports 2^lmc
// aligned LIDs, in NodeId order from 1. Stops at the end of the unicast range; returns the
// number of end ports left without a LID. Re-indexes the fabric's LIDs.
size_t AssignLids(Fabric& fabric, uint8_t lmc);

// The command. Returns 0 when the tables verify and have no credit loop, 1 when they do not,
// 2 on a usage error or unreadable input. Figures go to `out`, errors to `err`.
int RouteCheckMain(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace ibsm::tools
