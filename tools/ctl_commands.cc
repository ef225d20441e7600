// ibsmctl's command table and the driver: global flags, aligned tables and cells, sharp,
// resweep (--wait), log-level and help, and RunCtl.
#include "tools/ctl_commands.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "base/json.h"
#include "base/text.h"
#include "base/version.h"
#include "tools/control_client.h"
#include "tools/ctl_ar.h"
#include "tools/ctl_events.h"
#include "tools/ctl_fabric.h"
#include "tools/ctl_internal.h"
#include "tools/ctl_routes.h"
#include "tools/ctl_topo.h"

namespace ibsm::tools {

using nlohmann::json;

namespace {

Result<json> NoArgs(const std::vector<std::string>& words) {
  if (!words.empty()) return InvalidArgument("unexpected argument '" + words[0] + "'");
  return json::object();
}

// ---- sharp ----------------------------------------------------------------------------
std::string FormatSharp(const json& r) {
  if (!r.value("enabled", false)) return "SHARP is off (sharp_enable 0)\n";
  std::string out = fmt::format(
      "SHARP: {} aggregation nodes ({} enabled, {} usable), {} switch tiers, {} hosts\n",
      Get(r, "aggregation_nodes"), Get(r, "enabled_nodes"), Get(r, "usable_nodes"),
      Get(r, "switch_tiers"), Get(r, "hosts"));
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : r.value("trees", json::array()))
    rows.push_back({Get(t, "id"), Get(t, "root"), Get(t, "root_name"), Get(t, "depth"),
                    Get(t, "hosts"), Get(t, "switches"), t.value("programmed", false) ? "yes" : "NO"});
  if (!rows.empty())
    out += AlignedTable({"TREE", "ROOT", "ROOT NAME", "DEPTH", "HOSTS", "SWITCHES", "PROGRAMMED"}, rows);
  const auto never = r.value("never_covered", json::array());
  const auto some = r.value("uncovered", json::array());
  if (rows.empty()) {
    out += "no trees\n";
  } else if (some.empty()) {
    out += fmt::format("coverage: every tree reaches all {} hosts\n", Get(r, "hosts"));
  } else {
    out += fmt::format("coverage: {} hosts missing from some tree, {} in none\n", some.size(),
                       never.size());
    for (const auto& h : some) out += "  missing: " + Cell(h) + "\n";
  }
  for (const auto& n : r.value("notes", json::array())) out += "note: " + Cell(n) + "\n";
  return out;
}

// ---- resweep / log-level / help --------------------------------------------------------
std::string FormatQueued(const json&) { return "heavy sweep queued\n"; }

Result<json> LevelArgs(const std::vector<std::string>& words) {
  if (words.size() != 1) return InvalidArgument("log-level takes one of trace debug info warn error off");
  return json{{"level", words[0]}};
}
std::string FormatLevel(const json& r) { return "log level " + Get(r, "level") + "\n"; }

std::string FormatHelp(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : r.value("commands", json::array()))
    rows.push_back({Get(c, "cmd"), Get(c, "access"), Get(c, "summary")});
  return AlignedTable({"COMMAND", "ACCESS", "WHAT"}, rows);
}

bool IsNumber(const std::string& s) {
  if (s.empty()) return false;
  size_t i = s[0] == '-' ? 1 : 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '.' && !dot) {
      dot = true;
    } else if (s[i] < '0' || s[i] > '9') {
      return false;
    }
  }
  return s != "-";
}

Result<json> ResweepArgs(const std::vector<std::string>& words) {
  json a = json::object();
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] != "--wait")
      return InvalidArgument("resweep takes [--wait [SECONDS]], not '" + words[i] + "'");
    double s = 600;
    if (i + 1 < words.size() && IsNumber(words[i + 1])) s = std::stod(words[++i]);
    if (!(s > 0)) return InvalidArgument("--wait takes seconds above 0");
    a["wait_s"] = s;
  }
  return a;
}

}  // namespace

namespace {

constexpr char kGlobalUsage[] =
    "usage: ibsmctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS]\n"
    "       ibsmctl --version\n"
    "       ibsmctl --state-db PATH [--json] COMMAND [ARGS]   (no daemon: read its state file;\n"
    "               status events ha nodes links health topo, as the daemon last recorded them)\n"
    "       ibsmctl [port options] sa TABLE ...   (ask the SA; see ibsmctl sa --help)\n";

}  // namespace

