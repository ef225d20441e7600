// ibsmd's command line. OpenSM's flag letters where OpenSM has the option (-g, -o, -s, -f,
// -v, -B); long options for what is ibsm's own (--sim, --print-fabric).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/types.h"

namespace ibsm::sm {

struct DaemonOptions {
  std::string sim_topology;   // --sim FILE: run on the in-process simulator
  std::string sim_host;       // --sim-host NAME|GUID: attach point (default: first CA)
  std::optional<Guid> port_guid;  // -g: local port to bind (umad)
  bool once = false;          // -o: one sweep, then exit
  uint32_t sweep_interval_s = 10;  // -s
  std::string log_file;       // -f (default stderr)
  int verbosity = 0;          // -v (repeat for more)
  uint32_t max_wire_smps = 64;     // --max-wire-smps (OpenSM: max_wire_smps, default 4)
  uint32_t transaction_timeout_ms = 200;  // --transaction-timeout (OpenSM's default)
  uint32_t transaction_retries = 3;       // --transaction-retries
  bool print_fabric = false;  // --print-fabric: list discovered nodes and links on stdout
  bool show_help = false;
  bool show_version = false;
};

// Parses argv. InvalidArgument with a message naming the flag and the accepted values.
Result<DaemonOptions> ParseDaemonOptions(const std::vector<std::string>& args);

std::string DaemonUsage();

}  // namespace ibsm::sm
