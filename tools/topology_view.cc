#include "tools/topology_view.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/json.h"
#include "base/text.h"
#include "sm/answers/answers.h"
#include "sm/answers/health.h"
#include "tools/topology_style.h"

namespace ibsm::tools {

using nlohmann::json;

namespace {

std::string TopoStr(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A name in DOT: a quoted string. Names come from hosts (NodeDescriptions), so neither
// quotes nor control bytes may pass through.
std::string DotQuoted(const std::string& s) {
  std::string out;
  for (char c : EscapeControls(s)) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out;
}

std::string EndKey(const json& end) {
  if (!end.is_object()) return "";
  return TopoStr(end, "guid") + "/" + DumpJson(end.value("port", json()));
}

}  // namespace

std::string CableHealthOf(const json& link, const json& findings) {
  if (link.value("state", "") != "ACTIVE") return "down";
  const std::string degraded_rule(sm::RuleInfo(sm::HealthRule::kDegradedLink).name);
  bool degraded = link.contains("degraded") && link["degraded"].is_string();
  bool errors = sm::LinkErrorsMoved(link);  // what `links --errors` lists
  if (findings.is_array())
    for (const json& f : findings) {
      if (!f.is_object()) continue;
      (TopoStr(f, "rule") == degraded_rule ? degraded : errors) = true;
    }
  return degraded ? "degraded" : errors ? "errors" : "ok";
}

Result<json> BuildTopology(const json& nodes, const json& links, const json& health) {
  if (!nodes.is_array() || !links.is_array())
    return InvalidArgument("the daemon's nodes/links answers are not lists");
  std::map<std::string, json> by_guid;
  for (const auto& n : nodes) {
    std::string g = TopoStr(n, "guid");
    if (g.empty()) return InvalidArgument("a node without a GUID");
    by_guid[g] = {{"guid", g}, {"name", TopoStr(n, "name")}, {"kind", TopoStr(n, "kind")},
                  {"tier", 0}};
  }
  // The health answer's findings by cable end (either end names the cable).
  std::map<std::string, size_t> cable_at;
  json cables = health.is_object() ? health.value("cables", json::array()) : json::array();
  if (!cables.is_array()) cables = json::array();
  for (size_t i = 0; i < cables.size(); ++i) {
    if (!cables[i].is_object()) continue;
    for (const char* side : {"a", "b"})
      if (cables[i].contains(side) && cables[i][side].is_object())
        cable_at.emplace(EndKey(cables[i][side]), i);
  }
  std::map<std::string, std::vector<std::string>> adj;  // switch to switch
  std::set<std::string> leaves;
  json out_links = json::array();
  for (const auto& l : links) {
    if (!l.contains("a") || !l.contains("b")) return InvalidArgument("a link without two ends");
    std::string a = TopoStr(l["a"], "guid"), b = TopoStr(l["b"], "guid");
    if (!by_guid.count(a) || !by_guid.count(b)) return InvalidArgument("a link to an unknown node");
    const bool sa = by_guid[a]["kind"] == "SW", sb = by_guid[b]["kind"] == "SW";
    if (sa && sb) {
      adj[a].push_back(b);
      adj[b].push_back(a);
    } else if (sa) {
      leaves.insert(a);
    } else if (sb) {
      leaves.insert(b);
    }
    json findings = json::array();
    for (const char* side : {"a", "b"}) {
      auto it = cable_at.find(EndKey(l[side]));
      if (it == cable_at.end()) continue;
      findings = cables[it->second].value("findings", json::array());
      break;
    }
    // Why it is not "ok", as `links` and `health` say it.
    json why = json::array();
    if (l.value("state", "") != "ACTIVE") why.push_back("state " + TopoStr(l, "state"));
    if (l.contains("degraded") && l["degraded"].is_string())
      why.push_back("degraded: " + l["degraded"].get<std::string>());
    const json errors = l.value("errors", json());
    if (errors.is_object())
      for (const char* side : {"a", "b"}) {
        if (!errors.contains(side) || !errors[side].is_object()) continue;
        for (const auto& [counter, v] : errors[side].items())
          why.push_back(fmt::format("{} end: {} +{} in the health window", side, counter,
                                    DumpJson(v)));
      }
    if (findings.is_array())
      for (const json& f : findings)
        if (f.is_object())
          why.push_back(fmt::format("health: {} {}", TopoStr(f, "id"), TopoStr(f, "rule")));
    out_links.push_back({{"a", a},
                         {"b", b},
                         {"a_port", l["a"].value("port", 0)},
                         {"b_port", l["b"].value("port", 0)},
                         {"health", CableHealthOf(l, findings)},
                         {"why", why}});
  }
  // Tiers by BFS from the host-bearing switches.
  std::map<std::string, int> tier;
  std::deque<std::string> q;
  for (const auto& g : leaves) tier[g] = 0, q.push_back(g);
  while (!q.empty()) {
    std::string g = q.front();
    q.pop_front();
    for (const auto& n : adj[g])
      if (!tier.count(n)) tier[n] = tier[g] + 1, q.push_back(n);
  }
  int top = 0;
  json out_nodes = json::array();
  for (auto& [g, n] : by_guid) {
    if (n["kind"] != "SW") {
      n["tier"] = -1;
    } else {
      n["tier"] = tier.count(g) ? tier[g] : 0;
      top = std::max(top, n["tier"].get<int>());
    }
    out_nodes.push_back(n);
  }
  return json{{"nodes", out_nodes}, {"links", out_links}, {"tiers", top + 1}};
}

std::string TopologyDot(const json& topo) {
  std::string out = "graph fabric {\n  rankdir=TB;\n  node [fontsize=10];\n";
  std::map<int, std::vector<std::string>> ranks;
  for (const auto& n : topo["nodes"]) {
    const std::string g = n["guid"];
    const bool sw = n["kind"] == "SW";
    out += fmt::format("  \"{}\" [label=\"{}\" shape={}];\n", DotQuoted(g),
                       DotQuoted(n["name"].get<std::string>()), sw ? "box" : "ellipse");
    ranks[n["tier"].get<int>()].push_back(g);
  }
  for (auto it = ranks.rbegin(); it != ranks.rend(); ++it) {
    out += "  { rank=same;";
    for (const auto& g : it->second) out += " \"" + DotQuoted(g) + "\";";
    out += " }\n";
  }
  // Higher tiers first so dot puts them on top.
  std::map<std::string, int> tier;
  for (const auto& n : topo["nodes"]) tier[n["guid"]] = n["tier"];
  for (const auto& l : topo["links"]) {
    std::string a = l["a"], b = l["b"];
    if (tier[a] < tier[b]) std::swap(a, b);
    const CableStyle st = StyleOf(l["health"].get<std::string>());
    out += fmt::format("  \"{}\" -- \"{}\" [color=\"{}\" style={}{}];\n", DotQuoted(a),
                       DotQuoted(b), st.colour, st.dot, l["health"] == "ok" ? "" : " penwidth=2");
  }
  return out + "}\n";
}

}  // namespace ibsm::tools
