// How the topo picture draws a cable of each verdict (tools/topology_view.h), shared by the
// DOT and SVG renderers and the legend, so the legend cannot say what the lines do not.
#pragma once

#include <string>
#include <string_view>

namespace ibsm::tools {

struct CableStyle {
  const char* colour;
  const char* width;  // stroke width, SVG user units
  const char* dash;   // stroke-dasharray, "" for a solid line
  const char* dot;    // Graphviz style
  const char* legend;
};

inline CableStyle StyleOf(std::string_view health) {
  if (health == "ok") return {"#2e8b57", "0.8", "", "solid", "healthy: ACTIVE, no errors"};
  if (health == "errors")
    return {"#ff7f0e", "2.5", "", "bold", "errors in the health window"};
  if (health == "degraded")
    return {"#d62728", "2.5", "6 3", "dashed", "degraded: below both ends' best"};
  return {"#999999", "1.5", "2 3", "dotted", "down: not ACTIVE"};
}

// The verdicts in the order they are drawn: the worst last, on top, so a red cable is never
// hidden under green ones.
inline constexpr const char* kHealthDrawOrder[] = {"ok", "down", "errors", "degraded"};

// Box fills. The browser test counts boxes of the node colours in a screenshot
// (tests/e2e/topo_browser_test.cc).
inline constexpr char kSwitchFill[] = "#4a78b5";
inline constexpr char kHostFill[] = "#f2c14e";
inline constexpr char kSwitchGroupFill[] = "#c5d6ee";
inline constexpr char kHostGroupFill[] = "#f9e6b3";

}  // namespace ibsm::tools