const std::vector<CtlGlobalFlag>& CtlGlobalFlags() {
  static const std::vector<CtlGlobalFlag> kFlags = {
      {"--socket", "PATH", "ibsmd's control socket (default /run/ibsm/ibsmd.sock, or $IBSM_SOCKET)"},
      {"--json", "", "print the daemon's JSON answer instead of a table"},
      {"--timeout", "MS", "how long to wait for the daemon's answer (default 30000)"},
      {"--state-db", "PATH",
       "no daemon: answer from its state file (status events ha nodes links health topo)"},
      {"--version", "", "print the version and the commit"},
      {"--help", "", "print the commands and flags and exit"},
  };
  return kFlags;
}

const char* CtlSaUsage() {
  return "usage: ibsmctl [--ca NAME] [--port N] [--port-guid G] [--sa-lid L] [--timeout MS]\n"
         "               [--retries N] [--sa-key K] sa TABLE [--lid L] [--guid G]\n"
         "               [--slid L] [--dlid L] [--count] [--repeat N] [--json]\n"
         "       ibsmctl [port options] sa register-service --service-id ID --name NAME\n"
         "               [--lease SECONDS] [--pkey P] [--gid-prefix X]\n"
         "       ibsmctl [port options] sa delete-service --service-id ID [--pkey P]\n"
         "               [--gid-prefix X]\n"
         "services: --service-id ID and --name NAME select; register/delete act on this port's GID\n"
         "--repeat N: send the query N times, one at a time, and print queries per second and\n"
         "            latency percentiles (a load probe) instead of the records\n"
         "TABLE: nodes ports links switches lfts sminfo guids paths services\n";
}

const std::vector<CtlCommand>& CtlCommands() {
  static const std::vector<CtlCommand> kCommands = {
      {"status", "", "SM state, GUID, priority, last sweep, counts, engine, LMC", NoArgs,
       FormatStatus},
      {"nodes", "", "every node with its GUID, kind, LIDs and ports", NoArgs, FormatNodes},
      {"links", "[--degraded] [--errors]",
       "every cable with both ends; --degraded: only those below what both ends support; "
       "--errors: only those whose error counters moved within the health window",
       LinksArgs, FormatLinks},
      {"health", "[--window AGE] | --history [--since AGE] [--limit N]",
       "cables with health findings (PerfMgr counters, degraded links) within the health window "
       "(health_window_s, default 1h; --window: a shorter one), worst first, both ends named, "
       "each with when first and last seen; --history: every finding as it appeared, newest "
       "first",
       HealthArgs, FormatHealth},
      {"route", "SRC DST",
       "the hop-by-hop path from the tables; a node is a LID, a GUID (0x optional), a node "
       "name, a NodeDescription or an unambiguous prefix of one",
       RouteArgs, FormatRoute},
      {"lft", "SWITCH", "one switch's unicast forwarding table (named as for route)", LftArgs,
       FormatLft},
      {"check", "[--permutations N] [--seed S]",
       "completeness, deadlock proof and balance of the programmed routes", CheckArgs,
       FormatCheck},
      {"ar", "", "adaptive routing per switch (capable, enabled, SLs, mode, groups, why not) "
                 "and per destination leaf", ArArgs, FormatAr},
      {"traffic", "--pattern shift|random|alltoall [--count N] [--seed S]",
       "traffic model on the live tables: max link load and EBB, static vs AR", TrafficArgs,
       FormatTraffic},
      {"events", "[--since AGE] [--limit N]", "the event log (AGE: 600, 10m, 2h, 1d)",
       EventsArgs, FormatEvents},
      {"ha", "", "SM state, master, peer SMs and HA counters", NoArgs, FormatHa},
      {"sharp", "", "SHARP trees: roots, depth, hosts reached, coverage", NoArgs, FormatSharp},
      {"resweep", "[--wait [SECONDS]]",
       "queue a heavy sweep (root only); --wait: until it is done, with progress on a terminal",
       ResweepArgs, FormatQueued},
      {"log-level", "LEVEL", "set the daemon's log level (root only)", LevelArgs, FormatLevel},
      {"topo", "[--format json|dot|svg|html] [--view auto|full|aggregate]",
       "the fabric drawn by switch tier, names on the boxes, cables coloured as links and "
       "health judge them; html: the picture (pan, zoom) beside the health and links tables; "
       "aggregate (auto above 600 nodes): groups per pod and tier, unhealthy cables one by one",
       TopoArgs, FormatTopo},
      {"help", "", "the commands the running daemon serves", NoArgs, FormatHelp},
  };
  return kCommands;
}

