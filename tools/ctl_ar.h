// ibsmctl's adaptive-routing commands (rows of the table in ctl_commands.cc):
//   ibsmctl ar                                            per switch and per destination leaf
//   ibsmctl traffic --pattern shift|random|alltoall [--count N] [--seed S]
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

Result<nlohmann::json> ArArgs(const std::vector<std::string>& words);
std::string FormatAr(const nlohmann::json& result);
Result<nlohmann::json> TrafficArgs(const std::vector<std::string>& words);
std::string FormatTraffic(const nlohmann::json& result);

}  // namespace ibsm::tools
