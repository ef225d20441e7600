#include "tools/routecheck.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fabric/topology_reader.h"
#include "routing/verify.h"

namespace ibsm::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string SourceDir() {
  const char* env = std::getenv("IBSM_SOURCE_DIR");
  return env ? env : IBSM_SOURCE_DIR;
}
std::string Fixture(const std::string& name) {
  return SourceDir() + "/tests/fixtures/opensm-ftree2-k4/" + name;
}
std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct RunResult {
  int status;
  std::string out, err;
};
RunResult RouteCheck(std::vector<std::string> args) {
  args.insert(args.begin(), "ibsm-routecheck");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  const int status = RouteCheckMain(static_cast<int>(argv.size()), argv.data(), out, err);
  return {status, out.str(), err.str()};
}

// A file under the test's temporary directory, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    path_ = ::testing::TempDir() + "routecheck-" + std::to_string(::getpid()) + "-" +
            std::to_string(counter_++) + ".dump";
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

// ---- ParseLftDump ------------------------------------------------------------------------

TEST(ParseLftDumpTest, ReadsOpenSmsDumpOfATwoTierFatTree) {
  auto dump = ParseLftDump(ReadFile(Fixture("opensm-lfts.dump")), "opensm-lfts.dump");
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  ASSERT_EQ(dump->size(), 6u);
  const LftDumpSwitch& leaf1 = (*dump)[0];
  EXPECT_EQ(leaf1.guid, Guid(0x0002c90200000001));
  EXPECT_EQ(leaf1.lid, 2);
  EXPECT_EQ(leaf1.line, 1u);
  ASSERT_EQ(leaf1.entries.size(), 14u);
  EXPECT_EQ(leaf1.entries[0], (std::pair<uint16_t, uint8_t>{1, 1}));
  EXPECT_EQ(leaf1.entries[1], (std::pair<uint16_t, uint8_t>{2, 0}));
  ASSERT_EQ(leaf1.owners.size(), 14u);
  EXPECT_EQ(leaf1.owners[0], (std::pair<uint16_t, Guid>{1, Guid(0x0002c90300000011)}));
  EXPECT_EQ((*dump)[4].guid, Guid(0x0002c90200000005));  // spine-01
}

TEST(ParseLftDumpTest, ReadsIbroutesFormatAsDumpLftsPrintsIt) {
  const std::string text =
      "Unicast lids [0x0-0x3] of switch Lid 2 guid 0x0002c90200000001 (leaf-001):\n"
      "  Lid  Out   Destination\n"
      "       Port     Info \n"
      "0x0001 001 : (Channel Adapter portguid 0x0002c90300000011: 'node-0001 HCA-1')\n"
      "0x0002 000 : (Switch portguid 0x0002c90200000001: 'leaf-001')\n"
      "0x0003 004 : (Switch portguid 0x0002c90200000002: 'leaf-002')\n"
      "3 valid lids dumped \n";
  auto dump = ParseLftDump(text, "lfts.txt");
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  ASSERT_EQ(dump->size(), 1u);
  EXPECT_EQ((*dump)[0].lid, 2);
  ASSERT_EQ((*dump)[0].entries.size(), 3u);
  EXPECT_EQ((*dump)[0].entries[2], (std::pair<uint16_t, uint8_t>{3, 4}));
  EXPECT_EQ((*dump)[0].owners[2], (std::pair<uint16_t, Guid>{3, Guid(0x0002c90200000002)}));
}

TEST(ParseLftDumpTest, ReadsALiveDumpLftsWithDrPathHeadersAndItsTrailingNotice) {
  // As dump_lfts (infiniband-diags, a wrapper around dump_fts) prints it on ibsim.
  const std::string text =
      "Unicast lids [0x0-0x2] of switch DR path slid 0; dlid 0; 0,1,5 guid 0x0002c9020000004c "
      "(pod08-leaf-04):\n"
      "  Lid  Out   Destination\n"
      "       Port     Info \n"
      "0x0001 005 : (Channel Adapter portguid 0x0002c90300000011: 'node-0001 HCA-1')\n"
      "0x0002 005 : (Switch portguid 0x0002c90200000001: 'core-001')\n"
      "2 valid lids dumped \n"
      "\n"
      "*** WARNING ***: this command has been replaced by dump_fts\n"
      "\n"
      "\n";
  auto dump = ParseLftDump(text, "lfts.txt");
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  ASSERT_EQ(dump->size(), 1u);
  EXPECT_EQ((*dump)[0].guid, Guid(0x0002c9020000004c));
  EXPECT_EQ((*dump)[0].lid, 0);  // a DR-path header names no LID
  ASSERT_EQ((*dump)[0].entries.size(), 2u);
  EXPECT_EQ((*dump)[0].entries[1], (std::pair<uint16_t, uint8_t>{2, 5}));
  EXPECT_EQ((*dump)[0].owners[0], (std::pair<uint16_t, Guid>{1, Guid(0x0002c90300000011)}));
}

