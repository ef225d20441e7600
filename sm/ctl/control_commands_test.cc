#include "sm/ctl/control_commands.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "ha/memory_state_store.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/perf/perf_manager.h"
#include "sm/ctl/sm_metrics.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using nlohmann::json;

// One SM brought to SUBNET UP on the in-process simulator, with its control commands served
// on a socket in a fresh directory; requests go through ControlServer::Dispatch, exactly the
// path a socket line takes.
class ControlCommandsTest : public ::testing::Test {
 protected:
  void Bring(Fabric fabric) {
    fabric_ = std::make_unique<Fabric>(std::move(fabric));
    sim_ = std::make_unique<sim::Simulator>(*fabric_);
    PortId at = kNoPort;
    for (NodeId n = 0; n < fabric_->node_count() && at == kNoPort; ++n)
      if (!fabric_->node(n).is_switch()) at = fabric_->port_id(n, PortNum{1});
    transport_ = std::make_unique<sim::SimTransport>(io_, *sim_, at);
    char tmpl[] = "/tmp/ibsm-ctlcmd-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = std::make_unique<ha::MemoryStateStore>(clock_);  // the state file's twin
    SubnetManagerOptions o;
    o.send.timeout = std::chrono::milliseconds(20);
    o.send.retries = 4;
    o.sweep_interval = std::chrono::seconds(0);
    sm_ = std::make_unique<SubnetManager>(io_, *transport_, *sm_clock_, store_.get(), o);
    ControlServer::Options co;
    co.path = dir_ + "/ibsmd.sock";
    auto server = ControlServer::Start(io_, co);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ControlContext ctx;
    ctx.sm = sm_.get();
    ctx.store = store_.get();
    ctx.set_log_level = [this](spdlog::level::level_enum l) { level_ = l; };
    commands_ = std::make_unique<ControlCommands>(io_, *server_, ctx);
    // The callback outlives Bring (a resweep calls it again): it writes a member, not a local.
    sm_->Start([this](const SweepStats& s) {
      if (s.subnet_up) subnet_up_ = true;
      io_.stop();
    });
    io_.run();
    ASSERT_TRUE(subnet_up_);
  }
  void TearDown() override {
    commands_.reset();
    server_.reset();
    if (sm_) sm_->Stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // The reply line of one request, as a peer with `uid` would get it.
  json Ask(const json& request, uid_t uid = geteuid()) {
    std::optional<std::string> line;
    server_->Dispatch(request.dump(), uid, [&](std::string l) { line = std::move(l); });
    for (int i = 0; i < 600 && !line; ++i) {  // async commands answer through the io_context
      io_.restart();
      io_.run_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(line.has_value()) << request.dump();
    return line ? json::parse(*line) : json();
  }
  json Result(const std::string& cmd, json args = json::object()) {
    json r = Ask({{"cmd", cmd}, {"args", args}});
    EXPECT_EQ(r["ok"], true) << r.dump();
    return r["result"];
  }
  // A node's name as the SM knows it (from its NodeDescription).
  std::string NameOf(NodeKind kind, int skip = 0) const {
    const Fabric& f = *sm_->fabric();
    for (NodeId n = 0; n < f.node_count(); ++n)
      if (f.node(n).kind == kind && skip-- == 0) return f.node(n).description;
    return "";
  }

  boost::asio::io_context io_;
  SystemClock clock_;
  ManualClock manual_clock_;
  const Clock* sm_clock_ = &clock_;  // the SM's (a test may give it manual_clock_)
  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<sim::Simulator> sim_;
  std::unique_ptr<sim::SimTransport> transport_;
  std::unique_ptr<ha::MemoryStateStore> store_;
  std::unique_ptr<SubnetManager> sm_;
  std::unique_ptr<ControlServer> server_;
  std::unique_ptr<ControlCommands> commands_;
  std::string dir_;
  std::optional<spdlog::level::level_enum> level_;
  bool subnet_up_ = false;
};

TEST_F(ControlCommandsTest, StatusShowsTheMasterAndTheFabricItSwept) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  json s = Result("status");
  EXPECT_EQ(s["state"], "MASTER");
  EXPECT_EQ(s["subnet_up"], true);
  EXPECT_EQ(s["sm_lid"], 1);
  EXPECT_EQ(s["engine"], "ftree");
  EXPECT_EQ(s["engine_configured"], "ftree,updn") << "the default chain";
  EXPECT_EQ(s["counts"]["switches"], fabric_->switch_count());
  EXPECT_EQ(s["counts"]["cas"], fabric_->ca_count());
  EXPECT_EQ(s["counts"]["links"], fabric_->link_count());
  EXPECT_GT(s["last_sweep"]["smps"].get<uint64_t>(), 0u);
  json nodes = Result("nodes")["nodes"];
  EXPECT_EQ(nodes.size(), fabric_->node_count());
  std::set<uint64_t> lids;
  for (const auto& n : nodes)
    for (const auto& l : n["lids"]) EXPECT_TRUE(lids.insert(l.get<uint64_t>()).second) << l;
}

TEST_F(ControlCommandsTest, RouteFollowsTheProgrammedTablesHopByHop) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  // Hosts on different leaves: host, leaf, spine, leaf, host.
  const std::string a = NameOf(NodeKind::kCa, 0);
  const std::string b = NameOf(NodeKind::kCa, static_cast<int>(fabric_->ca_count()) - 1);
  json r = Result("route", {{"from", a}, {"to", b}});
  ASSERT_EQ(r["complete"], true) << r.dump(2);
  ASSERT_EQ(r["hops"].size(), 5u) << r.dump(2);
  EXPECT_EQ(r["hops"][0]["name"], a);
  EXPECT_EQ(r["hops"][4]["name"], b);
  // Each hop's out port is the table entry the simulator holds for the destination LID.
  uint16_t dlid = r["dlid"];
  for (size_t i = 1; i + 1 < r["hops"].size(); ++i) {
    const json& h = r["hops"][i];
    auto node = fabric_->FindNode(Guid{std::stoull(h["guid"].get<std::string>(), nullptr, 16)});
    ASSERT_TRUE(node);
    EXPECT_EQ(h["out_port"], sim_->lft_entry(*node, Lid{dlid}));
  }
  // The same route asked by LID and by GUID.
  json by_lid = Result("route", {{"from", r["from"]["lid"]}, {"to", std::to_string(dlid)}});
  EXPECT_EQ(by_lid["hops"], r["hops"]);
  json by_guid = Result("route", {{"from", r["hops"][0]["guid"]}, {"to", r["hops"][4]["guid"]}});
  EXPECT_EQ(by_guid["hops"], r["hops"]);
}

