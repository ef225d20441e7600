#include "routing/updn_engine.h"

#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "routing/lft_builder.h"
#include "routing/minhop_engine.h"
#include "routing/quality.h"
#include "routing/routing_test_util.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;
using testing::AttachNode;
using testing::SwitchesOnPath;

Result<RoutingTables> RouteWith(std::string_view engine, const Fabric& fabric, const LidMap& lids,
                                const RoutingOptions& options = {}) {
  return MakeEngine(engine)->Route(fabric, lids, options);
}

// The switches a packet for `lid` crosses from `from` (inclusive), or empty if it is not
// delivered within 64 switches.
std::vector<NodeId> SwitchPath(const Fabric& fabric, const RoutingTables& tables, NodeId from,
                               Lid lid, const LidMap& lids) {
  std::vector<NodeId> path{from};
  for (int n = 0; n < 64; ++n) {
    const SwitchTable* t = tables.table(path.back());
    if (!t || lid.value() >= t->lft.size()) return {};
    const uint8_t port = t->lft[lid.value()];
    if (port == 0) return path;
    if (port == kDropPort || port > fabric.node(path.back()).num_ports) return {};
    const Port& out = fabric.port(path.back(), PortNum(port));
    if (!out.connected()) return {};
    if (out.peer == lids.owner(lid)) return path;
    const NodeId next = fabric.port(out.peer).node;
    if (!fabric.node(next).is_switch()) return {};
    path.push_back(next);
  }
  return {};
}

// True when `path` is up* then down* (updn) or down* then up* (dnup) under `ranks`.
bool FollowsTurnRule(const Fabric& fabric, const UpDnRanks& ranks, const std::vector<NodeId>& path) {
  bool second_phase = false;
  for (size_t i = 1; i < path.size(); ++i) {
    const bool up = ranks.IsUp(fabric, path[i - 1], path[i]);
    const bool first_kind = ranks.dnup ? !up : up;
    if (first_kind && second_phase) return false;
    if (!first_kind) second_phase = true;
  }
  return true;
}

struct RuleCount {
  uint64_t from_ca_switches = 0;  // routes from a switch with CAs to a CA LID breaking the rule
  uint64_t off_rule_pairs = 0;    // distinct (switch, destination switch) pairs breaking it
  uint64_t undelivered = 0;
};

bool HasCa(const Fabric& fabric, NodeId sw) {
  const Node& node = fabric.node(sw);
  for (uint32_t num = 1; num <= node.num_ports; ++num) {
    const Port& p = fabric.port(node.first_port + num);
    if (p.connected() && !fabric.node(fabric.port(p.peer).node).is_switch()) return true;
  }
  return false;
}

// Walks every (switch, base LID) route.
RuleCount CountTurnRuleBreaks(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
                              const UpDnRanks& ranks) {
  RuleCount out;
  std::set<std::pair<NodeId, NodeId>> off_rule;
  const HopTable hops = HopTable::Build(fabric, 1);
  for (const SwitchTable& t : tables.switches) {
    const bool has_ca = HasCa(fabric, t.node);
    for (PortId p : lids.end_ports()) {
      const NodeId dest = AttachNode(fabric, p);
      if (dest == kNoNode ||
          hops.hops(hops.index(t.node), hops.index(dest)) == kUnreachableHops)
        continue;  // another plane
      const Lid lid = fabric.port(p).lid;
      const std::vector<NodeId> path = SwitchPath(fabric, tables, t.node, lid, lids);
      if (path.empty()) {
        ++out.undelivered;
        continue;
      }
      if (FollowsTurnRule(fabric, ranks, path)) continue;
      off_rule.emplace(t.node, dest);
      if (has_ca && !fabric.node(fabric.port(p).node).is_switch()) ++out.from_ca_switches;
    }
  }
  out.off_rule_pairs = off_rule.size();
  return out;
}

