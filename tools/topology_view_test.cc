#include "tools/topology_view.h"

#include <cstdlib>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "base/text.h"
#include "fabric/generators.h"
#include "sm/record/control_answers.h"
#include "tools/ctl_commands.h"
#include "tools/topology_html.h"

namespace ibsm::tools {
namespace {

using nlohmann::json;

size_t TvCount(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// A generated fabric's nodes and links answers, every cable ACTIVE (the generator leaves the
// port states as a fabric before its SM).
struct TvAnswers {
  json nodes, links;
};
TvAnswers TvFabric(Result<Fabric> f) {
  EXPECT_TRUE(f.ok());
  TvAnswers a{sm::NodesAnswer(*f), sm::LinksAnswer(*f, nullptr, nullptr)};
  for (json& l : a.links["links"]) {
    l["state"] = "ACTIVE";
    l["errors"] = {{"a", json::object()}, {"b", json::object()}};
  }
  a.links["perfmgr_sweep"] = 3;
  return a;
}

// The class of the cable line whose <title> begins with `title`, or "" when none.
std::string TvCableClass(const std::string& svg, const std::string& title) {
  const size_t t = svg.find("<title>" + title);
  if (t == std::string::npos) return "";
  const size_t line = svg.rfind("<line class=\"", t);
  if (line == std::string::npos) return "";
  const size_t from = line + 13;
  return svg.substr(from, svg.find('"', from) - from);
}

std::string TvName(const json& answers, const std::string& guid) {
  for (const json& n : answers["nodes"])
    if (n["guid"] == guid) return n["name"];
  return "";
}

// Names on the boxes, escaped, long ones cut with the whole name in the tooltip; a viewBox
// and width 100%, no fixed size; a legend of every verdict.
TEST(TopologyPictureTest, BoxesAreNamedEscapedAndThePictureScales) {
  TvAnswers a = TvFabric(FatTree2(4));
  a.nodes["nodes"][0]["name"] = "<b>&\"evil'</b>";
  a.nodes["nodes"][1]["name"] = "a-switch-name-far-longer-than-twenty-characters";
  a.nodes["nodes"][2]["name"] = "caf\xc3\xa9-\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"
                                "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"
                                "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"
                                "\xe2\x82\xac\xe2\x82\xac";  // cut inside multi-byte text
  auto topo = BuildTopology(a.nodes["nodes"], a.links["links"]);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  const std::string svg = TopologySvg(*topo);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_TRUE(std::regex_search(svg, std::regex(R"(<svg [^>]*viewBox="0 0 \d+ \d+")")))
      << svg.substr(0, 300);
  EXPECT_NE(svg.find("width=\"100%\" font-family"), std::string::npos) << svg.substr(0, 300);
  EXPECT_NE(svg.find("class=\"ibsm-topo view-full\""), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos) << "a name's markup reached the SVG";
  EXPECT_NE(svg.find(">&lt;b&gt;&amp;&quot;evil&apos;&lt;/b&gt;</text>"), std::string::npos)
      << "the name drawn, escaped";
  EXPECT_NE(svg.find(">a-switch-name-far-l\xe2\x80\xa6</text>"), std::string::npos)
      << "a long name cut to 20 characters";
  EXPECT_NE(svg.find("<title>a-switch-name-far-longer-than-twenty-characters ("),
            std::string::npos)
      << "the whole name in the tooltip";
  EXPECT_NE(svg.find(">caf\xc3\xa9-\xe2\x82\xac"), std::string::npos);
  EXPECT_EQ(ValidUtf8(svg), svg) << "a cut name is still UTF-8";
  // Every node is named on the picture, not only in a tooltip.
  for (const json& n : a.nodes["nodes"]) {
    if (n["name"].get<std::string>().size() > 20) continue;
    EXPECT_NE(svg.find(">" + XmlText(n["name"].get<std::string>()) + "</text>"),
              std::string::npos)
        << n["name"];
  }
  EXPECT_NE(svg.find("<g id=\"legend\""), std::string::npos);
  for (const char* h : {"ok", "errors", "degraded", "down"})
    EXPECT_NE(svg.find("<g class=\"legend-cable " + std::string(h) + "\">"), std::string::npos)
        << h;
  EXPECT_NE(svg.find("every cable healthy"), std::string::npos);
}

// The picture's verdict is that of `links --errors`, `links --degraded` and `health` on the
// same answers: a cable any of them names is never drawn "ok".
TEST(TopologyPictureTest, ACableLinksOrHealthNamesIsNeverDrawnOk) {
  TvAnswers a = TvFabric(FatTree2(4));
  json& l = a.links["links"];
  l[0]["errors"]["b"] = {{"symbol_errors", 3}};  // below any threshold: links --errors only
  l[1]["degraded"] = "width 1x of 4x";
  l[2]["state"] = "INIT";
  // Findings in the health window on cables the links answer calls clean: a counter finding,
  // and a degraded link since repaired (health remembers it for the window).
  json health{{"healthy", false}, {"cables", json::array()}};
  auto finding_on = [&](size_t i, const char* rule) {
    health["cables"].push_back({{"a", l[i]["b"]},
                                {"b", l[i]["a"]},
                                {"findings",
                                 json::array({{{"rule", rule}, {"id", "SM-PERF-00x"}}})}});
  };
  finding_on(3, "symbol_errors");
  finding_on(4, "degraded_link");
  auto topo = BuildTopology(a.nodes["nodes"], l, health);
  ASSERT_TRUE(topo.ok());
  const json& drawn = (*topo)["links"];
  EXPECT_EQ(drawn[0]["health"], "errors");
  EXPECT_EQ(drawn[1]["health"], "degraded");
  EXPECT_EQ(drawn[2]["health"], "down");
  EXPECT_EQ(drawn[3]["health"], "errors");
  EXPECT_EQ(drawn[4]["health"], "degraded");
  EXPECT_EQ(drawn[5]["health"], "ok");
  EXPECT_NE(drawn[3]["why"].dump().find("health: SM-PERF-00x symbol_errors"), std::string::npos)
      << drawn[3]["why"];
  // What links --errors and --degraded keep, the picture never calls ok.
  for (bool degraded : {false, true}) {
    auto kept = sm::FilterLinks(a.links, degraded, !degraded);
    ASSERT_TRUE(kept.ok());
    EXPECT_EQ((*kept)["links"].size(), 1u);
    for (const json& k : (*kept)["links"]) {
      for (const json& d : drawn) {
        if (d["a"] == k["a"]["guid"] && d["a_port"] == k["a"]["port"]) {
          EXPECT_NE(d["health"], "ok");
        }
      }
    }
  }
  // In both views the line of an errored cable has its colour, never class "ok".
  for (TopoView view : {TopoView::kFull, TopoView::kAggregate}) {
    SvgOptions o;
    o.view = view;
    const std::string svg = TopologySvg(*topo, o);
    for (size_t i = 0; i < 5; ++i) {
      const std::string title = fmt::format(
          "{} port {} - {} port {}: ", XmlText(TvName(a.nodes, drawn[i]["a"])),
          drawn[i]["a_port"].get<int>(), XmlText(TvName(a.nodes, drawn[i]["b"])),
          drawn[i]["b_port"].get<int>());
      EXPECT_EQ(TvCableClass(svg, title), "cable " + drawn[i]["health"].get<std::string>())
          << "cable " << i << ": " << title;
    }
    EXPECT_NE(svg.find("unhealthy cables (5):"), std::string::npos);
  }
}

// 3-tier k=16 (1,344 nodes): the automatic view is the aggregated one, with far fewer
// elements than the full view, and the unhealthy cables still drawn one by one and named.
TEST(TopologyPictureTest, AK16FabricIsAggregatedAndStillNamesItsUnhealthyCables) {
  TvAnswers a = TvFabric(FatTree3(16));
  ASSERT_EQ(a.nodes["nodes"].size(), 1344u);
  // One leaf-to-spine cable with errors, one host cable degraded.
  json& l = a.links["links"];
  size_t sw_sw = l.size(), host = l.size();
  auto kind = [&](const std::string& g) {
    for (const json& n : a.nodes["nodes"])
      if (n["guid"] == g) return n["kind"].get<std::string>();
    return std::string();
  };
  for (size_t i = 0; i < l.size() && (sw_sw == l.size() || host == l.size()); ++i) {
    const bool sa = kind(l[i]["a"]["guid"]) == "SW", sb = kind(l[i]["b"]["guid"]) == "SW";
    const std::string an = l[i]["a"]["name"], bn = l[i]["b"]["name"];
    if (sa && sb && sw_sw == l.size() && (an.find("leaf") != std::string::npos ||
                                          bn.find("leaf") != std::string::npos))
      sw_sw = i;
    if (sa != sb && host == l.size()) host = i;
  }
  ASSERT_LT(sw_sw, l.size());
  ASSERT_LT(host, l.size());
  l[sw_sw]["errors"]["a"] = {{"symbol_errors", 12}};
  l[host]["degraded"] = "speed SDR of EDR";
  auto topo = BuildTopology(a.nodes["nodes"], l);
  ASSERT_TRUE(topo.ok());
  EXPECT_EQ(ChosenView(*topo, {}), TopoView::kAggregate);
  const std::string agg = TopologySvg(*topo);
  SvgOptions full_o;
  full_o.view = TopoView::kFull;
  const std::string full = TopologySvg(*topo, full_o);
  // IBSM_TOPO_PICTURE_DIR=/tmp writes both pictures there, to look at.
  if (const char* dir = std::getenv("IBSM_TOPO_PICTURE_DIR")) {
    std::ofstream(std::string(dir) + "/k16-aggregate.svg") << agg;
    std::ofstream(std::string(dir) + "/k16-full.svg") << full;
  }
  EXPECT_NE(agg.find("class=\"ibsm-topo view-aggregate\""), std::string::npos);
  const size_t agg_elements = TvCount(agg, "<line") + TvCount(agg, "<rect");
  const size_t full_elements = TvCount(full, "<line") + TvCount(full, "<rect");
  EXPECT_GT(full_elements, 2000u);
  EXPECT_LT(agg_elements, 250u) << "the aggregated view is not small";
  EXPECT_LT(agg.size() * 5, full.size());
  // Groups per pod and tier, with counts.
  // (the ends of the two unhealthy cables are drawn apart, so two groups count one less)
  EXPECT_GE(TvCount(agg, ": 8 switches</text>"), 30u) << agg.substr(0, 3000);
  EXPECT_GE(TvCount(agg, ": 64 hosts</text>"), 15u);
  EXPECT_TRUE(std::regex_search(agg, std::regex(">pod 16: (8|7) switches</text>")));
  EXPECT_NE(agg.find(">top: 64 switches</text>"), std::string::npos);
  // Both unhealthy cables drawn on their own lines, their ends as named boxes.
  const json& d = (*topo)["links"];
  for (size_t i : {sw_sw, host}) {
    const std::string an = TvName(a.nodes, d[i]["a"]), bn = TvName(a.nodes, d[i]["b"]);
    const std::string title = fmt::format("{} port {} - {} port {}: ", an,
                                          d[i]["a_port"].get<int>(), bn, d[i]["b_port"].get<int>());
    EXPECT_EQ(TvCableClass(agg, title), i == sw_sw ? "cable errors" : "cable degraded") << title;
    EXPECT_NE(agg.find(">" + an + "</text>"), std::string::npos) << an;
    EXPECT_NE(agg.find(">" + bn + "</text>"), std::string::npos) << bn;
  }
  EXPECT_EQ(TvCount(agg, "<line class=\"cable "), 2u) << "only the unhealthy cables alone";
  EXPECT_NE(agg.find("unhealthy cables (2):"), std::string::npos);
  // The full view at this size groups the hosts per leaf, each box counting them.
  EXPECT_NE(full.find(">8 hosts</text>"), std::string::npos);
  EXPECT_TRUE(std::regex_search(full, std::regex("<title>8 hosts on [^:<]+:\n")));
}

// One page: the picture, its pan and zoom script, the health and links tables, every cell
// escaped, nothing fetched from elsewhere.
TEST(TopologyPictureTest, TheHtmlPageHoldsThePictureAndTheTablesAndNothingExternal) {
  TvAnswers a = TvFabric(FatTree2(4));
  a.nodes["nodes"][0]["name"] = "<script>alert(1)</script>";
  for (json& l : a.links["links"])
    for (const char* side : {"a", "b"})
      if (l[side]["guid"] == a.nodes["nodes"][0]["guid"])
        l[side]["name"] = a.nodes["nodes"][0]["name"];
  a.links["links"][0]["errors"]["a"] = {{"symbol_errors", 3}};
  json health{{"healthy", false},
              {"perfmgr", {{"enabled", true}}},
              {"cables",
               json::array({{{"a", a.links["links"][1]["a"]},
                             {"b", a.links["links"][1]["b"]},
                             {"findings", json::array({{{"rule", "link_downed"},
                                                        {"id", "SM-PERF-003"},
                                                        {"at", a.links["links"][1]["a"]},
                                                        {"delta", 2},
                                                        {"value", 2},
                                                        {"threshold", 1}}})}}})}};
  auto topo = BuildTopology(a.nodes["nodes"], a.links["links"], health);
  ASSERT_TRUE(topo.ok());
  const std::string html = TopologyHtml(*topo, HealthTable(health), LinksTable(a.links));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(html.find("<g id=\"legend\""), std::string::npos);
  EXPECT_NE(html.find("<table id=\"health-table\">"), std::string::npos);
  EXPECT_NE(html.find("<table id=\"links-table\">"), std::string::npos);
  EXPECT_NE(html.find("id=\"zoom-in\""), std::string::npos);
  EXPECT_NE(html.find("link_downed +2"), std::string::npos) << "the health finding listed";
  EXPECT_NE(html.find("<tr class=\"unhealthy\"><td>"), std::string::npos);
  EXPECT_EQ(TvCount(html, "<script"), 2u) << "a name became a script";
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  for (const char* external : {" src=", " href=", "<link", "url(", "@import", "https:"})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  EXPECT_EQ(TvCount(html, "http:"), 1u) << "only the SVG namespace";
  // The links table puts the unhealthy cables first.
  const size_t table = html.find("<table id=\"links-table\">");
  EXPECT_LT(html.find("<tr class=\"unhealthy\">", table), html.find("<tr><td>", table));
}

}  // namespace
}  // namespace ibsm::tools