TEST_F(ControlCommandsTest, UnknownEndpointsAndBadArgumentsAreBadRequests) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  json r = Ask({{"cmd", "route"}, {"args", {{"from", "no-such-node"}, {"to", "1"}}}});
  EXPECT_EQ(r["ok"], false);
  EXPECT_EQ(r["code"], "bad_request");
  EXPECT_NE(r["error"].get<std::string>().find("no-such-node"), std::string::npos);
  EXPECT_EQ(Ask({{"cmd", "route"}, {"args", {{"from", "1"}, {"to", "49151"}}}})["code"],
            "bad_request");
  EXPECT_EQ(Ask({{"cmd", "lft"}, {"args", {{"switch", NameOf(NodeKind::kCa)}}}})["code"],
            "bad_request");
  EXPECT_EQ(Ask({{"cmd", "links"}, {"args", {{"degraded", "yes"}}}})["code"], "bad_request");
  EXPECT_EQ(Ask({{"cmd", "events"}, {"args", {{"limit", -3}}}})["code"], "bad_request");
  EXPECT_EQ(Ask({{"cmd", "log-level"}, {"args", {{"level", "loud"}}}})["code"], "bad_request");
  EXPECT_FALSE(level_.has_value());
  EXPECT_EQ(Result("status")["state"], "MASTER") << "nothing was lost";
}

// The names an operator types, on a fabric as discovery sees it (no names, only
// NodeDescriptions) with the topology file the daemon runs on beside it.
class ResolveEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = FatTree2(8);
    ASSERT_TRUE(f.ok());
    topology_ = std::make_unique<Fabric>(*f);
    discovered_ = std::make_unique<Fabric>(std::move(*f));
    for (NodeId n = 0; n < discovered_->node_count(); ++n) discovered_->mutable_node(n).name.clear();
    host1_ = *discovered_->FindNode(topology_->node(*topology_->FindNodeByName("node-0001/hca1")).guid);
  }
  // What ResolveEndpoint answers as an operator reads it: the node's GUID, or the error.
  std::string Resolve(const std::string& what, bool with_topology = true) {
    auto p = ResolveEndpoint(*discovered_, what, with_topology ? topology_.get() : nullptr);
    if (!p.ok()) return p.status().message();
    return GuidText(discovered_->node(discovered_->port(*p).node).guid);
  }
  std::string GuidOf(NodeId n) const { return GuidText(discovered_->node(n).guid); }

  std::unique_ptr<Fabric> topology_, discovered_;
  NodeId host1_ = 0;
};

