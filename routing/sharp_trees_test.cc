#include "routing/sharp_trees.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "fabric/aggregation_node.h"
#include "fabric/generators.h"
#include "routing/quality.h"
#include "routing/routing_test_util.h"
#include "routing/sharp_allreduce.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;

// A fat tree whose switches all have an AN (or those `capable` accepts), with LIDs.
Fabric WithAns(Result<Fabric> base, std::function<bool(const Node&)> capable = {}) {
  EXPECT_TRUE(base.ok());
  if (!capable) capable = [](const Node&) { return true; };
  auto f = WithAggregationNodes(*base, capable);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  AssignLids(*f);
  return std::move(*f);
}

SharpInput AllAns(const Fabric& f, uint8_t radix = 48, uint16_t tree_table = 64) {
  SharpInput in;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (IsAggregationNode(f, n)) in.ans[n] = {radix, tree_table};
  return in;
}

size_t CountHosts(const Fabric& f) {
  size_t n = 0;
  for (PortId p = 0; p < f.port_count(); ++p) n += IsHostPort(f, p);
  return n;
}

TEST(AggregationNodeTest, EverySharpSwitchGetsOneAnBehindItsLastPort) {
  auto base = FatTree2(8);
  ASSERT_TRUE(base.ok());
  std::vector<AggregationNodeLink> links;
  auto f = WithAggregationNodes(
      *base, [](const Node& n) { return n.name.rfind("spine", 0) == 0; }, &links);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(links.size(), 4u);  // k=8: 4 spines
  for (const auto& l : links) {
    const Node& sw = f->node(l.sw);
    EXPECT_EQ(sw.num_ports, base->node(l.sw).num_ports + 1);
    auto sp = AggregationNodeSwitchPort(*f, l.an);
    ASSERT_TRUE(sp.has_value());
    EXPECT_EQ(f->port(*sp).node, l.sw);
    EXPECT_EQ(f->port(*sp).num.value(), sw.num_ports);
    EXPECT_TRUE(IsAggregationNode(*f, l.an));
    EXPECT_NE(f->node(l.an).guid, sw.guid);
    EXPECT_FALSE(IsHostPort(*f, f->port_id(l.an, PortNum{1})));
  }
  EXPECT_EQ(f->link_count(), base->link_count() + 4);
  EXPECT_EQ(CountHosts(*f), CountHosts(*base));
  // Nodes keep their ids; cables between the old nodes are unchanged.
  for (NodeId n = 0; n < base->node_count(); ++n) EXPECT_EQ(f->node(n).guid, base->node(n).guid);
}

TEST(AggregationNodeTest, FtreeAndUpdnStillSeeSpinesAsSpines) {
  // An AN on every spine would make every switch a "leaf" if it counted as a host: ftree
  // would decline (leaves at different ranks) and updn would rank every switch a root.
  for (auto make : {+[] { return FatTree2(8); }, +[] { return FatTree3(4); }}) {
    Fabric f = WithAns(make());
    const LidMap lids(f);
    for (const char* engine : {"ftree", "updn"}) {
      auto r = RouteChain(std::string(engine) + ",no_fallback", f, lids, {});
      ASSERT_TRUE(r.ok()) << engine << ": " << r.status().ToString();
      EXPECT_EQ(r->tables.engine, engine);
      const VerifyReport v = VerifyTables(f, lids, r->tables);
      EXPECT_EQ(v.missing_entries, 0u) << engine;
      EXPECT_EQ(v.loops, 0u) << engine;
      EXPECT_EQ(v.unreachable_pairs, 0u) << engine;
      EXPECT_TRUE(CheckCreditLoops(f, lids, r->tables).acyclic) << engine;
    }
  }
}

