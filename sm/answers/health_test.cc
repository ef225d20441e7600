#include "sm/answers/health.h"

#include <gtest/gtest.h>
#include <set>

namespace ibsm::sm {
namespace {

PortEnd End(uint64_t guid, uint8_t port, const std::string& name) {
  PortEnd e;
  e.node_guid = Guid{guid};
  e.port = PortNum{port};
  e.name = name;
  e.description = name + " desc";
  return e;
}

HealthFinding Counter(HealthRule rule, PortEnd at, PortEnd peer, uint64_t delta,
                      uint64_t threshold) {
  HealthFinding f;
  f.rule = rule;
  f.port = std::move(at);
  f.peer = std::move(peer);
  f.delta = delta;
  f.value = delta;
  f.threshold = threshold;
  return f;
}

TEST(HealthTest, FindingsOfBothEndsOfACableAreOneCableAndTheWorstCableComesFirst) {
  PortEnd leaf3 = End(0x10, 3, "leaf-1"), host = End(0x20, 1, "node-1");
  PortEnd leaf5 = End(0x10, 5, "leaf-1"), other = End(0x30, 1, "node-2");
  std::vector<HealthFinding> f = {
      Counter(HealthRule::kLinkDowned, other, leaf5, 3, 1),        // score 3
      Counter(HealthRule::kSymbolErrors, leaf3, host, 500, 10),    // score 50
      Counter(HealthRule::kPortRcvErrors, host, leaf3, 20, 10),    // score 2, same cable
  };
  auto cables = GroupByCable(f);
  ASSERT_EQ(cables.size(), 2u);
  EXPECT_EQ(cables[0].a.node_guid, Guid{0x10});
  EXPECT_EQ(cables[0].a.port, PortNum{3});
  ASSERT_TRUE(cables[0].b.has_value());
  EXPECT_EQ(cables[0].b->node_guid, Guid{0x20});
  ASSERT_EQ(cables[0].findings.size(), 2u);
  EXPECT_EQ(cables[0].findings[0].rule, HealthRule::kSymbolErrors) << "worst finding first";
  EXPECT_DOUBLE_EQ(cables[0].score, 52.0);
  EXPECT_EQ(cables[1].a.node_guid, Guid{0x10}) << "end A is the lower GUID whichever end reported";
  EXPECT_EQ(cables[1].b->node_guid, Guid{0x30});
  EXPECT_DOUBLE_EQ(cables[1].score, 3.0);
}

TEST(HealthTest, MessagesCarryTheStableIdTheNumbersAndTheOtherEnd) {
  HealthFinding f = Counter(HealthRule::kSymbolErrors, End(0x10, 3, "leaf-1"),
                            End(0x20, 1, "node-1"), 500, 10);
  EXPECT_EQ(f.Message(),
            "SM-PERF-001 symbol errors +500 in one PerfMgr sweep (counter now 500, threshold 10) "
            "on leaf-1 (0x0000000000000010) port 3; other end node-1 (0x0000000000000020) port 1");
  HealthFinding d;
  d.rule = HealthRule::kDegradedLink;
  d.port = End(0x10, 3, "leaf-1");
  d.peer = End(0x20, 1, "node-1");
  d.detail = "width 1x of 4x";
  EXPECT_NE(d.Message().find("SM-PERF-007 degraded link: width 1x of 4x"), std::string::npos);
  auto j = CableHealthJson(GroupByCable({f})[0]);
  EXPECT_EQ(j["findings"][0]["id"], "SM-PERF-001");
  EXPECT_EQ(j["b"]["guid"], "0x0000000000000020");
  EXPECT_EQ(j["b"]["description"], "node-1 desc");
}

TEST(HealthTest, EveryRuleHasItsOwnIdAndAZeroThresholdTurnsItOff) {
  std::set<std::string_view> ids;
  for (size_t r = 0; r < kHealthRuleCount; ++r) ids.insert(RuleInfo(static_cast<HealthRule>(r)).log_id);
  EXPECT_EQ(ids.size(), kHealthRuleCount);
  HealthThresholds t;
  t.vl15_dropped = 0;
  t.degraded_links = false;
  EXPECT_EQ(t.For(HealthRule::kVl15Dropped), 0u);
  EXPECT_EQ(t.For(HealthRule::kDegradedLink), 0u);
  EXPECT_EQ(t.For(HealthRule::kSymbolErrors), 10u);
}

}  // namespace
}  // namespace ibsm::sm
