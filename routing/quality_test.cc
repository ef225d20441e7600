#include "routing/quality.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "routing/minhop_engine.h"
#include "routing/routing_test_util.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;
using ::testing::HasSubstr;

RoutingTables MinHop(const Fabric& fabric, const LidMap& lids) {
  auto r = MinHopEngine().Route(fabric, lids, {});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : RoutingTables{};
}

NodeId NodeNamed(const Fabric& f, std::string_view name) { return *f.FindNodeByName(name); }

std::vector<uint8_t>& Lft(const Fabric& f, RoutingTables& t, std::string_view name) {
  return t.switches[t.switch_index[NodeNamed(f, name)]].lft;
}

// `switches` switches named sw-1.. with `hosts` hosts each on ports 1..hosts; the remaining
// ports are left for the caller's cables. LIDs are assigned by the caller.
Fabric Switches(int switches, int ports, int hosts) {
  Fabric f;
  for (int s = 1; s <= switches; ++s) {
    const std::string name = fmt::format("sw-{}", s);
    EXPECT_TRUE(
        f.AddNode(NodeKind::kSwitch, Guid(0x1000 + s), static_cast<uint8_t>(ports), name, name)
            .ok());
  }
  for (int s = 1; s <= switches; ++s)
    for (int h = 1; h <= hosts; ++h) {
      const std::string name = fmt::format("host-{}-{}", s, h);
      auto ca = f.AddNode(NodeKind::kCa, Guid(0x100000 + 16 * (s * 100 + h)), 1, name, name);
      EXPECT_TRUE(ca.ok());
      EXPECT_TRUE(f.Connect(*ca, PortNum(1), NodeNamed(f, fmt::format("sw-{}", s)),
                            PortNum(static_cast<uint8_t>(h)))
                      .ok());
    }
  return f;
}

void Cable(Fabric& f, std::string_view a, int pa, std::string_view b, int pb) {
  ASSERT_TRUE(f.Connect(NodeNamed(f, a), PortNum(static_cast<uint8_t>(pa)), NodeNamed(f, b),
                        PortNum(static_cast<uint8_t>(pb)))
                  .ok());
}

// A ring of 5 switches, one host each: port 2 goes clockwise (sw-i to sw-i+1), port 3 back.
// On an odd ring every minimal path is unique, so minhop sends everything two hops away
// around the ring in both directions: the classic credit loop.
Fabric Ring5() {
  Fabric f = Switches(5, 3, 1);
  for (int s = 1; s <= 5; ++s)
    Cable(f, fmt::format("sw-{}", s), 2, fmt::format("sw-{}", s % 5 + 1), 3);
  AssignLids(f);
  return f;
}

// Two leaves with three hosts each and one uplink (port 4) to one spine (ports 1, 2).
Fabric TwoLeavesOneSpine() {
  Fabric f = Switches(3, 4, 0);
  for (int leaf = 1; leaf <= 2; ++leaf)
    for (int h = 1; h <= 3; ++h) {
      const std::string name = fmt::format("host-{}-{}", leaf, h);
      auto ca = f.AddNode(NodeKind::kCa, Guid(0x200000 + 16 * (leaf * 10 + h)), 1, name, name);
      EXPECT_TRUE(ca.ok());
      Cable(f, name, 1, fmt::format("sw-{}", leaf), h);
    }
  Cable(f, "sw-1", 4, "sw-3", 1);
  Cable(f, "sw-2", 4, "sw-3", 2);
  AssignLids(f);
  return f;
}

uint16_t HostLid(const Fabric& f, std::string_view host) {
  return f.port(NodeNamed(f, host), PortNum(1)).lid.value();
}

// ---- CheckCreditLoops -------------------------------------------------------------------

TEST(CheckCreditLoopsTest, MinHopOnATwoTierFatTreeIsAcyclic) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  const RoutingTables tables = MinHop(*f, lids);
  const CreditLoopReport r = CheckCreditLoops(*f, lids, tables, 2);
  EXPECT_TRUE(r.acyclic);
  EXPECT_TRUE(r.cycle.empty());
  EXPECT_EQ(r.channels, 64u);  // 32 leaf-spine cables, both directions
  // Each of the 32 up-channels continues down to the 7 other leaves; down-channels end at
  // hosts.
  EXPECT_EQ(r.dependencies, 32u * 7u);
}

TEST(CheckCreditLoopsTest, MinHopOnAThreeTierFatTreeIsAcyclicForAnyThreadCount) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  const RoutingTables tables = MinHop(*f, lids);
  const CreditLoopReport one = CheckCreditLoops(*f, lids, tables, 1);
  const CreditLoopReport four = CheckCreditLoops(*f, lids, tables, 4);
  EXPECT_TRUE(one.acyclic);
  EXPECT_EQ(one.channels, 2u * (8u * 4u * 4u + 16u * 8u));  // leaf-spine + spine-core cables
  EXPECT_GT(one.dependencies, 0u);
  EXPECT_EQ(four.acyclic, one.acyclic);
  EXPECT_EQ(four.dependencies, one.dependencies);
}

