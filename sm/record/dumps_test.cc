#include "sm/record/dumps.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "conf/guid_file.h"
#include "fabric/topology_reader.h"
#include "routing/routing_engine.h"

namespace ibsm::sm {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(IBSM_SOURCE_DIR) + "/tests/fixtures/opensm-ftree2-k4/" + name;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What `write` prints to a FILE*.
std::string Capture(const std::function<void(std::FILE*)>& write) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* mem = open_memstream(&buf, &len);
  write(mem);
  std::fclose(mem);
  std::string out(buf, len);
  free(buf);
  return out;
}

// The k=4 fat tree as OpenSM 3.3.23 left it on ibsim: its LIDs (guid2lid), every port
// ACTIVE at 4x EDR, and the identity ibsim's SMA reports (vendor 0, device 0, rev 0xA1).
Fabric OpenSmFabric() {
  auto f = ReadTopologyFile(Fixture("k4.net"));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  auto lids = conf::LoadGuid2LidFile(Fixture("guid2lid"));
  EXPECT_TRUE(lids.ok());
  for (const auto& e : lids->entries) {
    auto p = f->FindPort(e.guid);
    EXPECT_TRUE(p.has_value()) << ToString(e.guid);
    f->mutable_port(*p).lid = e.min_lid;
  }
  for (NodeId n = 0; n < f->node_count(); ++n) {
    Node& node = f->mutable_node(n);
    node.vendor_id = 0;
    node.device_id = 0;
    node.revision = 0xA1;
    for (uint32_t p = 1; p <= node.num_ports; ++p)
      f->mutable_port(f->port_id(n, PortNum{static_cast<uint8_t>(p)})).state = PortState::kActive;
  }
  f->IndexLids();
  return std::move(*f);
}

// OpenSM's opensm-lfts.dump read back as tables: "0xLID PORT # ..." under each switch header.
routing::RoutingTables OpenSmTables(const Fabric& f) {
  routing::RoutingTables t;
  t.switch_index.assign(f.node_count(), SIZE_MAX);
  std::ifstream in(Fixture("opensm-lfts.dump"));
  routing::SwitchTable* cur = nullptr;
  for (std::string line; std::getline(in, line);) {
    unsigned long long guid = 0;
    unsigned max_lid = 0, sw_lid = 0;
    if (std::sscanf(line.c_str(), "Unicast lids [0-%u] of switch Lid %u guid %llx", &max_lid,
                    &sw_lid, &guid) == 3) {
      NodeId n = *f.FindNode(Guid{guid});
      t.switch_index[n] = t.switches.size();
      t.switches.push_back({n, std::vector<uint8_t>(max_lid + 1, routing::kDropPort)});
      cur = &t.switches.back();
      continue;
    }
    unsigned lid = 0, port = 0;
    if (cur && std::sscanf(line.c_str(), "0x%x %u #", &lid, &port) == 2)
      cur->lft[lid] = static_cast<uint8_t>(port);
  }
  return t;
}

TEST(DumpsTest, LftsDumpIsByteForByteWhatOpenSmWritesForTheSameTables) {
  Fabric f = OpenSmFabric();
  routing::RoutingTables t = OpenSmTables(f);
  ASSERT_EQ(t.switches.size(), 6u);
  const std::string ours = Capture([&](std::FILE* out) { WriteLftsDump(f, t, out); });
  EXPECT_EQ(ours, Slurp(Fixture("opensm-lfts.dump")));
}

TEST(DumpsTest, FdbsDumpIsByteForByteWhatOpenSmWritesForTheSameTables) {
  Fabric f = OpenSmFabric();
  routing::RoutingTables t = OpenSmTables(f);
  const std::string ours = Capture([&](std::FILE* out) { WriteFdbsDump(f, t, out); });
  EXPECT_EQ(ours, Slurp(Fixture("opensm.fdbs")));
}

TEST(DumpsTest, FdbsDumpMarksHolesAndDetours) {
  Fabric f = OpenSmFabric();
  routing::RoutingTables t = OpenSmTables(f);
  // Switch 0x...01 (a leaf): drop LID 9's entry; send LID 3 (the other leaf) back down to a host.
  routing::SwitchTable& leaf = t.switches[t.switch_index[*f.FindNode(Guid{0x0002c90200000001})]];
  leaf.lft[9] = routing::kDropPort;
  leaf.lft[3] = 1;
  const std::string ours = Capture([&](std::FILE* out) { WriteFdbsDump(f, t, out); });
  EXPECT_NE(ours.find("0x0009 : UNREACHABLE\n"), std::string::npos) << ours;
  EXPECT_NE(ours.find("0x0003 : 001  : HOPS UNKNOWN\n"), std::string::npos) << ours;
}

