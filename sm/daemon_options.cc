#include "sm/daemon_options.h"

#include <charconv>

#include <fmt/format.h>

namespace ibsm::sm {
namespace {

Result<uint64_t> ParseUint(const std::string& flag, const std::string& v, uint64_t lo,
                           uint64_t hi) {
  uint64_t out = 0;
  int base = 10;
  std::string_view s = v;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || out < lo || out > hi) {
    return InvalidArgument(fmt::format("{}: '{}' is not a number in {}..{}", flag, v, lo, hi));
  }
  return out;
}

}  // namespace

std::string DaemonUsage() {
  return R"(Usage: ibsmd [options]
InfiniBand subnet manager.

  --sim FILE               run on the in-process simulator loaded with the topology FILE
                           (ibnetdiscover/ibsim format); default: the local HCA via libibumad
  --sim-host NAME|GUID     simulator attach point (default: the first CA in FILE)
  -g, --guid GUID          bind to the local port with this port GUID (libibumad)
  -o, --once               sweep once, then exit
  -s, --sweep SECONDS      sweep interval (default 10, 0 = no periodic sweep)
  -f, --log-file FILE      log to FILE (default: stderr)
  -v, --verbose            more log detail; repeat for debug and trace
      --max-wire-smps N    SMPs in flight at once (default 64)
      --transaction-timeout MS   per-attempt SMP timeout (default 200)
      --transaction-retries N    retries after a timeout (default 3)
      --print-fabric       print every discovered node and cable after a sweep
  -h, --help               this text
  -V, --version            print the version
)";
}

Result<DaemonOptions> ParseDaemonOptions(const std::vector<std::string>& args) {
  DaemonOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> Result<std::string> {
      if (i + 1 >= args.size()) return InvalidArgument(a + " needs a value");
      return args[++i];
    };
    if (a == "--sim") {
      IBSM_ASSIGN_OR_RETURN(o.sim_topology, value());
    } else if (a == "--sim-host") {
      IBSM_ASSIGN_OR_RETURN(o.sim_host, value());
    } else if (a == "-g" || a == "--guid") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t g, ParseUint(a, v, 1, UINT64_MAX));
      o.port_guid = Guid{g};
    } else if (a == "-o" || a == "--once") {
      o.once = true;
    } else if (a == "-s" || a == "--sweep") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t s, ParseUint(a, v, 0, 86400));
      o.sweep_interval_s = static_cast<uint32_t>(s);
    } else if (a == "-f" || a == "--log-file") {
      IBSM_ASSIGN_OR_RETURN(o.log_file, value());
    } else if (a == "-v" || a == "--verbose") {
      ++o.verbosity;
    } else if (a == "-vv") {
      o.verbosity += 2;
    } else if (a == "--max-wire-smps") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, ParseUint(a, v, 1, 65535));
      o.max_wire_smps = static_cast<uint32_t>(n);
    } else if (a == "--transaction-timeout") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, ParseUint(a, v, 1, 60000));
      o.transaction_timeout_ms = static_cast<uint32_t>(n);
    } else if (a == "--transaction-retries") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, ParseUint(a, v, 0, 100));
      o.transaction_retries = static_cast<uint32_t>(n);
    } else if (a == "--print-fabric") {
      o.print_fabric = true;
    } else if (a == "-h" || a == "--help") {
      o.show_help = true;
    } else if (a == "-V" || a == "--version") {
      o.show_version = true;
    } else {
      return InvalidArgument(fmt::format("unknown option '{}' (see ibsmd --help)", a));
    }
  }
  return o;
}

}  // namespace ibsm::sm
