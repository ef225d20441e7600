// The partition stage alone (sm/sweep/partition_programmer.h) against the strict simulator:
// a first run reads what it does not know and writes what differs, a second sends nothing,
// the standby's reads stand until a heavy sweep, and a renumbered plan is kept only where it
// is the plan a new run would make.
#include "sm/sweep/partition_programmer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/model/discovery.h"
#include "sm/testing/sim_test_util.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using simcheck::FirstCaPort;

struct PKeyStageBed {
  PKeyStageBed()
      : built(FatTree2(4).value()), sim(built), t(io, sim, FirstCaPort(built)),
        pipeline(t, 16, mad::SendOptions{std::chrono::milliseconds(20), 3}, 0),
        partitions(pipeline, counters,
                   {[this]() -> const DiscoveryResult& { return d; },
                    [this](std::string_view id, std::string m) {
                      issues.push_back(std::string(id) + " " + m);
                    },
                    [this](PortId p) {
                      // As read, with "no change" where a Set would change the link.
                      const Port& port = d.fabric.port(p);
                      mad::PortInfo pi = d.nodes[port.node].port_info[port.num.value()];
                      pi.port_state = 0;
                      pi.port_phys_state = 0;
                      pi.link_down_default_state = 0;
                      pi.link_speed_enabled = 0;
                      pi.link_width_enabled = 0;
                      pi.link_speed_ext_enabled = 0;
                      return pi;
                    },
                    [this](NodeId n, uint8_t port, const mad::PortInfo& pi) {
                      d.nodes[n].port_info[port] = pi;
                    },
                    [] { return false; }}) {
    Discovery disc(pipeline);
    disc.Run([&](DiscoveryResult r) { d = std::move(r); });
    io.run();
    // The links as the link stage leaves them (a port whose link is not ACTIVE restarted,
    // and its table is read again every run).
    for (PortId p = 0; p < d.fabric.port_count(); ++p)
      if (d.fabric.port(p).connected()) d.fabric.mutable_port(p).state = PortState::kActive;
    sm_port = *d.fabric.FindPort(built.port(FirstCaPort(built)).guid);
    for (NodeId n = 0; n < built.node_count(); ++n)
      if (!built.node(n).is_switch()) hosts.push_back(built.port_id(n, PortNum{1}));
  }
  std::string Guid(size_t host) const { return ToString(built.port(hosts.at(host)).guid); }
  // One run with `policy`; `reread`: a heavy sweep (the standby's reads are read again).
  void Run(const PartitionPolicy& policy, bool reread = true) {
    PartitionProgrammer::Sweep s;
    s.number = ++runs;
    s.sm_port = sm_port;
    s.policy = policy;
    s.reread_assumed = reread;
    // Every switch holds the top it reports (nothing rebooted).
    s.top = [this](ibsm::Guid g) -> std::optional<uint16_t> {
      const auto n = d.fabric.FindNode(g);
      return n ? std::optional<uint16_t>(d.nodes[*n].switch_info.linear_fdb_top) : std::nullopt;
    };
    bool done = false;
    partitions.Run(std::move(s), [&] { done = true; });
    io.restart();
    io.run();
    EXPECT_TRUE(done);
  }

  Fabric built;
  sim::Simulator sim;
  boost::asio::io_context io;
  sim::SimTransport t;
  SmpPipeline pipeline;
  SmCounters counters;
  DiscoveryResult d;
  PartitionProgrammer partitions;
  PortId sm_port = kNoPort;
  std::vector<PortId> hosts;  // the simulator's CA ports
  std::vector<std::string> issues;
  uint64_t runs = 0;
};

PartitionPolicy Policy(const PKeyStageBed& b) {
  PartitionPolicy p;
  p.config = testutil::ParsePartitionsText("Default=0x7fff : ALL=full ;\n"
                                           "red=0x0001 : " + b.Guid(1) + "=full, " + b.Guid(2) +
                                           "=limited ;\n");
  p.enforce = PartEnforce::kBoth;
  return p;
}

TEST(PartitionProgrammerTest, AFirstRunWritesThePlanAndASecondSendsNothing) {
  PKeyStageBed b;
  b.Run(Policy(b));
  ASSERT_TRUE(b.partitions.plan());
  EXPECT_GT(b.partitions.run().read, 0u);  // nothing was known
  EXPECT_GT(b.partitions.run().sent, 0u);
  EXPECT_TRUE(b.issues.empty()) << (b.issues.empty() ? "" : b.issues.front()) << " of " << b.issues.size();
  EXPECT_EQ(testutil::UsedPKeys(b.sim.pkey_table(b.hosts[1])),
            (std::vector<uint16_t>{0xFFFF, 0x8001}));
  EXPECT_EQ(testutil::UsedPKeys(b.sim.pkey_table(b.hosts[2])),
            (std::vector<uint16_t>{0xFFFF, 0x0001}));
  EXPECT_EQ(testutil::UsedPKeys(b.sim.pkey_table(b.hosts[3])), (std::vector<uint16_t>{0xFFFF}));

  // The same policy again: every table is known and holds the plan, and every enforcement
  // bit is held or was answered without it (the echo): nothing is sent.
  b.Run(Policy(b));
  EXPECT_EQ(b.partitions.run().read, 0u) << (b.issues.empty() ? "" : b.issues.back());
  EXPECT_EQ(b.partitions.run().sent, 0u);
  EXPECT_EQ(b.partitions.run().enforcement_sets, 0u);
}