// Routes `fabric` with `engine` and checks what an operator relies on: the tables verify, every
// route CA traffic can take obeys the turn rule, and exactly the pairs the ranking reports as
// off-rule break it.
UpDnRanks ExpectLegalRouting(Fabric& fabric, std::string_view engine, uint8_t lmc = 0,
                             RoutingOptions options = {}) {
  AssignLids(fabric, lmc);
  const LidMap lids(fabric);
  options.threads = 2;
  auto tables = RouteWith(engine, fabric, lids, options);
  EXPECT_TRUE(tables.ok()) << tables.status().ToString();
  auto ranks = ComputeUpDnRanks(fabric, options, engine == "dnup");
  EXPECT_TRUE(ranks.ok()) << ranks.status().ToString();
  if (!tables.ok() || !ranks.ok()) return {};
  EXPECT_EQ(tables->engine, engine);
  const VerifyReport report = VerifyTables(fabric, lids, *tables);
  EXPECT_TRUE(report.ok) << (report.problems.empty() ? "" : report.problems.front());
  const RuleCount rule = CountTurnRuleBreaks(fabric, lids, *tables, *ranks);
  EXPECT_EQ(rule.undelivered, 0u);
  EXPECT_EQ(rule.from_ca_switches, 0u);
  EXPECT_EQ(rule.off_rule_pairs, ranks->off_rule_pairs);
  return std::move(ranks).value();
}

std::set<std::string> TopNames(const Fabric& fabric, const UpDnRanks& ranks) {
  std::set<std::string> out;
  for (const auto& c : ranks.components)
    for (NodeId n : c.tops) out.insert(fabric.node(n).name);
  return out;
}

TEST(UpDnEngineTest, TwoTierFatTreeRootsAreTheSpinesAndEveryRouteIsUpThenDown) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  const UpDnRanks ranks = ExpectLegalRouting(*f, "updn");
  ASSERT_EQ(ranks.components.size(), 1u);
  EXPECT_EQ(ranks.components[0].source, UpDnRanks::TopSource::kMaxHeight);
  EXPECT_EQ(TopNames(*f, ranks),
            (std::set<std::string>{"spine-01", "spine-02", "spine-03", "spine-04"}));
  // Spine-to-spine switch LIDs have no up*/down* route; they are routed anyway.
  EXPECT_GT(ranks.off_rule_pairs, 0u);
}

TEST(UpDnEngineTest, ThreeTierFatTreeRootsAreTheCores) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  const UpDnRanks ranks = ExpectLegalRouting(*f, "updn");
  ASSERT_EQ(ranks.components.size(), 1u);
  const std::set<std::string> tops = TopNames(*f, ranks);
  EXPECT_EQ(tops.size(), 16u);
  for (const std::string& name : tops) EXPECT_EQ(name.rfind("core-", 0), 0u) << name;
}

TEST(UpDnEngineTest, ThreeTierFatTreeRoutesAreMinimalForHosts) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  auto tables = RouteWith("updn", *f, lids);
  ASSERT_TRUE(tables.ok());
  const HopTable hops = HopTable::Build(*f, 1);
  for (const SwitchTable& t : tables->switches)
    for (PortId p : lids.end_ports()) {
      if (f->node(f->port(p).node).is_switch()) continue;
      const NodeId dest = AttachNode(*f, p);
      EXPECT_EQ(SwitchesOnPath(*f, lids, *tables, t.node, f->port(p).lid),
                hops.hops(hops.index(t.node), hops.index(dest)) + 1);
    }
}

TEST(UpDnEngineTest, RoutesAroundDroppedLinksOfAThreeTierFatTree) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(Degrade(*f, 12, 5).size(), 12u);
  const UpDnRanks ranks = ExpectLegalRouting(*f, "updn");
  EXPECT_EQ(ranks.components[0].source, UpDnRanks::TopSource::kMaxHeight);
}

TEST(UpDnEngineTest, RoutesEachPlaneOfARailOptimizedFabricSeparately) {
  auto f = RailOptimized(8, 8, 4, RailMode::kPlanes);
  ASSERT_TRUE(f.ok());
  const UpDnRanks ranks = ExpectLegalRouting(*f, "updn");
  EXPECT_EQ(ranks.components.size(), 4u);
  for (const auto& c : ranks.components) {
    EXPECT_EQ(c.source, UpDnRanks::TopSource::kMaxHeight);
    EXPECT_FALSE(c.tops.empty());
  }
  auto superpod = RailOptimized(16, 16, 4, RailMode::kSuperpod);
  ASSERT_TRUE(superpod.ok());
  EXPECT_EQ(ExpectLegalRouting(*superpod, "updn").components.size(), 1u);
}

