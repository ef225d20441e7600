#include "conf/guid_file.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "conf/text_file.h"

namespace ibsm::conf {
namespace {

TEST(GuidFileTest, GuidListReadsHexWithOrWithoutPrefixAndSkipsComments) {
  auto r = ParseGuidList(
      "# roots\n"
      "0x0002c90300000001\n"
      "  0002C90300000002   # spine 2\n"
      "\n"
      "0x0002c90300000001\n",
      "roots");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->guids.size(), 2u);
  EXPECT_EQ(r->guids[0], Guid{0x0002c90300000001});
  EXPECT_EQ(r->guids[1], Guid{0x0002c90300000002});
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0].ToString(),
            "roots:5: CONF-010 0x0002c90300000001 listed again; ignored");
}

TEST(GuidFileTest, GuidListLineThatIsNotAGuidIsAnErrorWithFileLine) {
  auto r = ParseGuidList("0x1\n0xnotaguid\n", "/etc/opensm/roots");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "/etc/opensm/roots:2: '0xnotaguid' is not a GUID (16 hex digits, 0x optional)");
  EXPECT_FALSE(ParseGuidList("0x00000000000000001\n", "f").ok());  // 17 digits
  EXPECT_FALSE(ParseGuidList("0x0\n", "f").ok());
}

TEST(Guid2LidTest, ReadsOpenSmLines) {
  Guid2LidLoad l = ParseGuid2Lid(
      "0x0002c90300000011 0x1 0x1\n"
      "0x0002c90300000012 0x4 0x7\n",
      "guid2lid");
  EXPECT_TRUE(l.warnings.empty());
  ASSERT_EQ(l.entries.size(), 2u);
  EXPECT_EQ(l.entries[1], (Guid2LidEntry{Guid{0x0002c90300000012}, Lid{4}, Lid{7}}));
}

TEST(Guid2LidTest, BadLinesAreSkippedWithAWarningAndGoodLinesKept) {
  Guid2LidLoad l = ParseGuid2Lid(
      "0x0002c90300000011 0x1 0x1\n"   // good
      "garbage\n"                      // 2: malformed
      "0x0002c90300000012 0x0 0x0\n"   // 3: LID 0
      "0x0002c90300000013 0xc000 0xc000\n"  // 4: multicast
      "0x0002c90300000014 0x8 0x4\n"   // 5: min > max
      "0x0002c90300000015 0x1 0x1\n"   // 6: overlaps line 1
      "0x0002c90300000011 0x9 0x9\n"   // 7: GUID again
      "0x0002c90300000016 0x2 0x3 0x4\n"  // 8: extra field
      "0x0002c90300000017 0x2 0x3\n",  // good
      "guid2lid");
  ASSERT_EQ(l.entries.size(), 2u);
  EXPECT_EQ(l.entries[1].guid, Guid{0x0002c90300000017});
  ASSERT_EQ(l.warnings.size(), 7u);
  EXPECT_EQ(l.warnings[0].ToString(),
            "guid2lid:2: CONF-020 'garbage' is not '0xGUID 0xMINLID 0xMAXLID'; line skipped");
  EXPECT_EQ(l.warnings[1].line, 3);
  EXPECT_EQ(l.warnings[3].ToString(),
            "guid2lid:5: CONF-020 0x0002c90300000014: LIDs 8..4 are not a unicast range "
            "(1..49151); line skipped");
  EXPECT_EQ(l.warnings[4].ToString(),
            "guid2lid:6: CONF-021 0x0002c90300000015: LIDs 1..1 overlap 1..1 of an earlier "
            "line; line skipped");
  EXPECT_EQ(l.warnings[5].id, "CONF-022");
  EXPECT_EQ(l.warnings[6].line, 8);
}

TEST(Guid2LidTest, RangeOverlappingTheMiddleOfAnEarlierRangeIsRejected) {
  Guid2LidLoad l = ParseGuid2Lid("0x1 0x10 0x17\n0x2 0x8 0x10\n0x3 0x14 0x14\n0x4 0x18 0x1f\n",
                                 "g");
  ASSERT_EQ(l.entries.size(), 2u);
  EXPECT_EQ(l.entries[1].guid, Guid{4});
  EXPECT_EQ(l.warnings.size(), 2u);
}

TEST(Guid2LidTest, WrittenFileReadsBackAndMatchesOpenSmFormat) {
  std::vector<Guid2LidEntry> e = {{Guid{0x0002c90300000011}, Lid{1}, Lid{1}},
                                  {Guid{0x0002c90300000012}, Lid{0x10}, Lid{0x13}}};
  EXPECT_EQ(WriteGuid2Lid(e), "0x0002c90300000011 0x1 0x1\n0x0002c90300000012 0x10 0x13\n");
  char dir_tmpl[] = "/tmp/ibsm_g2l_test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
  const std::string path = std::string(dir_tmpl) + "/guid2lid";
  ASSERT_TRUE(SaveGuid2LidFile(path, e).ok());
  // Renamed into place: the directory holds the file and no temporary beside it.
  size_t entries = 0;
  for (const auto& de : std::filesystem::directory_iterator(dir_tmpl)) {
    EXPECT_EQ(de.path().filename(), "guid2lid");
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
  auto r = LoadGuid2LidFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->entries, e);
  EXPECT_TRUE(r->warnings.empty());
  ::unlink(path.c_str());
  ::rmdir(dir_tmpl);
  EXPECT_EQ(LoadGuid2LidFile(path).status().code(), StatusCode::kNotFound);
}

TEST(Guid2LidTest, GarbageNeverCrashesAndWarningsStayBoundedAndPrintable) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string g(rng() % 8192, '\0');
    for (char& ch : g) ch = static_cast<char>(rng() % 3 == 0 ? '\n' : rng());
    Guid2LidLoad l = ParseGuid2Lid(g, "g");
    EXPECT_LE(l.warnings.size(), 101u);
    for (const Diagnostic& d : l.warnings) {
      for (char ch : d.message) ASSERT_TRUE(ch >= 0x20 && ch < 0x7f) << d.message;
    }
    (void)ParseGuidList(g, "g");
  }
}

}  // namespace
}  // namespace ibsm::conf
