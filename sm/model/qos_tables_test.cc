// The optional SL2VL and VLArb reads against the strict simulator, whose devices include
// ones that never answer them and ones that answer "unsupported" (sim/device_profile.h).
#include "sm/model/qos_tables.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/model/discovery.h"
#include "sm/testing/sim_test_util.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

using simcheck::FirstCaPort;

struct Read {
  QosMap tables;
  QosReadStats stats;
  uint64_t optional_drops = 0;  // requests the silent devices swallowed
};

// Discovers `f` on `sim`, then reads the QoS tables of every node once.
Read ReadOnce(const Fabric& f, sim::Simulator& sim, QosSupportMap* support) {
  boost::asio::io_context io;
  sim::SimTransport t(io, sim, FirstCaPort(f));
  mad::SendOptions send{std::chrono::milliseconds(20), 3};
  SmpPipeline pipeline(t, 16, send, 0);
  DiscoveryResult d;
  Discovery disc(pipeline);
  disc.Run([&](DiscoveryResult r) { d = std::move(r); });
  io.run();
  SmpPipeline qos_pipeline(t, 8, send, 0);
  qos_pipeline.set_rounds(1);
  QosReader reader(qos_pipeline);
  Read out;
  const uint64_t drops_before = sim.counters().drops(sim::DropReason::kOptionalAttr);
  reader.Run(d.fabric, d.nodes, {}, support, [&](QosMap fresh, QosReadStats stats) {
    out.tables = std::move(fresh);
    out.stats = stats;
  });
  io.restart();
  io.run();
  out.optional_drops = sim.counters().drops(sim::DropReason::kOptionalAttr) - drops_before;
  return out;
}

TEST(QosTablesTest, ADeviceWithoutTheTablesCostsOneRequestPerAttributeAndIsRemembered) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  size_t silent = 0, unsupported = 0, answering = 0;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const auto& q = sim.quirks(n);
    if (q.sl2vl == sim::OptionalAnswer::kSilent) ++silent;
    if (q.sl2vl == sim::OptionalAnswer::kUnsupported) ++unsupported;
    if (q.sl2vl == sim::OptionalAnswer::kAnswered) ++answering;
  }
  ASSERT_GT(silent, 0u) << "the strict profile has silent devices in this fabric";
  ASSERT_GT(unsupported, 0u);

  QosSupportMap support;
  Read first = ReadOnce(*f, sim, &support);
  // Every node was tried; a device with neither table answered nothing but its probes.
  EXPECT_EQ(first.stats.nodes, f->node_count());
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const Node& node = f->node(n);
    const auto& q = sim.quirks(n);
    ASSERT_TRUE(first.tables.count(node.guid)) << node.name;
    const NodeQos& t = *first.tables.at(node.guid);
    const uint8_t port = node.is_switch() ? 0 : 1;
    const bool sl2vl_read = !t.ports[port].sl2vl.empty() && t.ports[port].sl2vl[0].has_value();
    EXPECT_EQ(sl2vl_read, q.sl2vl == sim::OptionalAnswer::kAnswered) << node.name;
    EXPECT_EQ(support.count(node.guid) && support.at(node.guid).no_sl2vl,
              q.sl2vl != sim::OptionalAnswer::kAnswered)
        << node.name;
  }
  // Silent devices: one SL2VL and one VLArb probe each, nothing more (a retry is the
  // transport's, three more attempts of the same request).
  size_t silent_vlarb = 0;
  for (NodeId n = 0; n < f->node_count(); ++n)
    if (sim.quirks(n).vlarb == sim::OptionalAnswer::kSilent) ++silent_vlarb;
  EXPECT_EQ(first.optional_drops, 4 * (silent + silent_vlarb));

  // The next run of a changed fabric's new nodes would skip them: ask again with the memo.
  Read again = ReadOnce(*f, sim, &support);
  EXPECT_EQ(again.optional_drops, 0u);
  EXPECT_EQ(again.stats.probes_failed, 0u);
  EXPECT_GT(again.stats.skipped, 0u);
}

// osmtest -f q reads every SL2VL and VLArb record right after SUBNET UP: the tables are in
// the SA by then, and what a device does not answer is absent, not invented.
TEST(QosTablesTest, TheSaHoldsEveryAnsweredTableWhenSubnetUpIsLogged) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  sim::SimTransport t(io, sim, FirstCaPort(*f));
  SystemClock clock;
  SubnetManagerOptions o;
  o.once = true;
  o.send.timeout = std::chrono::milliseconds(20);
  SubnetManager sm(io, t, clock, nullptr, o);
  std::shared_ptr<const QosMap> at_up;
  bool up = false;
  sm.Start([&](const SweepStats& s) {
    up = s.subnet_up;
    at_up = sm.sa().snapshot() ? sm.sa().snapshot()->qos : nullptr;
    sm.Stop();
    t.Close();
    io.stop();
  });
  io.run();
  ASSERT_TRUE(up);
  ASSERT_NE(at_up, nullptr);
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const Node& node = f->node(n);
    ASSERT_TRUE(at_up->count(node.guid)) << node.name;
    const NodeQos& q = *at_up->at(node.guid);
    const uint8_t port = node.is_switch() ? 0 : 1;
    const bool has = !q.ports[port].sl2vl.empty() && q.ports[port].sl2vl[0].has_value();
    EXPECT_EQ(has, sim.quirks(n).sl2vl == sim::OptionalAnswer::kAnswered) << node.name;
  }
}

}  // namespace
}  // namespace ibsm::sm
