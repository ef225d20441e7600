// The SA never answers from a half-written state: whatever the SM is doing (a repair reading
// the reporting switches, re-routing, pushing blocks), the snapshot the SA answers from is one
// sweep's whole: its routes lead over cables of the fabric it describes, and it is replaced
// only by a newer one. Checked at every SMP the simulator takes while a cut is repaired, on
// the snapshot the SA holds at that instant.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/sim_test_util.h"
#include "sm/testing/sm_on_sim.h"

namespace ibsm::sm {
namespace {

using namespace std::chrono_literals;

using testutil::QuietOptions;
using testutil::SmOnSim;

// Counts the routes of `s` that leave a switch by a port that is not cabled in `s`'s own
// fabric: zero for a snapshot whose tables and fabric are of one sweep.
size_t RoutesOverMissingCables(const SaSnapshot& s, std::string* first) {
  const Fabric& f = s.fabric();
  size_t bad = 0;
  if (!s.tables) return 0;
  for (const routing::SwitchTable& t : s.tables->switches) {
    if (t.node >= f.node_count() || !f.node(t.node).is_switch()) {
      ++bad;
      continue;
    }
    const Node& n = f.node(t.node);
    for (size_t lid = 1; lid < t.lft.size(); ++lid) {
      const uint8_t p = t.lft[lid];
      if (p == 0 || p == routing::kDropPort) continue;
      if (p > n.num_ports || !f.port(f.port_id(t.node, PortNum{p})).connected()) {
        if (bad++ == 0 && first)
          *first = ToString(n.guid) + " sends LID " + std::to_string(lid) + " out of port " +
                   std::to_string(p);
      }
    }
  }
  return bad;
}

TEST(SaConsistencyTest, EverySnapshotTheSaHoldsDuringARepairIsOneSweepsWhole) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  SmOnSim on(sim, *f, QuietOptions());
  SubnetManager& sm = on.sm;
  boost::asio::io_context& io = on.io;

  // A spine's core-facing cable: redundant, every host keeps a path.
  PortId cut = kNoPort;
  for (NodeId n = 0; n < f->node_count() && cut == kNoPort; ++n) {
    if (f->node(n).name.find("-spine-") == std::string::npos) continue;
    for (uint32_t p = 1; p <= f->node(n).num_ports && cut == kNoPort; ++p) {
      const PortId id = f->port_id(n, PortNum{static_cast<uint8_t>(p)});
      if (f->port(id).connected() &&
          f->node(f->port(f->port(id).peer).node).name.starts_with("core"))
        cut = id;
    }
  }
  ASSERT_NE(cut, kNoPort);

  bool cut_done = false, repaired = false;
  size_t looks = 0, looks_before_publish = 0, bad = 0;
  uint64_t last_sweep_seen = 0, first_sweep = 0;
  bool went_back = false;
  std::string first_bad;
  sim.SetSmpObserver([&](NodeId, uint8_t, uint16_t, uint32_t) {
    if (!cut_done || repaired) return;
    auto snap = sm.sa().snapshot();
    if (!snap) return;
    ++looks;
    if (snap->sweep == first_sweep) ++looks_before_publish;
    if (snap->sweep < last_sweep_seen) went_back = true;
    last_sweep_seen = snap->sweep;
    bad += RoutesOverMissingCables(*snap, first_bad.empty() ? &first_bad : nullptr);
  });
  std::vector<SweepStats> sweeps;
  boost::asio::steady_timer settle(io);
  sm.Start([&](const SweepStats& s) {
    sweeps.push_back(s);
    if (sweeps.size() == 1) {
      ASSERT_TRUE(s.subnet_up);
      first_sweep = sm.sa().snapshot()->sweep;
      ASSERT_EQ(RoutesOverMissingCables(*sm.sa().snapshot(), &first_bad), 0u) << first_bad;
      cut_done = true;
      EXPECT_TRUE(sim.LinkDown(cut).ok());  // traps 128 from both ends
      return;
    }
    settle.expires_after(500ms);  // both ends may report: wait for the traps to stop
    settle.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      repaired = true;
      on.Stop();
    });
  });
  io.run();
  sim.SetSmpObserver({});

  ASSERT_GE(sweeps.size(), 2u);
  EXPECT_TRUE(sweeps[1].repair) << "the cut was repaired, not swept";
  // The repair read the reporting switches and wrote blocks while the SA answered: the
  // snapshot was looked at then, and it was the last sweep's until the repair published.
  EXPECT_GT(looks, 0u);
  EXPECT_GT(looks_before_publish, 0u);
  EXPECT_EQ(bad, 0u) << first_bad;
  EXPECT_FALSE(went_back);
  // The repair's own snapshot: the cable is gone from its fabric and from its routes.
  auto last = sm.sa().snapshot();
  ASSERT_TRUE(last);
  EXPECT_GT(last->sweep, first_sweep);
  auto spine = last->fabric().FindNode(f->node(f->port(cut).node).guid);
  ASSERT_TRUE(spine);
  EXPECT_FALSE(last->fabric().port(last->fabric().port_id(*spine, f->port(cut).num)).connected());
  EXPECT_EQ(RoutesOverMissingCables(*last, &first_bad), 0u) << first_bad;
}