TEST(UpDnEngineTest, RandomIrregularFabricsRouteLegallyAndWithoutCreditLoops) {
  for (uint64_t seed : {1, 7, 42, 99, 2024}) {
    SCOPED_TRACE(seed);
    auto f = RandomGraph(30, 8, 2, seed);
    ASSERT_TRUE(f.ok());
    for (std::string_view engine : {"updn", "dnup"}) {
      SCOPED_TRACE(engine);
      const UpDnRanks ranks = ExpectLegalRouting(*f, engine);
      // Every switch carries hosts, so only the centre gives every pair a legal route.
      EXPECT_EQ(ranks.off_rule_pairs, 0u);
      const LidMap lids(*f);
      auto tables = RouteWith(engine, *f, lids);
      ASSERT_TRUE(tables.ok());
      const CreditLoopReport loops = CheckCreditLoops(*f, lids, *tables);
      EXPECT_TRUE(loops.acyclic) << (loops.cycle.empty() ? "" : loops.cycle.front());
    }
  }
}

// Every LFT entry counts here, the off-rule core-to-core switch-LID routes included: sending
// them all by the lowest port keeps them from closing a cycle on this tree.
TEST(UpDnEngineTest, ThreeTierFatTreeTablesHaveNoCreditLoop) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  auto tables = RouteWith("updn", *f, lids);
  ASSERT_TRUE(tables.ok());
  const CreditLoopReport loops = CheckCreditLoops(*f, lids, *tables);
  EXPECT_TRUE(loops.acyclic) << (loops.cycle.empty() ? "" : loops.cycle.front());
}

TEST(UpDnEngineTest, WithLmcTwoTheFourLidsOfARemoteHostLeaveByFourDifferentSpines) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  ExpectLegalRouting(*f, "updn", 2);
  const LidMap lids(*f);
  auto tables = RouteWith("updn", *f, lids);
  ASSERT_TRUE(tables.ok());
  int checked = 0;
  for (const SwitchTable& t : tables->switches) {
    if (f->node(t.node).name.rfind("leaf-", 0) != 0) continue;
    for (PortId p : lids.end_ports()) {
      if (f->node(f->port(p).node).is_switch() || AttachNode(*f, p) == t.node) continue;
      std::set<NodeId> spines;
      for (uint16_t i = 0; i < 4; ++i) {
        const uint8_t out = t.lft[f->port(p).lid.value() + i];
        ASSERT_NE(out, kDropPort);
        spines.insert(f->port(f->port(t.node, PortNum(out)).peer).node);
      }
      EXPECT_EQ(spines.size(), 4u);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8 * 28);
}

TEST(UpDnEngineTest, HonoursRootGuidsAndRoutesThroughTheGivenRoot) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  const NodeId root = *f->FindNodeByName("spine-03");
  RoutingOptions options;
  options.root_guids = {Guid(0x1234), f->node(root).guid};
  const UpDnRanks ranks = ExpectLegalRouting(*f, "updn", 0, options);
  ASSERT_EQ(ranks.components.size(), 1u);
  EXPECT_EQ(ranks.components[0].source, UpDnRanks::TopSource::kRootGuids);
  EXPECT_EQ(ranks.components[0].tops, std::vector<NodeId>{root});
  EXPECT_EQ(ranks.rank[root], 0u);
  // One root: every host-to-host route between leaves crosses it.
  const LidMap lids(*f);
  options.threads = 1;
  auto tables = RouteWith("updn", *f, lids, options);
  ASSERT_TRUE(tables.ok());
  const NodeId leaf = *f->FindNodeByName("leaf-001");
  for (PortId p : lids.end_ports()) {
    if (f->node(f->port(p).node).is_switch() || AttachNode(*f, p) == leaf) continue;
    const auto path = SwitchPath(*f, *tables, leaf, f->port(p).lid, lids);
    ASSERT_EQ(path.size(), 3u);
    EXPECT_EQ(path[1], root);
  }
}

TEST(UpDnEngineTest, DeclinesWhenNoRootGuidNamesASwitch) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  RoutingOptions options;
  options.root_guids = {Guid(0xabcdef)};
  auto r = RouteWith("updn", *f, lids, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("0x0000000000abcdef"), std::string::npos)
      << r.status().message();
}

TEST(UpDnEngineTest, DeclinesWhenTheGivenRootsLeaveHostsWithoutALegalRoute) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  RoutingOptions options;  // two leaves as roots: the other leaves' hosts are cut off
  options.root_guids = {f->node(*f->FindNodeByName("leaf-001")).guid,
                        f->node(*f->FindNodeByName("leaf-002")).guid};
  auto r = RouteWith("updn", *f, lids, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("root_guid_file"), std::string::npos)
      << r.status().message();
}

