// ibsmctl's event log and HA view (rows of the table in ctl_commands.cc):
//   ibsmctl events [--since AGE] [--limit N] | ha
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

Result<nlohmann::json> EventsArgs(const std::vector<std::string>& words);
std::string FormatEvents(const nlohmann::json& result);
std::string FormatHa(const nlohmann::json& result);

}  // namespace ibsm::tools
