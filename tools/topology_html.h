// `ibsmctl topo --format html`: one self-contained page (no external resource) holding the
// picture of TopologySvg with pan (drag) and zoom (wheel, buttons), and beside it the tables
// `ibsmctl health` and `ibsmctl links` print, from the same answers the picture was drawn
// from.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tools/ctl_commands.h"
#include "tools/topology_view.h"

namespace ibsm::tools {

// `topo` as BuildTopology makes it; `health` and `links` as HealthTable and LinksTable make
// them. Every cell and name is escaped for HTML.
std::string TopologyHtml(const nlohmann::json& topo, const CtlTable& health,
                         const CtlTable& links, const SvgOptions& o = {});

}  // namespace ibsm::tools
