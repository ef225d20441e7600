// Reader for ibnetdiscover / ibsim net files ("topology files").
//
// Accepts what the reference generator gen_topology.py writes, ibsim's net-examples, and real
// `ibnetdiscover` output:
//   vendid=0x2c9 / devid=0xc738 / sysimgguid=0x... / switchguid=0x...(...) / caguid=0x...
//   Switch 36 "S-0002c902..."  # "desc" enhanced port 0 lid 3 lmc 0
//   [1]  "H-0002c903..."[1](2c903...)   # "desc" lid 1 4xEDR
//   Ca 2 "H-0002c903..."  # "desc"          (also "Hca", and "Rt" for routers)
//   [1](2c903...)  "S-0002c902..."[1]   # lid 1 lmc 0 "desc" lid 3 4xEDR
// Records are separated by blank lines; '#' starts a comment line.
//
// Semantics follow ibsim 0.10 (sim_net.c):
// - Node GUIDs come from per-type counters: CA 0x100000, switch 0x200000, router 0 until a
//   `caguid=`/`hcaguids=`, `switchguid=` or `rtguid=` line sets the base ('=' absolute,
//   '+' relative). Each node takes the counter's value; a switch then advances it by 1, a
//   CA or router by num_ports + 1.
// - Port GUIDs: a switch's ports all carry the node GUID; CA/router port p gets the GUID in
//   its own `[p](guid)` when present, else node GUID + p.
// - `vendid=` and `sysimgguid=` apply to the next node only; `devid=` stays in force.
// - A remote port omitted after the remote name defaults to 1; the NodeDescription defaults
//   to the node name.
// - Link width/speed come from the trailing `lid L 4xEDR` of a port line (default 4x EDR)
//   or from ibsim's `w=`/`s=`/`e=` port options.
// A link stated at only one end is a link. Ends that disagree (a port cabled to two
// different peers, or two different rates) are an error. `include`, `do` and `module`
// directives and '@' aliases are rejected as Unsupported.
//
// Input is untrusted: every malformed line yields a Status "file:line: what was expected,
// got what"; the reader never crashes or asserts on input.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "fabric/fabric.h"

namespace ibsm {

// Parses a whole topology text. file_name is used only in error messages.
Result<Fabric> ReadTopology(std::string_view text, std::string_view file_name);

// Reads and parses a file. IoError if it cannot be read; Unsupported if it is
// gzip-compressed (decompress it first, e.g. `zcat net.gz > net`).
Result<Fabric> ReadTopologyFile(const std::string& path);

}  // namespace ibsm