TEST(UpDnEngineTest, RoutesTheSwitchLidOfOneRootFromAnother) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  auto tables = RouteWith("updn", *f, lids);
  ASSERT_TRUE(tables.ok());
  const NodeId a = *f->FindNodeByName("core-001");
  const NodeId b = *f->FindNodeByName("core-016");
  EXPECT_GT(SwitchesOnPath(*f, lids, *tables, a, f->port(b, PortNum(0)).lid), 1);
  EXPECT_GT(SwitchesOnPath(*f, lids, *tables, b, f->port(a, PortNum(0)).lid), 1);
}

TEST(UpDnEngineTest, DnUpRoutesAreDownThenUpOnFatTrees) {
  for (int tiers : {2, 3}) {
    auto f = tiers == 2 ? FatTree2(8) : FatTree3(8);
    ASSERT_TRUE(f.ok());
    const UpDnRanks ranks = ExpectLegalRouting(*f, "dnup");
    EXPECT_TRUE(ranks.dnup);
    // dnup ranks by distance from the CAs: leaves 0, the top tier highest.
    const auto leaf = f->FindNodeByName(tiers == 2 ? "leaf-001" : "pod01-leaf-01");
    ASSERT_TRUE(leaf.has_value());
    EXPECT_EQ(ranks.rank[*leaf], 0u);
    for (const std::string& name : TopNames(*f, ranks))
      EXPECT_TRUE(name.rfind(tiers == 2 ? "spine-" : "core-", 0) == 0) << name;
  }
}

TEST(UpDnEngineTest, DnUpHandlesAHostOnASpine) {
  FatTree2Options shape;
  shape.leaves = 6;  // spines keep ports 7 and 8 free
  auto f = FatTree2(8, shape);
  ASSERT_TRUE(f.ok());
  const NodeId spine = *f->FindNodeByName("spine-01");
  auto host = f->AddNode(NodeKind::kCa, Guid(0x77000), 1, "extra", "extra HCA-1");
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE(f->SetPortGuid(f->port_id(*host, PortNum(1)), Guid(0x77001)).ok());
  ASSERT_TRUE(f->Connect(spine, PortNum(8), *host, PortNum(1)).ok());
  ExpectLegalRouting(*f, "dnup");
  ExpectLegalRouting(*f, "updn");
}

TEST(UpDnEngineTest, OneAndFourThreadsGiveIdenticalTables) {
  auto f = RandomGraph(40, 8, 2, 3);
  ASSERT_TRUE(f.ok());
  AssignLids(*f, 1);
  const LidMap lids(*f);
  RoutingOptions one, four;
  four.threads = 4;
  for (std::string_view engine : {"updn", "dnup"}) {
    auto a = RouteWith(engine, *f, lids, one);
    auto b = RouteWith(engine, *f, lids, four);
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < a->switches.size(); ++i)
      EXPECT_EQ(a->switches[i].lft, b->switches[i].lft);
  }
}

