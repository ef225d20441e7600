#include "sm/model/pkey_manager.h"
#include "sm/testing/test_util.h"

#include <gtest/gtest.h>

#include "fabric/generators.h"

namespace ibsm::sm {
namespace {

using testutil::CaPorts;
using testutil::UsedPKeys;
using testutil::ParsePartitionsText;

// A fabric as discovery would leave it: every port answered, ACTIVE; CAs hold 64 P_Keys,
// switch port 0 holds 8, switch external ports enforce 64 (ibsim's figures).
DiscoveryResult Discovered(Fabric f, uint16_t enforcement_cap = 64) {
  DiscoveryResult d;
  d.nodes.resize(f.node_count());
  for (NodeId n = 0; n < f.node_count(); ++n) {
    DiscoveredNode& dn = d.nodes[n];
    const Node& node = f.node(n);
    dn.node_info.partition_cap = node.is_switch() ? 8 : 64;
    dn.switch_info.partition_enforcement_cap = enforcement_cap;
    dn.port_info.resize(node.num_ports + 1);
    dn.port_info_valid.assign(node.num_ports + 1, true);
  }
  d.fabric = std::move(f);
  return d;
}

std::string Hex(const Fabric& f, PortId p) { return ToString(f.port(p).guid); }

class PKeyManagerTest : public ::testing::Test {
 protected:
  PKeyManagerTest() : d_(Discovered(FatTree2(4).value())), hosts_(CaPorts(d_.fabric)) {}
  PKeyPlan Plan(const PartitionPolicy& p,
                std::function<const std::vector<uint16_t>*(PortId)> current = {}) {
    return PlanPKeys(d_, hosts_[0], p, current);
  }
  DiscoveryResult d_;
  std::vector<PortId> hosts_;
};

TEST_F(PKeyManagerTest, WithoutAPartitionFileEveryEndPortIsAFullDefaultMember) {
  PKeyPlan plan = Plan({});
  for (PortId h : hosts_) {
    ASSERT_EQ(plan.tables.at(h).size(), 64u);
    EXPECT_EQ(UsedPKeys(plan.tables.at(h)), std::vector<uint16_t>{0xFFFF});
    EXPECT_EQ(plan.tables.at(h)[0], 0xFFFF);
  }
  for (NodeId n = 0; n < d_.fabric.node_count(); ++n) {
    if (!d_.fabric.node(n).is_switch()) continue;
    PortId p0 = d_.fabric.port_id(n, PortNum{0});
    EXPECT_EQ(plan.tables.at(p0).size(), 8u);
    EXPECT_EQ(UsedPKeys(plan.tables.at(p0)), std::vector<uint16_t>{0xFFFF});
  }
  EXPECT_TRUE(plan.issues.empty());
}

TEST_F(PKeyManagerTest, WithAFileOnlyTheSmIsAFullDefaultMemberUnlessTheFileSaysSo) {
  PartitionPolicy p;
  p.config = ParsePartitionsText("a=0x10 : ALL_CAS=full ;\n");
  PKeyPlan plan = Plan(p);
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[0])), (std::vector<uint16_t>{0xFFFF, 0x8010}));
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[1])), (std::vector<uint16_t>{0x7FFF, 0x8010}));
  p.config = ParsePartitionsText("Default=0x7fff : ALL=full ;\n");
  EXPECT_EQ(UsedPKeys(Plan(p).tables.at(hosts_[1])), std::vector<uint16_t>{0xFFFF});
}

TEST_F(PKeyManagerTest, MembersByGuidGetFullOrLimitedKeysAndOthersNone) {
  const Fabric& f = d_.fabric;
  PartitionPolicy p;
  p.config = ParsePartitionsText("red=0x0001 : " + Hex(f, hosts_[1]) + "=full, " + Hex(f, hosts_[2]) +
                   " ;\nblue=0x0002, defmember=full : " + Hex(f, hosts_[3]) + ", SELF ;\n");
  PKeyPlan plan = Plan(p);
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[0])), (std::vector<uint16_t>{0xFFFF, 0x8002}));
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[1])), (std::vector<uint16_t>{0x7FFF, 0x8001}));
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[2])), (std::vector<uint16_t>{0x7FFF, 0x0001}));
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[3])), (std::vector<uint16_t>{0x7FFF, 0x8002}));
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[4])), std::vector<uint16_t>{0x7FFF});
}

TEST_F(PKeyManagerTest, ALaterLineWinsAndBothIsTwoKeysOnlyWithAllowBothPkeys) {
  const Fabric& f = d_.fabric;
  PartitionPolicy p;
  p.config = ParsePartitionsText("a=0x10 : ALL_CAS=full ;\na : " + Hex(f, hosts_[1]) + "=limited, " +
                   Hex(f, hosts_[2]) + "=both ;\n");
  PKeyPlan plan = Plan(p);
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[1])), (std::vector<uint16_t>{0x7FFF, 0x0010}));
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[2])), (std::vector<uint16_t>{0x7FFF, 0x8010}));
  p.allow_both_pkeys = true;
  plan = Plan(p);
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[2])), (std::vector<uint16_t>{0x7FFF, 0x8010, 0x0010}));
}

