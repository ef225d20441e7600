#include "tools/ctl_commands.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "base/clock.h"
#include "fabric/generators.h"
#include "ha/state_store.h"
#include "sm/record/control_answers.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/record/control_answers.h"
#include "sm/sweep/subnet_manager.h"
#include "tools/topology_view.h"

namespace ibsm::tools {
namespace {

using nlohmann::json;

TEST(CtlCommandsTest, AlignedTablePadsColumnsAndRightAlignsNumbers) {
  std::string t = AlignedTable({"NAME", "LID"}, {{"leaf-1", "7"}, {"a", "123"}});
  EXPECT_EQ(t, "NAME    LID\nleaf-1    7\na       123\n");
}

// resweep --wait against a scripted daemon: a sweep (7) runs when it asks, so the one it
// queued is 8; it waits through 7's end and 8's progress and stops when 8 is done.
// A NodeDescription is whatever a host's root wrote: ESC sequences (clear screen, set the
// window title), C1 CSI, line breaks. A table cell shows them as \xNN text.
TEST(CtlCommandsTest, TableCellsNeverCarryTerminalControls) {
  const std::string hostile = "h\x1b[2J\x1b]0;pwn\x07\n\xc2\x9b" "31m\r\x7f caf\xc3\xa9";
  const std::string cell = Cell(nlohmann::json(hostile));
  for (unsigned char c : cell) {
    EXPECT_FALSE(c < 0x20 || c == 0x7f) << "control byte " << int(c) << " in " << cell;
  }
  EXPECT_EQ(cell.find("\xc2\x9b"), std::string::npos) << "C1 CSI escaped too";
  EXPECT_NE(cell.find("caf\xc3\xa9"), std::string::npos) << "printable UTF-8 kept";
  EXPECT_NE(cell.find("\\x1b[2J"), std::string::npos) << cell;
  const std::string table = AlignedTable({"NAME"}, {{cell}});
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2) << "one line per row";
}

TEST(CtlCommandsTest, ResweepWaitWaitsForTheSweepItQueuedNotTheOneRunning) {
  std::vector<json> statuses = {
      {{"sweep_running", {{"number", 7}, {"elapsed_s", 1.5}, {"smps", 900}, {"nodes", 0}}},
       {"last_sweep", {{"number", 6}}}},
      {{"last_sweep", {{"number", 7}}}, {"subnet_up", true}},
      {{"sweep_running", {{"number", 8}, {"elapsed_s", 0.25}, {"smps", 4562}, {"nodes", 208}}},
       {"last_sweep", {{"number", 7}}}},
      {{"last_sweep", {{"number", 8}, {"duration_s", 0.5}, {"smps", 4562}, {"smps_failed", 0},
                       {"lft_blocks_sent", 0}}},
       {"counts", {{"nodes", 208}}},
       {"subnet_up", true}},
  };
  size_t next = 0;
  std::vector<std::string> asked;
  CtlCall call = [&](const char* cmd, const json&) -> Result<json> {
    asked.push_back(cmd);
    if (std::string(cmd) == "resweep") return json{{"queued", true}};
    if (next >= statuses.size()) return Unavailable("asked too often");
    return statuses[next++];
  };
  EXPECT_EQ(RunResweepWait(call, 30, false, false), 0);
  EXPECT_EQ(next, statuses.size()) << "it did not stop at sweep 7";
  ASSERT_GE(asked.size(), 2u);
  EXPECT_EQ(asked[1], "resweep");
  EXPECT_EQ(SweepProgressLine(statuses[2]), "heavy sweep 8: 0.2 s, 4562 SMPs, 208 nodes");
  EXPECT_EQ(SweepProgressLine(statuses[0]), "heavy sweep 7: 1.5 s, 900 SMPs");
  EXPECT_EQ(SweepProgressLine(json::object()), "waiting for the heavy sweep to start");

  // A subnet that does not come up is exit status 3; a daemon gone is 2.
  statuses = {{{"last_sweep", {{"number", 1}}}}, {{"last_sweep", {{"number", 2}}}, {"subnet_up", false}}};
  next = 0;
  EXPECT_EQ(RunResweepWait(call, 30, false, false), 3);
  next = statuses.size();
  EXPECT_EQ(RunResweepWait(call, 30, false, false), 2);
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
  EXPECT_FALSE(FindCtlCommand("topo")->make_args({"--view", "tiny"}).ok());
  auto topo = FindCtlCommand("topo")->make_args({"--format", "html", "--view", "aggregate"});
  ASSERT_TRUE(topo.ok());
  EXPECT_EQ((*topo)["format"], "html");
  EXPECT_EQ((*topo)["view"], "aggregate");
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
  EXPECT_NE(dot.find("\"0xs\" -- \"0xl\" [color=\"#d62728\" style=dashed penwidth=2]"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("\"0xc\" -- \"0xs\" [color=\"#999999\" style=dotted penwidth=2]"),
            std::string::npos)
      << dot;
  std::string svg = TopologySvg(*topo);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("stroke=\"#d62728\""), std::string::npos);
  EXPECT_NE(svg.find("n0xl port 2 - n0xs port 1: degraded\ndegraded: width 1x of 4x</title>"),
            std::string::npos)
      << svg;
  EXPECT_FALSE(BuildTopology(nodes, json::array({{{"a", end("0xh", 1)}, {"b", end("0xq", 1)}}})).ok())
      << "a cable to a node nobody listed";
  // A cable whose error counters moved within the health window is never drawn "ok".
  links[0]["errors"] = {{"a", json::object()}, {"b", {{"symbol_errors", 500}}}};
  topo = BuildTopology(nodes, links);
  ASSERT_TRUE(topo.ok());
  EXPECT_EQ((*topo)["links"][0]["health"], "errors") << topo->dump();
  dot = TopologyDot(*topo);
  EXPECT_NE(dot.find("\"0xl\" -- \"0xh\" [color=\"#ff7f0e\" style=bold penwidth=2]"),
            std::string::npos)
      << dot;
  svg = TopologySvg(*topo);
  EXPECT_NE(svg.find("n0xh port 1 - n0xl port 1: errors\nb end: symbol_errors +500 in the health "
                     "window</title>"),
            std::string::npos)
      << svg;
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
  // status and ha say when the file was written and that no daemon was asked; what the file
  // does not hold reads "not recorded", not "-" or nothing.
  EXPECT_NE(text.find(", last written 20"), std::string::npos) << text;
  EXPECT_NE(text.find("SM state:          STANDBY (as last recorded)"), std::string::npos) << text;
  {
    SystemClock clock;
    auto store = ha::StateStore::Open(path, clock);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->UpsertPeer({Guid{0x0002c90300000011}, 5, 3, 1'700'000'000'000'000, true}).ok());
    ASSERT_TRUE((*store)->UpsertPeer({Guid{0x0002c90300000021}, 2, 2, 1'700'000'000'000'000, true}).ok());
    ASSERT_TRUE((*store)
                    ->SetValue(sm::kPeersNotAnsweringKey,
                               R"({"0x0002c90300000011": {"since_us": 1700000012000000, "misses": 2,)"
                               R"( "last_answer_us": 1700000011000000, "why": "timed out"}})")
                    .ok());
  }
  auto ha = CtlFromStateFile(path, "ha", json::object());
  ASSERT_TRUE(ha.ok()) << ha.status().ToString();
  std::string ha_text = FindCtlCommand("ha")->format(*ha);
  EXPECT_NE(ha_text.find("from state file " + path + ", last written 20"), std::string::npos) << ha_text;
  EXPECT_NE(ha_text.find("this SM: STANDBY, port GUID not recorded, priority not recorded\n"),
            std::string::npos)
      << ha_text;
  EXPECT_NE(ha_text.find("0x0002c90300000011  NOT ANSWERING since 2023-11-14 22:13:32 UTC (2 "
                         "missed; was MASTER)         5  2023-11-14 22:13:31"),
            std::string::npos)
      << ha_text;
  EXPECT_NE(ha_text.find("0x0002c90300000021  STANDBY"), std::string::npos) << ha_text;
  EXPECT_EQ(ha_text.find("MASTER   "), std::string::npos) << "the dead master is not MASTER\n" << ha_text;
  EXPECT_NE(ha_text.find("counters: not recorded\n"), std::string::npos) << ha_text;
  EXPECT_EQ(ha_text.find(" - "), std::string::npos) << ha_text;
  // events beyond the limit are counted, not silently cut.
  auto limited = CtlFromStateFile(path, "events", json{{"limit", 0}});
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ((*limited)["more"], 1);
  EXPECT_NE(FindCtlCommand("events")->format(*limited).find("0 events, newest first; 1 more not "
                                                            "shown (--limit N, --since AGE)"),
            std::string::npos)
      << FindCtlCommand("events")->format(*limited);
  auto route = CtlFromStateFile(path, "route", json::object());
  ASSERT_FALSE(route.ok());
  EXPECT_NE(route.status().message().find("needs a running daemon"), std::string::npos);
  EXPECT_FALSE(CtlFromStateFile(std::string(tmpl) + "/missing.db", "status", json::object()).ok());
  std::filesystem::remove_all(tmpl);
}

// A state file in a fresh directory, removed with the test.
class CtlStateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ibsm-ctlsnap-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/state.db";
    clock_.Advance(std::chrono::seconds(1'764'484'800));  // 2025-11-30 06:40:00 UTC
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<ha::StateStore> OpenWriter() {
    auto s = ha::StateStore::Open(path_, clock_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::string dir_;
  std::string path_;
  ManualClock clock_;
};

json End(const std::string& guid, const std::string& name, int port) {
  return {{"guid", guid}, {"name", name}, {"description", name}, {"port", port}, {"lid", 1}};
}

TEST_F(CtlStateFileTest, NodesLinksAndHealthAreTheDaemonsLastAnswersMarkedWithWhenAndWhere) {
  json nodes{{"nodes", json::array({{{"guid", "0x0000000000000011"}, {"name", "leaf-1"},
                                     {"description", "leaf-1"}, {"kind", "SW"},
                                     {"lids", json::array({1})}, {"ports", 36},
                                     {"cabled_ports", 2}, {"vendor_id", 713},
                                     {"device_id", 1}}})}};
  json ok_link{{"a", End("0x11", "leaf-1", 1)}, {"b", End("0x21", "node-1", 1)},
               {"width", "4x"}, {"speed", "HDR"}, {"state", "ACTIVE"}, {"degraded", false},
               {"errors", {{"a", json::object()}, {"b", json::object()}}}};
  json bad_link = ok_link;
  bad_link["b"] = End("0x22", "node-2", 1);
  bad_link["degraded"] = "width 1x of 4x";
  json erring_link = ok_link;
  erring_link["b"] = End("0x23", "node-3", 1);
  erring_link["errors"]["b"] = {{"symbol_errors", 500}};
  json links{{"links", json::array({ok_link, bad_link, erring_link})},
             {"degraded", 1},
             {"perfmgr_sweep", 7}};
  const int64_t sweep_end_us = clock_.UnixMicros() - 2'000'000;
  json finding{{"rule", "symbol_errors"}, {"delta", 500}, {"value", 500}, {"threshold", 10},
               {"at", End("0x23", "node-3", 1)}};
  json cable{{"a", End("0x11", "leaf-1", 3)}, {"b", End("0x23", "node-3", 1)},
             {"findings", json::array({finding})}};
  // Two quiet PerfMgr sweeps later: health rewritten, links (unchanged) not.
  json health{{"perfmgr", {{"enabled", true}, {"sweep", 9}, {"ports", 6}, {"sweep_time_s", 180},
                           {"counters", {{"queries_sent", 6}, {"timeouts", 0}}},
                           {"last_sweep_end_us", sweep_end_us}}},
              {"healthy", false},
              {"cables", json::array({cable})}};
  {
    auto store = OpenWriter();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->SaveSnapshot(ha::kSnapshotNodes, nodes.dump()).ok());
    ASSERT_TRUE(store->SaveSnapshot(ha::kSnapshotLinks, links.dump()).ok());
    ASSERT_TRUE(store->SaveSnapshot(ha::kSnapshotHealth, health.dump()).ok());
  }
  const int64_t written_us = clock_.UnixMicros();
  const std::string source = "state file " + path_;

  auto n = CtlFromStateFile(path_, "nodes", json::object());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  json expected = nodes;
  expected["as_of_us"] = written_us;
  expected["source"] = source;
  EXPECT_EQ(*n, expected);
  std::string text = FindCtlCommand("nodes")->format(*n);
  EXPECT_EQ(text.rfind("from " + source + " as of 2025-11-30 06:40:00 UTC", 0), 0u) << text;
  EXPECT_NE(text.find("leaf-1"), std::string::npos) << text;

  auto all = CtlFromStateFile(path_, "links", json::object());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ((*all)["links"].size(), 3u);
  EXPECT_EQ((*all)["as_of_us"], written_us);
  // The daemon's filters, on the stored unfiltered answer.
  const CtlCommand* links_cmd = FindCtlCommand("links");
  auto degraded = CtlFromStateFile(path_, "links", *links_cmd->make_args({"--degraded"}));
  ASSERT_TRUE(degraded.ok());
  ASSERT_EQ((*degraded)["links"].size(), 1u);
  EXPECT_EQ((*degraded)["links"][0]["b"]["name"], "node-2");
  EXPECT_EQ((*degraded)["degraded"], 1) << "the count is of every link, as the daemon gives it";
  auto errors = CtlFromStateFile(path_, "links", *links_cmd->make_args({"--errors"}));
  ASSERT_TRUE(errors.ok());
  ASSERT_EQ((*errors)["links"].size(), 1u);
  EXPECT_EQ((*errors)["links"][0]["b"]["name"], "node-3");
  text = FindCtlCommand("links")->format(*errors);
  EXPECT_NE(text.find("ERRORS: b: symbol_errors +500"), std::string::npos) << text;
  EXPECT_NE(text.find("1 with errors in the health window up to PerfMgr sweep 9"),
            std::string::npos)
      << text;

  auto h = CtlFromStateFile(path_, "health", json::object());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  {
    // A finding of the health window: when first and last seen, in how many sweeps, summed.
    json windowed = finding;
    windowed["sweeps"] = 3;
    windowed["total_delta"] = 1500;
    windowed["first_seen_us"] = int64_t{1'764'484'000'000'000};  // 06:26:40
    windowed["last_seen_us"] = int64_t{1'764'484'780'000'000};   // 06:39:40
    json wh = health;
    wh["perfmgr"]["window_s"] = 3600;
    wh["cables"][0]["findings"] = json::array({windowed});
    const std::string wt = FindCtlCommand("health")->format(wh);
    EXPECT_NE(wt.find("findings of the last 3600 s of PerfMgr sweeps\n"), std::string::npos) << wt;
    EXPECT_NE(wt.find("symbol_errors +1500 at node-3 port 1 (now 500, threshold 10); seen in 3 "
                      "sweeps, first 06:26:40 last 06:39:40 UTC"),
              std::string::npos)
        << wt;
    // --window keeps what was last seen within it.
    auto narrow = sm::HealthSince(wh, int64_t{1'764'484'790'000'000});
    EXPECT_EQ(narrow["healthy"], true);
    EXPECT_NE(FindCtlCommand("health")->format(narrow).find("healthy: no findings in the window"),
              std::string::npos);
    EXPECT_EQ(sm::HealthSince(wh, int64_t{1'764'484'700'000'000})["cables"].size(), 1u);
    EXPECT_EQ(FindCtlCommand("health")->make_args({"--window", "10m"})->value("window_s", 0), 600);
    EXPECT_FALSE(FindCtlCommand("health")->make_args({"--window", "soon"}).ok());
  }
  EXPECT_FALSE((*h)["perfmgr"].contains("last_sweep_end_us"));
  EXPECT_GT((*h)["perfmgr"]["last_sweep_age_s"].get<double>(), 1.0);
  EXPECT_EQ((*h)["cables"], health["cables"]);
  text = FindCtlCommand("health")->format(*h);
  EXPECT_NE(text.find("symbol_errors +500 at node-3 port 1"), std::string::npos) << text;
  EXPECT_NE(text.find("as of 2025-11-30 06:40:00 UTC"), std::string::npos) << text;
}

TEST_F(CtlStateFileTest, HealthHistoryListsTheFindingsNewestFirstWithBothEnds) {
  {
    auto store = OpenWriter();
    ASSERT_NE(store, nullptr);
    const int64_t now = clock_.UnixMicros();
    ASSERT_TRUE(store
                    ->RecordEvents(
                        {{0, now - 7200'000'000, std::string(ha::kEventHealth),
                          ha::EventSeverity::kWarning, Guid{0x11}, PortNum{3},
                          "SM-PERF-001 symbol errors +500 in one PerfMgr sweep (counter now 500, "
                          "threshold 10) on leaf-1 port 3; other end node-3 port 1"},
                         {0, now - 60'000'000, std::string(ha::kEventTrap),
                          ha::EventSeverity::kInfo, std::nullopt, std::nullopt, "trap 128"},
                         {0, now - 30'000'000, std::string(ha::kEventHealth),
                          ha::EventSeverity::kWarning, Guid{0x22}, PortNum{1},
                          "SM-PERF-003 link downed +2 in one PerfMgr sweep (counter now 2, "
                          "threshold 1) on node-2 port 1; other end leaf-1 port 4"}})
                    .ok());
  }
  const CtlCommand* health = FindCtlCommand("health");
  auto args = health->make_args({"--history"});
  ASSERT_TRUE(args.ok());
  auto r = CtlFromStateFile(path_, "health", *args);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)["history"].size(), 2u) << r->dump(2);
  std::string text = health->format(*r);
  const size_t downed = text.find("link downed +2");
  const size_t symbol = text.find("symbol errors +500");
  ASSERT_NE(downed, std::string::npos) << text;
  ASSERT_NE(symbol, std::string::npos) << text;
  EXPECT_LT(downed, symbol) << "newest first\n" << text;
  EXPECT_NE(text.find("other end leaf-1 port 4"), std::string::npos) << text;
  EXPECT_NE(text.find("0x0000000000000022/1"), std::string::npos) << text;
  EXPECT_EQ(text.find("trap 128"), std::string::npos) << "only health findings\n" << text;
  // since_us (what --since AGE becomes) leaves out the older finding.
  auto recent = CtlFromStateFile(
      path_, "health", {{"history", true}, {"since_us", clock_.UnixMicros() - 3600'000'000}});
  ASSERT_TRUE(recent.ok());
  ASSERT_EQ((*recent)["history"].size(), 1u);
  EXPECT_EQ((*recent)["history"][0]["port"], 1);
  auto since = health->make_args({"--history", "--since", "10m", "--limit", "5"});
  ASSERT_TRUE(since.ok());
  EXPECT_GT((*since)["since_us"].get<int64_t>(), 0);
  EXPECT_EQ((*since)["limit"], 5);
  EXPECT_FALSE(health->make_args({"--since", "1h"}).ok()) << "--since belongs to --history";
  EXPECT_FALSE(health->make_args({"--history", "--bogus"}).ok());
}

TEST_F(CtlStateFileTest, AFileWithNoSnapshotYetSaysSoAndDaemonOnlyCommandsAreRefused) {
  { ASSERT_NE(OpenWriter(), nullptr); }  // migrated by an ibsmd that never swept
  for (const char* cmd : {"nodes", "links", "health"}) {
    auto r = CtlFromStateFile(path_, cmd, json::object());
    ASSERT_FALSE(r.ok()) << cmd;
    EXPECT_EQ(r.status().message().rfind(fmt::format("no {} snapshot in {}: written by an older "
                                                     "ibsmd or before its first sweep",
                                                     cmd, path_),
                                         0),
              0u)
        << r.status().message();
  }
  for (const char* cmd : {"route", "lft", "check", "resweep", "sharp", "log-level"}) {
    auto r = CtlFromStateFile(path_, cmd, json::object());
    ASSERT_FALSE(r.ok()) << cmd;
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find(fmt::format("'{}' needs a running daemon", cmd)),
              std::string::npos)
        << r.status().message();
  }
  // ibsmctl prints the reason and exits 2.
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunCtl({"--state-db", path_, "links"}), 2);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("no links snapshot in " + path_), std::string::npos) << err;
}

// The whole path: an SM sweeps the simulated fabric and writes its state file; ibsmctl reads
// the file with no daemon and gets what the control socket would have answered.
TEST_F(CtlStateFileTest, AfterASweepTheFileAnswersAsTheDaemonAndDrawsTheTopology) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Fabric fabric = std::move(*f);
  sim::Simulator sim(fabric);
  PortId at = kNoPort;
  for (NodeId n = 0; n < fabric.node_count() && at == kNoPort; ++n)
    if (!fabric.node(n).is_switch()) at = fabric.port_id(n, PortNum{1});
  boost::asio::io_context io;
  sim::SimTransport transport(io, sim, at);
  SystemClock clock;
  auto store = ha::StateStore::Open(path_, clock);
  ASSERT_TRUE(store.ok());
  sm::SubnetManagerOptions o;
  o.send.timeout = std::chrono::milliseconds(20);
  o.send.retries = 4;
  o.sweep_interval = std::chrono::seconds(0);
  sm::SubnetManager sm(io, transport, clock, store->get(), o);
  bool up = false;
  sm.Start([&](const sm::SweepStats& s) {
    up = s.subnet_up;
    io.stop();
  });
  io.run();
  ASSERT_TRUE(up);

  auto strip = [](json j) {
    j.erase("as_of_us");
    j.erase("source");
    return j;
  };
  auto nodes = CtlFromStateFile(path_, "nodes", json::object());
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_EQ(strip(*nodes), sm::NodesAnswer(*sm.fabric()));
  auto links = CtlFromStateFile(path_, "links", json::object());
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  EXPECT_EQ(strip(*links), sm::LinksAnswer(*sm.fabric(), sm.discovered(), nullptr));
  EXPECT_EQ((*links)["links"].size(), fabric.link_count());

  testing::internal::CaptureStdout();
  EXPECT_EQ(RunCtl({"--state-db", path_, "topo", "--format", "dot"}), 0);
  std::string dot = testing::internal::GetCapturedStdout();
  EXPECT_EQ(dot.rfind("graph", 0), 0u) << dot.substr(0, 200);
  for (NodeId n = 0; n < fabric.node_count(); ++n)
    EXPECT_NE(dot.find(sm::GuidText(fabric.node(n).guid)), std::string::npos)
        << "node " << n << " missing from\n" << dot.substr(0, 400);
  sm.Stop();
  transport.Close();
}

}  // namespace
}  // namespace ibsm::tools
