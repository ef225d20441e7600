// The QoS policy file's qos-ulps (conf/qos_policy.h, docs/qos.md): what each rule matches,
// the first match wins, and every bad input is an error with its file and line.
#include "conf/qos_policy.h"

#include <gtest/gtest.h>

#include <string>

namespace ibsm::conf {
namespace {

QosPolicy Good(const std::string& text) {
  auto r = ParseQosPolicy(text, "qos-policy.conf");
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].ToString());
  return r.policy;
}

QosPathQuery Sid(uint64_t sid) {
  QosPathQuery q;
  q.service_id = sid;
  return q;
}

TEST(QosPolicyTest, EveryUlpMatchesWhatOpenSmMatches) {
  QosPolicy p = Good(R"(
# comment
qos-ulps
    default                                : 1
    sdp, port-num 3000-3100                : 2
    sdp                                    : 3
    rds                                    : 4
    iSER, port-num 3260                    : 5
    iser                                   : 6
    srp, target-port-guid 0x1234-0x1240    : 7
    ipoib, pkey 0x8001, 0x0002             : 8
    ipoib                                  : 9
    any, service-id 0x500-0x5ff, 0x700     : 10
    any, pkey 0x10-0x20                    : 11
    any, target-port-guid 0x50,0x60-0x70   : 12
    any, source-port-guid 0x80             : 13
    any, source-target-port-guid 0x90-0x91 : 14
end-qos-ulps
)");
  EXPECT_EQ(p.default_sl, 1);
  ASSERT_EQ(p.rules.size(), 13u);
  EXPECT_EQ(p.SlFor({}), 1);                       // nothing named: default
  EXPECT_EQ(p.SlFor(Sid(0x10000 + 3050)), 2);      // sdp port 3050
  EXPECT_EQ(p.SlFor(Sid(0x10000 + 80)), 3);        // any other sdp port
  EXPECT_EQ(p.SlFor(Sid(0x1060000 + 0x48CA)), 4);  // rds
  EXPECT_EQ(p.SlFor(Sid(0x1060000 + 3260)), 5);    // iser port 3260 (0x0CBC): first rule
  EXPECT_EQ(p.SlFor(Sid(0x1060000 + 3261)), 1);    // no rule: default
  QosPathQuery srp;
  srp.target = Guid{0x1236};
  EXPECT_EQ(p.SlFor(srp), 7);
  srp.target = Guid{0x1241};
  EXPECT_EQ(p.SlFor(srp), 1);
  QosPathQuery pk;
  pk.pkey = 0x8001;
  EXPECT_EQ(p.SlFor(pk), 8);
  pk.pkey = 0x0001;  // the membership bit is not part of the key
  EXPECT_EQ(p.SlFor(pk), 8);
  pk.pkey = 0xFFFF;
  EXPECT_EQ(p.SlFor(pk), 9);  // ipoib: the default partition
  pk.pkey = 0x8015;
  EXPECT_EQ(p.SlFor(pk), 11);
  EXPECT_EQ(p.SlFor(Sid(0x5AB)), 10);
  EXPECT_EQ(p.SlFor(Sid(0x700)), 10);
  EXPECT_EQ(p.SlFor(Sid(0x701)), 1);
  QosPathQuery g;
  g.target = Guid{0x65};
  EXPECT_EQ(p.SlFor(g), 12);
  g.target = Guid{0};
  g.source = Guid{0x80};
  EXPECT_EQ(p.SlFor(g), 13);
  g.source = Guid{0x90};
  EXPECT_EQ(p.SlFor(g), 1);  // source-target: both ends must be in the list
  g.target = Guid{0x91};
  EXPECT_EQ(p.SlFor(g), 14);
}

TEST(QosPolicyTest, TheFirstMatchingRuleWinsAndCriteriaNeedTheRequestToNameThem) {
  QosPolicy p = Good(
      "qos-ulps\n"
      "  default : 0\n"
      "  any, service-id 0x10-0x20 : 5\n"
      "  any, service-id 0x15 : 6\n"   // shadowed by the line above
      "  any, pkey 0x7fff : 7\n"
      "end-qos-ulps\n");
  EXPECT_EQ(p.SlFor(Sid(0x15)), 5);
  QosPathQuery no_pkey;  // a pkey rule does not match a request without a P_Key
  EXPECT_EQ(p.SlFor(no_pkey), 0);
  QosPathQuery both = Sid(0x99);
  both.pkey = 0xFFFF;
  EXPECT_EQ(p.SlFor(both), 7);
}

