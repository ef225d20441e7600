// What the SM writes into every port and switch, read back from the strict simulator, whose
// ports start with nothing an SM sets (NeighborMTU 256, OperationalVLs VL0, no thresholds,
// HOQLife and VLStallCount 0, LifeTimeValue 0): each field must end as OpenSM's link and
// unicast managers set it (docs/port-programming.md), and a second sweep must find nothing
// left to write.
#include <algorithm>
#include <functional>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/testing/sim_test_util.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

using simcheck::FirstCaPort;
using namespace std::chrono_literals;

SubnetManagerOptions LinkOptions() {
  SubnetManagerOptions o;
  o.send.timeout = 100ms;
  o.send.retries = 8;
  o.sweep_interval = 0s;
  o.routing_engine = "ftree";
  return o;
}

// Runs sweeps on `sim` until `sweeps` have ended; returns the last one's stats.
SweepStats SweepTimes(const Fabric& f, sim::Simulator& sim, SubnetManagerOptions o, int sweeps = 1) {
  boost::asio::io_context io;
  SystemClock clock;
  sim::SimTransport transport(io, sim, FirstCaPort(f));
  SubnetManager sm(io, transport, clock, nullptr, o);
  SweepStats last;
  int seen = 0;
  sm.Start([&](const SweepStats& s) {
    last = s;
    if (++seen >= sweeps) {
      sm.Stop();
      io.stop();
    } else {
      sm.RequestHeavySweep("test");
    }
  });
  io.run();
  return last;
}

TEST(PortProgrammingSimTest, EveryPortAndSwitchEndsAsOpenSmsLinkManagerSetsIt) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  // One host with a 2 KiB MTU and 2 data VLs: its cable runs at the smaller ends.
  PortId small = kNoPort;
  for (NodeId n = 0; n < f->node_count() && small == kNoPort; ++n) {
    const PortId p = f->port_id(n, PortNum{1});
    if (!f->node(n).is_switch() && p != FirstCaPort(*f) && f->port(p).connected()) small = p;
  }
  ASSERT_NE(small, kNoPort);
  sim.SetPortCaps(small, /*mtu_cap=*/4, /*vl_cap=*/2);
  SubnetManagerOptions o = LinkOptions();
  o.sm_sl = 3;
  o.packet_life_time = 0x13;
  o.local_phy_errors_threshold = 0x09;
  o.overrun_errors_threshold = 0x0A;
  SweepStats s = SweepTimes(*f, sim, o);
  ASSERT_TRUE(s.subnet_up);

  size_t links = 0;
  for (PortId p = 0; p < f->port_count(); ++p) {
    const Port& port = f->port(p);
    const bool is_switch = f->node(port.node).is_switch();
    if (!is_switch && port.num.value() == 0) continue;  // a CA has no port 0
    const mad::PortInfo& pi = sim.port_info(p);
    SCOPED_TRACE(ToString(f->node(port.node).guid) + " port " +
                 std::to_string(port.num.value()));
    if (!is_switch || port.num.value() == 0) {
      EXPECT_EQ(pi.master_sm_sl, 3);
      EXPECT_EQ(pi.subnet_timeout, o.subnet_timeout);
    }
    if (is_switch && port.num.value() == 0) continue;
    if (!port.connected()) continue;
    ++links;
    const mad::PortInfo& peer = sim.port_info(port.peer);
    EXPECT_EQ(pi.neighbor_mtu, std::min(pi.mtu_cap, peer.mtu_cap));
    EXPECT_EQ(pi.operational_vls, std::min(pi.vl_cap, peer.vl_cap));
    // A switch that keeps no error thresholds or VLStallCount reads 0 whatever was written.
    const bool keeps = !(is_switch && sim.quirks(port.node).drops_port_tuning);
    EXPECT_EQ(pi.local_phy_errors, keeps ? 0x09 : 0);
    EXPECT_EQ(pi.overrun_errors, keeps ? 0x0A : 0);
    EXPECT_EQ(pi.link_down_default_state, 2) << "Polling";
    if (is_switch) {
      const bool leaf = !f->node(f->port(port.peer).node).is_switch();
      EXPECT_EQ(pi.hoq_life, leaf ? o.leaf_head_of_queue_lifetime : o.head_of_queue_lifetime);
      EXPECT_EQ(pi.vl_stall_count, !keeps ? 0 : leaf ? o.leaf_vl_stall_count : o.vl_stall_count);
    }
  }
  EXPECT_GT(links, 0u);
  EXPECT_EQ(sim.port_info(small).neighbor_mtu, 4);
  EXPECT_EQ(sim.port_info(small).operational_vls, 2);
  EXPECT_EQ(sim.port_info(f->port(small).peer).neighbor_mtu, 4) << "the switch end follows";
  EXPECT_EQ(sim.port_info(f->port(small).peer).operational_vls, 2);
  for (NodeId n = 0; n < f->node_count(); ++n)
    if (f->node(n).is_switch()) {
      EXPECT_EQ(sim.switch_info(n).life_time_value, 0x13);
    }
}

