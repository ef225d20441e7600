// What the Debian package installs beside the programs, generated from the tables the programs
// themselves read, so the documentation cannot drift from the code: the man pages ibsmd(8)
// (from the flag table, conf/command_line.h), ibsmctl(8) (from the command table,
// tools/ctl_commands.h) and ibsm.conf(5) (from the option table, conf/sm_config.h), and the
// default /etc/ibsm/ibsm.conf. ibsm-mangen (tools/ibsm_mangen_main.cc) writes them at build
// time; the README's "Package" section lists where each is installed.
#pragma once

#include <string>
#include <string_view>

#include "conf/sm_config.h"

namespace ibsm::tools {

// Where the package puts the configuration the systemd unit (conf/systemd/ibsmd.service)
// starts ibsmd with.
inline constexpr char kPackagedConfigFile[] = "/etc/ibsm/ibsm.conf";

// The defaults, but for the log and the dumps, which go to /var/log/ibsm: the one log
// directory the unit lets ibsmd write (LogsDirectory=ibsm), and the file the package's
// logrotate entry rotates.
conf::SmConfig PackagedConfig();
// PackagedConfig() as `ibsmd -c` writes a config, after a header saying what the file is.
std::string PackagedConfigText();

// Text made safe for a roff text line: backslashes escaped, '-' as the ASCII minus (so an
// option copied from the rendered page still works), a leading '.' or '\'' kept literal.
std::string RoffEscape(std::string_view text);

// The man pages, dated `date` ("2026-12-02").
std::string IbsmdManPage(std::string_view date);
std::string IbsmctlManPage(std::string_view date);
std::string IbsmConfManPage(std::string_view date);
// A section 1 page for a program whose documentation is its --help text (ibsm-routecheck,
// ibsm-topogen): NAME from `summary`, the usage kept as printed.
std::string UsageManPage(std::string_view program, std::string_view summary,
                         std::string_view usage, std::string_view date);

}  // namespace ibsm::tools
