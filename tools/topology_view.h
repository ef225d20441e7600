// `ibsmctl topo`: the fabric as a picture. Built from the daemon's `nodes` and `links`
// answers: switches in tiers top-down (tier 0 = switches with hosts, each tier above one hop
// further from them), hosts below their leaf, cables coloured by health (green ACTIVE, red
// degraded, grey not ACTIVE).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

// {"nodes": [{"guid", "name", "kind", "tier"}], "links": [{"a", "b", "a_port", "b_port",
// "health"}], "tiers": N}. tier: hosts -1, switches 0.. upwards; a switch that no host-bearing
// switch reaches gets tier 0.
Result<nlohmann::json> BuildTopology(const nlohmann::json& nodes, const nlohmann::json& links);

std::string TopologyDot(const nlohmann::json& topo);
// Hosts are drawn as small boxes only up to `max_hosts`; beyond that each leaf shows a count.
std::string TopologySvg(const nlohmann::json& topo, size_t max_hosts = 512);

}  // namespace ibsm::tools