const CtlCommand* FindCtlCommand(const std::string& name) {
  for (const auto& c : CtlCommands())
    if (name == c.name) return &c;
  return nullptr;
}

std::string Cell(const json& v) {
  if (v.is_null()) return "-";
  // Strings come from the fabric (NodeDescriptions a host's root chose): an escape sequence
  // or a line break must reach the operator's terminal as text, \x1B, never as a command.
  if (v.is_string()) return EscapeControls(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_float()) return fmt::format("{:.3f}", v.get<double>());
  return DumpJson(v);
}

std::string AlignedTable(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  std::vector<bool> numeric(header.size(), true);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size() && c < header.size(); ++c) {
      width[c] = std::max(width[c], r[c].size());
      if (!IsNumber(r[c]) && r[c] != "-") numeric[c] = false;
    }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const bool last = c + 1 == header.size();
      if (numeric[c] && !rows.empty()) {
        out += std::string(width[c] - cell.size(), ' ') + cell;
      } else {
        out += cell + (last ? "" : std::string(width[c] - cell.size(), ' '));
      }
      if (!last) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string SweepProgressLine(const json& status) {
  if (!status.contains("sweep_running") || !status["sweep_running"].is_object())
    return "waiting for the heavy sweep to start";
  const json& r = status["sweep_running"];
  std::string line = fmt::format("heavy sweep {}: {:.1f} s, {} SMPs", Get(r, "number"),
                                 r.value("elapsed_s", 0.0), Get(r, "smps"));
  if (r.value("nodes", 0) > 0) line += fmt::format(", {} nodes", Get(r, "nodes"));
  return line;
}