TEST(SharpTreesTest, TwoTierK16HasOneFullTreePerSpine) {
  Fabric f = WithAns(FatTree2(16));
  const SharpInput in = AllAns(f);
  const SharpPlan plan = BuildSharpTrees(f, in);
  EXPECT_EQ(plan.switch_tiers, 2u);
  ASSERT_EQ(plan.trees.size(), 8u);  // 8 spines
  EXPECT_EQ(plan.hosts.size(), 128u);
  EXPECT_TRUE(plan.uncovered.empty());
  for (size_t i = 0; i < plan.trees.size(); ++i) {
    const SharpTree& t = plan.trees[i];
    EXPECT_EQ(t.id, i + 1);
    EXPECT_EQ(t.depth, 2u);
    EXPECT_EQ(t.host_count, 128u);
    EXPECT_EQ(t.nodes.size(), 17u);  // root + 16 leaves
    EXPECT_EQ(f.node(t.root_switch).name.rfind("spine", 0), 0u);
  }
  EXPECT_TRUE(CheckSharpPlan(f, in, plan, true).empty());
}

TEST(SharpTreesTest, ThreeTierK8HasOneFullTreePerCore) {
  Fabric f = WithAns(FatTree3(8));
  const SharpInput in = AllAns(f);
  const SharpPlan plan = BuildSharpTrees(f, in);
  EXPECT_EQ(plan.switch_tiers, 3u);
  ASSERT_EQ(plan.trees.size(), 16u);  // (k/2)^2 cores
  for (const SharpTree& t : plan.trees) {
    EXPECT_EQ(t.depth, 3u);
    EXPECT_EQ(t.host_count, 128u);
    EXPECT_EQ(t.nodes.size(), 1u + 8 + 32);  // core, one spine per pod, every leaf
  }
  auto problems = CheckSharpPlan(f, in, plan, true);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST(SharpTreesTest, RadixAndTreeTableLimitsAreRespectedAndShortfallsReported) {
  Fabric f = WithAns(FatTree2(16));
  {
    const SharpInput in = AllAns(f, /*radix=*/6, 64);
    const SharpPlan plan = BuildSharpTrees(f, in);
    ASSERT_EQ(plan.trees.size(), 8u);
    for (const SharpTree& t : plan.trees) {
      EXPECT_EQ(t.nodes.size(), 7u);       // 6 leaves under the spine
      EXPECT_EQ(t.host_count, 6u * 6u);    // 6 of each leaf's 8 hosts
      EXPECT_EQ(t.missing_hosts.size(), 128u - 36u);
    }
    // Every tree takes the same six leaves (GUID order), so a job on those 36 hosts can use
    // all eight trees; the other 92 hosts are in none.
    EXPECT_EQ(plan.uncovered.size(), 92u);
    EXPECT_EQ(plan.never_covered.size(), 92u);
    EXPECT_TRUE(CheckSharpPlan(f, in, plan, false).empty());
    EXPECT_FALSE(CheckSharpPlan(f, in, plan, true).empty());
  }
  {
    const SharpInput in = AllAns(f, 48, /*tree_table=*/3);
    const SharpPlan plan = BuildSharpTrees(f, in);
    // Leaves fit three trees: the rest have no hosts and are dropped.
    ASSERT_EQ(plan.trees.size(), 3u);
    for (const SharpTree& t : plan.trees) EXPECT_EQ(t.host_count, 128u);
    EXPECT_TRUE(CheckSharpPlan(f, in, plan, true).empty());
  }
}

TEST(SharpTreesTest, LegacyLeafHostsAreReportedNeverCovered) {
  // leaf-001 is legacy (no AN): its 8 hosts cannot be in any tree.
  Fabric f = WithAns(FatTree2(16), [](const Node& n) { return n.name != "leaf-001"; });
  const SharpInput in = AllAns(f);
  const SharpPlan plan = BuildSharpTrees(f, in);
  ASSERT_EQ(plan.trees.size(), 8u);
  EXPECT_EQ(plan.never_covered.size(), 8u);
  for (PortId h : plan.never_covered)
    EXPECT_EQ(f.node(f.port(f.port(h).peer).node).name, "leaf-001");
  EXPECT_TRUE(CheckSharpPlan(f, in, plan, false).empty());
}

TEST(SharpTreesTest, ASpineLinkDownShrinksOnlyThatSpinesTree) {
  Fabric f = WithAns(FatTree2(16));
  const NodeId leaf = *f.FindNodeByName("leaf-001");
  const NodeId spine = *f.FindNodeByName("spine-01");
  for (uint32_t p = 1; p <= f.node(leaf).num_ports; ++p) {
    const PortId id = f.port_id(leaf, PortNum{static_cast<uint8_t>(p)});
    if (f.port(id).connected() && f.port(f.port(id).peer).node == spine) f.Disconnect(id);
  }
  const SharpInput in = AllAns(f);
  const SharpPlan plan = BuildSharpTrees(f, in);
  ASSERT_EQ(plan.trees.size(), 8u);
  for (const SharpTree& t : plan.trees) {
    if (t.root_switch == spine) {
      EXPECT_EQ(t.host_count, 120u);
      EXPECT_EQ(t.missing_hosts.size(), 8u);
    } else {
      EXPECT_EQ(t.host_count, 128u);
    }
  }
  EXPECT_EQ(plan.uncovered.size(), 8u);
  EXPECT_TRUE(plan.never_covered.empty());
  EXPECT_TRUE(CheckSharpPlan(f, in, plan, false).empty());
}

TEST(SharpTreesTest, TreeIdsFollowTheirRootsAcrossRebuilds) {
  Fabric f = WithAns(FatTree2(8));
  SharpInput in = AllAns(f);
  in.previous_ids[f.node(*f.FindNodeByName("spine-01")).guid] = 7;
  in.previous_ids[f.node(*f.FindNodeByName("spine-03")).guid] = 2;
  const SharpPlan plan = BuildSharpTrees(f, in);
  std::map<std::string, uint16_t> ids;
  for (const SharpTree& t : plan.trees) ids[f.node(t.root_switch).name] = t.id;
  EXPECT_EQ(ids["spine-01"], 7);
  EXPECT_EQ(ids["spine-03"], 2);
  EXPECT_EQ(ids["spine-02"], 1);  // the lowest free IDs, in root GUID order
  EXPECT_EQ(ids["spine-04"], 3);
  EXPECT_TRUE(CheckSharpPlan(f, in, plan, true).empty());
}

TEST(SharpAllreduceTest, SharpMovesAboutHalfARingsBytesPerHostLink) {
  struct Case {
    const char* name;
    Result<Fabric> (*make)();
  } cases[] = {{"2-tier k=16", [] { return FatTree2(16); }},
               {"3-tier k=8", [] { return FatTree3(8); }}};
  const double S = 1 << 20;  // 1 MiB per host
  for (const Case& c : cases) {
    Fabric f = WithAns(c.make());
    const LidMap lids(f);
    auto r = RouteChain("ftree", f, lids, {});
    ASSERT_TRUE(r.ok());
    const SharpPlan plan = BuildSharpTrees(f, AllAns(f));
    ASSERT_FALSE(plan.trees.empty());
    const AllreduceLoad sharp = SharpAllreduceLoad(f, r->tables, plan.trees[0], S);
    const AllreduceLoad ring = RingAllreduceLoad(f, r->tables, plan.hosts, S);
    EXPECT_EQ(sharp.unroutable, 0u);
    EXPECT_EQ(ring.unroutable, 0u);
    const double n = static_cast<double>(plan.hosts.size());
    // Both directions of a host link: SHARP S up + S down; ring 2(n-1)/n S each way.
    EXPECT_DOUBLE_EQ(sharp.max_host_link_bytes, 2 * S);
    EXPECT_DOUBLE_EQ(ring.mean_host_link_bytes, 2 * 2 * (n - 1) / n * S);
    const double ratio = sharp.mean_host_link_bytes / ring.mean_host_link_bytes;
    EXPECT_GT(ratio, 0.45);
    EXPECT_LT(ratio, 0.55);
    std::printf("[ figures ] %s, %zu hosts, S = 1 MiB: bytes per host link SHARP %.0f, ring %.0f "
                "(ratio %.3f); busiest link SHARP %.0f, ring %.0f\n",
                c.name, plan.hosts.size(), sharp.mean_host_link_bytes, ring.mean_host_link_bytes,
                ratio, sharp.max_link_bytes, ring.max_link_bytes);
  }
}

}  // namespace
}  // namespace ibsm::routing
