#include "routing/minhop_engine.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "routing/hop_table.h"
#include "routing/routing_test_util.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;
using testing::AttachNode;
using testing::SwitchesOnPath;

RoutingTables Route(const Fabric& fabric, const LidMap& lids, unsigned threads = 1) {
  RoutingOptions options;
  options.threads = threads;
  auto r = MinHopEngine().Route(fabric, lids, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : RoutingTables{};
}

// Routes `fabric` and checks that the tables verify and that every switch reaches every LID
// over exactly as many switches as the hop table's minimum.
void ExpectCompleteAndMinimal(Fabric& fabric) {
  AssignLids(fabric);
  const LidMap lids(fabric);
  const RoutingTables tables = Route(fabric, lids, 2);
  ASSERT_EQ(tables.engine, "minhop");
  ASSERT_EQ(tables.switches.size(), fabric.switch_count());
  const VerifyReport report = VerifyTables(fabric, lids, tables);
  EXPECT_TRUE(report.ok) << (report.problems.empty() ? "" : report.problems.front());
  EXPECT_EQ(report.missing_entries + report.loops + report.unreachable_pairs, 0u);

  const HopTable hops = HopTable::Build(fabric, 1);
  for (const SwitchTable& t : tables.switches)
    for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid) {
      const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
      const NodeId dest = AttachNode(fabric, owner);
      ASSERT_NE(dest, kNoNode);
      const int want = hops.hops(hops.index(t.node), hops.index(dest)) + 1;
      ASSERT_EQ(SwitchesOnPath(fabric, lids, tables, t.node, Lid(static_cast<uint16_t>(lid))), want)
          << fabric.node(t.node).name << " to LID " << lid;
    }
}

TEST(MinHopEngineTest, RoutesATwoTierFatTreeCompletelyOverMinimalPaths) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  ExpectCompleteAndMinimal(*f);
}

TEST(MinHopEngineTest, RoutesAThreeTierFatTreeCompletelyOverMinimalPaths) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  ExpectCompleteAndMinimal(*f);
}

TEST(MinHopEngineTest, RoutesARandomIrregularFabricCompletelyOverMinimalPaths) {
  auto f = RandomGraph(30, 8, 2, 42);
  ASSERT_TRUE(f.ok());
  ExpectCompleteAndMinimal(*f);
}

TEST(MinHopEngineTest, RoutesADegradedThreeTierFatTreeAroundTheMissingLinks) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  const size_t links = f->link_count();
  EXPECT_EQ(Degrade(*f, 12, 5).size(), 12u);
  ASSERT_EQ(f->link_count(), links - 12);
  ExpectCompleteAndMinimal(*f);
}

TEST(MinHopEngineTest, ASwitchKeepsItsOwnLidAndHandsALocalHostItsPort) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  const RoutingTables tables = Route(*f, lids);
  const NodeId leaf = *f->FindNodeByName("leaf-002");
  const SwitchTable* t = tables.table(leaf);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->node, leaf);
  EXPECT_EQ(t->lft.size(), lids.max_lid() + 1u);
  EXPECT_EQ(t->lft[f->port(leaf, PortNum(0)).lid.value()], 0);
  for (uint8_t p = 1; p <= 4; ++p) {
    const Port& host = f->port(f->port(leaf, PortNum(p)).peer);
    EXPECT_EQ(t->lft[host.lid.value()], p);
  }
  EXPECT_EQ(t->lft[0], kDropPort);
  EXPECT_EQ(tables.table(f->port(f->port(leaf, PortNum(1)).peer).node), nullptr);
}

TEST(MinHopEngineTest, DropsTheLidOfAHostWithoutACable) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const NodeId leaf = *f->FindNodeByName("leaf-003");
  const PortId host = f->port(leaf, PortNum(2)).peer;
  f->Disconnect(host);
  const LidMap lids(*f);
  const RoutingTables tables = Route(*f, lids);
  for (const SwitchTable& t : tables.switches)
    EXPECT_EQ(t.lft[f->port(host).lid.value()], kDropPort) << f->node(t.node).name;
  EXPECT_TRUE(VerifyTables(*f, lids, tables).ok);
}

// Routes to hosts on other leaves, counted per uplink of each leaf.
TEST(MinHopEngineTest, SpreadsRemoteHostsEvenlyOverEachLeafsUplinks) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  const RoutingTables tables = Route(*f, lids);
  int leaves = 0;
  for (const SwitchTable& t : tables.switches) {
    if (f->node(t.node).name.rfind("leaf-", 0) != 0) continue;
    ++leaves;
    std::vector<int> per_uplink(9, 0);
    for (PortId p : lids.end_ports()) {
      if (f->node(f->port(p).node).is_switch() || AttachNode(*f, p) == t.node) continue;
      const uint8_t out = t.lft[f->port(p).lid.value()];
      ASSERT_GE(out, 5) << "remote host routed to a host port";
      ++per_uplink[out];
    }
    const auto [lo, hi] = std::minmax_element(per_uplink.begin() + 5, per_uplink.end());
    EXPECT_LE(*hi - *lo, 1) << f->node(t.node).name;
    EXPECT_EQ(std::accumulate(per_uplink.begin(), per_uplink.end(), 0), 28);
  }
  EXPECT_EQ(leaves, 8);
}

TEST(MinHopEngineTest, WithLmcTwoTheFourLidsOfARemoteHostLeaveByFourSpines) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f, 2);
  const LidMap lids(*f);
  const RoutingTables tables = Route(*f, lids);
  for (const SwitchTable& t : tables.switches) {
    if (f->node(t.node).name.rfind("leaf-", 0) != 0) continue;
    for (PortId p : lids.end_ports()) {
      if (f->node(f->port(p).node).is_switch() || AttachNode(*f, p) == t.node) continue;
      std::set<NodeId> spines;
      for (uint16_t i = 0; i < 4; ++i) {
        const uint8_t out = t.lft[f->port(p).lid.value() + i];
        ASSERT_NE(out, kDropPort);
        spines.insert(f->port(f->port(t.node, PortNum(out)).peer).node);
      }
      EXPECT_EQ(spines.size(), 4u) << f->node(t.node).name << " to LID " << f->port(p).lid.value();
    }
  }
  EXPECT_TRUE(VerifyTables(*f, lids, tables).ok);
}

void ExpectSameTables(const RoutingTables& a, const RoutingTables& b) {
  ASSERT_EQ(a.switches.size(), b.switches.size());
  for (size_t i = 0; i < a.switches.size(); ++i) {
    ASSERT_EQ(a.switches[i].node, b.switches[i].node);
    ASSERT_EQ(a.switches[i].lft, b.switches[i].lft) << "switch index " << i;
  }
  EXPECT_EQ(a.switch_index, b.switch_index);
}

TEST(MinHopEngineTest, OneAndFourThreadsGiveIdenticalTables) {
  auto ft = FatTree3(8);
  ASSERT_TRUE(ft.ok());
  AssignLids(*ft, 1);
  const LidMap ft_lids(*ft);
  const RoutingTables ft_tables = Route(*ft, ft_lids, 1);
  ExpectSameTables(ft_tables, Route(*ft, ft_lids, 4));
  EXPECT_TRUE(VerifyTables(*ft, ft_lids, ft_tables).ok);

  auto rnd = RandomGraph(30, 8, 2, 9);
  ASSERT_TRUE(rnd.ok());
  AssignLids(*rnd);
  const LidMap rnd_lids(*rnd);
  ExpectSameTables(Route(*rnd, rnd_lids, 1), Route(*rnd, rnd_lids, 4));
}

}  // namespace
}  // namespace ibsm::routing