// When routing fails after the fabric changed, the last good tables stay in the switches,
// and they are for the model they were routed on, whose NodeIds are not the new model's (a
// switch left: every switch with a higher GUID is numbered one lower). The SA answers, for each
// switch of the new model, the table that switch holds, never another switch's.
TEST(SaConsistencyTest, AfterARoutingFailureTheSaAnswersEachSwitchsOwnTable) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  // The spine of lowest GUID: the switches above it in GUID order are renumbered when it goes.
  const NodeId spine = testutil::LowestGuidSwitchNamed(*f, "-spine-");
  ASSERT_NE(spine, kNoNode);
  size_t above = 0;
  for (NodeId n = 0; n < f->node_count(); ++n)
    above += f->node(n).is_switch() && f->node(n).guid > f->node(spine).guid;
  ASSERT_GT(above, 1u);
  SubnetManagerOptions o = QuietOptions();
  o.incremental_repair = false;  // the engine routes after the change, and fails
  SmOnSim on(sim, *f, o);
  SubnetManager& sm = on.sm;
  std::vector<SweepStats> sweeps;
  sm.Start([&](const SweepStats& s) {
    sweeps.push_back(s);
    if (sweeps.size() == 1) {
      ASSERT_TRUE(s.subnet_up);
      SubnetManagerOptions fails = o;
      fails.routing_engine = "no_fallback";  // no engine: nothing may route
      sm.Reconfigure(fails);
      EXPECT_TRUE(sim.RemoveNode(spine).ok());
      sm.RequestHeavySweep("test: the spine left");
      return;
    }
    if (s.number < 2) return;
    on.Stop();
  });
  on.io.run();
  ASSERT_GE(sweeps.size(), 2u);
  EXPECT_FALSE(sweeps.back().subnet_up);
  EXPECT_GE(sm.counters().routing_failures, 1u);
  auto snap = sm.sa().snapshot();
  ASSERT_TRUE(snap && snap->tables);
  const Fabric& model = snap->fabric();
  EXPECT_EQ(model.node_count(), f->node_count() - 1);
  size_t compared = 0;
  for (NodeId n = 0; n < model.node_count(); ++n) {
    if (!model.node(n).is_switch()) continue;
    const routing::SwitchTable* table = snap->tables->table(n);
    ASSERT_NE(table, nullptr) << model.node(n).name;
    EXPECT_EQ(table->node, n);
    const NodeId held_by = *f->FindNode(model.node(n).guid);
    for (uint32_t lid = 1; lid < table->lft.size(); ++lid)
      ASSERT_EQ(table->lft[lid], sim.lft_entry(held_by, Lid{static_cast<uint16_t>(lid)}))
          << model.node(n).name << " LID " << lid;
    ++compared;
  }
  EXPECT_EQ(compared, f->switch_count() - 1);
}

}  // namespace
}  // namespace ibsm::sm