int RunResweepWait(const CtlCall& call, double wait_s, bool progress, bool as_json) {
  auto before = call("status", json::object());
  if (!before.ok()) {
    std::fprintf(stderr, "ibsmctl resweep: %s\n", before.status().message().c_str());
    return 2;
  }
  // Ours is the sweep after the one running now, or the next one when none runs.
  uint64_t target = 1;
  if (before->contains("sweep_running")) {
    target = (*before)["sweep_running"].value("number", uint64_t{0}) + 1;
  } else if (before->contains("last_sweep")) {
    target = (*before)["last_sweep"].value("number", uint64_t{0}) + 1;
  }
  auto queued = call("resweep", json::object());
  if (!queued.ok()) {
    std::fprintf(stderr, "ibsmctl resweep: %s\n", queued.status().message().c_str());
    return 2;
  }
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(wait_s));
  for (;;) {
    auto st = call("status", json::object());
    if (!st.ok()) {
      if (progress) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "ibsmctl resweep: %s\n", st.status().message().c_str());
      return 2;
    }
    const json last = st->value("last_sweep", json::object());
    if (last.value("number", uint64_t{0}) >= target) {
      if (progress) std::fprintf(stderr, "%-70s\r", "");
      if (as_json) {
        std::fputs((DumpJson(last, 2) + "\n").c_str(), stdout);
      } else {
        const json counts = st->value("counts", json::object());
        std::printf("heavy sweep %s done in %.3f s: %s nodes, %s SMPs (%s failed), %s LFT "
                    "blocks sent; %s\n",
                    Get(last, "number").c_str(), last.value("duration_s", 0.0),
                    Get(counts, "nodes").c_str(), Get(last, "smps").c_str(),
                    Get(last, "smps_failed").c_str(), Get(last, "lft_blocks_sent").c_str(),
                    st->value("subnet_up", false) ? "subnet up" : "subnet NOT up");
      }
      return st->value("subnet_up", false) ? 0 : 3;
    }
    if (std::chrono::steady_clock::now() >= end) {
      if (progress) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "ibsmctl resweep: heavy sweep %llu not done after %g s\n",
                   static_cast<unsigned long long>(target), wait_s);
      return 3;
    }
    if (progress) std::fprintf(stderr, "%-70s\r", SweepProgressLine(*st).c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int RunCtl(const std::vector<std::string>& argv) {
  std::string socket;
  if (const char* env = std::getenv("IBSM_SOCKET"); env && *env) socket = env;
  if (socket.empty()) socket = kDefaultControlSocket;
  bool as_json = false;
  std::string state_db;
  std::chrono::milliseconds timeout(30000);
  size_t i = 0;
  auto usage = [] {
    std::string u = kGlobalUsage;
    for (const auto& f : CtlGlobalFlags())
      u += fmt::format("{:<20} {}\n", fmt::format("{} {}", f.name, f.metavar), f.help);
    u += "commands:\n";
    for (const auto& c : CtlCommands())
      u += fmt::format("  {:<40} {}\n", std::string(c.name) + " " + c.usage, c.help);
    return u;
  };
  for (; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    if (f == "--json") {
      as_json = true;
    } else if ((f == "--socket" || f == "--timeout" || f == "--state-db") && i + 1 < argv.size()) {
      const std::string& v = argv[++i];
      if (f == "--socket") {
        socket = v;
      } else if (f == "--state-db") {
        state_db = v;
      } else {
        char* end = nullptr;
        unsigned long long ms = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || *end != 0 || ms == 0 || ms > 3600000) {
          std::fprintf(stderr, "ibsmctl: --timeout wants milliseconds (1..3600000)\n");
          return 1;
        }
        timeout = std::chrono::milliseconds(ms);
      }
    } else if (f == "-h" || f == "--help") {
      std::fputs(usage().c_str(), stdout);
      return 0;
    } else if (f == "--version") {
      std::printf("%s\n", VersionLine("ibsmctl").c_str());
      return 0;
    } else {
      break;
    }
  }
  if (i >= argv.size()) {
    std::fprintf(stderr, "ibsmctl: which command?\n%s", usage().c_str());
    return 1;
  }
  const CtlCommand* cmd = FindCtlCommand(argv[i]);
  if (!cmd) {
    std::fprintf(stderr, "ibsmctl: no command '%s'\n%s", argv[i].c_str(), usage().c_str());
    return 1;
  }
  std::vector<std::string> words(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
  // --json may also follow the command, as operators type it.
  if (auto it = std::find(words.begin(), words.end(), "--json"); it != words.end()) {
    as_json = true;
    words.erase(it);
  }
  auto args = cmd->make_args(words);
  if (!args.ok()) {
    std::fprintf(stderr, "ibsmctl %s: %s\nusage: ibsmctl %s %s\n", cmd->name,
                 args.status().message().c_str(), cmd->name, cmd->usage);
    return 1;
  }
  if (std::string(cmd->name) == "topo") {
    return RunTopo(
        [&](const char* what) -> Result<json> {
          return state_db.empty() ? CallControl(socket, what, json::object(), timeout)
                                  : CtlFromStateFile(state_db, what, json::object());
        },
        *args);
  }
  const bool tty = isatty(STDERR_FILENO) && timeout > std::chrono::seconds(2);
  if (std::string(cmd->name) == "resweep" && args->contains("wait_s") && state_db.empty()) {
    return RunResweepWait(
        [&](const char* what, const json& a) { return CallControl(socket, what, a, timeout); },
        (*args)["wait_s"].get<double>(), isatty(STDERR_FILENO), as_json);
  }
  if (tty && std::string(cmd->name) == "check")
    std::fprintf(stderr, "ibsmctl: checking the routes (the daemon measures balance)...\r");
  auto result = state_db.empty() ? CallControl(socket, cmd->name, *args, timeout)
                                 : CtlFromStateFile(state_db, cmd->name, *args);
  if (tty && std::string(cmd->name) == "check") std::fprintf(stderr, "%60s\r", "");
  if (!result.ok()) {
    std::fprintf(stderr, "ibsmctl %s: %s\n", cmd->name, result.status().message().c_str());
    return 2;
  }
  std::string out;
  try {
    out = as_json ? result->dump(2) + "\n" : cmd->format(*result);
  } catch (const json::exception& e) {
    // A daemon of another version (or something else on the socket) answered in a shape
    // this ibsmctl does not know.
    std::fprintf(stderr, "ibsmctl %s: unexpected answer (%s); try --json\n", cmd->name, e.what());
    return 2;
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace ibsm::tools
