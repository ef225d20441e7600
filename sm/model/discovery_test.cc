#include "sm/model/discovery.h"
#include "sm/testing/sim_test_util.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"

namespace ibsm::sm {
namespace {

// The first cabled CA port: where ibsim attaches an SM for the same file.
PortId FirstCabledCaPort(const Fabric& f) {
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).kind == NodeKind::kCa && f.port(n, PortNum{1}).connected())
      return f.port_id(n, PortNum{1});
  return kNoPort;
}

struct Walk {
  DiscoveryResult result;
  sim::SimCounters sim_counters;
  Fabric reported;  // the fabric with each node's description as its device answers it
};

Walk Discover(const Fabric& f, double drop_rate = 0, NodeId dead = kNoNode,
              size_t in_flight = 64, std::chrono::microseconds jitter = {},
              uint64_t seed = 7) {
  boost::asio::io_context io;
  sim::SimOptions so;
  so.seed = seed;
  so.per_hop = std::chrono::microseconds(1);
  so.jitter = jitter;
  sim::Simulator simulator(f, so);
  simulator.SetDropRate(drop_rate);
  if (dead != kNoNode) {
    EXPECT_TRUE(simulator.SetNodeDropRate(dead, 1.0).ok());
  }
  sim::SimTransport transport(io, simulator, FirstCabledCaPort(f));
  EXPECT_TRUE(transport.bind_status().ok());
  mad::SendOptions send;
  send.timeout = std::chrono::milliseconds(5);
  send.retries = 8;
  SmpPipeline pipeline(transport, in_flight, send, 0);
  Discovery d(pipeline);
  Walk w;
  bool done = false;
  d.Run([&](DiscoveryResult r) {
    w.result = std::move(r);
    done = true;
  });
  io.run();
  EXPECT_TRUE(done);
  w.sim_counters = simulator.counters();
  w.reported = simcheck::AsDevicesReportIt(f, simulator);
  return w;
}

TEST(DiscoveryTest, FindsEveryNodePortAndCableOfATwoTierFatTree) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  Walk w = Discover(*f);
  EXPECT_TRUE(w.result.issues.empty());
  EXPECT_EQ(w.result.fabric.switch_count(), 12u);
  EXPECT_EQ(w.result.fabric.ca_count(), 32u);
  EXPECT_EQ(w.result.fabric.link_count(), f->link_count());
  EXPECT_EQ(FormatFabric(w.result.fabric), FormatFabric(w.reported));
}

TEST(DiscoveryTest, ThreeTierAndIrregularFabricsComeOutAsBuilt) {
  auto ft3 = FatTree3(8);
  ASSERT_TRUE(ft3.ok());
  Walk w3 = Discover(*ft3);
  EXPECT_EQ(FormatFabric(w3.result.fabric), FormatFabric(w3.reported));
  auto rnd = RandomGraph(20, 8, 3, 11);
  ASSERT_TRUE(rnd.ok());
  Walk wr = Discover(*rnd);
  EXPECT_EQ(FormatFabric(wr.result.fabric), FormatFabric(wr.reported));
}

// A walk cancelled part way: what it had not sent is taken back from the pipeline (not sent,
// not counted), its answers in flight are ignored, its `done` never runs, and the same
// Discovery walks again at once to the same fabric as a fresh one.
TEST(DiscoveryTest, ACancelledWalkSendsNoMoreAndTheNextWalkIsWhole) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator simulator(*f);
  size_t node_infos = 0;
  bool cancelling = false, cancelled = false;
  size_t sent_after_cancel = 0;
  sim::SimTransport transport(io, simulator, FirstCabledCaPort(*f));
  mad::SendOptions send;
  send.timeout = std::chrono::milliseconds(100);  // no resend, even under a sanitizer
  SmpPipeline pipeline(transport, 8, send, 0);
  Discovery d(pipeline);
  simulator.SetSmpObserver([&](NodeId, uint8_t, uint16_t attr, uint32_t) {
    if (cancelled) ++sent_after_cancel;
    if (attr == mad::attr::kNodeInfo && ++node_infos == 20 && !cancelling) {
      cancelling = true;
      // From the io loop, as a trap stops it: answers in flight are still to come.
      boost::asio::post(io, [&] {
        d.Cancel();
        cancelled = true;
        EXPECT_FALSE(d.running());
      });
    }
  });
  bool first_done = false;
  d.Run([&](DiscoveryResult) { first_done = true; });
  io.run();
  io.restart();
  EXPECT_TRUE(cancelled);
  EXPECT_FALSE(first_done) << "a cancelled walk's done ran";
  EXPECT_TRUE(pipeline.idle());
  // What was in flight had been sent already; its answers start nothing new.
  EXPECT_EQ(sent_after_cancel, 0u) << "the walk sent on after Cancel";
  const uint64_t gets = pipeline.counters().gets;
  EXPECT_LT(gets, 20u + 8u + 8u * 16u) << "the taken-back requests were counted as sent";
  simulator.SetSmpObserver({});
  DiscoveryResult again;
  bool second_done = false;
  d.Run([&](DiscoveryResult r) {
    again = std::move(r);
    second_done = true;
  });
  io.run();
  ASSERT_TRUE(second_done);
  EXPECT_TRUE(again.issues.empty());
  EXPECT_TRUE(FormatFabric(again.fabric) ==
              FormatFabric(simcheck::AsDevicesReportIt(*f, simulator)))
      << "the walk after the cancelled one did not find the fabric as built";
}

