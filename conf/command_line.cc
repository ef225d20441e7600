#include "conf/command_line.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "conf/opensm_keys.h"

namespace ibsm::conf {
namespace {

using ExtraFn = void (*)(std::string_view value, SmConfig* c, CommandLineExtras* x);

// A flag either sets a config option (to its argument, or to `fixed` when it takes none) or
// runs `extra`. `alt_long` is a second spelling (OpenSM's --log_file and ibsmd's --log-file).
struct FlagDesc {
  char short_name;
  std::string_view long_name;
  std::string_view alt_long;
  std::string_view metavar;  // empty: takes no argument
  std::string_view option;
  std::string_view fixed;
  ExtraFn extra;
  std::string_view help;
};

void SetConfigFile(std::string_view v, SmConfig*, CommandLineExtras* x) { x->config_file = v; }
void SetCreateConfig(std::string_view v, SmConfig*, CommandLineExtras* x) {
  x->create_config_file = v;
}
void SetOnce(std::string_view, SmConfig*, CommandLineExtras* x) { x->once = true; }
// OpenSM: each -v turns on the next log level bit (0x03 -> 0x07 -> 0x0f ...).
void Verbose(std::string_view, SmConfig* c, CommandLineExtras* x) {
  ++x->verbosity;
  c->log_flags = static_cast<uint8_t>((c->log_flags << 1) | 1);
}
// OpenSM's -V: every log level and a flush after each line (it is not --version).
void MaxVerbose(std::string_view, SmConfig* c, CommandLineExtras* x) {
  x->verbosity = std::max(x->verbosity, 3);
  c->log_flags = 0xFF;
  c->force_log_flush = true;
}
void Help(std::string_view, SmConfig*, CommandLineExtras* x) { x->show_help = true; }
void Version(std::string_view, SmConfig*, CommandLineExtras* x) { x->show_version = true; }
void Sim(std::string_view v, SmConfig*, CommandLineExtras* x) { x->sim_topology = v; }
void SimHost(std::string_view v, SmConfig*, CommandLineExtras* x) { x->sim_host = v; }
void SimAr(std::string_view v, SmConfig*, CommandLineExtras* x) { x->sim_ar_switches = v; }
void SimSharp(std::string_view v, SmConfig*, CommandLineExtras* x) { x->sim_sharp_switches = v; }
void SimProfileFlag(std::string_view v, SmConfig*, CommandLineExtras* x) { x->sim_profile = v; }
void PrintFabric(std::string_view, SmConfig*, CommandLineExtras* x) { x->print_fabric = true; }
void PidFile(std::string_view v, SmConfig*, CommandLineExtras* x) { x->pid_file = v; }
// OpenSM flags whose behaviour ibsm does not have: refused, saying what to do instead, so an
// init script that passes them fails loudly rather than runs something else.
void Inactive(std::string_view, SmConfig*, CommandLineExtras* x) {
  x->refused = "-I/--inactive: ibsm has no inactive mode (an SM that answers SMInfo but never "
               "becomes master); run a standby with a lower sm_priority instead";
}
void Console(std::string_view v, SmConfig*, CommandLineExtras* x) {
  if (v != "off") {
    x->refused = fmt::format("--console {}: ibsm has no console; use ibsmctl on the control "
                             "socket (only --console off is accepted)",
                             v);
  }
}
void ConsolePort(std::string_view, SmConfig*, CommandLineExtras*) {}  // no console to bind
// OpenSM's -d: 0 ignore other SMs, 1 single-threaded, 2 flush every log line, 3 no multicast.
void Debug(std::string_view v, SmConfig* c, CommandLineExtras* x) {
  if (v == "0") {
    c->ignore_other_sm = true;
  } else if (v == "2") {
    c->force_log_flush = true;
  } else if (v != "1") {  // ibsm's io thread is single already
    x->refused = fmt::format("-d {}: ibsm honours -d 0 (ignore other SMs), 1 (no effect: one io "
                             "thread) and 2 (flush every log line)",
                             v);
  }
}

constexpr FlagDesc kFlags[] = {
    {'F', "config", "", "FILE", "", "", SetConfigFile, "opensm.conf to load first"},
    {'c', "create-config", "", "FILE", "", "", SetCreateConfig,
     "write every option with its value and a comment to FILE, then exit"},
    {'g', "guid", "", "GUID", "guid", "", nullptr, "bind to the local port with this GUID"},
    {'l', "lmc", "", "LMC", "lmc", "", nullptr, "2^LMC LIDs per end port (0..7)"},
    {'p', "priority", "", "PRIO", "sm_priority", "", nullptr, "SM priority (0..15)"},
    {0, "subnet_prefix", "", "PREFIX", "subnet_prefix", "", nullptr, "subnet prefix in hex"},
    {0, "smkey", "", "KEY", "sm_key", "", nullptr, "SM_Key"},
    {'r', "reassign_lids", "", "", "reassign_lids", "TRUE", nullptr,
     "reassign every LID on the first sweep"},
    {'R', "routing_engine", "", "ENGINES", "routing_engine", "", nullptr,
     "routing engines to try in order, comma separated"},
    {'A', "ucast_cache", "", "", "use_ucast_cache", "TRUE", nullptr, "unicast routing cache"},
    {'a', "root_guid_file", "", "FILE", "root_guid_file", "", nullptr, "root switch GUIDs"},
    {'u', "cn_guid_file", "", "FILE", "cn_guid_file", "", nullptr, "compute node GUIDs"},
    {'G', "io_guid_file", "", "FILE", "io_guid_file", "", nullptr, "I/O node GUIDs"},
    {0, "port-shifting", "", "", "port_shifting", "TRUE", nullptr, "port shifting"},
    {0, "scatter-ports", "", "SEED", "scatter_ports", "", nullptr, "random port order seed"},
    {'H', "max_reverse_hops", "", "N", "max_reverse_hops", "", nullptr,
     "reverse hops allowed for I/O nodes"},
    {'X', "guid_routing_order_file", "", "FILE", "guid_routing_order_file", "", nullptr,
     "GUIDs in routing order"},
    {'o', "once", "", "", "", "", SetOnce, "sweep once, then exit"},
    {'s', "sweep", "", "SECONDS", "sweep_interval", "", nullptr,
     "sweep interval (0 = no periodic sweep)"},
    {'t', "timeout", "transaction-timeout", "MS", "transaction_timeout", "", nullptr,
     "per-attempt SMP timeout"},
    {0, "retries", "transaction-retries", "N", "transaction_retries", "", nullptr,
     "retries after a timeout"},
    {0, "maxsmps", "max-wire-smps", "N", "max_wire_smps", "", nullptr,
     "SMPs in flight at once (0 = no limit)"},
    {'x', "honor_guid2lid", "", "", "honor_guid2lid_file", "TRUE", nullptr,
     "honor the guid2lid file when leaving STANDBY"},
    {0, "dump_files_dir", "", "DIR", "dump_files_dir", "", nullptr, "where dumps go"},
    {'f', "log_file", "log-file", "FILE", "log_file", "", nullptr, "log file (stdout, stderr)"},
    {'L', "log_limit", "", "MB", "log_max_size", "", nullptr, "log file size limit"},
    {'e', "erase_log_file", "", "", "accum_log_file", "FALSE", nullptr,
     "start a new log file instead of appending"},
    {'P', "Pconfig", "", "FILE", "partition_config_file", "", nullptr, "partitions.conf"},
    {'Z', "part_enforce", "", "MODE", "part_enforce", "", nullptr,
     "partition enforcement: both, in, out, off"},
    {'W', "allow_both_pkeys", "", "", "allow_both_pkeys", "TRUE", nullptr,
     "full and limited membership in one partition"},
    {'Q', "qos", "", "", "qos", "TRUE", nullptr, "QoS setup (docs/qos.md)"},
    {'y', "stay_on_fatal", "", "", "exit_on_fatal", "FALSE", nullptr,
     "do not exit on fatal initialization issues"},
    {'B', "daemon", "", "", "daemon", "TRUE", nullptr, "run in the background"},
    {0, "perfmgr", "", "", "perfmgr", "TRUE", nullptr, "performance manager"},
    {'J', "pidfile", "", "FILE", "", "", PidFile, "write ibsmd's PID to FILE (removed at exit)"},
    {'I', "inactive", "", "", "", "", Inactive, "refused: ibsm has no inactive mode"},
    {0, "console", "", "MODE", "", "", Console, "only \"off\": ibsm's console is ibsmctl"},
    {0, "console-port", "", "PORT", "", "", ConsolePort, "accepted, unused (no console)"},
    {'d', "debug", "", "N", "", "", Debug, "OpenSM debug: 0 ignore other SMs, 2 flush logs"},
    {0, "sm_sl", "", "SL", "sm_sl", "", nullptr, "SL of SM traffic"},
    {0, "do_mesh_analysis", "", "", "do_mesh_analysis", "TRUE", nullptr, "lash mesh analysis"},
    {0, "lash_start_vl", "", "VL", "lash_start_vl", "", nullptr, "lash's first VL"},
    {0, "nue_max_num_vls", "", "N", "nue_max_num_vls", "", nullptr, "nue's VLs"},
    {'z', "connect_roots", "", "", "connect_roots", "TRUE", nullptr, "updn: connect roots"},
    {'M', "lid_matrix_file", "", "FILE", "lid_matrix_dump_file", "", nullptr,
     "lid matrix to load"},
    {'U', "lfts_file", "", "FILE", "lfts_file", "", nullptr, "LFTs to load (file engine)"},
    {'S', "sadb_file", "", "FILE", "sa_db_file", "", nullptr, "SA database to load"},
    {'m', "ids_guid_file", "", "FILE", "ids_guid_file", "", nullptr, "node IDs for routing"},
    {'i', "ignore_guids", "", "FILE", "port_prof_ignore_file", "", nullptr,
     "ports left out of port load balancing"},
    {'w', "hop_weights_file", "", "FILE", "hop_weights_file", "", nullptr, "per-port weights"},
    {'O', "port_search_ordering_file", "dimn_ports_file", "FILE", "port_search_ordering_file",
     "", nullptr, "port search order (dor)"},
    {0, "prefix_routes_file", "", "FILE", "prefix_routes_file", "", nullptr, "router prefixes"},
    {'Y', "qos_policy_file", "", "FILE", "qos_policy_file", "", nullptr, "QoS policy"},
    {0, "congestion_control", "", "", "congestion_control", "TRUE", nullptr,
     "congestion control"},
    {0, "cc_key", "", "KEY", "cc_key", "", nullptr, "congestion control key"},
    {'N', "no_part_enforce", "", "", "no_partition_enforcement", "TRUE", nullptr,
     "no partition enforcement (deprecated: -Z off)"},
    {0, "log_prefix", "", "TEXT", "log_prefix", "", nullptr, "prefix of each log line"},
    {0, "torus_config", "", "FILE", "torus_config", "", nullptr, "torus-2QoS config"},
    {0, "perfmgr_sweep_time_s", "", "SECONDS", "perfmgr_sweep_time_s", "", nullptr,
     "performance manager sweep time"},
    {'D', "", "", "FLAGS", "log_flags", "", nullptr, "log flags (0x01 ERROR ... 0x80 SYS)"},
    {'v', "verbose", "", "", "", "", Verbose, "more log detail; repeat for more"},
    {'V', "", "", "", "", "", MaxVerbose, "every log level, flushed at once"},
    {0, "state-db", "", "PATH", "state_db_file", "", nullptr, "SQLite state file"},
    {0, "control-socket", "", "PATH", "control_socket", "", nullptr,
     "control socket for ibsmctl (\"none\": no socket)"},
    {0, "sim", "", "FILE", "", "", Sim, "run on the in-process simulator with topology FILE"},
    {0, "sim-host", "", "NAME|GUID", "", "", SimHost, "simulator attach point"},
    {0, "sim-ar-switches", "", "all|none|GUID,...", "", "", SimAr,
     "simulated switches that support adaptive routing"},
    {0, "sim-sharp-switches", "", "all|none|GUID,...", "", "", SimSharp,
     "simulated switches that support SHARP"},
    {0, "sim-profile", "", "strict|strict-plain-names|kind", "", "", SimProfileFlag,
     "how forgiving the simulated devices are (default strict)"},
    {0, "print-fabric", "", "", "", "", PrintFabric,
     "print every discovered node and cable after a sweep"},
    {'h', "help", "", "", "", "", Help, "print the flags and exit"},
    {'?', "", "", "", "", "", Help, "print the flags and exit"},
    {0, "version", "", "", "", "", Version, "print the version"},
};

const FlagDesc* FindShort(char ch) {
  for (const FlagDesc& f : kFlags) {
    if (f.short_name != 0 && f.short_name == ch) return &f;
  }
  return nullptr;
}

const FlagDesc* FindLong(std::string_view name) {
  for (const FlagDesc& f : kFlags) {
    if (!name.empty() && (f.long_name == name || f.alt_long == name)) return &f;
  }
  return nullptr;
}

struct ParsedFlag {
  const FlagDesc* flag;
  std::string spelled;  // as the user typed it, for messages
  std::string value;
};

Result<std::vector<ParsedFlag>> Tokenize(const std::vector<std::string>& args) {
  std::vector<ParsedFlag> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      std::string_view body = std::string_view(a).substr(2);
      std::optional<std::string> inline_value;
      if (size_t eq = body.find('='); eq != std::string_view::npos) {
        inline_value = std::string(body.substr(eq + 1));
        body = body.substr(0, eq);
      }
      const FlagDesc* f = FindLong(body);
      std::string spelled = "--" + std::string(body);
      if (f == nullptr) {
        return InvalidArgument(fmt::format("unknown option '{}' (see --help)", Printable(a)));
      }
      if (f->metavar.empty()) {
        if (inline_value) return InvalidArgument(fmt::format("{} takes no value", spelled));
        out.push_back({f, spelled, ""});
      } else if (inline_value) {
        out.push_back({f, spelled, *inline_value});
      } else {
        if (i + 1 >= args.size()) {
          return InvalidArgument(fmt::format("{} needs a value ({})", spelled, f->metavar));
        }
        out.push_back({f, spelled, args[++i]});
      }
    } else if (a.size() >= 2 && a[0] == '-' && a[1] != '-') {
      for (size_t k = 1; k < a.size(); ++k) {
        const FlagDesc* f = FindShort(a[k]);
        std::string spelled = std::string("-") + a[k];
        if (f == nullptr) {
          return InvalidArgument(
              fmt::format("unknown option '{}' (see --help)", Printable(spelled)));
        }
        if (f->metavar.empty()) {
          out.push_back({f, spelled, ""});
          continue;
        }
        if (k + 1 < a.size()) {
          out.push_back({f, spelled, a.substr(k + 1)});
        } else if (i + 1 < args.size()) {
          out.push_back({f, spelled, args[++i]});
        } else {
          return InvalidArgument(fmt::format("{} needs a value ({})", spelled, f->metavar));
        }
        break;
      }
    } else {
      return InvalidArgument(fmt::format("unexpected argument '{}' (see --help)", Printable(a)));
    }
  }
  return out;
}

}  // namespace

