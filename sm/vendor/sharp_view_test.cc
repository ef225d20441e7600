// `sharp` on the control socket: a running SM with SHARP on the simulator answers the trees it
// programmed, in the JSON the README documents.
#include "sm/vendor/sharp_view.h"

#include <unistd.h>

#include <filesystem>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "fabric/aggregation_node.h"
#include "fabric/generators.h"
#include "sim/sharp_an.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/ctl/control_commands.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

using nlohmann::json;

json AskSharp(bool sharp_enable, const std::string& cmd = "sharp") {
  auto base = FatTree2(8);
  EXPECT_TRUE(base.ok());
  auto fabric = WithAggregationNodes(*base, [](const Node& n) { return n.name != "leaf-004"; });
  EXPECT_TRUE(fabric.ok());
  boost::asio::io_context io;
  sim::SharpSim sharp(*fabric);
  sim::Simulator sim(*fabric);
  sim.AddExtension(&sharp);
  PortId at = kNoPort;
  for (PortId p = 0; p < fabric->port_count() && at == kNoPort; ++p)
    if (IsHostPort(*fabric, p)) at = p;
  sim::SimTransport t(io, sim, at);
  SystemClock clock;
  SubnetManagerOptions o;
  o.send.timeout = std::chrono::milliseconds(20);
  o.sweep_interval = std::chrono::seconds(0);
  o.routing_engine = "ftree";
  o.sharp_enable = sharp_enable;
  SubnetManager sm(io, t, clock, nullptr, o);
  char tmpl[] = "/tmp/ibsm-sharpview-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ControlServer::Options co;
  co.path = dir + "/ibsmd.sock";
  auto server = ControlServer::Start(io, co);
  EXPECT_TRUE(server.ok());
  ControlContext ctx;
  ctx.sm = &sm;
  auto commands = std::make_unique<ControlCommands>(io, **server, ctx);
  sm.Start([&](const SweepStats&) { io.stop(); });
  io.run();
  std::optional<std::string> line;
  (*server)->Dispatch(json{{"cmd", cmd}}.dump(), geteuid(), [&](std::string l) { line = l; });
  commands.reset();
  server->reset();
  sm.Stop();
  t.Close();
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(line.has_value());
  return line ? json::parse(*line) : json();
}

TEST(SharpViewTest, ControlSocketAnswersTheProgrammedTreesWithDepthHostsAndSwitches) {
  const json r = AskSharp(true);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  const json& s = r["result"];
  EXPECT_TRUE(s["enabled"].get<bool>());
  EXPECT_EQ(s["aggregation_nodes"], 11);  // 12 switches, leaf-004 legacy
  EXPECT_EQ(s["switch_tiers"], 2);
  EXPECT_EQ(s["hosts"], 32);
  ASSERT_EQ(s["trees"].size(), 4u);  // one per spine
  for (const json& t : s["trees"]) {
    for (const char* key : {"id", "root", "depth", "hosts", "switches"})
      EXPECT_TRUE(t.contains(key)) << key;
    EXPECT_EQ(t["depth"], 2);
    EXPECT_EQ(t["hosts"], 28);     // leaf-004's 4 hosts are in no tree
    EXPECT_EQ(t["switches"], 8);   // the spine and 7 leaves
    EXPECT_TRUE(t["programmed"].get<bool>());
    EXPECT_EQ(t["root"].get<std::string>().substr(0, 2), "0x");
  }
  EXPECT_EQ(s["never_covered"].size(), 4u);
}

TEST(SharpViewTest, StatusSumsUpTheTreesAndTheHostsInNone) {
  const json r = AskSharp(true, "status");
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  const json& s = r["result"]["sharp"];
  EXPECT_TRUE(s["configured"].get<bool>());
  EXPECT_EQ(s["trees"], 4);
  EXPECT_EQ(s["programmed"], 4);
  EXPECT_EQ(s["usable"], 11);
  EXPECT_EQ(s["hosts"], 32);
  EXPECT_EQ(s["hosts_not_covered"], 4);
  EXPECT_FALSE(r["result"]["ar"]["configured"].get<bool>());
  EXPECT_EQ(AskSharp(false, "status")["result"]["sharp"]["configured"], false);
}

TEST(SharpViewTest, SharpOffSaysSo) {
  const json r = AskSharp(false);
  ASSERT_TRUE(r.value("ok", false));
  EXPECT_FALSE(r["result"]["enabled"].get<bool>());
  EXPECT_TRUE(r["result"]["trees"].empty());
}

}  // namespace
}  // namespace ibsm::sm
