#include "tools/ctl_topo.h"

#include <algorithm>
#include <cstdio>

#include "base/json.h"
#include "tools/ctl_commands.h"
#include "tools/topology_html.h"
#include "tools/topology_view.h"

namespace ibsm::tools {

using nlohmann::json;

Result<json> TopoArgs(const std::vector<std::string>& words) {
  json a{{"format", "json"}, {"view", "auto"}};
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--format" && i + 1 < words.size()) {
      const std::string& f = words[++i];
      if (f != "dot" && f != "svg" && f != "json" && f != "html")
        return InvalidArgument("--format is json, dot, svg or html, not '" + f + "'");
      a["format"] = f;
    } else if (words[i] == "--view" && i + 1 < words.size()) {
      const std::string& v = words[++i];
      if (v != "auto" && v != "full" && v != "aggregate")
        return InvalidArgument("--view is auto, full or aggregate, not '" + v + "'");
      a["view"] = v;
    } else {
      return InvalidArgument(
          "topo takes --format json|dot|svg|html and --view auto|full|aggregate, not '" +
          words[i] + "'");
    }
  }
  return a;
}

std::string FormatTopo(const json& r) { return DumpJson(r, 2) + "\n"; }

// Three questions (nodes, links, health) to the daemon or the state file, one picture whose
// colours are the verdicts of `links` and `health` on the same answers.
int RunTopo(const std::function<Result<json>(const char* cmd)>& ask, const json& args) {
  auto nodes = ask("nodes");
  auto links = nodes.ok() ? ask("links") : nodes;
  if (!links.ok()) {
    std::fprintf(stderr, "ibsmctl topo: %s\n", links.status().message().c_str());
    return 2;
  }
  auto health = ask("health");
  if (!health.ok())
    std::fprintf(stderr, "ibsmctl topo: no health answer (%s): cables judged by the links "
                         "answer alone\n",
                 health.status().message().c_str());
  const json health_answer = health.ok() ? *health : json();
  auto topo = BuildTopology((*nodes)["nodes"], (*links)["links"], health_answer);
  if (!topo.ok()) {
    std::fprintf(stderr, "ibsmctl topo: %s\n", topo.status().message().c_str());
    return 2;
  }
  if (nodes->contains("as_of_us")) {
    (*topo)["source"] = (*nodes)["source"];
    (*topo)["as_of_us"] = std::min((*nodes)["as_of_us"].get<int64_t>(),
                                   (*links)["as_of_us"].get<int64_t>());
  }
  SvgOptions o;
  const std::string view = args.value("view", "auto");
  o.view = view == "full" ? TopoView::kFull
           : view == "aggregate" ? TopoView::kAggregate
                                 : TopoView::kAuto;
  const std::string format = args["format"];
  std::string out;
  if (format == "dot") {
    out = TopologyDot(*topo);
  } else if (format == "svg") {
    out = TopologySvg(*topo, o);
  } else if (format == "html") {
    const CtlTable none{{}, {}, "no health answer: " + (health.ok() ? std::string()
                                                                     : health.status().message())};
    out = TopologyHtml(*topo, health.ok() ? HealthTable(*health) : none, LinksTable(*links), o);
  } else {
    out = DumpJson(*topo, 2) + "\n";
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace ibsm::tools
