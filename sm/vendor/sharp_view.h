// The operator's view of the SHARP trees: what `ibsmctl sharp`
// prints and its --json. Pure: the SharpManager's summary in, JSON out.
//
//   {"enabled": bool, "aggregation_nodes": n, "enabled_nodes": n, "usable_nodes": n,
//    "switch_tiers": n, "hosts": n,
//    "trees": [{"id", "root", "root_name", "root_an", "depth", "hosts", "switches",
//               "programmed", "missing_hosts": [guid, ...]}, ...],
//    "uncovered": [guid, ...], "never_covered": [guid, ...], "notes": [text, ...]}
// "depth" counts switch tiers, "hosts" the hosts the tree reaches, "switches" the switches
// (ANs) in it; GUIDs are "0x%016x" strings (root: the root switch's node GUID).
#pragma once

#include <nlohmann/json.hpp>

#include "sm/vendor/sharp_manager.h"

namespace ibsm::sm {

nlohmann::json SharpTreesJson(const SharpSummary& summary);

}  // namespace ibsm::sm