TEST(PortProgrammingSimTest, MaxOpVlsCapsOperationalVlsAndASecondSweepWritesNoPortInfo) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  SubnetManagerOptions o = LinkOptions();
  o.max_op_vls = 2;  // VL0-1
  SweepStats s = SweepTimes(*f, sim, o, /*sweeps=*/2);
  ASSERT_TRUE(s.subnet_up);
  for (PortId p = 0; p < f->port_count(); ++p) {
    const Port& port = f->port(p);
    if (!port.connected() || port.num.value() == 0) continue;
    EXPECT_EQ(sim.port_info(p).operational_vls, 2) << p;
  }
  EXPECT_EQ(s.portinfo_sets, 0u) << "the second sweep found every port as it wants it";
  EXPECT_EQ(s.switchinfo_sets, 0u);
}

// A switch that reports partition enforcement but keeps none (as ibsim's switches: the bits
// read back 0 after the Set) is told once, counted and logged (SM-PKEY-004), and not Set
// again by every sweep while it answers the same; the switches that keep it hold it.
TEST(PortProgrammingSimTest, ASwitchThatKeepsNoPartitionEnforcementIsNotSetAgainEverySweep) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  size_t facing_cas = 0, dropping = 0;
  for (PortId p = 0; p < f->port_count(); ++p) {
    const Port& port = f->port(p);
    if (!f->node(port.node).is_switch() || port.num.value() == 0 || !port.connected()) continue;
    if (f->node(f->port(port.peer).node).is_switch()) continue;
    ++facing_cas;
    if (sim.quirks(port.node).drops_partition_enforcement) ++dropping;
  }
  ASSERT_GT(dropping, 0u) << "the seed gives some leaf that keeps no enforcement";
  ASSERT_LT(dropping, facing_cas);

  boost::asio::io_context io;
  SystemClock clock;
  sim::SimTransport transport(io, sim, FirstCaPort(*f));
  SubnetManager sm(io, transport, clock, nullptr, LinkOptions());
  std::vector<SweepStats> sweeps;
  uint64_t not_kept_after_first = 0;
  sm.Start([&](const SweepStats& s) {
    sweeps.push_back(s);
    if (sweeps.size() == 1) not_kept_after_first = sm.counters().enforcement_not_kept;
    if (sweeps.size() >= 3) {
      sm.Stop();
      io.stop();
    } else {
      sm.RequestHeavySweep("test");
    }
  });
  io.run();
  ASSERT_EQ(sweeps.size(), 3u);
  for (const SweepStats& s : sweeps) EXPECT_TRUE(s.subnet_up) << s.number;
  // part_enforce both by default: every port facing a CA is told once...
  EXPECT_EQ(sweeps[0].enforcement_sets, facing_cas);
  EXPECT_EQ(not_kept_after_first, dropping);
  // ...and no later sweep tells them again: neither those that hold it nor those that
  // answer without it.
  EXPECT_EQ(sweeps[1].enforcement_sets, 0u);
  EXPECT_EQ(sweeps[2].enforcement_sets, 0u);
  EXPECT_EQ(sm.counters().enforcement_not_kept, dropping);
  auto id = sm.counters().issues_by_id.find("SM-PKEY-004");
  ASSERT_NE(id, sm.counters().issues_by_id.end());
  EXPECT_EQ(id->second, 1u) << "logged by the sweep that found them";
  for (PortId p = 0; p < f->port_count(); ++p) {
    const Port& port = f->port(p);
    if (!f->node(port.node).is_switch() || port.num.value() == 0 || !port.connected()) continue;
    if (f->node(f->port(port.peer).node).is_switch()) continue;
    const uint8_t want = sim.quirks(port.node).drops_partition_enforcement ? 0 : 1;
    EXPECT_EQ(sim.port_info(p).partition_enforcement_inbound, want) << p;
    EXPECT_EQ(sim.port_info(p).partition_enforcement_outbound, want) << p;
  }
}

// force_link_width 0 and force_link_speed 0 leave the Enabled fields as the ports have them;
// the default (255, 15) sets them to what each port supports.
TEST(PortProgrammingSimTest, ForcedLinkWidthAndSpeedFollowTheOptions) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  {
    sim::Simulator sim(*f);
    SubnetManagerOptions o = LinkOptions();
    o.force_link_width = 1;  // 1x only
    o.force_link_speed = 1;  // SDR only
    ASSERT_TRUE(SweepTimes(*f, sim, o).subnet_up);
    for (PortId p = 0; p < f->port_count(); ++p) {
      if (!f->port(p).connected() || f->port(p).num.value() == 0) continue;
      EXPECT_EQ(sim.port_info(p).link_width_enabled, 1) << p;
      EXPECT_EQ(sim.port_info(p).link_speed_enabled, 1) << p;
    }
  }
  {
    sim::Simulator sim(*f);
    SubnetManagerOptions o = LinkOptions();
    o.force_link_width = 0;
    o.force_link_speed = 0;
    std::vector<std::pair<uint8_t, uint8_t>> before;
    for (PortId p = 0; p < f->port_count(); ++p)
      before.emplace_back(sim.port_info(p).link_width_enabled, sim.port_info(p).link_speed_enabled);
    ASSERT_TRUE(SweepTimes(*f, sim, o).subnet_up);
    for (PortId p = 0; p < f->port_count(); ++p) {
      EXPECT_EQ(sim.port_info(p).link_width_enabled, before[p].first) << p;
      EXPECT_EQ(sim.port_info(p).link_speed_enabled, before[p].second) << p;
    }
  }
}

}  // namespace
}  // namespace ibsm::sm
