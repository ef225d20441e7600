#include "routing/ar_groups.h"

#include <gtest/gtest.h>

#include <set>

#include "fabric/generators.h"
#include "routing/ar_engine.h"
#include "routing/minhop_engine.h"
#include "routing/routing_test_util.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;

struct Routed {
  Fabric fabric;
  std::unique_ptr<LidMap> lids;
  RoutingTables tables;
};

Routed RouteWithEngine(Fabric f, std::unique_ptr<RoutingEngine> engine) {
  Routed r{std::move(f), nullptr, {}};
  AssignLids(r.fabric);
  r.lids = std::make_unique<LidMap>(r.fabric);
  auto t = engine->Route(r.fabric, *r.lids, {});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (t.ok()) r.tables = std::move(*t);
  return r;
}

// Up-ports of a switch in the generated fat trees: ports cabled to a switch with a higher
// name tier, i.e. the ports 1 + k/2 .. k of a leaf.
std::vector<uint8_t> UpPorts(const Fabric& f, NodeId leaf) {
  std::vector<uint8_t> out;
  const Node& n = f.node(leaf);
  for (uint32_t p = 1; p <= n.num_ports; ++p) {
    const Port& port = f.port(n.first_port + p);
    if (port.connected() && f.node(f.port(port.peer).node).is_switch())
      out.push_back(static_cast<uint8_t>(p));
  }
  return out;
}

NodeId LeafOfHost(const Fabric& f, NodeId host) {
  return f.port(f.port(f.port_id(host, PortNum{1})).peer).node;
}

TEST(ArGroupsTest, TwoTierLeavesSpreadOverEveryUpPortAndSpinesStayStatic) {
  Routed r = RouteWithEngine(*FatTree2(16), MakeArFTree());
  auto ar = BuildArTables(r.fabric, *r.lids, r.tables, {});
  ASSERT_TRUE(ar.ok()) << ar.status().ToString();
  EXPECT_EQ(ar->group_ids.size(), 16u);  // one per leaf
  size_t checked = 0;
  for (NodeId host = 0; host < r.fabric.node_count(); ++host) {
    if (r.fabric.node(host).is_switch()) continue;
    const uint16_t lid = r.fabric.port(host, PortNum{1}).lid.value();
    const NodeId dest_leaf = LeafOfHost(r.fabric, host);
    const uint16_t gid = ar->group_ids.at(r.fabric.node(dest_leaf).guid);
    for (const ArSwitchTable& t : ar->switches) {
      const ArEntry& e = t.lft[lid];
      EXPECT_EQ(e.default_port, r.tables.table(t.node)->lft[lid]);
      const bool is_leaf = r.fabric.node(t.node).name.starts_with("leaf");
      if (is_leaf && t.node != dest_leaf) {
        EXPECT_EQ(e.mode, ArLidMode::kFree);  // ArOptions' default
        EXPECT_EQ(e.group, gid);
        EXPECT_EQ(t.groups[gid], UpPorts(r.fabric, t.node));
        EXPECT_EQ(t.groups[gid].size(), 8u);
        ++checked;
      } else {
        EXPECT_EQ(e.mode, ArLidMode::kStatic) << r.fabric.node(t.node).name;
        EXPECT_EQ(e.group, e.default_port);
      }
    }
  }
  EXPECT_EQ(checked, 128u * 15u);
  ArVerifyReport v = VerifyArTables(r.fabric, *r.lids, r.tables, *ar);
  EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems[0]);
  EXPECT_TRUE(v.acyclic);
  EXPECT_GT(v.dependencies, 0u);
}

TEST(ArGroupsTest, ThreeTierGroupsAreTheMinimalHopSetsAndTheUnionIsDeadlockFree) {
  Routed r = RouteWithEngine(*FatTree3(8), MakeArUpDn());
  ArOptions o;
  o.mode = ArLidMode::kFree;
  auto ar = BuildArTables(r.fabric, *r.lids, r.tables, o);
  ASSERT_TRUE(ar.ok());
  ArVerifyReport v = VerifyArTables(r.fabric, *r.lids, r.tables, *ar);
  EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems[0]);
  // A pod spine reaching another pod: every up-port (k/2 = 4) is in the group.
  size_t spine_groups = 0;
  for (const ArSwitchTable& t : ar->switches) {
    if (r.fabric.node(t.node).name.find("spine") == std::string::npos) continue;
    for (const auto& g : t.groups)
      if (!g.empty()) {
        EXPECT_EQ(g.size(), 4u);
        ++spine_groups;
      }
  }
  EXPECT_GT(spine_groups, 0u);
}

