// The switch-info stage alone (sm/sweep/switch_info_stage.h) on the strict simulator: a
// fabric fresh from power-on gets LinearFDBTop and LifeTimeValue on every routed switch, each
// switch's blocks are read once where nothing is known of them, and a second run sends and
// reads nothing; a switch that rebooted is read again and its MFTs are forgotten; a
// PortStateChange a switch reports is cleared.
#include "sm/sweep/switch_info_stage.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "routing/routing_test_util.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/model/discovery.h"
#include "sm/testing/sim_test_util.h"

namespace ibsm::sm {
namespace {

using simcheck::FirstCaPort;

struct SwitchInfoBed {
  SwitchInfoBed()
      : built(FatTree3(4).value()), sim(built), t(io, sim, FirstCaPort(built)),
        pipeline(t, 16, mad::SendOptions{std::chrono::milliseconds(20), 3}, 0),
        lfts(pipeline, [this](std::string_view id, std::string m) { Note(id, m); }),
        mfts(pipeline),
        stage(pipeline, options, lfts, mfts,
              {[this]() -> const DiscoveryResult& { return d; },
               [this]() -> DiscoveryResult& { return d; },
               [this](std::string_view id, std::string m) { Note(id, m); },
               [] { return false; }}) {
    options.packet_life_time = 0x11;
    Discovery disc(pipeline);
    disc.Run([&](DiscoveryResult r) { d = std::move(r); });
    io.run();
    routing::testing::AssignLids(d.fabric);
    const routing::LidMap lids(d.fabric);
    auto r = routing::RouteChain("ftree", d.fabric, lids, {});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    tables = std::make_shared<const routing::RoutingTables>(std::move(r->tables));
    top = lids.max_lid();
  }
  void Note(std::string_view id, const std::string& m) {
    issues.push_back(std::string(id) + " " + m);
  }
  SweepStats Run() {
    lfts.BeginSweep();
    SwitchInfoStage::Sweep s;
    s.top = top;
    s.tables = tables;
    SweepContext ctx;
    int done = 0;
    stage.Run(std::move(s), ctx, [&] { ++done; });
    io.restart();
    io.run();
    EXPECT_EQ(done, 1);
    return ctx.stats;
  }
  NodeId SimNode(NodeId n) const { return *built.FindNode(d.fabric.node(n).guid); }
  size_t Switches() const {
    size_t n = 0;
    for (NodeId i = 0; i < d.fabric.node_count(); ++i) n += d.fabric.node(i).is_switch();
    return n;
  }

