#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "routing/routing_engine.h"
#include "routing/routing_test_util.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;

TEST(LidMapTest, EveryLidOfAnLmcRangeBelongsToItsPort) {
  auto fabric = FatTree2(4);
  ASSERT_TRUE(fabric.ok());
  AssignLids(*fabric, 2);
  LidMap lids(*fabric);
  ASSERT_EQ(lids.end_ports().size(), fabric->switch_count() + fabric->ca_count());
  for (PortId p : lids.end_ports()) {
    const Port& port = fabric->port(p);
    const uint32_t count = fabric->node(port.node).is_switch() ? 1 : 4;
    for (uint32_t i = 0; i < count; ++i)
      EXPECT_EQ(lids.owner(Lid(static_cast<uint16_t>(port.lid.value() + i))), p);
  }
  EXPECT_EQ(lids.conflicts(), 0u);
  EXPECT_EQ(lids.owner(Lid(0)), kNoPort);
  EXPECT_EQ(lids.owner(Lid(static_cast<uint16_t>(lids.max_lid() + 1))), kNoPort);
}

TEST(LidMapTest, SwitchPortZeroOwnsOneLidUnlessItsLmcSaysOtherwise) {
  auto fabric = FatTree2(4);
  ASSERT_TRUE(fabric.ok());
  AssignLids(*fabric);
  const NodeId sw = *fabric->FindNodeByName("leaf-001");
  Port& p0 = fabric->mutable_port(fabric->port_id(sw, PortNum(0)));
  p0.lid = Lid(100);
  EXPECT_EQ(LidMap(*fabric).owner(Lid(101)), kNoPort);
  p0.lmc = 1;
  EXPECT_EQ(LidMap(*fabric).owner(Lid(101)), fabric->port_id(sw, PortNum(0)));
  EXPECT_EQ(LidMap(*fabric).max_lid(), 101);
}

TEST(LidMapTest, ALidClaimedTwiceStaysWithTheFirstPortAndCountsAsAConflict) {
  auto fabric = FatTree2(4);
  ASSERT_TRUE(fabric.ok());
  AssignLids(*fabric);
  const PortId a = fabric->port_id(*fabric->FindNodeByName("leaf-001"), PortNum(0));
  const PortId b = fabric->port_id(*fabric->FindNodeByName("leaf-002"), PortNum(0));
  fabric->mutable_port(b).lid = fabric->port(a).lid;
  LidMap lids(*fabric);
  EXPECT_EQ(lids.owner(fabric->port(a).lid), a);
  EXPECT_EQ(lids.conflicts(), 1u);
}

TEST(LidMapTest, PortsWithoutALidAreNotEndPorts) {
  auto fabric = FatTree2(4);
  ASSERT_TRUE(fabric.ok());
  LidMap lids(*fabric);
  EXPECT_TRUE(lids.end_ports().empty());
  EXPECT_EQ(lids.max_lid(), 0);
}

}  // namespace
}  // namespace ibsm::routing