TEST_F(PKeyManagerTest, AKeyThePortAlreadyHoldsKeepsItsIndex) {
  PartitionPolicy p;
  p.config = ParsePartitionsText("a=0x10 : ALL_CAS=full ;\nb=0x20 : ALL_CAS=full ;\n");
  std::vector<uint16_t> held(64, 0);
  held[0] = 0xFFFF;
  held[7] = 0x8020;  // an IPoIB child interface was made on index 7
  PKeyPlan plan = Plan(p, [&](PortId) { return &held; });
  const auto& t = plan.tables.at(hosts_[1]);
  EXPECT_EQ(t[0], 0x7FFF);
  EXPECT_EQ(t[7], 0x8020);
  EXPECT_EQ(t[1], 0x8010);
  EXPECT_EQ(UsedPKeys(t).size(), 3u);
}

TEST_F(PKeyManagerTest, Indx0PutsItsKeyFirst) {
  PartitionPolicy p;
  p.config = ParsePartitionsText("a=0x10, indx0 : ALL_CAS=full ;\n");
  EXPECT_EQ(UsedPKeys(Plan(p).tables.at(hosts_[1])), (std::vector<uint16_t>{0x8010, 0x7FFF}));
}

TEST_F(PKeyManagerTest, SwitchPortsFacingHostsEnforceTheHostsKeysAsPartEnforceSays) {
  const Fabric& f = d_.fabric;
  PartitionPolicy p;
  p.config = ParsePartitionsText("a=0x10 : ALL_CAS=full ;\n");
  PortId leaf_port = f.port(hosts_[1]).peer;
  PKeyPlan plan = Plan(p);
  EXPECT_EQ(UsedPKeys(plan.tables.at(leaf_port)), (std::vector<uint16_t>{0x7FFF, 0x8010}));
  EXPECT_TRUE(plan.enforcement.at(leaf_port).inbound);
  EXPECT_TRUE(plan.enforcement.at(leaf_port).outbound);
  // Switch-to-switch ports are left alone (OpenSM too).
  for (const auto& [sp, e] : plan.enforcement)
    EXPECT_FALSE(f.node(f.port(f.port(sp).peer).node).is_switch());
  p.enforce = PartEnforce::kIn;
  plan = Plan(p);
  EXPECT_TRUE(plan.enforcement.at(leaf_port).inbound);
  EXPECT_FALSE(plan.enforcement.at(leaf_port).outbound);
  p.enforce = PartEnforce::kOff;
  plan = Plan(p);
  EXPECT_FALSE(plan.enforcement.at(leaf_port).inbound);
  EXPECT_FALSE(plan.enforcement.at(leaf_port).outbound);
  EXPECT_EQ(plan.tables.count(leaf_port), 0u);
}

TEST(PKeyManagerAloneTest, ASwitchThatCannotEnforceGetsNoTablesOnItsPorts) {
  DiscoveryResult d = Discovered(FatTree2(4).value(), /*enforcement_cap=*/0);
  PKeyPlan plan = PlanPKeys(d, CaPorts(d.fabric)[0], {}, {});
  EXPECT_TRUE(plan.enforcement.empty());
  for (const auto& [p, t] : plan.tables) {
    const Port& port = d.fabric.port(p);
    EXPECT_TRUE(!d.fabric.node(port.node).is_switch() || port.num.value() == 0);
  }
}

TEST_F(PKeyManagerTest, MoreKeysThanThePortHoldsIsAnIssueNotACrash) {
  std::string text;
  for (int k = 1; k <= 70; ++k) text += fmt::format("p{}={:#x} : ALL_CAS=full ;\n", k, k);
  PartitionPolicy p;
  p.config = ParsePartitionsText(text);
  PKeyPlan plan = Plan(p);
  EXPECT_EQ(UsedPKeys(plan.tables.at(hosts_[1])).size(), 64u);
  ASSERT_FALSE(plan.issues.empty());
  EXPECT_EQ(plan.issues[0].id, "SM-PKEY-001");
}

TEST(SharedPKeyTest, LimitedMembersDoNotTalkToEachOtherButToAFullMember) {
  Memberships full{{0x10, kFullBit}}, limited{{0x10, kLimitedBit}}, none{{0x20, kFullBit}};
  EXPECT_EQ(SharedPKey(limited, limited, std::nullopt), std::nullopt);
  EXPECT_EQ(SharedPKey(limited, full, std::nullopt), 0x0010);
  EXPECT_EQ(SharedPKey(full, limited, std::nullopt), 0x8010);
  EXPECT_EQ(SharedPKey(full, none, std::nullopt), std::nullopt);
}

TEST(SharedPKeyTest, ARequestedKeyMustBeOneBothShare) {
  Memberships a{{0x10, kFullBit}, {0x7FFF, kLimitedBit}}, b{{0x10, kFullBit}, {0x7FFF, kLimitedBit}};
  EXPECT_EQ(SharedPKey(a, b, uint16_t{0x8010}), 0x8010);
  EXPECT_EQ(SharedPKey(a, b, uint16_t{0xFFFF}), std::nullopt);  // both limited there
  EXPECT_EQ(SharedPKey(a, b, uint16_t{0x8020}), std::nullopt);
  // Without one: a key where both are full members comes first.
  EXPECT_EQ(SharedPKey(a, b, std::nullopt), 0x8010);
}

TEST(PartEnforceTest, OpenSmsFourValuesAndNothingElse) {
  EXPECT_EQ(ParsePartEnforce("both").value(), PartEnforce::kBoth);
  EXPECT_EQ(ParsePartEnforce("in").value(), PartEnforce::kIn);
  EXPECT_EQ(ParsePartEnforce("out").value(), PartEnforce::kOut);
  EXPECT_EQ(ParsePartEnforce("off").value(), PartEnforce::kOff);
  EXPECT_FALSE(ParsePartEnforce("yes").ok());
}

}  // namespace
}  // namespace ibsm::sm
