// ibsmctl's commands on the programmed routes (rows of the table in ctl_commands.cc):
//   ibsmctl route SRC DST | lft SWITCH | check [--permutations N] [--seed S]
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

Result<nlohmann::json> RouteArgs(const std::vector<std::string>& words);
std::string FormatRoute(const nlohmann::json& result);
Result<nlohmann::json> LftArgs(const std::vector<std::string>& words);
std::string FormatLft(const nlohmann::json& result);
Result<nlohmann::json> CheckArgs(const std::vector<std::string>& words);
std::string FormatCheck(const nlohmann::json& result);

}  // namespace ibsm::tools
