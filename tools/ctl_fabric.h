// ibsmctl's commands on the fabric as it is now (rows of the table in ctl_commands.cc):
//   ibsmctl status | nodes | links [--degraded] [--errors]
//   ibsmctl health [--window AGE] | --history [--since AGE] [--limit N]
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

std::string FormatStatus(const nlohmann::json& result);
std::string FormatNodes(const nlohmann::json& result);
Result<nlohmann::json> LinksArgs(const std::vector<std::string>& words);
std::string FormatLinks(const nlohmann::json& result);
Result<nlohmann::json> HealthArgs(const std::vector<std::string>& words);
std::string FormatHealth(const nlohmann::json& result);

}  // namespace ibsm::tools
