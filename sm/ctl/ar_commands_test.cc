#include "sm/ctl/ar_commands.h"

#include <unistd.h>

#include <filesystem>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

using nlohmann::json;

// One SM at SUBNET UP on a simulated 2-tier k=8 fat tree whose even switches are AR-capable,
// with the AR commands served on a socket; requests go through ControlServer::Dispatch.
class ArCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fabric_ = std::make_unique<Fabric>(*FatTree2(8));
    sim_ = std::make_unique<sim::Simulator>(*fabric_);
    PortId at = kNoPort;
    for (NodeId n = 0; n < fabric_->node_count(); ++n) {
      if (fabric_->node(n).is_switch() && n % 2 == 0) {
        ASSERT_TRUE(sim_->SetArCapable(n, true).ok());
      }
      if (!fabric_->node(n).is_switch() && at == kNoPort) at = fabric_->port_id(n, PortNum{1});
    }
    transport_ = std::make_unique<sim::SimTransport>(io_, *sim_, at);
    char tmpl[] = "/tmp/ibsm-arcmd-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    SubnetManagerOptions o;
    o.send.timeout = std::chrono::milliseconds(20);
    o.send.retries = 2;
    o.sweep_interval = std::chrono::seconds(0);
    o.routing_engine = "ar_ftree";
    o.ar.mode = 1;
    o.ar.lid_mode = routing::ArLidMode::kFree;
    sm_ = std::make_unique<SubnetManager>(io_, *transport_, clock_, nullptr, o);
    ControlServer::Options co;
    co.path = dir_ + "/ibsmd.sock";
    auto server = ControlServer::Start(io_, co);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    commands_ = std::make_unique<ArCommands>(io_, *server_, *sm_);
    // The callback outlives SetUp (every later sweep calls it): a member, not a local.
    sm_->Start([this](const SweepStats& s) {
      subnet_up_ = s.subnet_up;
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
  json Ask(const json& request) {
    std::optional<std::string> line;
    server_->Dispatch(request.dump(), geteuid(), [&](std::string l) { line = std::move(l); });
    for (int i = 0; i < 600 && !line; ++i) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(line.has_value()) << request.dump();
    return line ? json::parse(*line) : json();
  }

  boost::asio::io_context io_;
  SystemClock clock_;
  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<sim::Simulator> sim_;
  std::unique_ptr<sim::SimTransport> transport_;
  std::unique_ptr<SubnetManager> sm_;
  std::unique_ptr<ControlServer> server_;
  std::unique_ptr<ArCommands> commands_;
  std::string dir_;
  bool subnet_up_ = false;
};

TEST_F(ArCommandsTest, ArShowsEverySwitchAsTheSimulatorHoldsItAndEachDestinationsGroup) {
  json r = Ask({{"cmd", "ar"}});
  ASSERT_EQ(r["ok"], true) << r.dump();
  const json& sw = r["result"]["switches"];
  ASSERT_EQ(sw.size(), 12u);
  size_t enabled = 0;
  for (const json& s : sw) {
    const NodeId n = *fabric_->FindNode(Guid{std::stoull(s["guid"].get<std::string>(), nullptr, 16)});
    const sim::ArSwitch* agent = sim_->ar_switch(n);
    EXPECT_EQ(s["capable"], agent != nullptr) << s.dump();
    EXPECT_EQ(s["enabled"], agent != nullptr && agent->info().e == 1) << s.dump();
    for (const char* key : {"guid", "name", "capable", "enabled", "sl_mask", "mode", "groups"})
      EXPECT_TRUE(s.contains(key)) << key;
    if (s["enabled"] == true) {
      ++enabled;
      EXPECT_EQ(s["mode"], "free");
      EXPECT_EQ(s["sl_mask"], 0xFFFF);
    } else {
      EXPECT_FALSE(s["why_not"].is_null());
    }
  }
  EXPECT_EQ(enabled, 6u);
  // Every destination leaf has a group; its members on capable leaves are all their up-ports.
  const json& dests = r["result"]["destinations"];
  EXPECT_EQ(dests.size(), 8u);
  for (const json& d : dests)
    for (const json& m : d["members"]) EXPECT_EQ(m["ports"].size(), 4u) << m.dump();
  EXPECT_NE(r["result"]["summary"].get<std::string>().find("AR enabled on 6 of 12 switches"),
            std::string::npos);
}

TEST_F(ArCommandsTest, TrafficComparesStaticAndArOnTheLiveTables) {
  json r = Ask({{"cmd", "traffic"}, {"args", {{"pattern", "random"}, {"count", 20}, {"seed", 3}}}});
  ASSERT_EQ(r["ok"], true) << r.dump();
  const json& t = r["result"];
  EXPECT_EQ(t["hosts"], 32);
  EXPECT_EQ(t["matrices"], 20);
  EXPECT_EQ(t["ar_programmed"], true);
  for (const char* k : {"static", "ar"}) {
    EXPECT_TRUE(t[k].contains("max_link_load")) << k;
    EXPECT_TRUE(t[k].contains("ebb")) << k;
    EXPECT_EQ(t[k]["unrouted"], 0);
  }
  EXPECT_LE(t["ar"]["max_link_load"].get<double>(), t["static"]["max_link_load"].get<double>());

  json all = Ask({{"cmd", "traffic"}, {"args", {{"pattern", "alltoall"}}}});
  ASSERT_EQ(all["ok"], true) << all.dump();
  EXPECT_EQ(all["result"]["ar"]["flows"], 32 * 31);

  json bad = Ask({{"cmd", "traffic"}, {"args", {{"pattern", "ring"}}}});
  EXPECT_EQ(bad["ok"], false);
  EXPECT_NE(bad["error"].get<std::string>().find("shift, random or alltoall"), std::string::npos);
  bad = Ask({{"cmd", "traffic"}, {"args", {{"count", -1}}}});
  EXPECT_EQ(bad["ok"], false);
  bad = Ask({{"cmd", "traffic"}, {"args", {{"count", 0}}}});
  EXPECT_EQ(bad["ok"], false);
}

TEST(ArReportTest, WithoutASweepTheReportIsEmptyButWellFormed) {
  json r = ArReport(nullptr);
  EXPECT_TRUE(r["switches"].is_array());
  EXPECT_TRUE(r["switches"].empty());
  EXPECT_TRUE(r["destinations"].empty());
}

}  // namespace
}  // namespace ibsm::sm