TEST_F(ResolveEndpointTest, TopologyNamesDescriptionsGuidsAndUnambiguousPrefixesNameANode) {
  const std::string host1 = GuidOf(host1_);
  EXPECT_EQ(Resolve("node-0001/hca1"), host1) << "the topology file's name";
  EXPECT_EQ(Resolve("node-0001 HCA-1"), host1) << "the NodeDescription";
  EXPECT_EQ(Resolve("node-0001 HCA-1", false), host1) << "on ibsim: the description alone";
  EXPECT_EQ(Resolve("node-0001"), host1) << "a prefix only one node has";
  EXPECT_EQ(Resolve("node-0001", false), host1);
  const uint64_t guid = discovered_->node(host1_).guid.value();
  const uint64_t port_guid = discovered_->port(discovered_->port_id(host1_, PortNum{1})).guid.value();
  EXPECT_EQ(Resolve(fmt::format("{:#018x}", guid)), host1);
  EXPECT_EQ(Resolve(fmt::format("{:016x}", guid)), host1) << "a GUID without 0x";
  EXPECT_EQ(Resolve(fmt::format("{:x}", port_guid)), host1) << "as ibnetdiscover prints it";
  EXPECT_EQ(Resolve("spine-01"), GuidOf(*topology_->FindNodeByName("spine-01")));
}

TEST_F(ResolveEndpointTest, AnAmbiguousNameListsTheCandidates) {
  std::string r = Resolve("node-000");
  EXPECT_EQ(r.rfind("'node-000' is ambiguous: 9 nodes match: node-0001/hca1 (" + GuidOf(host1_) +
                        "), node-0002/hca1 (",
                    0),
            0u)
      << r;
  // Many candidates: ten shown, the rest counted.
  r = Resolve("node-", false);
  EXPECT_NE(r.find("is ambiguous: 32 nodes match: "), std::string::npos) << r;
  EXPECT_NE(r.find(" and 22 more"), std::string::npos) << r;
  // One NodeDescription on two nodes (every host of one model has the same one) is ambiguous
  // even when typed in full.
  NodeId other = *discovered_->FindNode(topology_->node(*topology_->FindNodeByName("node-0002/hca1")).guid);
  discovered_->mutable_node(other).description = "node-0001 HCA-1";
  r = Resolve("node-0001 HCA-1", false);
  EXPECT_NE(r.find("'node-0001 HCA-1' is ambiguous: 2 nodes match"), std::string::npos) << r;
  EXPECT_EQ(Resolve("node-0001/hca1"), GuidOf(host1_)) << "the topology name still tells them apart";
}

TEST_F(ResolveEndpointTest, WhatNamesNoNodeSaysSoWithoutEchoingControlBytes) {
  EXPECT_EQ(Resolve("nowhere"), "'nowhere' is no LID, GUID, node name or description in the fabric");
  EXPECT_EQ(Resolve("no\x1b[2Jwhere").find('\x1b'), std::string::npos);
  EXPECT_EQ(Resolve("0"), "LID 0 is not unicast");
  EXPECT_EQ(Resolve("0xdeadbeef00"), "no port or node has GUID 0xdeadbeef00");
  EXPECT_EQ(Resolve("12345"), "no port has LID 12345");
  EXPECT_EQ(Resolve(""), "an empty endpoint");
  EXPECT_EQ(Resolve("0x" + std::string(40, 'f')),
            "'0x" + std::string(40, 'f') + "' is no LID, GUID, node name or description in the fabric");
}

// links and nodes are rendered off the io thread (at 3-tier k=32 the links answer is 11.8 MB):
// the io thread answers status, and would handle a trap, while one renders.
TEST_F(ControlCommandsTest, LinksAndNodesRenderOffTheIoThread) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  const json expected_links = Result("links");
  for (const std::string cmd : {"links", "nodes"}) {
    std::optional<std::string> big, status;
    server_->Dispatch(json{{"cmd", cmd}, {"id", 7}}.dump(), geteuid(),
                      [&](std::string l) { big = std::move(l); });
    server_->Dispatch(json{{"cmd", "status"}}.dump(), geteuid(),
                      [&](std::string l) { status = std::move(l); });
    EXPECT_FALSE(big.has_value()) << cmd << " was answered on the io thread";
    ASSERT_TRUE(status.has_value()) << "status waited for " << cmd;
    EXPECT_EQ(json::parse(*status)["ok"], true);
    for (int i = 0; i < 600 && !big; ++i) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(big.has_value());
    const json r = json::parse(*big);
    EXPECT_EQ(r["ok"], true);
    EXPECT_EQ(r["id"], 7);
    if (cmd == "links") {
      EXPECT_EQ(r["result"], expected_links);
    } else {
      EXPECT_EQ(r["result"]["nodes"].size(), fabric_->node_count());
    }
  }
}

