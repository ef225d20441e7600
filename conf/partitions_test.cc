#include "conf/partitions.h"

#include <unistd.h>

#include <random>

#include <gtest/gtest.h>

#include "conf/text_file.h"

namespace ibsm::conf {
namespace {

PartitionConfig MustParse(std::string_view text) {
  PartitionsParse r = ParsePartitions(text, "partitions.conf");
  for (const auto& e : r.errors) ADD_FAILURE() << e.ToString();
  return r.config;
}

std::vector<std::string> Errors(std::string_view text) {
  PartitionsParse r = ParsePartitions(text, "p.conf");
  std::vector<std::string> out;
  for (const auto& e : r.errors) out.push_back(e.ToString());
  return out;
}

TEST(PartitionsTest, OpenSmsDefaultLineGivesAllFullAndSelf) {
  PartitionConfig c = MustParse("Default=0x7fff, ipoib : ALL=full, SELF=full ;\n");
  ASSERT_EQ(c.partitions.size(), 1u);
  const Partition& p = c.partitions[0];
  EXPECT_EQ(p.name, "Default");
  EXPECT_EQ(p.pkey, 0x7FFF);
  EXPECT_TRUE(p.ipoib);
  ASSERT_EQ(p.members.size(), 2u);
  EXPECT_EQ(p.members[0].kind, MemberKind::kAll);
  EXPECT_EQ(p.members[0].membership, Membership::kFull);
  EXPECT_EQ(p.members[1].kind, MemberKind::kSelf);
  EXPECT_EQ(p.members[1].line, 1);
}

TEST(PartitionsTest, DefinitionsSpanLinesAndCommentsAreDropped) {
  PartitionConfig c = MustParse(
      "# storage network\n"
      "storage = 0x0002 , ipoib, mtu=5, rate=7, sl=3, scope=2, Q_Key=0x1234, TClass=4,\n"
      "    FlowLabel=0x12345, defmember=full :   # header ends here\n"
      "  0x0002c90300000011,            # host a\n"
      "  0x0002c90300000012=limited,\n"
      "  ALL_SWITCHES=both, ALL_ROUTERS, ALL_CAS=limited, NONE\n"
      ";\n"
      "0x8003 : 0x0002c90300000013 ;  compute : ALL_CAS=full;\n");
  ASSERT_EQ(c.partitions.size(), 3u);
  const Partition& s = c.partitions[0];
  EXPECT_EQ(s.name, "storage");
  EXPECT_EQ(s.pkey, 0x0002);
  EXPECT_EQ(s.line, 2);
  EXPECT_EQ(s.flags.mtu, 5);
  EXPECT_EQ(s.flags.rate, 7);
  EXPECT_EQ(s.flags.sl, 3);
  EXPECT_EQ(s.flags.scope_mask, 1u << 2);
  EXPECT_EQ(s.flags.q_key, 0x1234u);
  EXPECT_EQ(s.flags.tclass, 4);
  EXPECT_EQ(s.flags.flow_label, 0x12345u);
  ASSERT_EQ(s.members.size(), 5u);  // NONE adds nothing
  EXPECT_EQ(s.members[0].guid, Guid{0x0002c90300000011});
  EXPECT_EQ(s.members[0].membership, Membership::kFull);  // defmember
  EXPECT_EQ(s.members[0].line, 4);
  EXPECT_EQ(s.members[1].membership, Membership::kLimited);
  EXPECT_EQ(s.members[1].line, 5);
  EXPECT_EQ(s.members[2].kind, MemberKind::kAllSwitches);
  EXPECT_EQ(s.members[2].membership, Membership::kBoth);
  EXPECT_EQ(s.members[3].kind, MemberKind::kAllRouters);
  EXPECT_EQ(s.members[3].membership, Membership::kFull);
  EXPECT_EQ(s.members[4].kind, MemberKind::kAllCas);
  EXPECT_EQ(s.members[4].membership, Membership::kLimited);
  // A bare number names the partition by P_Key; the membership bit is dropped.
  EXPECT_EQ(c.partitions[1].pkey, 0x0003);
  EXPECT_EQ(c.partitions[1].name, "0003");
  EXPECT_EQ(c.partitions[1].members[0].membership, Membership::kLimited);
  // A name without a P_Key gets the first free one (OpenSM counts up from 1).
  EXPECT_EQ(c.partitions[2].name, "compute");
  EXPECT_EQ(c.partitions[2].pkey, 0x0001);
  EXPECT_EQ(c.partitions[2].line, 8);
}

TEST(PartitionsTest, IndexZeroAndMulticastGroupsAreRead) {
  PartitionConfig c = MustParse(
      "p1=0x10, indx0, ipoib, rate=3 : ALL=full,\n"
      "   mgid=ff12:401b::0707,sl=1,Q_Key=0xDEADBEEF\n"
      "   ;\n");
  ASSERT_EQ(c.partitions.size(), 1u);
  const Partition& p = c.partitions[0];
  EXPECT_TRUE(p.indx0);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].mgid[0], 0xFF);
  EXPECT_EQ(p.groups[0].mgid[1], 0x12);
  EXPECT_EQ(p.groups[0].mgid[15], 0x07);
  EXPECT_EQ(p.groups[0].flags.sl, 1);
  EXPECT_EQ(p.groups[0].flags.rate, 3);  // inherited from the partition
  EXPECT_EQ(p.groups[0].flags.q_key, 0xDEADBEEFu);
  ASSERT_EQ(p.members.size(), 1u);
}