// A write that fails in the middle of a dump (a full disk) fails the dump: no file is
// renamed into place, and the error names it. The file size limit makes the kernel refuse
// the writes past 100 KiB (EFBIG) as a full disk refuses them (ENOSPC).
TEST(DumpsTest, AWriteThatFailsMidwayFailsTheDumpAndLeavesNoFile) {
  const std::string dir = ::testing::TempDir() + "/ibsm-dump-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/opensm-lfts.dump";
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 100 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  // In pieces of 64 KiB, as the dump writers hand them over: larger than the stream's
  // buffer, so the failed write leaves nothing buffered for fflush to fail on.
  const std::string piece(64 * 1024, 'x');
  Status s = WriteDumpFile(path, [&](std::FILE* out) {
    for (int i = 0; i < 8; ++i) std::fwrite(piece.data(), 1, piece.size(), out);
  });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("opensm-lfts.dump"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "no temporary file is left behind";
  // Within the limit it is written whole.
  EXPECT_TRUE(WriteDumpFile(path, [&](std::FILE* out) { std::fputs("ok\n", out); }).ok());
  EXPECT_EQ(Slurp(path), "ok\n");
  std::filesystem::remove_all(dir);
}

// dump_files_dir defaults to /var/log, group-writable on some systems: a symlink planted at
// the old fixed temp name "<dump>.tmp" made root overwrite its target with the dump.
TEST(DumpsTest, ASymlinkPlantedAtTheTempNameIsNeverWrittenThrough) {
  const std::string dir = ::testing::TempDir() + "/ibsm-dump-link-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/opensm-subnet.lst", target = dir + "/shadow";
  std::ofstream(target) << "root:x:0:\n";
  std::filesystem::create_symlink(target, path + ".tmp");
  const mode_t old_umask = ::umask(022);
  Status s = WriteDumpFile(path, [](std::FILE* out) { std::fputs("dump\n", out); });
  ::umask(old_umask);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Slurp(target), "root:x:0:\n") << "the symlink's target is untouched";
  EXPECT_EQ(Slurp(path), "dump\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  std::filesystem::remove_all(dir);
}

TEST(DumpsTest, SubnetListIsLineForLineWhatOpenSmWritesForTheSameFabric) {
  Fabric f = OpenSmFabric();
  EXPECT_EQ(Capture([&](std::FILE* out) { WriteSubnetLst(f, Lid{1}, out); }),
            Slurp(Fixture("opensm-subnet.lst")));
}

}  // namespace
}  // namespace ibsm::sm

namespace ibsm::sm {
namespace {

// The layout of OpenSM's dump_mcast_routes: a blank line, the switch header, then one line
// per MLID with each port as " 0x%03X ".
TEST(DumpsTest, McfdbsDumpListsEachSwitchsMlidsAndPortsAsOpenSmDoes) {
  Fabric f;
  NodeId a = *f.AddNode(NodeKind::kSwitch, Guid{0x20}, 18, "a", "a");
  NodeId b = *f.AddNode(NodeKind::kSwitch, Guid{0x10}, 18, "b", "b");
  MftPlan plan;
  plan.switches[a].positions = 2;
  plan.switches[a].masks[0xC001] = {0x0006, 0x0001};  // ports 1, 2, 16
  plan.switches[b].positions = 2;
  plan.switches[b].masks[0xC000] = {0x0000, 0x0000};  // on a tree, forwards nothing
  plan.switches[b].masks[0xC002] = {0x0008, 0x0000};
  std::string got = Capture([&](std::FILE* out) { WriteMcfdbsDump(f, plan, out); });
  EXPECT_EQ(got,
            "\nSwitch 0x0000000000000010\nLID    : Out Port(s)\n"
            "0xC002 : 0x003 \n"
            "\nSwitch 0x0000000000000020\nLID    : Out Port(s)\n"
            "0xC001 : 0x001  0x002  0x010 \n");
  EXPECT_EQ(Capture([&](std::FILE* out) { WriteMcfdbsDump(f, MftPlan{}, out); }), "");
}

}  // namespace
}  // namespace ibsm::sm