Status ApplyCommandLine(const std::vector<std::string>& args, SmConfig* c,
                        CommandLineExtras* extras) {
  IBSM_ASSIGN_OR_RETURN(std::vector<ParsedFlag> flags, Tokenize(args));
  // The file first, wherever -F stands, so that every flag overrides it.
  for (const ParsedFlag& p : flags) {
    if (p.flag->extra == SetConfigFile) extras->config_file = p.value;
  }
  if (!extras->config_file.empty()) {
    IBSM_ASSIGN_OR_RETURN(ConfigLoad load, LoadConfigFile(extras->config_file));
    *c = std::move(load.config);
    extras->config_warnings = std::move(load.warnings);
    extras->config_not_honoured = load.not_honoured;
  }
  for (const ParsedFlag& p : flags) {
    const FlagDesc& f = *p.flag;
    if (f.extra == SetConfigFile) continue;
    if (f.extra != nullptr) {
      f.extra(p.value, c, extras);
      if (!extras->refused.empty()) return InvalidArgument(extras->refused);
      continue;
    }
    // An OpenSM flag whose option ibsm accepts in a file but does not act on: refused, so an
    // init script that relies on it fails loudly instead of running without it.
    if (IsOpenSmOnlyOption(f.option)) {
      return InvalidArgument(fmt::format("{}: ibsm does not act on {} (see the README's OpenSM "
                                         "compatibility section)",
                                         p.spelled, f.option));
    }
    const OptionDesc* d = FindOption(f.option);
    if (d == nullptr) return Internal(fmt::format("flag {} names no option", p.spelled));
    std::string value = f.metavar.empty() ? std::string(f.fixed) : p.value;
    if (Status s = SetOption(c, f.option, value); !s.ok()) {
      // "lmc: '9' is out of range 0..7" becomes "-l: '9' ..." so the user sees the flag.
      std::string msg = s.message();
      if (msg.rfind(f.option, 0) == 0) msg = p.spelled + msg.substr(f.option.size());
      return InvalidArgument(msg);
    }
    // A flag that asks for what ibsm does not do is named as a config line would be.
    if (const OpenSmKey* k = FindOpenSmKey(f.option); k && !Honoured(*k, value)) {
      ++extras->config_not_honoured;
      extras->config_warnings.push_back(
          {kConfNotHonoured, "command line", 0, p.spelled + ": " + NotHonouredText(*k, value)});
    }
  }
  return Status::Ok();
}

std::vector<CommandLineFlag> CommandLineFlags() {
  std::vector<CommandLineFlag> out;
  for (const FlagDesc& f : kFlags) {
    out.push_back({f.short_name, f.long_name, f.alt_long, f.metavar, f.option, f.fixed, f.help,
                   IsOpenSmOnlyOption(f.option)});
  }
  return out;
}

std::string CommandLineUsage() {
  std::string out =
      "Usage: ibsmd [options]\n"
      "InfiniBand subnet manager; OpenSM's options, config file (opensm.conf) and flags.\n\n";
  for (const CommandLineFlag& f : CommandLineFlags()) {
    std::string names;
    if (f.short_name != 0) names += fmt::format("-{}", f.short_name);
    if (!f.long_name.empty()) names += fmt::format("{}--{}", names.empty() ? "" : ", ", f.long_name);
    if (!f.alt_long.empty()) names += fmt::format(", --{}", f.alt_long);
    if (!f.metavar.empty()) names += fmt::format(" {}", f.metavar);
    out += fmt::format("  {:<36} {}{}\n", names, f.help,
                       f.refused ? " (OpenSM's; refused: ibsm does not act on it)" : "");
  }
  return out;
}

}  // namespace ibsm::conf
