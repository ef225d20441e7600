#include "tools/ctl_commands.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "ha/state_store.h"
#include "tools/topology_view.h"

namespace ibsm::tools {
namespace {

using nlohmann::json;

TEST(CtlCommandsTest, AlignedTablePadsColumnsAndRightAlignsNumbers) {
  std::string t = AlignedTable({"NAME", "LID"}, {{"leaf-1", "7"}, {"a", "123"}});
  EXPECT_EQ(t, "NAME    LID\nleaf-1    7\na       123\n");
}

TEST(CtlCommandsTest, WordsBecomeArgsOrAUsageError) {
  const CtlCommand* route = FindCtlCommand("route");
  ASSERT_NE(route, nullptr);
  auto ok = route->make_args({"node-1 HCA-1", "17"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["from"], "node-1 HCA-1");
  EXPECT_EQ((*ok)["to"], "17");
  EXPECT_FALSE(route->make_args({"only-one"}).ok());
  EXPECT_FALSE(FindCtlCommand("links")->make_args({"--bogus"}).ok());
  EXPECT_FALSE(FindCtlCommand("check")->make_args({"--permutations", "x"}).ok());
  EXPECT_FALSE(FindCtlCommand("topo")->make_args({"--format", "png"}).ok());
  auto since = FindCtlCommand("events")->make_args({"--since", "2h", "--limit", "5"});
  ASSERT_TRUE(since.ok());
  EXPECT_EQ((*since)["limit"], 5);
  EXPECT_GT((*since)["since_us"].get<int64_t>(), 0);
  EXPECT_FALSE(FindCtlCommand("events")->make_args({"--since", "2 weeks"}).ok());
  EXPECT_EQ(FindCtlCommand("nonsense"), nullptr);
}

TEST(CtlCommandsTest, FormattersShowWhatTheDaemonSaid) {
  json route{{"from", {{"name", "h1"}, {"guid", "0x1"}, {"port", 1}}},
             {"to", {{"name", "h2"}, {"guid", "0x2"}, {"port", 1}}},
             {"dlid", 9},
             {"complete", false},
             {"problem", "switch s1 has no route to LID 9"},
             {"hops", json::array({{{"kind", "CA"}, {"guid", "0x1"}, {"name", "h1"}, {"in_port", nullptr}, {"out_port", 1}},
                                   {{"kind", "SW"}, {"guid", "0x3"}, {"name", "s1"}, {"in_port", 1}, {"out_port", nullptr}}})}};
  std::string text = FindCtlCommand("route")->format(route);
  EXPECT_NE(text.find("NOT DELIVERED: switch s1 has no route to LID 9"), std::string::npos) << text;
  EXPECT_NE(text.find("s1"), std::string::npos);
}

// A three-tier picture: hosts at the bottom, then leaves, spines, cores; the one degraded cable
// drawn red.
TEST(TopologyViewTest, TiersFollowTheHostsAndHealthColoursTheCables) {
  json nodes = json::array();
  auto node = [&](const std::string& g, const std::string& kind) {
    nodes.push_back({{"guid", g}, {"name", "n" + g}, {"kind", kind}});
  };
  node("0xc", "SW");  // core
  node("0xs", "SW");  // spine
  node("0xl", "SW");  // leaf
  node("0xh", "CA");
  auto end = [](const std::string& g, int port) { return json{{"guid", g}, {"port", port}}; };
  json links = json::array(
      {{{"a", end("0xh", 1)}, {"b", end("0xl", 1)}, {"state", "ACTIVE"}, {"degraded", false}},
       {{"a", end("0xl", 2)}, {"b", end("0xs", 1)}, {"state", "ACTIVE"}, {"degraded", "width 1x of 4x"}},
       {{"a", end("0xs", 2)}, {"b", end("0xc", 1)}, {"state", "INIT"}, {"degraded", false}}});
  auto topo = BuildTopology(nodes, links);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ((*topo)["tiers"], 3);
  std::map<std::string, int> tier;
  for (const auto& n : (*topo)["nodes"]) tier[n["guid"]] = n["tier"];
  EXPECT_EQ(tier["0xh"], -1);
  EXPECT_EQ(tier["0xl"], 0);
  EXPECT_EQ(tier["0xs"], 1);
  EXPECT_EQ(tier["0xc"], 2);
  std::string dot = TopologyDot(*topo);
  EXPECT_NE(dot.find("\"0xs\" -- \"0xl\" [color=\"#d62728\" penwidth=2]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"0xc\" -- \"0xs\" [color=\"#999999\" penwidth=2]"), std::string::npos) << dot;
  std::string svg = TopologySvg(*topo);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("stroke=\"#d62728\""), std::string::npos);
  EXPECT_NE(svg.find("n0xl port 2 - n0xs port 1: degraded</title>"), std::string::npos) << svg;
  EXPECT_FALSE(BuildTopology(nodes, json::array({{{"a", end("0xh", 1)}, {"b", end("0xq", 1)}}})).ok())
      << "a cable to a node nobody listed";
}

TEST(CtlCommandsTest, AStateFileAnswersStatusEventsAndHaWithoutADaemon) {
  char tmpl[] = "/tmp/ibsm-ctlstate-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/state.db";
  {
    SystemClock clock;
    auto store = ha::StateStore::Open(path, clock);
    ASSERT_TRUE(store.ok());
    ha::SweepRow row;
    row.started_us = 1'000'000;
    row.ended_us = 1'500'000;
    row.nodes = 12;
    row.switches = 4;
    row.cas = 8;
    row.links = 16;
    row.smps_sent = 321;
    row.engine = "ftree";
    row.outcome = "ok";
    ASSERT_TRUE((*store)->RecordSweep(row).ok());
    ASSERT_TRUE((*store)->SetValue("sm_state", "STANDBY").ok());
    ha::EventRow ev;
    ev.time_us = 2'000'000;
    ev.kind = "state_change";
    ev.message = "MASTER -> STANDBY: handover";
    ASSERT_TRUE((*store)->RecordEvent(ev).ok());
  }
  auto status = CtlFromStateFile(path, "status", json::object());
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ((*status)["state"], "STANDBY");
  EXPECT_EQ((*status)["engine"], "ftree");
  EXPECT_EQ((*status)["counts"]["switches"], 4);
  EXPECT_EQ((*status)["last_sweep"]["smps"], 321);
  std::string text = FindCtlCommand("status")->format(*status);
  EXPECT_NE(text.find("no daemon asked"), std::string::npos) << text;
  auto events = CtlFromStateFile(path, "events", json::object());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ((*events)["events"].size(), 1u);
  EXPECT_EQ((*events)["events"][0]["message"], "MASTER -> STANDBY: handover");
  EXPECT_TRUE(CtlFromStateFile(path, "ha", json::object()).ok());
  auto route = CtlFromStateFile(path, "route", json::object());
  ASSERT_FALSE(route.ok());
  EXPECT_NE(route.status().message().find("needs a running daemon"), std::string::npos);
  EXPECT_FALSE(CtlFromStateFile(std::string(tmpl) + "/missing.db", "status", json::object()).ok());
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace ibsm::tools
