#include "sm/model/multicast_tree.h"

#include <gtest/gtest.h>

#include <set>

#include "fabric/generators.h"

namespace ibsm::sm {
namespace {

// s1 - s2 - s3 - s4 in a line (port 1 left, port 2 right), hosts h1..h4 on port 3 of each.
struct Line {
  Fabric f;
  std::vector<NodeId> sw, host;
  Line() {
    for (int i = 0; i < 4; ++i) {
      NodeId s = *f.AddNode(NodeKind::kSwitch, Guid{0x100u + i}, 4, "s" + std::to_string(i + 1),
                            "switch");
      EXPECT_TRUE(f.SetPortGuid(f.port_id(s, PortNum{0}), Guid{0x100u + i}).ok());
      sw.push_back(s);
      NodeId h = *f.AddNode(NodeKind::kCa, Guid{0x200u + i}, 1, "h" + std::to_string(i + 1), "host");
      EXPECT_TRUE(f.SetPortGuid(f.port_id(h, PortNum{1}), Guid{0x300u + i}).ok());
      host.push_back(h);
      EXPECT_TRUE(f.Connect(s, PortNum{3}, h, PortNum{1}).ok());
    }
    for (int i = 0; i + 1 < 4; ++i) EXPECT_TRUE(f.Connect(sw[i], PortNum{2}, sw[i + 1], PortNum{1}).ok());
  }
};

McGroup Group(uint16_t mlid, std::vector<std::pair<uint64_t, uint8_t>> members) {
  McGroup g;
  g.mgid = mad::Gid{0xff12a01bfe800000ull, mlid};
  g.mlid = mlid;
  for (auto [guid, js] : members)
    g.members[Guid{guid}] = McMember{mad::Gid{0xfe80000000000000ull, guid}, js, false};
  return g;
}

TEST(MulticastTreeTest, TreeJoinsMemberSwitchesThroughTheMiddleAndForwardsToMembers) {
  Line l;
  std::map<mad::Gid, McGroup> groups;
  McGroup g = Group(0xC001, {{0x300, mad::join_state::kFull}, {0x303, mad::join_state::kFull}});
  groups[g.mgid] = g;
  MftPlan plan = PlanMfts(l.f, groups);
  ASSERT_EQ(plan.trees.size(), 1u);
  // s2 and s3 both have max hop count 2 to {s1, s4}; s2 has the lower GUID.
  EXPECT_EQ(plan.trees[0].root, l.sw[1]);
  EXPECT_EQ(plan.trees[0].depth, 2u);
  EXPECT_EQ(plan.max_mlid, 0xC001);
  EXPECT_EQ(plan.switches.at(l.sw[0]).Ports(0xC001), (std::vector<uint8_t>{2, 3}));
  EXPECT_EQ(plan.switches.at(l.sw[1]).Ports(0xC001), (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(plan.switches.at(l.sw[2]).Ports(0xC001), (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(plan.switches.at(l.sw[3]).Ports(0xC001), (std::vector<uint8_t>{1, 3}));
}

TEST(MulticastTreeTest, SendOnlyMemberIsOnTheTreeButReceivesNothing) {
  Line l;
  std::map<mad::Gid, McGroup> groups;
  McGroup g = Group(0xC002, {{0x300, mad::join_state::kFull},
                             {0x301, mad::join_state::kSendOnlyNon}});
  groups[g.mgid] = g;
  MftPlan plan = PlanMfts(l.f, groups);
  EXPECT_EQ(plan.switches.at(l.sw[0]).Ports(0xC002), (std::vector<uint8_t>{2, 3}));
  EXPECT_EQ(plan.switches.at(l.sw[1]).Ports(0xC002), (std::vector<uint8_t>{1}));
  EXPECT_TRUE(plan.switches.at(l.sw[2]).Ports(0xC002).empty());
  EXPECT_FALSE(plan.switches.at(l.sw[2]).masks.count(0xC002));
}

TEST(MulticastTreeTest, GroupWithoutMembersOnTheFabricHasNoTree) {
  Line l;
  std::map<mad::Gid, McGroup> groups;
  McGroup g = Group(0xC003, {{0x999, mad::join_state::kFull}});
  groups[g.mgid] = g;
  MftPlan plan = PlanMfts(l.f, groups);
  EXPECT_TRUE(plan.trees.empty());
  EXPECT_EQ(plan.max_mlid, 0);
  for (const auto& [n, sw] : plan.switches) EXPECT_TRUE(sw.masks.empty());
}

// On a fat tree with every host a member, the tree spans every leaf, reaches every host,
// and has exactly one edge fewer than its switches (no loop).
TEST(MulticastTreeTest, FatTreeTreeIsLoopFreeAndReachesEveryHost) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  McGroup g;
  g.mgid = mad::Gid{0xff12a01bfe800000ull, 1};
  g.mlid = 0xC000;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    if (f->node(n).is_switch()) continue;
    Guid pg = f->port(n, PortNum{1}).guid;
    g.members[pg] = McMember{mad::Gid{0xfe80000000000000ull, pg.value()}, mad::join_state::kFull, false};
  }
  std::map<mad::Gid, McGroup> groups{{g.mgid, g}};
  MftPlan plan = PlanMfts(*f, groups);
  ASSERT_EQ(plan.trees.size(), 1u);
  size_t switch_edges = 0, host_ports = 0;
  std::set<NodeId> on_tree;
  for (const auto& [n, sw] : plan.switches) {
    for (uint8_t p : sw.Ports(0xC000)) {
      const Port& port = f->port(n, PortNum{p});
      ASSERT_TRUE(port.connected());
      if (f->node(f->port(port.peer).node).is_switch()) {
        ++switch_edges;
        // Both ends agree.
        EXPECT_TRUE(plan.switches.at(f->port(port.peer).node)
                        .Forwards(0xC000, static_cast<uint8_t>(f->port(port.peer).num.value())));
      } else {
        ++host_ports;
      }
      on_tree.insert(n);
    }
  }
  EXPECT_EQ(host_ports, g.members.size());
  EXPECT_EQ(switch_edges / 2, on_tree.size() - 1);
  EXPECT_EQ(plan.trees[0].switches.size(), on_tree.size());
  EXPECT_EQ(plan.trees[0].depth, 1u);  // a spine reaches every leaf in one hop
}

}  // namespace
}  // namespace ibsm::sm