// What a standby read stands for what the ports hold (no read) until a heavy sweep reads it
// back; forgotten, it is read again at once.
TEST(PartitionProgrammerTest, TheStandbysReadsStandUntilAHeavySweepReadsThemBack) {
  PKeyStageBed b;
  b.Run(Policy(b));
  const PortId port = *b.d.fabric.FindPort(b.built.port(b.hosts[1]).guid);
  const PortKey key{b.d.fabric.node(b.d.fabric.port(port).node).guid, 1};
  // A read that says the port holds the default partition only (wrong: it holds red too).
  PKeyCache wrong;
  wrong.keys.assign(b.sim.pkey_table(b.hosts[1]).size(), 0);
  wrong.keys[0] = 0xFFFF;
  wrong.known.assign((wrong.keys.size() + 31) / 32, true);
  std::map<PortKey, PKeyCache> read;
  read[key] = wrong;
  b.partitions.Assume(read);
  b.Run(Policy(b), /*reread=*/false);  // a repair: the assumed table is not read
  EXPECT_EQ(b.partitions.run().read, 0u);
  EXPECT_GE(b.partitions.run().sent, 1u);  // red, which the assumed table lacks, is written
  b.partitions.Assume(read);
  b.Run(Policy(b), /*reread=*/true);  // a heavy sweep: read back, found right, nothing sent
  EXPECT_EQ(b.partitions.run().read, wrong.known.size());
  EXPECT_EQ(b.partitions.run().sent, 0u);
  b.partitions.Assume(read);
  b.partitions.ForgetAssumed();
  b.Run(Policy(b), /*reread=*/false);
  EXPECT_EQ(b.partitions.run().read, wrong.known.size());
  EXPECT_EQ(b.partitions.run().sent, 0u);
}

// A renumbered plan is kept only when every node taken out was a switch facing no end port.
TEST(PartitionProgrammerTest, APlanIsRenumberedOnlyWhenNoEndPortLeft) {
  PKeyStageBed b;
  EXPECT_FALSE(b.partitions.KeepPlanRenumbered({0, 1}, true));  // no plan yet
  b.Run(Policy(b));
  const auto before = b.partitions.plan();
  std::vector<PortId> same(b.d.fabric.port_count());
  for (PortId p = 0; p < same.size(); ++p) same[p] = p;
  EXPECT_FALSE(b.partitions.KeepPlanRenumbered(same, /*switches_only=*/false));
  EXPECT_EQ(b.partitions.plan(), before);
  // A switch port facing an end port taken out: planned again.
  std::vector<PortId> lost = same;
  ASSERT_FALSE(before->enforcement.empty());
  lost[before->enforcement.begin()->first] = kNoPort;
  EXPECT_FALSE(b.partitions.KeepPlanRenumbered(lost, true));
  EXPECT_EQ(b.partitions.plan(), before);
  // Every port one higher (a node of a lower GUID taken out): the same entries, moved.
  std::vector<PortId> shifted(same.size());
  for (PortId p = 0; p < shifted.size(); ++p) shifted[p] = p + 1;
  EXPECT_TRUE(b.partitions.KeepPlanRenumbered(shifted, true));
  const auto after = b.partitions.plan();
  ASSERT_EQ(after->tables.size(), before->tables.size());
  for (const auto& [p, table] : before->tables) EXPECT_EQ(after->tables.at(p + 1), table);
  for (const auto& [p, m] : before->members) EXPECT_EQ(after->members.at(p + 1), m);
  EXPECT_EQ(after->enforcement.size(), before->enforcement.size());
}

// Two repairs that each took a switch out, the second before the plan was asked for (it
// handed over before publishing): the plan asked for after both carries both renumberings,
// and the second's check is against the ports as the first left them.
TEST(PartitionProgrammerTest, TwoRenumberingsBeforeThePlanIsAskedForAreBothApplied) {
  PKeyStageBed b;
  b.Run(Policy(b));
  const auto before = b.partitions.plan();
  const size_t n = b.d.fabric.port_count();
  std::vector<PortId> shifted(n), shifted_again(n + 1);
  for (PortId p = 0; p < n; ++p) shifted[p] = p + 1;
  for (PortId p = 0; p < n + 1; ++p) shifted_again[p] = p + 2;
  ASSERT_TRUE(b.partitions.KeepPlanRenumbered(shifted, true));
  // The second takes out a port the first renumbering moved an enforcing port to: refused.
  std::vector<PortId> lost = shifted_again;
  lost[before->enforcement.begin()->first + 1] = kNoPort;
  EXPECT_FALSE(b.partitions.KeepPlanRenumbered(lost, true));
  ASSERT_TRUE(b.partitions.KeepPlanRenumbered(shifted_again, true));
  const auto after = b.partitions.plan();
  ASSERT_NE(after, before);
  ASSERT_EQ(after->tables.size(), before->tables.size());
  for (const auto& [p, table] : before->tables) EXPECT_EQ(after->tables.at(p + 3), table);
  for (const auto& [p, m] : before->members) EXPECT_EQ(after->members.at(p + 3), m);
  for (const auto& [p, e] : before->enforcement) EXPECT_EQ(after->enforcement.count(p + 3), 1u);
  EXPECT_EQ(b.partitions.plan(), after);  // applied once
}

}  // namespace
}  // namespace ibsm::sm