TEST(ParseLftDumpTest, RejectsBadLinesWithFileAndLine) {
  const std::string header = "Unicast lids [0-14] of switch Lid 2 guid 0x0002c90200000001 ('x'):\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {header + "0x0001 001\nhello world\n", "d:3: expected a switch header or a '0xLID PORT'"},
      {"0x0001 001\n", "d:1: an LFT entry before the first switch header"},
      {header + "0xc000 001\n", "d:2: expected a unicast LID, got '0xc000'"},
      {header + "0x0000 001\n", "d:2: expected a unicast LID"},
      {header + "0x00zz 001\n", "d:2: expected a unicast LID"},
      {header + "0x0001 256\n", "d:2: expected an egress port 0..255, got '256'"},
      {header + "0x0001\n", "d:2: expected an egress port after the LID"},
      {header + "0x0001 -1\n", "d:2: expected an egress port"},
      {header + "\n" + header, "d:3: switch 0x0002c90200000001 is dumped twice (first at line 1)"},
      {"Unicast lids [0-14] of switch Lid 2 ('x'):\n", "d:1: expected 'guid 0x...'"},
      {"Unicast lids [0-14] of switch Lid 2 guid zz ('x'):\n", "d:1: expected a hex GUID"},
      {"Unicast lids [0-14] of switch Lid 99999 guid 0x1 ('x'):\n",
       "d:1: expected a unicast LID after 'Lid'"},
      {header + "0x0001 001 # Channel Adapter portguid 0xqq: 'n'\n",
       "d:2: expected a hex GUID after 'portguid'"},
  };
  for (const auto& [text, want] : cases) {
    auto dump = ParseLftDump(text, "d");
    ASSERT_FALSE(dump.ok()) << text;
    EXPECT_EQ(dump.status().code(), StatusCode::kCorrupt);
    EXPECT_THAT(dump.status().message(), StartsWith(want)) << text;
  }
  // Binary garbage is an error, not a crash.
  std::string junk(300, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(i * 37);
  EXPECT_FALSE(ParseLftDump(junk, "d").ok());
  EXPECT_TRUE(ParseLftDump("", "d").ok());
}

TEST(TablesFromDumpTest, MatchesSwitchesByGuidAndRejectsUnknownOnes) {
  auto fabric = ReadTopologyFile(Fixture("k4.net"));
  ASSERT_TRUE(fabric.ok());
  auto dump = ParseLftDump(ReadFile(Fixture("opensm-lfts.dump")), "f");
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(LidsFromDump(*fabric, *dump), 14u);
  EXPECT_EQ(fabric->port(*fabric->FindPort(Guid(0x0002c90300000011))).lid, Lid(1));
  EXPECT_EQ(fabric->port(*fabric->FindNodeByName("spine-02"), PortNum(0)).lid, Lid(7));
  const routing::LidMap lids(*fabric);
  auto tables = TablesFromDump(*fabric, *dump, lids.max_lid(), "f");
  ASSERT_TRUE(tables.ok());
  EXPECT_TRUE(routing::VerifyTables(*fabric, lids, *tables).ok);

  (*dump)[2].guid = Guid(0x1234);
  auto unknown = TablesFromDump(*fabric, *dump, lids.max_lid(), "f");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            fmt::format("f:{}: switch 0x0000000000001234 is not in the topology", (*dump)[2].line));
}

// ---- the command -------------------------------------------------------------------------

