// Routing engines ar_updn and ar_ftree (NVIDIA's names): the static routes of updn /
// ftree, unchanged; the name tells the SM to program adaptive routing on top of them (groups
// from routing/ar_groups.h, default ports = these static routes). ar_enable with plain updn
// or ftree programs the same AR on top of that engine; these names stay as aliases.
#pragma once

#include <memory>
#include <string_view>

#include "routing/routing_engine.h"

namespace ibsm::routing {

std::unique_ptr<RoutingEngine> MakeArUpDn();
std::unique_ptr<RoutingEngine> MakeArFTree();

// True for an engine name that asks for AR ("ar_updn", "ar_ftree").
bool IsArEngine(std::string_view name);

}  // namespace ibsm::routing
