#include "routing/verify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "fabric/generators.h"
#include "routing/minhop_engine.h"
#include "routing/routing_test_util.h"

namespace ibsm::routing {
namespace {

using ::testing::HasSubstr;

// FatTree2(8) routed by minhop: 8 leaves of 4 hosts (ports 1-4) and 4 uplinks (ports 5-8);
// leaf-00i is port i of every spine.
class VerifyTablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = FatTree2(8);
    ASSERT_TRUE(f.ok());
    fabric_ = std::move(f).value();
    testing::AssignLids(fabric_);
    lids_.emplace(fabric_);
    auto t = MinHopEngine().Route(fabric_, *lids_, {});
    ASSERT_TRUE(t.ok());
    tables_ = std::move(t).value();
    ASSERT_TRUE(VerifyTables(fabric_, *lids_, tables_).ok);
  }
  NodeId Node(const char* name) const { return *fabric_.FindNodeByName(name); }
  std::vector<uint8_t>& Lft(const char* name) {
    return tables_.switches[tables_.switch_index[Node(name)]].lft;
  }
  // LID of host `port` (1-4) of leaf `leaf`.
  uint16_t HostLid(const char* leaf, uint8_t port) const {
    return fabric_.port(fabric_.port(Node(leaf), PortNum(port)).peer).lid.value();
  }

  Fabric fabric_;
  std::optional<LidMap> lids_;
  RoutingTables tables_;
};

TEST_F(VerifyTablesTest, FindsAForwardingLoopPlantedBetweenALeafAndASpine) {
  const uint16_t lid = HostLid("leaf-005", 1);
  const uint8_t up = Lft("leaf-001")[lid];
  const NodeId spine = fabric_.port(fabric_.port(Node("leaf-001"), PortNum(up)).peer).node;
  Lft(fabric_.node(spine).name.c_str())[lid] = 1;  // back down to leaf-001
  const VerifyReport r = VerifyTables(fabric_, *lids_, tables_);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.loops, 1u);
  EXPECT_EQ(r.missing_entries, 0u);
  // leaf-001's four hosts, and the hosts of every leaf that climbs through that spine.
  EXPECT_GE(r.unreachable_pairs, 4u);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_THAT(r.problems[0], HasSubstr(fmt::format("LID {} loops: ", lid)));
  EXPECT_THAT(r.problems[0], HasSubstr("leaf-001"));
}

TEST_F(VerifyTablesTest, FindsAMissingEntryAndTheHostsItStrands) {
  const uint16_t lid = HostLid("leaf-005", 1);
  Lft("leaf-002")[lid] = kDropPort;
  const VerifyReport r = VerifyTables(fabric_, *lids_, tables_);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.missing_entries, 1u);
  EXPECT_EQ(r.loops, 0u);
  EXPECT_EQ(r.unreachable_pairs, 4u);  // leaf-002's hosts
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0],
            fmt::format("switch leaf-002 ({}) has no route to LID {}",
                        fabric_.node(Node("leaf-002")).guid, lid));
}

// Limited to some LIDs, the check reads only those: a hole in another LID's routes is not
// seen, one in a listed LID's is, with the same counts as the whole check gives for it.
TEST_F(VerifyTablesTest, OnlyTheListedLidsAreChecked) {
  const uint16_t lid = HostLid("leaf-005", 1);
  Lft("leaf-001")[lid] = kDropPort;
  const std::vector<uint32_t> others{1, HostLid("leaf-002", 1), HostLid("leaf-007", 4)};
  EXPECT_TRUE(VerifyTables(fabric_, *lids_, tables_, 20, 1, &others).ok);
  std::vector<uint32_t> with = others;
  with.push_back(lid);
  std::sort(with.begin(), with.end());
  const VerifyReport part = VerifyTables(fabric_, *lids_, tables_, 20, 2, &with);
  const VerifyReport whole = VerifyTables(fabric_, *lids_, tables_);
  EXPECT_FALSE(part.ok);
  EXPECT_EQ(part.missing_entries, whole.missing_entries);
  EXPECT_EQ(part.unreachable_pairs, whole.unreachable_pairs);
  EXPECT_EQ(part.problems, whole.problems);
}