// links, health and the metrics (and nodes) answer from the snapshot the last sweep published,
// never from the model a running sweep is changing: after a sweep's discovery found a cable
// gone, and before that sweep has routed and programmed anything, they still show the fabric
// as the last sweep left it; once the sweep ends, its own.
TEST_F(ControlCommandsTest, DuringASweepLinksHealthAndMetricsShowTheLastSweepsFabric) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  const size_t links = fabric_->link_count();
  const json links_before = Result("links");
  ASSERT_EQ(links_before["links"].size(), links);
  const PortId cut = testutil::FirstSwitchCable(*fabric_);  // a leaf's first cable up
  ASSERT_NE(cut, kNoPort);
  ASSERT_TRUE(sim_->LinkDown(cut).ok());
  subnet_up_ = false;
  sm_->RequestHeavySweep("test: a cable went down");
  io_.restart();
  for (int i = 0; i < 1000000 && sm_->fabric()->link_count() == links && !subnet_up_; ++i)
    io_.run_one();
  ASSERT_EQ(sm_->fabric()->link_count(), links - 1) << "the sweep's discovery did not end";
  ASSERT_TRUE(sm_->sweep_in_progress());
  ASSERT_FALSE(subnet_up_);

  // All asked before the io thread runs again (which would let the sweep go on).
  const std::string text = RenderSmMetrics(*sm_, server_.get(), nullptr);
  EXPECT_NE(text.find(fmt::format("\nibsm_links {}\n", links)), std::string::npos) << text;
  std::optional<std::string> links_now, health_now;
  server_->Dispatch(json{{"cmd", "links"}}.dump(), geteuid(),
                    [&](std::string l) { links_now = std::move(l); });
  server_->Dispatch(json{{"cmd", "health"}}.dump(), geteuid(),
                    [&](std::string l) { health_now = std::move(l); });
  ASSERT_TRUE(health_now.has_value());  // answered on the io thread, at once
  EXPECT_EQ(json::parse(*health_now)["ok"], true) << *health_now;
  for (int i = 0; i < 600 && !links_now; ++i) {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(links_now.has_value());
  EXPECT_EQ(json::parse(*links_now)["result"], links_before);

  for (int i = 0; i < 600 && !subnet_up_; ++i) {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(subnet_up_);
  EXPECT_EQ(Result("links")["links"].size(), links - 1);
  const std::string after = RenderSmMetrics(*sm_, server_.get(), nullptr);
  EXPECT_NE(after.find(fmt::format("\nibsm_links {}\n", links - 1)), std::string::npos) << after;
}

TEST_F(ControlCommandsTest, LftListsAnEntryForEveryLid) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  const std::string sw = NameOf(NodeKind::kSwitch);
  json r = Result("lft", {{"switch", sw}});
  size_t lids = 0;
  json nodes = Result("nodes");
  for (const auto& n : nodes["nodes"]) lids += n["lids"].size();
  EXPECT_EQ(r["entries"].size(), lids);
  auto node = fabric_->FindNode(Guid{std::stoull(r["switch"]["guid"].get<std::string>(), nullptr, 16)});
  ASSERT_TRUE(node);
  for (const auto& e : r["entries"])
    EXPECT_EQ(e["port"], sim_->lft_entry(*node, Lid{e["lid"].get<uint16_t>()})) << e.dump();
}

// After a switch left and routing then failed, the switches keep the last good tables,
// routed on the model before, where every switch of a higher GUID had another NodeId: lft
// answers for each switch the table that switch holds.
TEST_F(ControlCommandsTest, AfterARoutingFailureLftShowsWhatEachSwitchHolds) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  const NodeId spine = testutil::LowestGuidSwitchNamed(*fabric_, "-spine-");
  ASSERT_NE(spine, kNoNode);
  SubnetManagerOptions o = sm_->options();
  o.routing_engine = "no_fallback";  // nothing may route
  o.incremental_repair = false;
  sm_->Reconfigure(o);
  ASSERT_TRUE(sim_->RemoveNode(spine).ok());
  sm_->RequestHeavySweep("test: a spine left");
  io_.restart();
  io_.run_for(std::chrono::seconds(5));
  ASSERT_GE(sm_->counters().routing_failures, 1u);
  size_t switches = 0;
  for (NodeId n = 0; n < fabric_->node_count(); ++n) {
    if (!fabric_->node(n).is_switch() || n == spine) continue;
    json r = Result("lft", {{"switch", fabric_->node(n).description}});
    ASSERT_FALSE(r["entries"].empty()) << fabric_->node(n).description;
    for (const auto& e : r["entries"])
      ASSERT_EQ(e["port"], sim_->lft_entry(n, Lid{e["lid"].get<uint16_t>()}))
          << fabric_->node(n).description << " " << e.dump();
    ++switches;
  }
  EXPECT_EQ(switches, fabric_->switch_count() - 1);
}