TEST(QosPolicyTest, ReversedRangesAndCaseAreReadAsOpenSmReadsThem) {
  QosPolicy p = Good("QOS-ULPS\n DEFAULT: 2\n ANY, SERVICE-ID 0x20-0x10 :3\nEND-QOS-ULPS\n");
  EXPECT_EQ(p.SlFor(Sid(0x18)), 3);
}

struct Bad {
  const char* text;
  const char* id;
  int line;
};

TEST(QosPolicyTest, BadInputIsRefusedWithItsLine) {
  const Bad cases[] = {
      {"qos-ulps\n default : 0\n sdp : 16\nend-qos-ulps\n", kQosPolBadSl, 3},
      {"qos-ulps\n default : 0\n sdp 3\nend-qos-ulps\n", kQosPolBadLine, 3},
      {"qos-ulps\n default : x\nend-qos-ulps\n", kQosPolBadNumber, 2},
      {"qos-ulps\n default : 0\n any, service-id 0x1-zz : 1\nend-qos-ulps\n", kQosPolBadNumber, 3},
      {"qos-ulps\n default : 0\n any, service-id : 1\nend-qos-ulps\n", kQosPolBadLine, 3},
      {"qos-ulps\n default : 0\n any : 1\nend-qos-ulps\n", kQosPolBadLine, 3},
      {"qos-ulps\n default : 0\n srp : 1\nend-qos-ulps\n", kQosPolBadLine, 3},
      {"qos-ulps\n default : 0\n sdp, port-num 70000 : 1\nend-qos-ulps\n", kQosPolBadNumber, 3},
      {"qos-ulps\n default : 0\n ipoib, pkey 0x10000 : 1\nend-qos-ulps\n", kQosPolBadNumber, 3},
      {"qos-ulps\n default : 0\n default : 1\nend-qos-ulps\n", kQosPolBadLine, 3},
      {"qos-ulps\n default : 0\n", kQosPolOutside, 3},
      {"default : 0\n", kQosPolOutside, 1},
      {"qos-ulps\n sdp : 1\nend-qos-ulps\n", kQosPolNoDefault, 1},
      {"", kQosPolNoDefault, 0},
      {"qos-ulps\n default : 0\nend-qos-ulps\nport-groups\n port-group\n name: a\n "
       "end-port-group\nend-port-groups\n",
       kQosPolUnsupported, 4},
      {"qos-levels\nend-qos-levels\nqos-ulps\n default : 0\nend-qos-ulps\n", kQosPolUnsupported, 1},
      {"qos-ulps\n default : 0\nend-qos-ulps\nqos-setup\n", kQosPolUnsupported, 4},
      {"qos-ulps\n default : 0\nend-qos-ulps\nqos-match-rules\nend-qos-match-rules\n",
       kQosPolUnsupported, 4},
  };
  for (const auto& c : cases) {
    auto r = ParseQosPolicy(c.text, "qp.conf");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.errors[0].id, c.id) << c.text << "\n" << r.errors[0].ToString();
    EXPECT_EQ(r.errors[0].line, c.line) << c.text << "\n" << r.errors[0].ToString();
    EXPECT_EQ(r.errors[0].file, "qp.conf");
    EXPECT_EQ(r.errors.back().id, kQosPolRejected) << c.text;
  }
}

TEST(QosPolicyTest, GarbageIsBoundedAndPrintable) {
  std::string text = "qos-ulps\n";
  for (int i = 0; i < 1000; ++i) text += "\x01\xff junk\n";
  auto r = ParseQosPolicy(text, "qp.conf");
  ASSERT_FALSE(r.ok());
  EXPECT_LE(r.errors.size(), 102u);
  for (const auto& e : r.errors)
    for (char ch : e.message) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << e.message;
}

TEST(QosPolicyTest, AMissingFileIsNotFound) {
  auto r = LoadQosPolicyFile("/nonexistent/qos-policy.conf");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ibsm::conf