TEST(CheckCreditLoopsTest, FindsTheCreditLoopOfMinHopOnARingAndNamesItsLinks) {
  const Fabric f = Ring5();
  const LidMap lids(f);
  RoutingTables tables = MinHop(f, lids);
  ASSERT_TRUE(VerifyTables(f, lids, tables).ok);  // the routes themselves are fine
  const CreditLoopReport r = CheckCreditLoops(f, lids, tables);
  EXPECT_FALSE(r.acyclic);
  EXPECT_EQ(r.channels, 10u);
  EXPECT_EQ(r.dependencies, 10u);  // each channel continues one more hop the same way
  // The search starts at sw-1's lowest channel: the clockwise ring.
  ASSERT_EQ(r.cycle.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(r.cycle[i], fmt::format("sw-{} ({:#018x}) port 2", i + 1, 0x1000 + i + 1));
  ASSERT_EQ(r.cycle_lids.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    // The witness LID leaves sw-i+1 and sw-i+2 clockwise.
    const uint16_t lid = r.cycle_lids[i];
    EXPECT_EQ(Lft(f, tables, fmt::format("sw-{}", i + 1))[lid], 2);
    EXPECT_EQ(Lft(f, tables, fmt::format("sw-{}", (i + 1) % 5 + 1))[lid], 2);
  }
}

TEST(CheckCreditLoopsTest, FindsALoopPlantedByHandBetweenALeafAndASpine) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  RoutingTables tables = MinHop(*f, lids);
  const uint16_t lid = f->port(f->port(NodeNamed(*f, "leaf-005"), PortNum(1)).peer).lid.value();
  const uint8_t up = Lft(*f, tables, "leaf-001")[lid];
  const NodeId spine = f->port(f->port(NodeNamed(*f, "leaf-001"), PortNum(up)).peer).node;
  Lft(*f, tables, f->node(spine).name)[lid] = 1;  // back down to leaf-001, which sends it up
  const CreditLoopReport r = CheckCreditLoops(*f, lids, tables);
  EXPECT_FALSE(r.acyclic);
  ASSERT_EQ(r.cycle.size(), 2u);
  EXPECT_EQ(r.cycle[0],
            fmt::format("leaf-001 ({}) port {}", f->node(NodeNamed(*f, "leaf-001")).guid, up));
  EXPECT_EQ(r.cycle[1], fmt::format("{} ({}) port 1", f->node(spine).name, f->node(spine).guid));
  EXPECT_EQ(r.cycle_lids, (std::vector<uint16_t>{lid, lid}));
}

TEST(CheckCreditLoopsTest, SurvivesMissingMisroutedAndTruncatedTables) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  RoutingTables tables = MinHop(*f, lids);
  Lft(*f, tables, "leaf-001")[10] = kDropPort;
  Lft(*f, tables, "leaf-002")[10] = 200;  // no such port
  Lft(*f, tables, "leaf-003")[10] = 0;    // not its LID
  Lft(*f, tables, "spine-01")[11] = kDropPort;
  Lft(*f, tables, "spine-02").resize(3);  // too short for most LIDs
  Lft(*f, tables, "spine-03").clear();
  tables.switch_index[NodeNamed(*f, "spine-04")] = SIZE_MAX;  // no table at all
  const CreditLoopReport r = CheckCreditLoops(*f, lids, tables, 3);
  EXPECT_TRUE(r.acyclic);
  EXPECT_EQ(r.channels, 64u);
  EXPECT_LT(r.dependencies, 32u * 7u);

  RoutingTables none;
  EXPECT_TRUE(CheckCreditLoops(*f, lids, none).acyclic);
}

// ---- MeasureQuality ---------------------------------------------------------------------

TEST(MeasureQualityTest, FlowsThatStayOnOneSwitchShareNoChannel) {
  Fabric f = Switches(1, 8, 6);
  AssignLids(f);
  const LidMap lids(f);
  const RoutingTables tables = MinHop(f, lids);
  QualityOptions options;
  options.random_permutations = 50;
  const QualityReport q = MeasureQuality(f, lids, tables, options);
  EXPECT_EQ(q.hosts, 6u);
  EXPECT_EQ(q.shift_max_sharing, 1u);
  EXPECT_EQ(q.shift_worst, 1u);
  EXPECT_EQ(q.random_max_sharing, 1u);
  EXPECT_DOUBLE_EQ(q.effective_bisection_bandwidth, 1.0);
  EXPECT_EQ(q.unrouted_flows, 0u);
  ASSERT_EQ(q.routes_per_link.size(), 1u);
  EXPECT_EQ(q.routes_per_link[0].tier, 0u);
  EXPECT_EQ(q.routes_per_link[0].channels, 12u);
  EXPECT_EQ(q.routes_per_link[0].min_routes, 5u);
  EXPECT_EQ(q.routes_per_link[0].max_routes, 5u);
  EXPECT_DOUBLE_EQ(q.routes_per_link[0].stddev_routes, 0.0);
}