TEST_F(ControlCommandsTest, ADegradedCableIsNamedWithBothEnds) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  // One host cable trained at 1x of the 4x both ends support.
  PortId host = kNoPort;
  for (NodeId n = 0; n < f->node_count() && host == kNoPort; ++n)
    if (!f->node(n).is_switch()) host = f->port_id(n, PortNum{1});
  f->mutable_port(host).width = LinkWidth::k1x;
  f->mutable_port(f->port(host).peer).width = LinkWidth::k1x;
  const Guid host_guid = f->node(f->port(host).node).guid;
  Bring(std::move(*f));
  json all = Result("links");
  EXPECT_EQ(all["links"].size(), fabric_->link_count());
  EXPECT_EQ(all["degraded"], 1);
  json bad = Result("links", {{"degraded", true}});
  ASSERT_EQ(bad["links"].size(), 1u);
  const json& l = bad["links"][0];
  const std::string g = GuidText(host_guid);
  EXPECT_TRUE(l["a"]["guid"] == g || l["b"]["guid"] == g) << l.dump();
  EXPECT_EQ(l["degraded"], "width 1x of 4x");
}

TEST_F(ControlCommandsTest, HealthWithoutThePerfMgrNamesTheDegradedCableByBothEnds) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  PortId host = kNoPort;
  for (NodeId n = 0; n < f->node_count() && host == kNoPort; ++n)
    if (!f->node(n).is_switch()) host = f->port_id(n, PortNum{1});
  f->mutable_port(host).width = LinkWidth::k1x;
  f->mutable_port(f->port(host).peer).width = LinkWidth::k1x;
  const Guid host_guid = f->node(f->port(host).node).guid;
  const Guid leaf_guid = f->node(f->port(f->port(host).peer).node).guid;
  Bring(std::move(*f));
  json h = Result("health");
  EXPECT_EQ(h["perfmgr"]["enabled"], false);
  EXPECT_EQ(h["healthy"], false);
  ASSERT_EQ(h["cables"].size(), 1u) << h.dump();
  const json& c = h["cables"][0];
  std::set<std::string> ends = {c["a"]["guid"], c["b"]["guid"]};
  EXPECT_EQ(ends, (std::set<std::string>{GuidText(host_guid), GuidText(leaf_guid)}));
  EXPECT_EQ(c["findings"][0]["rule"], "degraded_link");
  EXPECT_EQ(c["findings"][0]["id"], "SM-PERF-007");
  EXPECT_EQ(c["findings"][0]["detail"], "width 1x of 4x");
  // No PerfMgr, no error counters: links --errors says so instead of listing nothing.
  json r = Ask({{"cmd", "links"}, {"args", {{"errors", true}}}});
  EXPECT_EQ(r["ok"], false) << r.dump();
}

// Without the PerfMgr, health lists degraded cables one at a time from the discovery result
// (ForEachDegradedCable); the cables and their order are those of grouping all the findings.
TEST_F(ControlCommandsTest, HealthOfManyDegradedCablesMatchesGroupingAllTheFindings) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  size_t degraded = 0;
  for (PortId p = 0; p < f->port_count(); ++p) {
    const Port& port = f->port(p);
    if (!port.connected() || port.peer < p || (p + degraded) % 3 == 0) continue;
    LinkWidth w = degraded % 2 ? LinkWidth::k1x : LinkWidth::k2x;
    f->mutable_port(p).width = w;
    f->mutable_port(port.peer).width = w;
    ++degraded;
  }
  ASSERT_GE(degraded, 5u);
  Bring(std::move(*f));
  json h = Result("health");
  ASSERT_EQ(h["cables"].size(), degraded) << h.dump();
  json want = json::array();
  ForEachCable(DegradedLinkFindings(*sm_->discovered()),
               [&](const CableHealth& c) { want.push_back(CableHealthJson(c)); });
  EXPECT_EQ(h["cables"], want);
}

