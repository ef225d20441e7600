// ibsmd's command line: OpenSM's flags (same letters, same long names, same meaning) laid
// over the config file, plus ibsm's own long options. One flag table drives parsing and
// --help.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "conf/diagnostic.h"
#include "conf/sm_config.h"

namespace ibsm::conf {

// OpenSM reads this when no -F is given; the daemon decides whether to do the same.
inline constexpr char kOpenSmDefaultConfigFile[] = "/etc/opensm/opensm.conf";

// What the command line says that is not an opensm.conf option.
struct CommandLineExtras {
  std::string config_file;         // -F/--config: loaded before any other flag applies
  std::string create_config_file;  // -c/--create-config: write the config there and exit
  bool once = false;               // -o/--once: one sweep, then exit
  int verbosity = 0;               // -v count (each also widens log_flags as OpenSM does)
  bool show_help = false;          // -h/--help/-?
  bool show_version = false;       // --version
  std::string sim_topology;        // --sim FILE: the in-process simulator instead of umad
  std::string sim_host;            // --sim-host NAME|GUID: attach point (default first CA)
  std::string sim_ar_switches;     // --sim-ar-switches all|none|GUID,...: AR-capable switches
  std::string sim_sharp_switches;  // --sim-sharp-switches all|none|GUID,...
  std::string sim_profile;         // --sim-profile strict|strict-plain-names|kind
  bool print_fabric = false;       // --print-fabric: list nodes and links after a sweep
  std::string pid_file;            // -J/--pidfile FILE: ibsmd's PID, written at start
  std::string refused;             // set by a flag ibsm does not honour: why (an error)
  std::vector<Diagnostic> config_warnings;  // from the -F file (unknown keys ...)
  size_t config_not_honoured = 0;           // its CONF-030 keys, all of them
};

// Applies `args` (argv without argv[0]) to `c`. When -F/--config names a file, `c` is first
// replaced by that file's contents, wherever -F stands; every other flag then overrides the
// file. Short flags group and take attached values as getopt does (-vv, -l2); long options
// take "--name value" or "--name=value".
// InvalidArgument naming the flag and the accepted values; the -F file's load error as is.
Status ApplyCommandLine(const std::vector<std::string>& args, SmConfig* c,
                        CommandLineExtras* extras);

// One row of the flag table, as --help and the ibsmd(8) man page show it.
struct CommandLineFlag {
  char short_name;             // 0: long name only
  std::string_view long_name;  // empty: short name only
  std::string_view alt_long;   // a second long spelling, or empty
  std::string_view metavar;    // empty: the flag takes no value
  std::string_view option;     // the opensm.conf option it sets, or empty
  std::string_view fixed;      // the value it sets the option to when it takes none
  std::string_view help;
  bool refused;                // OpenSM's flag for an option ibsm does not act on
};

// Every flag, in --help order.
std::vector<CommandLineFlag> CommandLineFlags();

// --help text, generated from the flag table.
std::string CommandLineUsage();

}  // namespace ibsm::conf
