// `ibsmctl topo` (a row of the table in ctl_commands.cc): the fabric as a picture
// (tools/topology_view.h) from three questions to the daemon or its state file: nodes, links
// and health.
//   ibsmctl topo [--format json|dot|svg|html] [--view auto|full|aggregate]
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

Result<nlohmann::json> TopoArgs(const std::vector<std::string>& words);
std::string FormatTopo(const nlohmann::json& result);

// Asks `ask` for nodes, links and health and prints the picture in args' format. Exit status
// 0, or 2 when the daemon (or the state file) could not answer.
int RunTopo(const std::function<Result<nlohmann::json>(const char* cmd)>& ask,
            const nlohmann::json& args);

}  // namespace ibsm::tools