TEST_F(ControlCommandsTest, CheckReportsTheProofsAndBalanceOfTheProgrammedRoutes) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  json r = Result("check", {{"permutations", 20}});
  EXPECT_EQ(r["engine"], "ftree");
  EXPECT_EQ(r["accepted"], true);
  EXPECT_EQ(r["verify"]["ok"], true);
  EXPECT_EQ(r["verify"]["missing_entries"], 0);
  EXPECT_EQ(r["credit_loops"]["acyclic"], true);
  EXPECT_EQ(r["balance"]["hosts"], fabric_->ca_count());
  EXPECT_EQ(r["balance"]["unrouted_flows"], 0);
  double ebb = r["balance"]["effective_bisection_bandwidth"];
  EXPECT_GT(ebb, 0.0);
  EXPECT_LE(ebb, 1.0);
}

TEST_F(ControlCommandsTest, ChangesNeedAnAllowedUserAndLogLevelTakesEffect) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  json denied = Ask({{"cmd", "log-level"}, {"args", {{"level", "debug"}}}},
                    static_cast<uid_t>(geteuid() + 4242));
  EXPECT_EQ(denied["code"], "permission_denied");
  EXPECT_FALSE(level_.has_value());
  EXPECT_EQ(Result("log-level", {{"level", "debug"}})["level"], "debug");
  EXPECT_EQ(level_, spdlog::level::debug);
  uint64_t before = sm_->counters().heavy_sweeps;
  EXPECT_EQ(Result("resweep")["queued"], true);
  // Bounded only so a broken resweep fails instead of hanging: a sanitizer build on a
  // loaded CI machine takes seconds for this sweep.
  for (int i = 0; i < 3000 && sm_->counters().heavy_sweeps == before; ++i) {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(sm_->counters().heavy_sweeps, before);
}

// What ibsmctl --state-db prints for nodes and links is what the daemon answered after its
// sweep; a sweep that finds the same fabric leaves the snapshots as they were.
TEST_F(ControlCommandsTest, TheStateFileKeepsTheNodesAndLinksAnswersAndAQuietSweepKeepsThem) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  auto stored = [&](std::string_view name) -> std::optional<ha::SnapshotRow> {
    auto row = store_->LoadSnapshot(name);
    EXPECT_TRUE(row.ok()) << row.status().ToString();
    return row.ok() ? *row : std::nullopt;
  };
  auto nodes = stored(ha::kSnapshotNodes);
  auto links = stored(ha::kSnapshotLinks);
  auto health = stored(ha::kSnapshotHealth);
  ASSERT_TRUE(nodes && links && health);
  EXPECT_EQ(json::parse(nodes->json), Result("nodes"));
  EXPECT_EQ(json::parse(links->json), Result("links"));
  EXPECT_EQ(json::parse(links->json)["links"].size(), fabric_->link_count());
  EXPECT_EQ(json::parse(health->json), Result("health"));

  uint64_t before = sm_->counters().heavy_sweeps;
  sm_->RequestHeavySweep("test: the same fabric again");
  for (int i = 0; i < 3000 && sm_->counters().heavy_sweeps == before; ++i) {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(sm_->counters().heavy_sweeps, before);
  EXPECT_EQ(stored(ha::kSnapshotNodes), nodes) << "an unchanged fabric costs no write";
  EXPECT_EQ(stored(ha::kSnapshotLinks), links);
  EXPECT_EQ(stored(ha::kSnapshotHealth), health);
  EXPECT_EQ(sm_->counters().state_write_failures, 0u);
}

TEST_F(ControlCommandsTest, HealthHistoryListsTheFindingsOfTheEventLogNewestFirst) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  ha::EventRow older{0, 1'000'000, std::string(ha::kEventHealth), ha::EventSeverity::kWarning,
                     Guid{0x11}, PortNum{3}, "SM-PERF-001 symbol errors +500 on leaf-1"};
  ha::EventRow trap{0, 2'000'000, std::string(ha::kEventTrap), ha::EventSeverity::kInfo,
                    std::nullopt, std::nullopt, "trap 128"};
  ha::EventRow newer{0, 3'000'000, std::string(ha::kEventHealth), ha::EventSeverity::kWarning,
                     Guid{0x22}, PortNum{1}, "SM-PERF-003 link downed +2 on node-1"};
  ASSERT_TRUE(store_->RecordEvents({older, trap, newer}).ok());
  json h = Result("health", {{"history", true}});
  ASSERT_EQ(h["history"].size(), 2u) << h.dump(2);
  EXPECT_EQ(h["history"][0]["message"], newer.message);
  EXPECT_EQ(h["history"][0]["node_guid"], "0x0000000000000022");
  EXPECT_EQ(h["history"][0]["port"], 1);
  EXPECT_EQ(h["history"][1]["message"], older.message);
  json since = Result("health", {{"history", true}, {"since_us", 2'000'000}});
  ASSERT_EQ(since["history"].size(), 1u);
  EXPECT_EQ(since["history"][0]["message"], newer.message);
}