// ---- The shared builder's options, on two switches joined by two parallel cables (ports 1 and
// 2), four hosts on ports 3..6 of each. LIDs: switch A 1, switch B 2, A's hosts 3..6, B's 7..10.
class TwoSwitchFabric : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = *fabric_.AddNode(NodeKind::kSwitch, Guid(0x100), 8, "sw-a", "sw-a");
    b_ = *fabric_.AddNode(NodeKind::kSwitch, Guid(0x200), 8, "sw-b", "sw-b");
    ASSERT_TRUE(fabric_.SetPortGuid(fabric_.port_id(a_, PortNum(0)), Guid(0x100)).ok());
    ASSERT_TRUE(fabric_.SetPortGuid(fabric_.port_id(b_, PortNum(0)), Guid(0x200)).ok());
    ASSERT_TRUE(fabric_.Connect(a_, PortNum(1), b_, PortNum(1)).ok());
    ASSERT_TRUE(fabric_.Connect(a_, PortNum(2), b_, PortNum(2)).ok());
    for (NodeId sw : {a_, b_})
      for (uint8_t p = 3; p <= 6; ++p) {
        const uint64_t guid = (sw == a_ ? 0x1000 : 0x2000) + p * 16;
        auto h = fabric_.AddNode(NodeKind::kCa, Guid(guid), 1, fmt::format("h{:x}", guid), "");
        ASSERT_TRUE(h.ok());
        ASSERT_TRUE(fabric_.SetPortGuid(fabric_.port_id(*h, PortNum(1)), Guid(guid + 1)).ok());
        ASSERT_TRUE(fabric_.Connect(sw, PortNum(p), *h, PortNum(1)).ok());
      }
    AssignLids(fabric_);
  }

  // Ports switch A gives LIDs 2 (switch B) and 7..10 (B's hosts).
  std::vector<int> PortsOfA(std::string_view engine, const RoutingOptions& options) {
    const LidMap lids(fabric_);
    auto t = RouteWith(engine, fabric_, lids, options);
    EXPECT_TRUE(t.ok());
    if (!t.ok()) return {};
    EXPECT_TRUE(VerifyTables(fabric_, lids, *t).ok);
    const SwitchTable* table = t->table(a_);
    std::vector<int> out;
    for (int lid : {2, 7, 8, 9, 10}) out.push_back(table->lft[lid]);
    return out;
  }

  Fabric fabric_;
  NodeId a_ = kNoNode, b_ = kNoNode;
};

TEST_F(TwoSwitchFabric, DefaultRuleAlternatesBetweenTheLeastLoadedPorts) {
  for (std::string_view engine : {"minhop", "updn", "dnup"})
    EXPECT_EQ(PortsOfA(engine, {}), (std::vector<int>{1, 2, 1, 2, 1})) << engine;
}

TEST_F(TwoSwitchFabric, GuidRoutingOrderRoutesTheListedDestinationsFirst) {
  RoutingOptions options;
  // B's third host (port GUID 0x2051, LID 9), then switch B by node GUID.
  options.guid_routing_order = {Guid(0x2051), Guid(0x999999), Guid(0x200), Guid(0x2051)};
  for (std::string_view engine : {"minhop", "updn"})
    EXPECT_EQ(PortsOfA(engine, options), (std::vector<int>{2, 1, 2, 1, 1})) << engine;
}

TEST_F(TwoSwitchFabric, PortShiftingStartsEachRoundOneEqualPortFurther) {
  RoutingOptions options;
  options.port_shifting = true;
  // OpenSM's offset is (routes on the candidates / candidates) mod candidates: after LID 2
  // and 7 have taken ports 1 and 2, LID 8 starts its search at port 2.
  for (std::string_view engine : {"minhop", "updn"})
    EXPECT_EQ(PortsOfA(engine, options), (std::vector<int>{1, 2, 2, 1, 1})) << engine;
}

TEST(LftBuilderTest, ScatterPortsIsSeededBalancedAndIndependentOfThreads) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  RoutingOptions plain;
  auto base = RouteWith("updn", *f, lids, plain);
  ASSERT_TRUE(base.ok());
  size_t differing_seeds = 0;
  for (uint32_t seed : {1u, 2u, 3u}) {
    RoutingOptions options;
    options.scatter_ports = seed;
    options.threads = 1;
    auto a = RouteWith("updn", *f, lids, options);
    options.threads = 4;
    auto b = RouteWith("updn", *f, lids, options);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(VerifyTables(*f, lids, *a).ok);
    bool differs = false;
    for (size_t i = 0; i < a->switches.size(); ++i) {
      EXPECT_EQ(a->switches[i].lft, b->switches[i].lft) << "seed " << seed;
      differs |= a->switches[i].lft != base->switches[i].lft;
    }
    differing_seeds += differs;
    // Still the least-loaded rule: each leaf's uplinks carry within one route of each other.
    for (const SwitchTable& t : a->switches) {
      if (f->node(t.node).name.rfind("leaf-", 0) != 0) continue;
      std::vector<int> per_uplink(9, 0);
      for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid)
        if (t.lft[lid] >= 5 && t.lft[lid] <= 8) ++per_uplink[t.lft[lid]];
      const auto [lo, hi] = std::minmax_element(per_uplink.begin() + 5, per_uplink.end());
      EXPECT_LE(*hi - *lo, 1) << f->node(t.node).name << " seed " << seed;
    }
  }
  EXPECT_EQ(differing_seeds, 3u);
}

}  // namespace
}  // namespace ibsm::routing
