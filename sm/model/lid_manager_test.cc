#include "sm/model/lid_manager.h"
#include "sm/testing/test_util.h"

#include <gtest/gtest.h>

#include <set>

#include "fabric/generators.h"

namespace ibsm::sm {
namespace {

using testutil::FirstCaPort;

void Apply(Fabric& f, const LidAssignment& a) {
  for (PortId p : a.end_ports) {
    f.mutable_port(p).lid = Lid{a.base[p]};
    f.mutable_port(p).lmc = a.lmc[p];
  }
}

// Every LID of every range is owned by exactly one port, and ranges are aligned.
void ExpectUniqueAligned(const Fabric& f, const LidAssignment& a) {
  std::set<uint16_t> seen;
  for (PortId p : a.end_ports) {
    if (a.base[p] == 0) continue;
    uint32_t count = 1u << a.lmc[p];
    EXPECT_EQ(a.base[p] % count, 0u) << ToString(f.port(p).guid);
    for (uint32_t i = 0; i < count; ++i)
      EXPECT_TRUE(seen.insert(static_cast<uint16_t>(a.base[p] + i)).second)
          << "LID " << a.base[p] + i << " assigned twice";
  }
}

TEST(LidManagerTest, FreshFabricGetsDenseLidsWithTheSmFirst) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  PortId sm = FirstCaPort(*f);
  LidAssignment a = AssignLids(*f, sm, {}, {});
  EXPECT_EQ(a.base[sm], 1);
  EXPECT_EQ(a.end_ports.size(), 12u + 32u);
  EXPECT_EQ(a.fresh, 44u);
  EXPECT_EQ(a.changed, 44u);
  ExpectUniqueAligned(*f, a);
  uint16_t max = 0;
  for (PortId p : a.end_ports) max = std::max(max, a.base[p]);
  EXPECT_EQ(max, 44);
}

TEST(LidManagerTest, LmcTwoGivesAlignedRangesOfFourAndSwitchesOneLid) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  LidPolicy pol;
  pol.lmc = 2;
  LidAssignment a = AssignLids(*f, FirstCaPort(*f), {}, pol);
  ExpectUniqueAligned(*f, a);
  for (PortId p : a.end_ports) {
    bool sw = f->node(f->port(p).node).is_switch();
    EXPECT_EQ(a.lmc[p], sw ? 0 : 2);
  }
  pol.lmc_esp0 = true;
  a = AssignLids(*f, FirstCaPort(*f), {}, pol);
  for (PortId p : a.end_ports) EXPECT_EQ(a.lmc[p], 2);
  ExpectUniqueAligned(*f, a);
}

TEST(LidManagerTest, SecondRunKeepsEveryLidAndChangesNothing) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  PortId sm = FirstCaPort(*f);
  LidAssignment first = AssignLids(*f, sm, {}, {});
  Apply(*f, first);
  LidAssignment second = AssignLids(*f, sm, {}, {});
  EXPECT_EQ(second.changed, 0u);
  EXPECT_EQ(second.from_current, first.end_ports.size());
}

TEST(LidManagerTest, PersistedLidsWinOverCurrentOnesAndAbsentPortsKeepTheirs) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  PortId sm = FirstCaPort(*f);
  std::unordered_map<Guid, PersistedLid> persisted;
  persisted[f->port(sm).guid] = {100, 100};
  persisted[Guid{0xdeadbeef}] = {1, 1};  // a port not on the fabric now
  LidAssignment a = AssignLids(*f, sm, persisted, {});
  EXPECT_EQ(a.base[sm], 100);
  EXPECT_EQ(a.from_persisted, 1u);
  for (PortId p : a.end_ports) EXPECT_NE(a.base[p], 1) << "reserved LID 1 was handed out";
  ExpectUniqueAligned(*f, a);
}

TEST(LidManagerTest, TwoPortsClaimingOneLidAreSeparatedAndReported) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  PortId sm = FirstCaPort(*f);
  std::vector<PortId> ends = EndPorts(*f);
  // A merged subnet: two ports come in holding the same LID.
  f->mutable_port(ends[3]).lid = Lid{7};
  f->mutable_port(ends[9]).lid = Lid{7};
  LidAssignment a = AssignLids(*f, sm, {}, {});
  ExpectUniqueAligned(*f, a);
  ASSERT_EQ(a.issues.size(), 1u);
  EXPECT_EQ(a.issues[0].id, "SM-LID-002");
}

TEST(LidManagerTest, ReassignIgnoresPersistedAndCurrentLids) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  PortId sm = FirstCaPort(*f);
  f->mutable_port(sm).lid = Lid{300};
  std::unordered_map<Guid, PersistedLid> persisted{{f->port(sm).guid, {200, 200}}};
  LidPolicy pol;
  pol.reassign = true;
  EXPECT_EQ(AssignLids(*f, sm, persisted, pol).base[sm], 1);
}

TEST(LidManagerTest, AssignmentDoesNotDependOnNodeOrder) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  PortId sm = FirstCaPort(*f);
  LidAssignment a = AssignLids(*f, sm, {}, {});
  // The same fabric with nodes added in reverse order.
  Fabric r;
  for (NodeId n = static_cast<NodeId>(f->node_count()); n-- > 0;) {
    const Node& node = f->node(n);
    ASSERT_TRUE(r.AddNode(node.kind, node.guid, node.num_ports, node.name, node.description).ok());
    NodeId id = *r.FindNode(node.guid);
    for (uint32_t p = 0; p <= node.num_ports; ++p) {
      Guid g = f->port(n, PortNum{static_cast<uint8_t>(p)}).guid;
      if (g.value() && (p == 0 || !node.is_switch())) {
        ASSERT_TRUE(r.SetPortGuid(r.port_id(id, PortNum{static_cast<uint8_t>(p)}), g).ok());
      }
    }
  }
  PortId rsm = *r.FindPort(f->port(sm).guid);
  LidAssignment b = AssignLids(r, rsm, {}, {});
  for (PortId p : a.end_ports) {
    PortId q = *r.FindPort(f->port(p).guid);
    EXPECT_EQ(a.base[p], b.base[q]);
  }
}

}  // namespace
}  // namespace ibsm::sm