TEST_F(ControlCommandsTest, HaAndEventsComeFromTheRunningSmAndItsStateFile) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  json ha = Result("ha");
  EXPECT_EQ(ha["state"], "MASTER");
  EXPECT_EQ(ha["peers"].size(), 0u);
  EXPECT_EQ(ha["counters"]["takeovers"], 0);
  EXPECT_EQ(ha["counters"]["state_changes"], 2) << "NOTACTIVE -> DISCOVERING -> MASTER";
  json ev = Result("events", {{"limit", 1000}});
  bool master = false;
  for (const auto& e : ev["events"])
    if (e["message"].get<std::string>().find("MASTER") != std::string::npos) master = true;
  EXPECT_TRUE(master) << ev.dump(2);
  EXPECT_EQ(ev["more"], 0);
  // Beyond its limit the answer says how many more there are.
  json one = Result("events", {{"limit", 1}});
  ASSERT_EQ(one["events"].size(), 1u);
  EXPECT_EQ(one["more"], ev["events"].size() - 1);
}

TEST_F(ControlCommandsTest, MetricsDescribeTheRunningSm) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  Result("status");
  std::string text = RenderSmMetrics(*sm_, server_.get(), nullptr);
  auto has = [&](const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
  };
  EXPECT_TRUE(has("ibsm_sm_state{state=\"MASTER\"} 1")) << text;
  EXPECT_TRUE(has("ibsm_sm_state{state=\"STANDBY\"} 0")) << text;
  EXPECT_TRUE(has("ibsm_subnet_up 1"));
  EXPECT_TRUE(has(fmt::format("ibsm_nodes{{kind=\"switch\"}} {}", fabric_->switch_count())));
  EXPECT_TRUE(has(fmt::format("ibsm_ports{{state=\"active\"}} {}", 2 * fabric_->link_count())))
      << text;
  EXPECT_TRUE(has("ibsm_sweeps_total{kind=\"heavy\"} 1"));
  EXPECT_TRUE(has("ibsm_control_requests_total{outcome=\"all\"} 1"));
  EXPECT_NE(text.find("ibsm_smps_total{method=\"get\"} "), std::string::npos);
  // HA: NOTACTIVE -> DISCOVERING -> MASTER; every CA port told to re-register once.
  EXPECT_TRUE(has("ibsm_ha_events_total{event=\"state_change\"} 2")) << text;
  EXPECT_TRUE(has(fmt::format("ibsm_client_reregisters_total {}", fabric_->ca_count()))) << text;
  EXPECT_TRUE(has("ibsm_traps_suppressed_total 0"));
  EXPECT_TRUE(has("ibsm_state_write_failures_total 0"));
}