// A daemon shutting down sets the cancel flag; a measurement of 100,000 permutations then
// stops at the next one instead of running to the end.
TEST(MeasureQualityTest, ASetCancelFlagStopsTheMeasurementAndSaysSo) {
  const Fabric f = TwoLeavesOneSpine();
  const LidMap lids(f);
  const RoutingTables tables = MinHop(f, lids);
  std::atomic<bool> cancel{false};
  QualityOptions options;
  options.random_permutations = 100000;
  options.cancel = &cancel;
  EXPECT_FALSE(MeasureQuality(f, lids, tables, options).cancelled) << "not set: runs to the end";
  cancel = true;
  const QualityReport q = MeasureQuality(f, lids, tables, options);
  EXPECT_TRUE(q.cancelled);
  EXPECT_EQ(q.random_max_sharing, 0u) << "no permutation was measured";
  EXPECT_EQ(q.effective_bisection_bandwidth, 0.0);
}

TEST(MeasureQualityTest, CountsEveryFlowThatMustCrossTheOneUplink) {
  const Fabric f = TwoLeavesOneSpine();
  const LidMap lids(f);
  const RoutingTables tables = MinHop(f, lids);
  QualityOptions options;
  options.random_permutations = 100;
  const QualityReport q = MeasureQuality(f, lids, tables, options);
  EXPECT_EQ(q.hosts, 6u);
  // Shift 3 sends all three hosts of each leaf to the other leaf.
  EXPECT_EQ(q.shift_max_sharing, 3u);
  EXPECT_EQ(q.shift_worst, 3u);
  EXPECT_GE(q.random_max_sharing, 2u);
  EXPECT_LE(q.random_max_sharing, 3u);
  EXPECT_GT(q.effective_bisection_bandwidth, 0.3);
  EXPECT_LT(q.effective_bisection_bandwidth, 1.0);
  ASSERT_EQ(q.routes_per_link.size(), 2u);
  const TierLinkStats& hosts = q.routes_per_link[0];
  EXPECT_EQ(hosts.channels, 12u);
  EXPECT_EQ(hosts.min_routes, 5u);
  EXPECT_EQ(hosts.max_routes, 5u);
  const TierLinkStats& up = q.routes_per_link[1];
  EXPECT_EQ(up.tier, 1u);
  EXPECT_EQ(up.channels, 4u);
  EXPECT_EQ(up.min_routes, 9u);  // 3 sources x 3 destinations across
  EXPECT_EQ(up.max_routes, 9u);
  EXPECT_DOUBLE_EQ(up.mean_routes, 9.0);
}

TEST(MeasureQualityTest, CountsUnroutedFlowsAndLeavesThemOutOfTheSharing) {
  const Fabric f = TwoLeavesOneSpine();
  const LidMap lids(f);
  RoutingTables tables = MinHop(f, lids);
  Lft(f, tables, "sw-3")[HostLid(f, "host-2-1")] = kDropPort;
  QualityOptions options;
  options.random_permutations = 0;
  const QualityReport q = MeasureQuality(f, lids, tables, options);
  EXPECT_EQ(q.unrouted_flows, 3u);                  // host-1-1..3 to host-2-1
  EXPECT_EQ(q.shift_max_sharing, 3u);               // host-2-x still cross the other way
  EXPECT_EQ(q.effective_bisection_bandwidth, 0.0);  // no random permutations
  ASSERT_EQ(q.routes_per_link.size(), 2u);
  EXPECT_EQ(q.routes_per_link[1].min_routes, 6u);  // sw-1 -> sw-3 and sw-3 -> sw-2
  EXPECT_EQ(q.routes_per_link[1].max_routes, 9u);
  // host-1-x reach 4 hosts instead of 5, host-2-1 is reached by 2 instead of 5.
  EXPECT_EQ(q.routes_per_link[0].min_routes, 2u);
}

TEST(MeasureQualityTest, CountsAForwardingLoopAsUnrouted) {
  const Fabric f = TwoLeavesOneSpine();
  const LidMap lids(f);
  RoutingTables tables = MinHop(f, lids);
  Lft(f, tables, "sw-3")[HostLid(f, "host-2-1")] = 1;  // back to sw-1, which sends it up
  QualityOptions options;
  options.random_permutations = 10;
  const QualityReport q = MeasureQuality(f, lids, tables, options);
  EXPECT_EQ(q.unrouted_flows, 3u);
}

