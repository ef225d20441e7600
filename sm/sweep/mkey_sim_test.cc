// M_Key on the in-process simulator: ibsmd puts its key, protection level and
// lease period on every port; a second SM without the key can read (protection level 1) but
// not reprogram; when the lease runs out after such attempts the protection drops to 0, as
// IBA 14.2.4.2 says, and the SM that holds the key puts it back on its next sweep.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/testing/sim_test_util.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

using simcheck::FirstCaPort;
using simcheck::PortLids;
using namespace std::chrono_literals;

constexpr uint64_t kKey = 0x1122334455667788ull;

SubnetManagerOptions KeyOptions(uint64_t key) {
  SubnetManagerOptions o;
  o.send.timeout = 10ms;
  o.send.retries = 1;
  o.sweep_interval = 0s;
  o.once = true;
  o.m_key = key;
  o.m_key_protection_level = 1;
  o.m_key_lease_period = 1;  // seconds
  return o;
}

// One heavy sweep of a fresh SM bound at `at`.
SweepStats Sweep(boost::asio::io_context& io, sim::Simulator& sim, PortId at,
                 const SubnetManagerOptions& o) {
  sim::SimTransport t(io, sim, at);
  EXPECT_TRUE(t.bind_status().ok());
  SystemClock clock;
  SubnetManager sm(io, t, clock, nullptr, o);
  SweepStats out;
  sm.Start([&](const SweepStats& s) {
    out = s;
    sm.Stop();
    t.Close();
    io.stop();
  });
  io.restart();
  io.run();
  return out;
}

// The ports whose M_Key guards SMPs: every switch's port 0 and every CA port.
std::vector<PortId> KeyPorts(const Fabric& f) {
  std::vector<PortId> out;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    if (node.is_switch()) {
      out.push_back(f.port_id(n, PortNum{0}));
    } else {
      for (uint32_t p = 1; p <= node.num_ports; ++p)
        if (f.port(f.port_id(n, PortNum{static_cast<uint8_t>(p)})).connected())
          out.push_back(f.port_id(n, PortNum{static_cast<uint8_t>(p)}));
    }
  }
  return out;
}

TEST(MKeySimTest, ASecondSmWithoutTheKeyCannotReprogramAndTheLeaseEndsTheProtection) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::SimOptions so;
  so.io = &io;
  sim::Simulator sim(*f, so);
  const PortId a_port = FirstCaPort(*f);
  PortId b_port = kNoPort;  // another host, on another leaf
  for (NodeId n = f->node_count(); n-- > 0 && b_port == kNoPort;)
    if (f->node(n).kind == NodeKind::kCa) b_port = f->port_id(n, PortNum{1});

  SweepStats first = Sweep(io, sim, a_port, KeyOptions(kKey));
  ASSERT_TRUE(first.subnet_up);
  const auto ports = KeyPorts(*f);
  for (PortId p: ports) {
    EXPECT_EQ(sim.port_info(p).m_key, kKey) << f->node(f->port(p).node).name;
    EXPECT_EQ(sim.port_info(p).m_key_protect_bits, 1);
    EXPECT_EQ(sim.port_info(p).m_key_lease_period, 1);
  }
  const auto lids = PortLids(*f, sim);

  // The second SM has no key and wants other LIDs (LMC 1): every Set it sends is dropped.
  SubnetManagerOptions b = KeyOptions(0);
  b.m_key_protection_level = 0;
  b.m_key_lease_period = 0;
  b.ignore_other_sm = true;
  b.lids.lmc = 1;
  SweepStats intruder = Sweep(io, sim, b_port, b);
  EXPECT_FALSE(intruder.subnet_up);
  EXPECT_GT(intruder.smps_failed, 0u);
  EXPECT_EQ(PortLids(*f, sim), lids) << "no LID changed";
  uint64_t violations = 0;
  for (PortId p: ports) {
    violations += sim.port_info(p).m_key_violations;
    EXPECT_EQ(sim.port_info(p).m_key, kKey);
    EXPECT_EQ(sim.port_info(p).lmc, 0);
  }
  EXPECT_GT(violations, 0u);
  EXPECT_GT(sim.counters().drops(sim::DropReason::kMKey), 0u);

  // No SMP with the key for longer than the lease: the protection ends on the ports the
  // intruder tried (a Get now shows the key in the clear, 14.2.4.1 level 0). The SM with the
  // key finds that on its next sweep and sets the protection again.
  std::this_thread::sleep_for(1200ms);
  SweepStats back = Sweep(io, sim, a_port, KeyOptions(kKey));
  EXPECT_TRUE(back.subnet_up);
  EXPECT_GT(back.portinfo_sets, 0u) << "the expired protection is written back";
  EXPECT_EQ(PortLids(*f, sim), lids);
  for (PortId p: ports) {
    EXPECT_EQ(sim.port_info(p).m_key, kKey);
    EXPECT_EQ(sim.port_info(p).m_key_protect_bits, 1) << f->node(f->port(p).node).name;
  }
}

}  // namespace
}  // namespace ibsm::sm