// Every counter of the SM is in the control answer and in the metrics, with the value the SM
// holds, under the names kSmCounterRows gives it (one table, read by both).
TEST_F(ControlCommandsTest, EveryCounterIsInTheControlAnswerAndTheMetricsWithOneValue) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  json status = Result("status");
  json ha = Result("ha");
  const std::string text = RenderSmMetrics(*sm_, server_.get(), nullptr);
  const SmCounters& c = sm_->counters();
  std::set<std::string> keys;
  for (const SmCounterRow& row : kSmCounterRows) {
    SCOPED_TRACE(std::string(row.key));
    EXPECT_TRUE(keys.insert(std::string(row.key)).second) << "a key named twice";
    const json& section = row.section == CounterSection::kHa ? ha["counters"] : status["counters"];
    ASSERT_TRUE(section.contains(std::string(row.key))) << section.dump();
    EXPECT_EQ(section[std::string(row.key)].get<uint64_t>(), c.*row.member);
    const std::string sample =
        row.label_name.empty()
            ? fmt::format("\n{} {}\n", row.family, c.*row.member)
            : fmt::format("\n{}{{{}=\"{}\"}} {}\n", row.family, row.label_name, row.label_value,
                          c.*row.member);
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
  }
  EXPECT_EQ(c.heavy_sweeps, 1u);  // the figures are the running SM's, not zeros
  EXPECT_GT(c.client_reregisters, 0u);

  // The transport's counters, from their own table (mad/transport.h).
  const mad::TransportCounters& t = sm_->transport_counters();
  const json& transport = status["transport"];
  EXPECT_EQ(transport.size(), std::size(mad::kTransportCounterRows));
  for (const mad::TransportCounterRow& row : mad::kTransportCounterRows) {
    SCOPED_TRACE(std::string(row.key));
    ASSERT_TRUE(transport.contains(std::string(row.key))) << transport.dump();
    EXPECT_EQ(transport[std::string(row.key)].get<uint64_t>(), t.*row.member);
    const std::string sample =
        row.gauge ? fmt::format("\n{} {}\n", row.metric, t.*row.member)
                  : fmt::format("\nibsm_mad_transport_total{{event=\"{}\"}} {}\n", row.metric,
                                t.*row.member);
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
  }
  EXPECT_GT(t.sent, 0u);

  // The sweep pipeline's, from theirs (sm/model/smp_pipeline.h).
  const PipelineCounters& pc = sm_->smp_counters();
  const json& smps = status["smp_pipeline"];
  EXPECT_EQ(smps.size(), std::size(kPipelineCounterRows));
  for (const PipelineCounterRow& row : kPipelineCounterRows) {
    SCOPED_TRACE(std::string(row.key));
    ASSERT_TRUE(smps.contains(std::string(row.key))) << smps.dump();
    EXPECT_EQ(smps[std::string(row.key)].get<uint64_t>(), pc.*row.member);
    const std::string sample =
        row.label_name.empty()
            ? fmt::format("\n{} {}\n", row.family, pc.*row.member)
            : fmt::format("\n{}{{{}=\"{}\"}} {}\n", row.family, row.label_name,
                          row.label_value, pc.*row.member);
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
  }
  EXPECT_GT(pc.gets, 0u);

  // The SA's counters, from theirs (sm/sa/sa_server.h).
  const SaCounters& sc = sm_->sa().counters();
  const json& sa = status["sa"];
  EXPECT_EQ(sa.size(), std::size(kSaCounterRows));
  for (const SaCounterRow& row : kSaCounterRows) {
    SCOPED_TRACE(std::string(row.key));
    ASSERT_TRUE(sa.contains(std::string(row.key))) << sa.dump();
    EXPECT_EQ(sa[std::string(row.key)].get<uint64_t>(), sc.*row.member);
    if (row.family.empty()) continue;
    const std::string sample = fmt::format("\n{} {}\n", row.family, sc.*row.member);
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
  }

  // The control socket's and the metrics endpoint's own counters, from theirs
  // (sm/net/control_server.h, sm/net/metrics_server.h). Each request moves the control
  // socket's, so the answer and the metrics are compared with what the server held then.
  MetricsServerCounters mc;
  mc.scrapes = 11;
  mc.bad_requests = 12;
  mc.timed_out = 13;
  mc.refused = 14;
  mc.accept.failures = 15;
  mc.accept.shed = 16;
  commands_->set_metrics_server(&mc);
  const ControlCounters before = server_->counters();
  const json again = Result("status");
  const std::string with_servers = RenderSmMetrics(*sm_, server_.get(), &mc);
  const json& control = again["control_server"];
  EXPECT_EQ(control.size(), std::size(kControlCounterRows));
  for (const ControlCounterRow& row : kControlCounterRows) {
    SCOPED_TRACE(std::string(row.key));
    ASSERT_TRUE(control.contains(std::string(row.key))) << control.dump();
    EXPECT_GE(control[std::string(row.key)].get<uint64_t>(), row.get(before));
    const std::string sample = fmt::format("\n{}{{outcome=\"{}\"}} {}\n", row.family,
                                           row.outcome, row.get(server_->counters()));
    EXPECT_NE(with_servers.find(sample), std::string::npos) << sample << with_servers;
  }
  EXPECT_GE(control["requests"].get<uint64_t>(), 3u);  // status, ha, status
  const json& metrics = again["metrics_server"];
  EXPECT_EQ(metrics.size(), std::size(kMetricsServerCounterRows));
  for (const MetricsServerCounterRow& row : kMetricsServerCounterRows) {
    SCOPED_TRACE(std::string(row.key));
    EXPECT_EQ(metrics[std::string(row.key)].get<uint64_t>(), row.get(mc));
    const std::string sample =
        fmt::format("\n{}{{outcome=\"{}\"}} {}\n", row.family, row.outcome, row.get(mc));
    EXPECT_NE(with_servers.find(sample), std::string::npos) << sample << with_servers;
  }
}

TEST_F(ControlCommandsTest, TheLastSweepsAgeIsReadOnTheClockTheSmTimesItsSweepsWith) {
  sm_clock_ = &manual_clock_;
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  Bring(std::move(*f));
  manual_clock_.Advance(std::chrono::seconds(100));
  json status = Result("status");
  ASSERT_TRUE(status.contains("last_sweep")) << status.dump();
  // The sweep started at the manual clock's 0, so its age is what the clock moved since.
  EXPECT_DOUBLE_EQ(status["last_sweep"]["age_s"].get<double>(), 100.0);
}

}  // namespace
}  // namespace ibsm::sm
