// ibsmctl's daemon commands: each asks ibsmd over its control socket (sm/control_server.h)
// and prints the answer as an aligned table, or as the daemon's JSON with --json.
//
//   ibsmctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS]
//
// A command is one row of the table in ctl_commands.cc: its name, usage, how its words become
// the request's args, and how the result prints for a person. Adding a command is adding a
// row (and a handler in ibsmd).
#pragma once

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

// Columns padded to their widest cell, two spaces apart; numbers right-aligned.
std::string AlignedTable(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

// A JSON scalar as a person reads it: strings bare, null as "-", numbers as written.
std::string Cell(const nlohmann::json& v);

// `ibsmctl --state-db PATH status|events|ha`: the answer built from a state file, read-only,
// in the daemon's answer shapes; FailedPrecondition for commands that need the daemon.
Result<nlohmann::json> CtlFromStateFile(const std::string& path, const std::string& cmd,
                                        const nlohmann::json& args);

// Runs `ibsmctl [global flags] COMMAND ...` against the daemon; prints to stdout/stderr.
// Exit status: 0 done, 1 usage error, 2 the daemon could not be asked or refused.
int RunCtl(const std::vector<std::string>& argv);

}  // namespace ibsm::tools