TEST_F(VerifyTablesTest, FindsAnEntryThatDeliversToTheWrongHost) {
  const uint16_t lid = HostLid("leaf-001", 1);
  Lft("leaf-001")[lid] = 2;
  const VerifyReport r = VerifyTables(fabric_, *lids_, tables_);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.misrouted_entries, 1u);
  EXPECT_EQ(r.unreachable_pairs, 31u);  // every other host: all paths end at leaf-001
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_THAT(r.problems[0], HasSubstr(fmt::format("routes LID {} to port 2, reaching", lid)));
}

TEST_F(VerifyTablesTest, FindsPortsOutOfRangeUncabledOrOwnedByAnotherSwitch) {
  fabric_.Disconnect(fabric_.port_id(Node("leaf-002"), PortNum(8)));
  auto rerouted = MinHopEngine().Route(fabric_, *lids_, {});
  ASSERT_TRUE(rerouted.ok());
  tables_ = std::move(rerouted).value();
  ASSERT_TRUE(VerifyTables(fabric_, *lids_, tables_).ok);
  const uint16_t lid = HostLid("leaf-003", 1);
  Lft("leaf-001")[lid] = 40;
  Lft("spine-01")[lid] = 0;
  Lft("leaf-002")[lid] = 8;
  const VerifyReport r = VerifyTables(fabric_, *lids_, tables_, 100);
  EXPECT_EQ(r.misrouted_entries, 3u);
  EXPECT_FALSE(r.ok);
  std::string all;
  for (const auto& p : r.problems) all += p + "\n";
  EXPECT_THAT(all, HasSubstr("but has only 8 ports"));
  EXPECT_THAT(all, HasSubstr("which has no cable"));
  EXPECT_THAT(all, HasSubstr("(port 0), but it belongs to"));
}

TEST_F(VerifyTablesTest, KeepsOnlyTheFirstProblemsButCountsThemAll) {
  for (auto& t : tables_.switches) std::fill(t.lft.begin() + 1, t.lft.end(), kDropPort);
  const VerifyReport r = VerifyTables(fabric_, *lids_, tables_, 5);
  EXPECT_EQ(r.problems.size(), 5u);
  EXPECT_EQ(r.missing_entries, uint64_t{12} * lids_->max_lid());
  EXPECT_EQ(r.unreachable_pairs, uint64_t{32} * 31 + 32 * 12);
}

TEST_F(VerifyTablesTest, TheReportIsTheSameOnOneOrFourThreads) {
  // Damage spread over many LID blocks: every third LID dropped on one leaf, a loop planted.
  for (uint16_t lid = 1; lid <= lids_->max_lid(); lid += 3) Lft("leaf-003")[lid] = kDropPort;
  const uint16_t lid = HostLid("leaf-005", 1);
  const uint8_t up = Lft("leaf-001")[lid];
  const NodeId spine = fabric_.port(fabric_.port(Node("leaf-001"), PortNum(up)).peer).node;
  Lft(fabric_.node(spine).name.c_str())[lid] = 1;
  const VerifyReport one = VerifyTables(fabric_, *lids_, tables_, 7, 1);
  const VerifyReport four = VerifyTables(fabric_, *lids_, tables_, 7, 4);
  EXPECT_FALSE(one.ok);
  EXPECT_GT(one.missing_entries, 0u);
  EXPECT_EQ(one.loops, 1u);
  EXPECT_EQ(four.missing_entries, one.missing_entries);
  EXPECT_EQ(four.loops, one.loops);
  EXPECT_EQ(four.unreachable_pairs, one.unreachable_pairs);
  EXPECT_EQ(four.misrouted_entries, one.misrouted_entries);
  EXPECT_EQ(four.problems, one.problems);
  EXPECT_EQ(one.problems.size(), 7u);
}

TEST_F(VerifyTablesTest, AMissingSwitchTableCountsAsMissingEntries) {
  tables_.switch_index[Node("spine-02")] = SIZE_MAX;
  const VerifyReport r = VerifyTables(fabric_, *lids_, tables_);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.missing_entries, lids_->max_lid());
}

}  // namespace
}  // namespace ibsm::routing