  Fabric built;
  sim::Simulator sim;
  boost::asio::io_context io;
  sim::SimTransport t;
  SmpPipeline pipeline;
  SubnetManagerOptions options;
  LftProgrammer lfts;
  MftProgrammer mfts;
  SwitchInfoStage stage;
  DiscoveryResult d;
  std::shared_ptr<const routing::RoutingTables> tables;
  uint16_t top = 0;
  std::vector<std::string> issues;
};

TEST(SwitchInfoStageTest, AFreshFabricGetsItsTopAndARestartedSmReadsEachSwitchOnce) {
  SwitchInfoBed b;
  // At power-on every LinearFDBTop is 0: nothing to read.
  const SweepStats s = b.Run();
  EXPECT_TRUE(b.issues.empty()) << b.issues.front();
  EXPECT_EQ(s.switchinfo_sets, b.Switches());
  EXPECT_EQ(s.lft_blocks_read, 0u);
  for (NodeId n = 0; n < b.d.fabric.node_count(); ++n) {
    if (!b.d.fabric.node(n).is_switch()) continue;
    EXPECT_EQ(b.sim.switch_info(b.SimNode(n)).linear_fdb_top, b.top);
    EXPECT_EQ(b.sim.switch_info(b.SimNode(n)).life_time_value, 0x11);
    EXPECT_EQ(b.d.nodes[n].switch_info.linear_fdb_top, b.top);  // the model follows
  }
  EXPECT_EQ(b.Run().switchinfo_sets, 0u);

  // Another SM (or this one restarted) knows nothing of the tables: its first sweep reads
  // each switch's blocks up to the top, and Sets no SwitchInfo that holds what it wants;
  // after its push, the next sweep reads nothing.
  LftProgrammer lfts(b.pipeline, [&](std::string_view id, std::string m) { b.Note(id, m); });
  MftProgrammer mfts(b.pipeline);
  SwitchInfoStage restarted(b.pipeline, b.options, lfts, mfts,
                            {[&]() -> const DiscoveryResult& { return b.d; },
                             [&]() -> DiscoveryResult& { return b.d; },
                             [&](std::string_view id, std::string m) { b.Note(id, m); },
                             [] { return false; }});
  for (int round = 0; round < 2; ++round) {
    lfts.BeginSweep();
    SweepContext ctx;
    restarted.Run({b.top, b.tables, true, {}}, ctx, [] {});
    b.io.restart();
    b.io.run();
    lfts.Push(b.d.fabric, b.tables, b.top,
              [&](NodeId n) -> const DrPath& { return b.d.nodes[n].path; });
    b.io.restart();
    b.io.run();
    EXPECT_EQ(ctx.stats.switchinfo_sets, 0u);
    EXPECT_EQ(ctx.stats.lft_blocks_read, round == 0 ? b.Switches() * (b.top / 64 + 1) : 0u);
  }
}

TEST(SwitchInfoStageTest, ASwitchThatRebootedIsSetAgainAndWrittenWhole) {
  SwitchInfoBed b;
  b.Run();
  b.lfts.Push(b.d.fabric, b.tables, b.top,
              [&](NodeId n) -> const DrPath& { return b.d.nodes[n].path; });
  b.io.restart();
  b.io.run();
  NodeId sw = kNoNode;
  for (NodeId n = 0; n < b.d.fabric.node_count() && sw == kNoNode; ++n)
    if (b.d.fabric.node(n).is_switch() && !b.d.nodes[n].path.empty()) sw = n;
  ASSERT_NE(sw, kNoNode);
  ASSERT_TRUE(b.sim.RebootSwitch(b.SimNode(sw)).ok());
  // One of its links bounces once more as it comes up: PortStateChange is raised.
  PortId cabled = kNoPort;
  for (uint8_t p = 1; p <= b.d.fabric.node(sw).num_ports && cabled == kNoPort; ++p)
    if (b.d.fabric.port(b.d.fabric.port_id(sw, PortNum{p})).connected())
      cabled = b.sim.port_id(b.SimNode(sw), PortNum{p});
  ASSERT_TRUE(b.sim.LinkDown(cabled).ok());
  ASSERT_TRUE(b.sim.LinkUp(cabled).ok());
  // What the sweep's reads found: a power-on SwitchInfo (LinearFDBTop 0).
  b.d.nodes[sw].switch_info = b.sim.switch_info(b.SimNode(sw));
  ASSERT_EQ(b.d.nodes[sw].switch_info.linear_fdb_top, 0);
  ASSERT_TRUE(b.d.nodes[sw].switch_info.port_state_change);

  const SweepStats s = b.Run();
  EXPECT_TRUE(b.issues.empty()) << b.issues.front();
  EXPECT_EQ(s.switchinfo_sets, 1u);
  EXPECT_EQ(b.sim.switch_info(b.SimNode(sw)).linear_fdb_top, b.top);
  EXPECT_FALSE(b.sim.switch_info(b.SimNode(sw)).port_state_change);  // write 1 to clear
  EXPECT_FALSE(b.d.nodes[sw].switch_info.port_state_change);
  // What it held before is forgotten: the next push writes its every block, and no other.
  b.lfts.Push(b.d.fabric, b.tables, b.top,
              [&](NodeId n) -> const DrPath& { return b.d.nodes[n].path; });
  b.io.restart();
  b.io.run();
  EXPECT_EQ(b.lfts.run().sent, b.top / 64 + 1u);
  for (uint16_t lid = 1; lid <= b.top; ++lid)
    EXPECT_EQ(b.sim.lft_entry(b.SimNode(sw), Lid{lid}), b.tables->table(sw)->lft[lid]);
}

}  // namespace
}  // namespace ibsm::sm
