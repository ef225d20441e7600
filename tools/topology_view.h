// `ibsmctl topo`: the fabric as a picture. Built from the daemon's `nodes`, `links` and
// `health` answers: switches in tiers top-down (tier 0 = switches with hosts, each tier above
// one hop further from them), hosts below their leaf, cables coloured by the verdict `links`
// and `health` give them (CableHealthOf), so the picture never calls "ok" a cable either of
// them names.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

// {"nodes": [{"guid", "name", "kind", "tier"}], "links": [{"a", "b", "a_port", "b_port",
// "health", "why"}], "tiers": N}. tier: hosts -1, switches 0.. upwards; a switch that no
// host-bearing switch reaches gets tier 0. health: "down" (not ACTIVE), "degraded",
// "errors" or "ok"; why: what made it so, one string per reason. `health` is the daemon's
// health answer (null: none asked, the links answer alone decides).
Result<nlohmann::json> BuildTopology(const nlohmann::json& nodes, const nlohmann::json& links,
                                     const nlohmann::json& health = nlohmann::json());

// One cable's verdict from its entry of the links answer and the health answer's findings on
// it (each {"rule": ...}; empty when health names it not): "down" when not ACTIVE, "degraded"
// when `links --degraded` lists it or health has a degraded_link finding, "errors" when
// `links --errors` lists it or health has a counter finding, else "ok".
std::string CableHealthOf(const nlohmann::json& link, const nlohmann::json& findings);

enum class TopoView { kAuto, kFull, kAggregate };

struct SvgOptions {
  TopoView view = TopoView::kAuto;
  // kAuto: the aggregated view for a fabric of more nodes than this.
  size_t aggregate_above = 600;
  // Full view: one box per host up to this many hosts; beyond, one box per leaf.
  size_t max_hosts = 512;
};

// The view TopologySvg draws for `topo` with `o`.
TopoView ChosenView(const nlohmann::json& topo, const SvgOptions& o);

std::string TopologyDot(const nlohmann::json& topo);
// A standalone SVG document: a viewBox and width 100% (it scales to its window), names on
// the boxes (truncated, in full in each box's <title>), a legend, and the unhealthy cables
// listed. The full view draws every switch (and every host, or one box per leaf when they
// are more than o.max_hosts); the aggregated view draws groups per tier and pod with counts,
// and every cable that is not "ok" one by one between its two named ends.
std::string TopologySvg(const nlohmann::json& topo, const SvgOptions& o = {});

}  // namespace ibsm::tools
