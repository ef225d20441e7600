// The links stage alone (sm/sweep/link_stage.h) on the strict simulator: a fabric fresh from
// power-on (every link INIT) comes up ACTIVE at both ends, the model following what the
// ports answered, and each transition is counted once.
#include "sm/sweep/link_stage.h"

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>

#include <string>
#include <vector>

#include "sm/testing/port_stage_bed.h"

namespace ibsm::sm {
namespace {

// The port stages' bed, and the links stage over it.
struct LinkStageBed : testutil::PortStageBed {
  LinkStage links{pipeline, ports, counters,
                  {[this]() -> const DiscoveryResult& { return d; },
                   [this]() -> DiscoveryResult& { return d; },
                   [this](PortId p) { return PathTo(p); },
                   [this](std::string_view id, std::string m) { Note(id, m); },
                   [] { return true; }, [] { return false; }}};
};

TEST(LinkStageTest, EveryLinkOfAFreshFabricComesUpActiveAtBothEnds) {
  LinkStageBed b;
  size_t cabled_ends = 0;
  for (PortId p = 0; p < b.d.fabric.port_count(); ++p) {
    const Port& port = b.d.fabric.port(p);
    if (port.num.value() == 0 || !port.connected()) continue;
    ++cabled_ends;
    ASSERT_EQ(port.state, PortState::kInit) << "power-on state";
  }
  SweepContext sweep;
  int done = 0;
  b.links.Run(sweep, [&] { ++done; });
  b.io.restart();
  b.io.run();
  EXPECT_EQ(done, 1);
  EXPECT_TRUE(b.issues.empty()) << b.issues.front();
  EXPECT_EQ(sweep.stats.ports_armed, cabled_ends);
  EXPECT_EQ(sweep.stats.ports_activated, cabled_ends);
  for (PortId p = 0; p < b.d.fabric.port_count(); ++p) {
    const Port& port = b.d.fabric.port(p);
    if (port.num.value() == 0 || !port.connected()) continue;
    EXPECT_EQ(port.state, PortState::kActive);  // the model follows the answers
    const PortId in_sim = b.sim.port_id(*b.built.FindNode(b.d.fabric.node(port.node).guid),
                                        port.num);
    EXPECT_EQ(b.sim.port_info(in_sim).port_state, static_cast<uint8_t>(PortState::kActive));
  }
  // Run again: nothing is left to move.
  SweepContext again;
  b.links.Run(again, [&] { ++done; });
  b.io.restart();
  b.io.run();
  EXPECT_EQ(done, 2);
  EXPECT_EQ(again.stats.ports_armed, 0u);
  EXPECT_EQ(again.stats.ports_activated, 0u);
}

// Stopped after its first Sets reached the ports (a repair taking over): `done` never runs,
// and nothing more is sent. The next run brings every link up; the ports that took a Set
// whose answer was let go refuse the same Set (not idempotent) and are read back.
TEST(LinkStageTest, AStoppedRunEndsThereAndTheNextBringsUpWhatItLeft) {
  LinkStageBed b;
  size_t port_sets = 0;
  size_t in_flight = 0;
  bool stop_posted = false;
  b.sim.SetSmpObserver([&](NodeId, uint8_t method, uint16_t attr, uint32_t) {
    if (method != mad::method::kSet || attr != mad::attr::kPortInfo) return;
    if (++port_sets < 4 || stop_posted) return;
    stop_posted = true;
    boost::asio::post(b.io, [&] { in_flight = b.links.Stop(); });
  });
  SweepContext sweep;
  int done = 0;
  b.links.Run(sweep, [&] { ++done; });
  EXPECT_TRUE(b.links.running());
  b.io.restart();
  b.io.run();
  b.sim.SetSmpObserver({});
  ASSERT_TRUE(stop_posted);
  EXPECT_EQ(done, 0);
  EXPECT_FALSE(b.links.running());
  EXPECT_GT(in_flight, 0u);
  EXPECT_TRUE(b.pipeline.idle());
  EXPECT_LT(sweep.stats.ports_armed, port_sets);  // answers let go changed nothing
  size_t cabled_ends = 0;
  for (PortId p = 0; p < b.d.fabric.port_count(); ++p)
    cabled_ends += b.d.fabric.port(p).num.value() != 0 && b.d.fabric.port(p).connected();
  SweepContext again;
  b.links.Run(again, [&] { ++done; });
  b.io.restart();
  b.io.run();
  EXPECT_EQ(done, 1);
  EXPECT_TRUE(b.issues.empty()) << b.issues.front();
  EXPECT_GT(again.stats.port_state_readbacks, 0u);
  EXPECT_EQ(sweep.stats.ports_armed + again.stats.ports_armed, cabled_ends);
  EXPECT_EQ(again.stats.ports_activated, cabled_ends);
  for (PortId p = 0; p < b.d.fabric.port_count(); ++p) {
    const Port& port = b.d.fabric.port(p);
    if (port.num.value() == 0 || !port.connected()) continue;
    const PortId in_sim = b.sim.port_id(*b.built.FindNode(b.d.fabric.node(port.node).guid),
                                        port.num);
    EXPECT_EQ(b.sim.port_info(in_sim).port_state, static_cast<uint8_t>(PortState::kActive));
  }
}

// Not master: no pass begins and `done` never runs (the HA protocol ends the sweep).
TEST(LinkStageTest, NothingIsSetWhileNotMaster) {
  LinkStageBed b;
  bool master = false;
  LinkStage fenced(b.pipeline, b.ports, b.counters,
                   {[&]() -> const DiscoveryResult& { return b.d; },
                    [&]() -> DiscoveryResult& { return b.d; },
                    [&](PortId p) { return b.d.nodes[b.d.fabric.port(p).node].path; },
                    [](std::string_view, std::string) {}, [&] { return master; },
                    [] { return false; }});
  const uint64_t sets = b.pipeline.counters().sets;
  SweepContext sweep;
  bool done = false;
  fenced.Run(sweep, [&] { done = true; });
  b.io.restart();
  b.io.run();
  EXPECT_FALSE(done);
  EXPECT_EQ(b.pipeline.counters().sets, sets);
}

}  // namespace
}  // namespace ibsm::sm
