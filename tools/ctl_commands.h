// ibsmctl's daemon commands: each asks ibsmd over its control socket (sm/net/control_server.h)
// and prints the answer as an aligned table, or as the daemon's JSON with --json.
//
//   ibsmctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS]
//
// A command is one row of the table in ctl_commands.cc: its name, usage, how its words become
// the request's args, and how the result prints for a person. Adding a command is adding a
// row (and a handler in ibsmd).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

struct CtlCommand {
  const char* name;
  const char* usage;  // after the name: "SRC DST"
  const char* help;
  // The request's args from the words after the name; InvalidArgument on misuse.
  Result<nlohmann::json> (*make_args)(const std::vector<std::string>& words);
  // Human output of the result (ends with a newline).
  std::string (*format)(const nlohmann::json& result);
};

const std::vector<CtlCommand>& CtlCommands();
const CtlCommand* FindCtlCommand(const std::string& name);

// The flags before a daemon command, as --help and the ibsmctl(8) man page list them.
struct CtlGlobalFlag {
  const char* name;     // "--socket"
  const char* metavar;  // "PATH", or "" for none
  const char* help;
};
const std::vector<CtlGlobalFlag>& CtlGlobalFlags();

// `ibsmctl sa --help`: the SA queries, which go to the master SM through the local port.
const char* CtlSaUsage();

// Columns padded to their widest cell, two spaces apart; numbers right-aligned.
std::string AlignedTable(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

// A JSON scalar as a person reads it: strings bare, null as "-", numbers as written.
std::string Cell(const nlohmann::json& v);

// A table as a command prints it: the header, the rows (cells as Cell gives them, escaped
// for a terminal, not for markup) and the line under it.
struct CtlTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string note;  // "3072 links, 0 degraded"; no newline
};
// The table of `ibsmctl links` from a links answer, and of `ibsmctl health` from a health
// answer (the findings of the health window), also shown beside the topo page's picture.
CtlTable LinksTable(const nlohmann::json& links);
CtlTable HealthTable(const nlohmann::json& health);

// `ibsmctl --state-db PATH status|events|ha`: the answer built from a state file, read-only,
// in the daemon's answer shapes; FailedPrecondition for commands that need the daemon.
Result<nlohmann::json> CtlFromStateFile(const std::string& path, const std::string& cmd,
                                        const nlohmann::json& args);

// One question to the daemon: command name and args -> its answer.
using CtlCall = std::function<Result<nlohmann::json>(const char* cmd, const nlohmann::json& args)>;

// The progress of a heavy sweep from a status answer ("heavy sweep 7: 2.4 s, 4562 SMPs, 208
// nodes"), for the line `resweep --wait` redraws on a terminal.
std::string SweepProgressLine(const nlohmann::json& status);

// `ibsmctl resweep --wait`: queues a heavy sweep and polls status until that sweep is done
// (or `wait_s` passes), redrawing a progress line on stderr when `progress`. Prints the
// sweep's figures. Exit status: 0 done with the subnet up, 2 the daemon could not be asked,
// 3 not done in time or the subnet is not up.
int RunResweepWait(const CtlCall& call, double wait_s, bool progress, bool as_json);

// Runs `ibsmctl [global flags] COMMAND ...` against the daemon; prints to stdout/stderr.
// Exit status: 0 done, 1 usage error, 2 the daemon could not be asked or refused.
int RunCtl(const std::vector<std::string>& argv);

}  // namespace ibsm::tools