// FatTree2(8): 8 leaves of 4 hosts (ports 1-4), uplinks 5-8 to spine-01..04. Host j (fabric
// order) leaves every other leaf over uplink 5 + j mod 4 (d-mod-k), which makes every shift
// permutation contention-free on a 2-level fat tree.
TEST(MeasureQualityTest, DModKTablesMakeEveryShiftPermutationContentionFree) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  RoutingTables tables = MinHop(*f, lids);
  for (int leaf = 1; leaf <= 8; ++leaf)
    for (int other = 1; other <= 8; ++other) {
      if (other == leaf) continue;
      for (int h = 1; h <= 4; ++h) {
        const int j = (other - 1) * 4 + (h - 1);
        const uint16_t lid =
            f->port(f->port(NodeNamed(*f, fmt::format("leaf-{:03}", other)), PortNum(h)).peer)
                .lid.value();
        Lft(*f, tables, fmt::format("leaf-{:03}", leaf))[lid] = static_cast<uint8_t>(5 + j % 4);
      }
    }
  ASSERT_TRUE(VerifyTables(*f, lids, tables).ok);
  QualityOptions options;
  options.random_permutations = 200;
  options.threads = 3;
  const QualityReport q = MeasureQuality(*f, lids, tables, options);
  EXPECT_EQ(q.hosts, 32u);
  EXPECT_EQ(q.shift_max_sharing, 1u);
  EXPECT_GE(q.random_max_sharing, 2u);
  EXPECT_LT(q.effective_bisection_bandwidth, 1.0);
  EXPECT_GT(q.effective_bisection_bandwidth, 0.5);
  EXPECT_EQ(q.unrouted_flows, 0u);
  ASSERT_EQ(q.routes_per_link.size(), 2u);
  // d-mod-k spreads the 28 remote destinations of each host evenly: 7 per uplink.
  const TierLinkStats& up = q.routes_per_link[1];
  EXPECT_EQ(up.channels, 64u);
  EXPECT_EQ(up.min_routes, 28u);
  EXPECT_EQ(up.max_routes, 28u);
}

TEST(MeasureQualityTest, GivesTheSameFiguresForAnyThreadCountAndSeedsDiffer) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  const RoutingTables tables = MinHop(*f, lids);
  QualityOptions options;
  options.random_permutations = 64;
  const QualityReport one = MeasureQuality(*f, lids, tables, options);
  options.threads = 5;
  const QualityReport five = MeasureQuality(*f, lids, tables, options);
  EXPECT_EQ(one.hosts, 16u);
  EXPECT_EQ(one.unrouted_flows, 0u);
  EXPECT_EQ(five.shift_max_sharing, one.shift_max_sharing);
  EXPECT_EQ(five.shift_worst, one.shift_worst);
  EXPECT_EQ(five.random_max_sharing, one.random_max_sharing);
  EXPECT_EQ(five.effective_bisection_bandwidth, one.effective_bisection_bandwidth);
  ASSERT_EQ(one.routes_per_link.size(), 3u);  // host cables, leaf-spine, spine-core
  ASSERT_EQ(five.routes_per_link.size(), 3u);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(five.routes_per_link[t].channels, one.routes_per_link[t].channels);
    EXPECT_EQ(five.routes_per_link[t].max_routes, one.routes_per_link[t].max_routes);
    EXPECT_EQ(five.routes_per_link[t].mean_routes, one.routes_per_link[t].mean_routes);
  }
  // Total routes over the host cables: every ordered pair, counted leaving and arriving.
  EXPECT_DOUBLE_EQ(one.routes_per_link[0].mean_routes * one.routes_per_link[0].channels,
                   2.0 * 16 * 15);
  options.seed = 2;
  const QualityReport other = MeasureQuality(*f, lids, tables, options);
  EXPECT_NE(other.effective_bisection_bandwidth, one.effective_bisection_bandwidth);
}

TEST(MeasureQualityTest, HandlesAFabricWithoutHostsOrTables) {
  Fabric f = Switches(2, 4, 0);
  Cable(f, "sw-1", 1, "sw-2", 1);
  AssignLids(f);
  const LidMap lids(f);
  const QualityReport q = MeasureQuality(f, lids, RoutingTables{});
  EXPECT_EQ(q.hosts, 0u);
  EXPECT_EQ(q.shift_max_sharing, 0u);
  EXPECT_EQ(q.unrouted_flows, 0u);

  const Fabric g = TwoLeavesOneSpine();
  const LidMap glids(g);
  const QualityReport none = MeasureQuality(g, glids, RoutingTables{});
  EXPECT_EQ(none.unrouted_flows, 30u);
  EXPECT_EQ(none.shift_max_sharing, 0u);
}

}  // namespace
}  // namespace ibsm::routing