TEST(RouteCheckMainTest, JudgesOpenSmsTablesReadFromItsDump) {
  const RunResult r =
      RouteCheck({"--topology", Fixture("k4.net"), "--lft-dump", Fixture("opensm-lfts.dump"),
                  "--quality", "--permutations", "20"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("6 switches, 8 CAs, 16 cables, max LID 14 (LIDs of 14 ports "
                               "from the dump)"));
  EXPECT_THAT(r.out, HasSubstr("tables: 6 switches from"));
  EXPECT_THAT(r.out, HasSubstr("verify: ok: 0 missing entries, 0 loops"));
  EXPECT_THAT(r.out, HasSubstr("credit loops: acyclic: 16 channels"));
  EXPECT_THAT(r.out, HasSubstr("routes per link, tier 1: 16 channels, min 6, max 6"));
  EXPECT_THAT(r.out, HasSubstr("quality: 8 hosts, shift max sharing 1"));
}

TEST(RouteCheckMainTest, ReportsALoopPlantedInTheDumpAndFails) {
  std::string text = ReadFile(Fixture("opensm-lfts.dump"));
  // spine-01 sends LID 1 down to leaf-002, which sends it back up to spine-01.
  const std::string spine = "('spine-01'):\n0x0001 001";
  const size_t at = text.find(spine);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, spine.size(), "('spine-01'):\n0x0001 002");
  const TempFile dump(text);
  const RunResult r = RouteCheck({"--topology", Fixture("k4.net"), "--lft-dump", dump.path()});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("verify: FAILED"));
  EXPECT_THAT(r.out, HasSubstr("LID 1 loops"));
  EXPECT_THAT(r.out, HasSubstr("credit loops: CYCLE"));
  EXPECT_THAT(r.out, HasSubstr("cycle: spine-01 (0x0002c90200000005) port 2 -(LID 1)-> "
                               "leaf-002 (0x0002c90200000002) port 3 -(LID 1)-> spine-01 "
                               "(0x0002c90200000005) port 2\n"));
}

TEST(RouteCheckMainTest, RoutesAGeneratedFabricWithLmcThroughTheChain) {
  const RunResult r = RouteCheck({"--fat-tree2", "4", "--lmc=1", "--engine", "minhop", "--threads",
                                  "2", "--quality", "--permutations", "10", "--no-shifts"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("fabric: fat-tree2 k=4: 6 switches, 8 CAs"));
  EXPECT_THAT(r.out, HasSubstr("LIDs assigned, lmc 1"));
  EXPECT_THAT(r.out, HasSubstr("routing: engine minhop (chain 'minhop'), 2 threads"));
  EXPECT_THAT(r.out, HasSubstr("verify: ok"));
  EXPECT_THAT(r.out, HasSubstr("shift max sharing 0 (shifts off)"));
  EXPECT_THAT(r.out, HasSubstr("over 10 permutations"));
}

TEST(RouteCheckMainTest, RejectsBadUsageAndInputWithStatusTwo) {
  EXPECT_EQ(RouteCheck({}).status, 2);
  EXPECT_EQ(RouteCheck({"--fat-tree3", "8", "--fat-tree2", "8"}).status, 2);
  EXPECT_EQ(RouteCheck({"--fat-tree3", "eight"}).status, 2);
  EXPECT_EQ(RouteCheck({"--fat-tree3", "8", "--bogus"}).status, 2);
  EXPECT_EQ(RouteCheck({"--fat-tree3", "8", "--threads"}).status, 2);
  EXPECT_EQ(RouteCheck({"--fat-tree3", "8", "--lmc", "9"}).status, 2);
  EXPECT_EQ(RouteCheck({"--fat-tree3", "8", "--engine", "nosuch"}).status, 2);
  EXPECT_EQ(RouteCheck({"--fat-tree2", "4", "--engine", "minhop", "--lft-dump", "x"}).status, 2);
  const RunResult missing =
      RouteCheck({"--fat-tree2", "4", "--lft-dump", "/nonexistent/lfts.dump"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_THAT(missing.err, HasSubstr("cannot read /nonexistent/lfts.dump"));
  const TempFile bad("Unicast lids [0-1] of switch Lid 1 guid 0x1 ('x'):\nnonsense\n");
  const RunResult parsed = RouteCheck({"--fat-tree2", "4", "--lft-dump", bad.path()});
  EXPECT_EQ(parsed.status, 2);
  EXPECT_THAT(parsed.err, HasSubstr(bad.path() + ":2: expected a switch header"));
}

TEST(RouteCheckMainTest, JudgesADumpAgainstTheGeneratedTwinOfItsNetFile) {
  // ibsm's generators give the GUIDs of gen_topology.py, which wrote the fixture's net file.
  const RunResult r = RouteCheck({"--fat-tree2", "4", "--lft-dump", Fixture("opensm-lfts.dump")});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("LIDs of 14 ports from the dump"));
  EXPECT_THAT(r.out, HasSubstr("verify: ok"));
}

}  // namespace
}  // namespace ibsm::tools