TEST(PartitionsTest, SecondDefinitionOfAPKeyIsMergedWithAWarning) {
  PartitionsParse r = ParsePartitions(
      "a=0x10 : 0x1 ;\n"
      "b=0x8010 : 0x2=full ;\n"
      "a : 0x3 ;\n",
      "p.conf");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.config.partitions.size(), 1u);
  EXPECT_EQ(r.config.partitions[0].members.size(), 3u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].id, kPartDuplicate);
  EXPECT_EQ(r.warnings[0].line, 2);
}

TEST(PartitionsTest, UnknownFlagsAndMembershipsAreWarningsAsInOpenSm) {
  PartitionsParse r = ParsePartitions("a=0x10, shiny=1 : 0x1=fullish ;\n", "p.conf");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(r.warnings[0].ToString(), "p.conf:1: PART-010 unrecognized partition flag 'shiny' ignored");
  EXPECT_EQ(r.warnings[1].id, kPartUnknownMembership);
  EXPECT_EQ(r.config.partitions[0].members[0].membership, Membership::kLimited);
}

TEST(PartitionsTest, EmptyFileAndOnlyCommentsDefineNothing) {
  EXPECT_TRUE(MustParse("").partitions.empty());
  EXPECT_TRUE(MustParse("# nothing\n\n   \n").partitions.empty());
}

TEST(PartitionsTest, LastDefinitionWithoutSemicolonIsKeptWithAWarning) {
  PartitionsParse r = ParsePartitions("a=0x10 : ALL\n", "p.conf");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.config.partitions.size(), 1u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].id, kPartUnterminated);
}

TEST(PartitionsTest, EveryBadLineIsReportedWithFileAndLine) {
  auto errs = Errors(
      "good=0x10 : ALL ;\n"
      "no header here ;\n"                     // 2
      "x=0xzz : ALL ;\n"                       // 3
      "y=0x10000 : ALL ;\n"                    // 4
      "z=0x11, mtu=9 : ALL ;\n"                // 5
      "w=0x12, defmember=most : ALL ;\n"       // 6
      "v=0x13, , ipoib : ALL ;\n"              // 7
      "u=0x14 :\n"
      "   0x1,\n"
      "   0xnotaguid ;\n"                      // 10
      "t=0x15 : 0x0 ;\n"                       // 11
      "s=0x16 : AL ;\n"                        // 12
      "r=0x17 : mgid=ff12::zz ;\n"             // 13
      "q=0x18 : mgid=fe80::1 ;\n"              // 14
      "=0x19 : ALL ;\n");                      // 15: a P_Key alone is fine
  std::vector<std::string> want = {
      "p.conf:2: PART-001 no partition definition found (expected 'Name=PKey : members'): "
      "'no header here'",
      "p.conf:3: PART-002 partition 'x': P_Key '0xzz' is not a number in 0..0xffff",
      "p.conf:4: PART-002 partition 'y': P_Key '0x10000' is not a number in 0..0xffff",
      "p.conf:5: PART-003 flag 'mtu' needs a value in 1..5, not '9'",
      "p.conf:6: PART-003 flag 'defmember' needs full, limited or both, not 'most'",
      "p.conf:7: PART-003 bad partition flags (an empty flag)",
      "p.conf:10: PART-004 bad PortGUID '0xnotaguid' in partition 'u' (a GUID, ALL, ALL_CAS, "
      "ALL_SWITCHES, ALL_ROUTERS, SELF or NONE)",
      "p.conf:11: PART-004 bad PortGUID '0x0' in partition 't' (a GUID, ALL, ALL_CAS, "
      "ALL_SWITCHES, ALL_ROUTERS, SELF or NONE)",
      "p.conf:12: PART-004 bad PortGUID 'AL' in partition 's' (a GUID, ALL, ALL_CAS, "
      "ALL_SWITCHES, ALL_ROUTERS, SELF or NONE)",
      "p.conf:13: PART-005 mgid 'ff12::zz' is not a multicast GID",
      "p.conf:14: PART-005 mgid 'fe80::1' is not a multicast GID",
  };
  EXPECT_EQ(errs, want);
}

TEST(PartitionsTest, ControlBytesInABadLineArePrintedEscaped) {
  auto errs = Errors(std::string("a=0x10 : \x01\x7f ;\n"));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("\\x01\\x7f"), std::string::npos) << errs[0];
}

TEST(PartitionsTest, RandomBytesNeverCrashTheParser) {
  std::mt19937 rng(7);
  const std::string alphabet = "ALL_CSWITCHEF=0x123456789abcdef:;,#\n \t=fulimtdbo\x01\xff";
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 200, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    PartitionsParse r = ParsePartitions(s, "fuzz");
    for (const auto& e : r.errors) EXPECT_GT(e.line, 0) << s;
  }
}

TEST(PartitionsTest, LoadingAFileThatDoesNotExistIsNotFound) {
  auto r = LoadPartitionsFile("/nonexistent/partitions.conf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(PartitionsTest, LoadingAFileReportsItsPathInDiagnostics) {
  char path[] = "/tmp/ibsm-partitions-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(WriteFileAtomically(path, "a=0x10 : ALL ;\nb=0x11 : junk ;\n").ok());
  auto r = LoadPartitionsFile(path);
  unlink(path);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_EQ(r->errors[0].file, path);
  EXPECT_EQ(r->errors[0].line, 2);
}

}  // namespace
}  // namespace ibsm::conf
