#include "tools/topology_view.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/json.h"
#include "base/text.h"

namespace ibsm::tools {

using nlohmann::json;

namespace {

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A name in the picture: XML text for SVG, a quoted string for DOT. Names come from hosts
// (NodeDescriptions), so neither may carry markup, quotes or control bytes through.
std::string Escape(const std::string& s, bool xml) {
  if (xml) return XmlText(s);
  std::string out;
  for (char c : EscapeControls(s)) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out;
}

const char* Colour(const std::string& health) {
  if (health == "ok") return "#2e8b57";
  if (health == "degraded") return "#d62728";
  if (health == "errors") return "#ff7f0e";
  return "#999999";
}

}  // namespace

Result<json> BuildTopology(const json& nodes, const json& links) {
  if (!nodes.is_array() || !links.is_array())
    return InvalidArgument("the daemon's nodes/links answers are not lists");
  std::map<std::string, json> by_guid;
  for (const auto& n : nodes) {
    std::string g = Str(n, "guid");
    if (g.empty()) return InvalidArgument("a node without a GUID");
    by_guid[g] = {{"guid", g}, {"name", Str(n, "name")}, {"kind", Str(n, "kind")}, {"tier", 0}};
  }
  std::map<std::string, std::vector<std::string>> adj;  // switch to switch
  std::set<std::string> leaves;
  json out_links = json::array();
  for (const auto& l : links) {
    if (!l.contains("a") || !l.contains("b")) return InvalidArgument("a link without two ends");
    std::string a = Str(l["a"], "guid"), b = Str(l["b"], "guid");
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
    // Error counters that moved within the health window (sm/control_answers.h, LinksAnswer)
    // make a cable "errors", never "ok".
    auto moved = [&](const char* side) {
      const json errors = l.value("errors", json());
      if (!errors.is_object() || !errors.contains(side)) return false;
      const json& e = errors[side];
      return e.is_object() && !e.empty();
    };
    std::string health = l.value("state", "") != "ACTIVE" ? "down"
                         : l.contains("degraded") && l["degraded"].is_string() ? "degraded"
                         : moved("a") || moved("b")                          ? "errors"
                                                                             : "ok";
    out_links.push_back({{"a", a}, {"b", b}, {"a_port", l["a"].value("port", 0)},
                         {"b_port", l["b"].value("port", 0)}, {"health", health}});
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
    out += fmt::format("  \"{}\" [label=\"{}\" shape={}];\n", g,
                       Escape(n["name"].get<std::string>(), false), sw ? "box" : "ellipse");
    ranks[n["tier"].get<int>()].push_back(g);
  }
  for (auto it = ranks.rbegin(); it != ranks.rend(); ++it) {
    out += "  { rank=same;";
    for (const auto& g : it->second) out += " \"" + g + "\";";
    out += " }\n";
  }
  // Higher tiers first so dot puts them on top.
  std::map<std::string, int> tier;
  for (const auto& n : topo["nodes"]) tier[n["guid"]] = n["tier"];
  for (const auto& l : topo["links"]) {
    std::string a = l["a"], b = l["b"];
    if (tier[a] < tier[b]) std::swap(a, b);
    out += fmt::format("  \"{}\" -- \"{}\" [color=\"{}\"{}];\n", a, b,
                       Colour(l["health"]), l["health"] == "ok" ? "" : " penwidth=2");
  }
  return out + "}\n";
}

std::string TopologySvg(const json& topo, size_t max_hosts) {
  const int tiers = topo["tiers"];
  std::map<int, std::vector<const json*>> rows;
  size_t hosts = 0;
  for (const auto& n : topo["nodes"]) {
    rows[n["tier"].get<int>()].push_back(&n);
    if (n["tier"] == -1) ++hosts;
  }
  const bool draw_hosts = hosts <= max_hosts;
  // Hosts ordered by their leaf so the bottom row lines up under the leaves.
  std::map<std::string, std::string> host_leaf;
  std::map<std::string, size_t> hosts_per_leaf;
  std::map<std::string, const json*> node;
  for (const auto& n : topo["nodes"]) node[n["guid"]] = &n;
  for (const auto& l : topo["links"]) {
    const json* a = node[l["a"]];
    const json* b = node[l["b"]];
    if ((*a)["tier"] == -1 && (*b)["kind"] == "SW") host_leaf[l["a"]] = l["b"], ++hosts_per_leaf[l["b"]];
    if ((*b)["tier"] == -1 && (*a)["kind"] == "SW") host_leaf[l["b"]] = l["a"], ++hosts_per_leaf[l["a"]];
  }
  for (auto& [tier, r] : rows) {
    const int t = tier;  // clang before 16 cannot capture a structured binding
    std::stable_sort(r.begin(), r.end(), [&](const json* x, const json* y) {
      if (t == -1) return host_leaf[(*x)["guid"]] < host_leaf[(*y)["guid"]];
      return (*x)["name"].get<std::string>() < (*y)["name"].get<std::string>();
    });
  }
  size_t widest = 1;
  for (const auto& [t, r] : rows)
    if (t >= 0 || draw_hosts) widest = std::max(widest, r.size());
  const double cell = 22, width = std::max(400.0, static_cast<double>(widest) * cell + 40);
  const double row_h = 90, height = (tiers + (draw_hosts ? 1 : 0)) * row_h + 60;
  std::map<std::string, std::pair<double, double>> pos;
  for (const auto& [t, r] : rows) {
    if (t == -1 && !draw_hosts) continue;
    const int level = t == -1 ? 0 : t + (draw_hosts ? 1 : 0);
    const double y = height - 40 - level * row_h;
    const double step = (width - 40) / static_cast<double>(r.size());
    for (size_t i = 0; i < r.size(); ++i)
      pos[(*r[i])["guid"]] = {20 + step * (static_cast<double>(i) + 0.5), y};
  }
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"9\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  // Healthy cables first, so a red one is never hidden under green ones.
  for (const char* pass : {"ok", "down", "errors", "degraded"})
    for (const auto& l : topo["links"]) {
      if (l["health"] != pass) continue;
      auto a = pos.find(l["a"]), b = pos.find(l["b"]);
      if (a == pos.end() || b == pos.end()) continue;
      out += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
          "stroke-width=\"{}\"><title>{} port {} - {} port {}: {}</title></line>\n",
          a->second.first, a->second.second, b->second.first, b->second.second,
          Colour(l["health"]), l["health"] == "ok" ? "0.6" : "2.5",
          Escape((*node[l["a"]])["name"], true), DumpJson(l["a_port"]),
          Escape((*node[l["b"]])["name"], true), DumpJson(l["b_port"]), l["health"].get<std::string>());
    }
  for (const auto& [g, p] : pos) {
    const json& n = *node[g];
    const bool sw = n["kind"] == "SW";
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#333\">"
        "<title>{} {}</title></rect>\n",
        p.first - (sw ? 8 : 4), p.second - (sw ? 6 : 4), sw ? 16 : 8, sw ? 12 : 8,
        sw ? "#4a78b5" : "#f2c14e", Escape(n["name"], true), g);
    if (!draw_hosts && sw && hosts_per_leaf.count(g))
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{} hosts</text>\n",
                         p.first, p.second + 18, hosts_per_leaf[g]);
  }
  return out + "</svg>\n";
}

}  // namespace ibsm::tools