TEST(ArGroupsTest, PreviousIdsAreKeptAndNewLeavesTakeTheLowestFreeId) {
  Routed r = RouteWithEngine(*FatTree2(8), MakeArFTree());
  auto first = BuildArTables(r.fabric, *r.lids, r.tables, {});
  ASSERT_TRUE(first.ok());
  // Swap two leaves' IDs and drop one: the swap is kept, the dropped leaf gets a free ID that
  // no remembered leaf holds (a leaf absent from the fabric keeps its ID too).
  ArOptions o;
  o.previous_ids = first->group_ids;
  auto it = o.previous_ids.begin();
  const Guid a = it->first;
  const Guid b = std::next(it)->first;
  std::swap(o.previous_ids[a], o.previous_ids[b]);
  const Guid dropped = std::prev(o.previous_ids.end())->first;
  o.previous_ids.erase(dropped);
  o.previous_ids[Guid{0xdead}] = 0x40;  // a leaf no longer cabled
  auto second = BuildArTables(r.fabric, *r.lids, r.tables, o);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->group_ids.at(a), first->group_ids.at(b));
  EXPECT_EQ(second->group_ids.at(b), first->group_ids.at(a));
  EXPECT_EQ(second->group_ids.at(Guid{0xdead}), 0x40);
  std::set<uint16_t> ids;
  for (const auto& [g, id] : second->group_ids) EXPECT_TRUE(ids.insert(id).second);
  EXPECT_TRUE(VerifyArTables(r.fabric, *r.lids, r.tables, *second).ok);

  ArOptions tiny;
  tiny.group_cap = 4;  // 8 leaves
  auto none = BuildArTables(r.fabric, *r.lids, r.tables, tiny);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
}

TEST(ArGroupsTest, WithOneSpineLinkDownGroupsShrinkToTheSurvivingPorts) {
  Fabric f = *FatTree2(16);
  const NodeId leaf = *f.FindNodeByName("leaf-001");
  const std::vector<uint8_t> up = UpPorts(f, leaf);
  f.Disconnect(f.port_id(leaf, PortNum{up[0]}));
  Routed r = RouteWithEngine(std::move(f), MakeArFTree());
  auto ar = BuildArTables(r.fabric, *r.lids, r.tables, {});
  ASSERT_TRUE(ar.ok());
  const ArSwitchTable* t = ar->table(leaf);
  size_t groups = 0;
  for (const auto& g : t->groups) {
    if (g.empty()) continue;
    ++groups;
    EXPECT_EQ(g.size(), 7u);
    EXPECT_EQ(std::count(g.begin(), g.end(), up[0]), 0);
  }
  EXPECT_EQ(groups, 15u);
  ArVerifyReport v = VerifyArTables(r.fabric, *r.lids, r.tables, *ar);
  EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems[0]);
}

TEST(ArGroupsTest, VerificationCatchesAWrongGroupAWrongDefaultAndACreditLoop) {
  Routed r = RouteWithEngine(*FatTree2(8), MakeArFTree());
  auto ar = BuildArTables(r.fabric, *r.lids, r.tables, {});
  ASSERT_TRUE(ar.ok());
  ArTables bad = *ar;
  for (ArSwitchTable& t : bad.switches)
    for (auto& g : t.groups)
      if (g.size() > 1) {
        g.pop_back();
        break;
      }
  EXPECT_GT(VerifyArTables(r.fabric, *r.lids, r.tables, bad).group_mismatches, 0u);
  bad = *ar;
  const uint16_t host_lid = bad.switches[0].lft.size() > 20 ? 20 : 1;
  bad.switches[0].lft[host_lid].default_port ^= 1;
  auto v = VerifyArTables(r.fabric, *r.lids, r.tables, bad);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.default_mismatches, 1u);

  // A ring of four switches, one host each: both directions are minimal towards the opposite
  // switch, and the union of those choices closes a cycle around the ring.
  Fabric ring;
  NodeId s[4], h[4];
  for (int i = 0; i < 4; ++i) {
    s[i] = *ring.AddNode(NodeKind::kSwitch, Guid{0x100u + i}, 3, "s" + std::to_string(i), "");
    h[i] = *ring.AddNode(NodeKind::kCa, Guid{0x200u + i}, 1, "h" + std::to_string(i), "");
    ASSERT_TRUE(ring.Connect(h[i], PortNum{1}, s[i], PortNum{3}).ok());
  }
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ring.Connect(s[i], PortNum{1}, s[(i + 1) % 4], PortNum{2}).ok());
  Routed rr = RouteWithEngine(std::move(ring), MakeMinHop());
  auto ring_ar = BuildArTables(rr.fabric, *rr.lids, rr.tables, {});
  ASSERT_TRUE(ring_ar.ok());
  auto rv = VerifyArTables(rr.fabric, *rr.lids, rr.tables, *ring_ar);
  EXPECT_FALSE(rv.acyclic);
  EXPECT_FALSE(rv.ok);
  EXPECT_GE(rv.cycle.size(), 4u);
}

}  // namespace
}  // namespace ibsm::routing
