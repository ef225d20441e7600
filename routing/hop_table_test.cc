#include "routing/hop_table.h"

#include <gtest/gtest.h>

#include "fabric/generators.h"

namespace ibsm::routing {
namespace {

SwitchIdx Idx(const Fabric& f, const HopTable& t, const char* name) {
  return t.index(*f.FindNodeByName(name));
}

TEST(HopTableTest, FatTree2LeavesAreOneHopFromEverySpineAndTwoFromEachOther) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  const HopTable t = HopTable::Build(*f, 1);
  ASSERT_EQ(t.switch_count(), 12u);
  const SwitchIdx l1 = Idx(*f, t, "leaf-001"), l2 = Idx(*f, t, "leaf-002");
  const SwitchIdx s1 = Idx(*f, t, "spine-01");
  EXPECT_EQ(t.hops(l1, l1), 0);
  EXPECT_EQ(t.hops(l1, s1), 1);
  EXPECT_EQ(t.hops(s1, l1), 1);
  EXPECT_EQ(t.hops(l1, l2), 2);
  const NodeId host = f->port(*f->FindPort(Guid(kGenCaGuidBase + 16 + 1))).node;
  EXPECT_EQ(t.index(host), kNoSwitch);
}

TEST(HopTableTest, ALeafReachesAnotherLeafMinimallyThroughEveryUplink) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  const HopTable t = HopTable::Build(*f, 1);
  std::vector<uint8_t> ports;
  t.MinHopPorts(Idx(*f, t, "leaf-001"), Idx(*f, t, "leaf-005"), ports);
  EXPECT_EQ(ports, (std::vector<uint8_t>{5, 6, 7, 8}));
  t.MinHopPorts(Idx(*f, t, "leaf-001"), Idx(*f, t, "leaf-001"), ports);
  EXPECT_TRUE(ports.empty());
}

TEST(HopTableTest, DistancesDoNotDependOnTheNumberOfThreads) {
  auto f = RandomGraph(40, 8, 2, 7);
  ASSERT_TRUE(f.ok());
  const HopTable a = HopTable::Build(*f, 1), b = HopTable::Build(*f, 4);
  for (SwitchIdx x = 0; x < a.switch_count(); ++x)
    for (SwitchIdx y = 0; y < a.switch_count(); ++y) {
      ASSERT_EQ(a.hops(x, y), b.hops(x, y));
      ASSERT_EQ(a.hops(x, y), a.hops(y, x));
      ASSERT_NE(a.hops(x, y), kUnreachableHops);
    }
}

TEST(HopTableTest, SwitchesWithoutACablePathAreUnreachable) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  const NodeId leaf = *f->FindNodeByName("leaf-001");
  for (uint32_t p = 3; p <= 4; ++p) f->Disconnect(f->port_id(leaf, PortNum(p)));
  const HopTable t = HopTable::Build(*f, 2);
  std::vector<uint8_t> ports{1};
  EXPECT_EQ(t.hops(t.index(leaf), Idx(*f, t, "spine-01")), kUnreachableHops);
  t.MinHopPorts(t.index(leaf), Idx(*f, t, "leaf-002"), ports);
  EXPECT_TRUE(ports.empty());
}

TEST(HopTableTest, AllMinHopPortsAgreesWithMinHopPortsForEveryDestination) {
  auto f = RandomGraph(40, 8, 2, 11);
  ASSERT_TRUE(f.ok());
  Degrade(*f, 5, 3);
  const HopTable t = HopTable::Build(*f, 2);
  std::vector<uint32_t> start;
  std::vector<uint8_t> all, one;
  for (SwitchIdx x = 0; x < t.switch_count(); ++x) {
    t.AllMinHopPorts(x, start, all);
    ASSERT_EQ(start.size(), t.switch_count() + 1);
    for (SwitchIdx y = 0; y < t.switch_count(); ++y) {
      t.MinHopPorts(x, y, one);
      ASSERT_EQ(std::vector<uint8_t>(all.begin() + start[y], all.begin() + start[y + 1]), one);
      ASSERT_EQ(one.empty(), x == y);
    }
  }
}

}  // namespace
}  // namespace ibsm::routing