TEST(DiscoveryTest, OneSmpInFlightFindsTheSameFabricAsMany) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(FormatFabric(Discover(*f, 0, kNoNode, 1).result.fabric),
            FormatFabric(Discover(*f, 0, kNoNode, 256).result.fabric));
}

// Each node's DR path and NodeInfo arrival port, by node GUID.
std::string Paths(const DiscoveryResult& r) {
  std::string out;
  for (NodeId n = 0; n < r.nodes.size(); ++n) {
    out += ToString(r.fabric.node(n).guid) + " " + PathString(r.nodes[n].path) + " port " +
           std::to_string(r.nodes[n].node_info.local_port_num) + " " +
           ToString(Guid{r.nodes[n].node_info.port_guid});
    for (size_t p = 0; p < r.nodes[n].port_info.size(); ++p)
      if (r.nodes[n].port_info_valid[p])
        out += " " + std::to_string(r.nodes[n].port_info[p].local_port_num);
    out += "\n";
  }
  return out;
}

// With many SMPs in flight the answers come back in an order set by load; the path and
// arrival port kept for each node (what PortInfoRecord's LocalPortNum reports) must not follow
// it. One SMP at a time with no jitter against 256 in flight with answers reordered.
TEST(DiscoveryTest, PathsAndArrivalPortsDoNotDependOnAnswerOrder) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  std::string serial = Paths(Discover(*f, 0, kNoNode, 1).result);
  for (uint64_t seed : {1, 2, 3}) {
    Walk w = Discover(*f, 0, kNoNode, 256, std::chrono::microseconds(500), seed);
    EXPECT_EQ(FormatFabric(w.result.fabric), FormatFabric(w.reported));
    EXPECT_EQ(Paths(w.result), serial) << "seed " << seed;
  }
  // Breadth first: the SM's leaf is one hop away, reached through its port to the SM.
  const DiscoveryResult r = Discover(*f).result;
  size_t one_hop = 0;
  for (const DiscoveredNode& dn : r.nodes) {
    if (dn.path.size() != 1) continue;
    ++one_hop;
    EXPECT_EQ(dn.node_info.node_type, mad::NodeType::kSwitch);
    EXPECT_GE(dn.node_info.local_port_num, 1);
  }
  EXPECT_EQ(one_hop, 1u);
}

TEST(DiscoveryTest, LossyFabricGivesTheSameResultThroughRetries) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  Walk w = Discover(*f, 0.05);
  EXPECT_GT(w.sim_counters.dropped, 0u) << "injected " << w.sim_counters.injected << " random " << w.sim_counters.drops(sim::DropReason::kRandom);
  EXPECT_EQ(w.result.smps_failed, 0u);
  EXPECT_EQ(FormatFabric(w.result.fabric), FormatFabric(w.reported));
}

TEST(DiscoveryTest, DeadSwitchIsReportedAndTheRestIsStillDiscovered) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  auto spine = f->FindNodeByName("spine-01");
  ASSERT_TRUE(spine.has_value());
  Walk w = Discover(*f, 0, *spine);
  EXPECT_EQ(w.result.fabric.switch_count(), 11u);
  EXPECT_EQ(w.result.fabric.ca_count(), 32u);
  EXPECT_FALSE(w.result.issues.empty());
  EXPECT_EQ(w.result.issues.front().id, "SM-DISC-001");
}

}  // namespace
}  // namespace ibsm::sm
