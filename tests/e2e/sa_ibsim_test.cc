// ibsmd's SA end to end on ibsim: ibsmd runs as a daemon on
// a FatTree2(8) fabric and infiniband-diags' saquery, run from a far host under
// libumad2sim, must see what ibnetdiscover sees (LIDs, GUIDs, descriptions).
//
// ibsim and its preload library carry no RMPP, so saquery sees only the first segment of an
// answer, and it counts (length - 56) / (AttributeOffset * 8) records in it, length being
// what the sender passed to umad_send: the single-record forms are what can be checked here.
// ibsmd sends an answer's last RMPP segment at its real length (mad/umad_transport_write.cc), so a
// one-record answer shows exactly one record, not that record and the zero padding of the
// MAD read as records of LID 0. Whole tables are checked on the in-process simulator
// (sm/sa/sa_server_test.cc).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// One end port as ibnetdiscover shows it.
struct SeenPort {
  bool is_switch = false;
  uint64_t node_guid = 0;
  uint64_t port_guid = 0;
  std::string description;
  uint16_t lid = 0;
  int num_ports = 0;
  std::map<int, uint16_t> peer_lid;  // port -> LID of the far end (CA: port 1)
};

// Parses ibnetdiscover's topology output into end ports (switch port 0, CA ports).
std::vector<SeenPort> ParseSeenPorts(const std::string& out) {
  static const std::regex node_re(
      R"re(^(Switch|Ca)\s+(\d+)\s+"[SH]-([0-9a-fA-F]+)"\s+#\s+"([^"]*)"(.*)$)re");
  static const std::regex port0_re(R"(port 0 lid (\d+))");
  static const std::regex ca_port_re(
      R"re(^\[(\d+)\]\(([0-9a-fA-F]+)\)\s+"[SH]-[0-9a-fA-F]+"\[\d+\].*#\s*lid (\d+) lmc \d+ "[^"]*" lid (\d+))re");
  static const std::regex sw_port_re(
      R"re(^\[(\d+)\]\s+"[SH]-[0-9a-fA-F]+"\[\d+\](?:\([0-9a-fA-F]+\))?\s+#\s*"[^"]*" lid (\d+))re");
  std::vector<SeenPort> ports;
  std::istringstream lines(out);
  SeenPort node;
  bool in_node = false;
  auto flush = [&] {
    if (in_node && node.is_switch) ports.push_back(node);
    in_node = false;
  };
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, node_re)) {
      flush();
      node = SeenPort{};
      in_node = true;
      node.is_switch = m[1] == "Switch";
      node.num_ports = std::stoi(m[2]);
      node.node_guid = std::stoull(m[3], nullptr, 16);
      node.port_guid = node.node_guid;
      node.description = m[4];
      std::smatch l;
      std::string rest = m[5];
      if (std::regex_search(rest, l, port0_re)) node.lid = static_cast<uint16_t>(std::stoi(l[1]));
    } else if (in_node && !node.is_switch && std::regex_search(line, m, ca_port_re)) {
      SeenPort p = node;
      p.port_guid = std::stoull(m[2], nullptr, 16);
      p.lid = static_cast<uint16_t>(std::stoi(m[3]));
      p.peer_lid[std::stoi(m[1])] = static_cast<uint16_t>(std::stoi(m[4]));
      ports.push_back(p);
    } else if (in_node && node.is_switch && std::regex_search(line, m, sw_port_re)) {
      node.peer_lid[std::stoi(m[1])] = static_cast<uint16_t>(std::stoi(m[2]));
    }
  }
  flush();
  return ports;
}

// A port GUID as saquery prints the interface ID of a GID: four hex groups, no leading
// zeros ("2:c903:0:11").
std::string GidTail(uint64_t guid) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%x:%x:%x:%x", static_cast<unsigned>(guid >> 48),
                static_cast<unsigned>((guid >> 32) & 0xffff),
                static_cast<unsigned>((guid >> 16) & 0xffff), static_cast<unsigned>(guid & 0xffff));
  return buf;
}

struct Shared {
  std::string root;
  std::unique_ptr<IbsimInstance> sim;
  std::optional<ChildProcess> daemon;
  std::vector<SeenPort> ports;
  std::string far_host;  // saquery runs here: a CA other than the SM's
  uint64_t sm_port_guid = 0;
  std::string error;
};

class SaIbsimTest: public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_ = new Shared;
    if (!IbsimInstance::Available() || access(Ibsmd().c_str(), X_OK) != 0) return;
    Shared& s = *s_;
    auto dir = MakeTempDir("ibsm-sa-e2e-");
    if (!dir.ok()) {
      s.error = dir.status().ToString();
      return;
    }
    s.root = *dir;
    auto fabric = FatTree2(8);
    if (!fabric.ok()) {
      s.error = fabric.status().ToString();
      return;
    }
    for (NodeId n = 0; n < fabric->node_count(); ++n) {
      if (fabric->node(n).kind != NodeKind::kCa) continue;
      if (!s.sm_port_guid) s.sm_port_guid = fabric->port(n, PortNum{1}).guid.value();
      s.far_host = fabric->node(n).name;
    }
    std::ofstream(s.root + "/fabric.net") << WriteTopology(*fabric);
    auto sim = IbsimInstance::Start(s.root + "/fabric.net");
    if (!sim.ok()) {
      s.error = "ibsim: " + sim.status().ToString();
      return;
    }
    s.sim = std::move(*sim);
    std::ofstream(s.root + "/opensm.conf")
        << "guid2lid_file " << s.root << "/guid2lid\nstate_db_file " << s.root
        << "/state.db\ndump_files_dir " << s.root << "\nlog_file " << s.root
        << "/ibsmd.log\nrouting_engine ftree\n";
    auto d = s.sim->StartChild({Ibsmd(), "-F", s.root + "/opensm.conf"});
    if (!d.ok()) {
      s.error = "ibsmd: " + d.status().ToString();
      return;
    }
    s.daemon.emplace(std::move(*d));
    auto until = std::chrono::steady_clock::now() + 60s;
    std::string log;
    while (std::chrono::steady_clock::now() < until) {
      log = ReadFile(s.root + "/ibsmd.log");
      if (log.find("SUBNET UP") != std::string::npos) break;
      std::this_thread::sleep_for(50ms);
    }
    if (log.find("SUBNET UP") == std::string::npos) {
      s.error = "no SUBNET UP:\n" + log;
      return;
    }
    auto disc = s.sim->Run({"ibnetdiscover"}, kToolTimeout);
    if (!disc.ok() || disc->exit_code != 0) {
      s.error = "ibnetdiscover: " + (disc.ok() ? Describe(*disc): disc.status().ToString());
      return;
    }
    s.ports = ParseSeenPorts(disc->out);
    if (s.ports.size() != fabric->switch_count() + fabric->ca_count())
      s.error = "ibnetdiscover showed " + std::to_string(s.ports.size()) + " end ports";
  }

  static void TearDownTestSuite() {
    if (s_ && s_->daemon) {
      kill(s_->daemon->pid(), SIGTERM);
      (void)s_->daemon->Wait(10s);
    }
    if (s_) {
      s_->sim.reset();
      std::error_code ec;
      if (!s_->root.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(s_->root, ec);
    }
    delete s_;
    s_ = nullptr;
  }

  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    if (access(Ibsmd().c_str(), X_OK) != 0) FAIL() << "ibsmd not built at " << Ibsmd();
    ASSERT_TRUE(s_->error.empty()) << s_->error;
  }

  // saquery from the far host; fails the test unless it exits 0.
  static std::string Saquery(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"saquery"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = s_->sim->Run(argv, kToolTimeout, s_->far_host);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return "";
    EXPECT_EQ(r->exit_code, 0) << Describe(*r);
    return r->out;
  }

  static std::vector<const SeenPort*> Sample() {
    std::vector<const SeenPort*> out;
    const SeenPort* last_sw = nullptr;
    const SeenPort* last_ca = nullptr;
    for (const auto& p: s_->ports) {
      if (p.is_switch && out.empty()) out.push_back(&p);
      if (p.is_switch) last_sw = &p;
      if (!p.is_switch) last_ca = &p;
    }
    if (last_sw) out.push_back(last_sw);
    if (last_ca) out.push_back(last_ca);
    return out;
  }

  static const SeenPort& SmPort() {
    for (const auto& p: s_->ports)
      if (p.port_guid == s_->sm_port_guid) return p;
    return s_->ports.front();
  }

  static inline Shared* s_ = nullptr;
};

TEST_F(SaIbsimTest, NodeRecordByLidIsTheNodeIbnetdiscoverShows) {
  for (const SeenPort* p: Sample()) {
    std::string out = Saquery({"NR", std::to_string(p->lid)});
    auto lids = DumpValues(out, "lid");
    ASSERT_EQ(lids.size(), 1u) << out;
    EXPECT_EQ(lids[0], std::to_string(p->lid));
    EXPECT_EQ(DumpValues(out, "node_guid").at(0), Hex16(p->node_guid)) << out;
    EXPECT_EQ(DumpValues(out, "port_guid").at(0), Hex16(p->port_guid)) << out;
    EXPECT_EQ(DumpValues(out, "NodeDescription").at(0), p->description) << out;
    EXPECT_EQ(DumpValues(out, "node_type").at(0) == "Switch", p->is_switch) << out;
  }
}

TEST_F(SaIbsimTest, PortInfoRecordOfAPortShowsItsLidAndActiveState) {
  for (const SeenPort* p: Sample()) {
    const int port = 1;
    std::string out = Saquery({"PIR", std::to_string(p->lid) + "/" + std::to_string(port)});
    auto lids = DumpValues(out, "EndPortLid");
    ASSERT_EQ(lids.size(), 1u) << "no zero padding read as records: " << out;
    EXPECT_EQ(lids[0], std::to_string(p->lid)) << out;
    EXPECT_EQ(DumpValues(out, "PortNum").at(0), std::to_string(port));
    EXPECT_EQ(DumpValues(out, "LinkState").at(0), "Active") << out;
    if (!p->is_switch) {
      EXPECT_EQ(DumpValues(out, "Lid").at(0), std::to_string(p->lid)) << out;
    }
  }
}

TEST_F(SaIbsimTest, SmInfoRecordNamesTheRunningIbsmdAsMaster) {
  std::string out = Saquery({"SMIR"});
  auto lids = DumpValues(out, "LID");
  ASSERT_EQ(lids.size(), 1u) << out;
  EXPECT_EQ(lids[0], std::to_string(SmPort().lid)) << out;
  EXPECT_EQ(DumpValues(out, "GUID").at(0), Hex16(s_->sm_port_guid)) << out;
  EXPECT_EQ(DumpValues(out, "SMState").at(0), "3") << out;
  EXPECT_EQ(DumpValues(out, "SM_Key").at(0), Hex16(0)) << "the key is shown only to the trusted";
}

TEST_F(SaIbsimTest, IsSmPortInfoRecordsFindTheSmPort) {
  std::string out = Saquery({"-s"});
  auto lids = DumpValues(out, "EndPortLid");
  ASSERT_FALSE(lids.empty()) << out;
  EXPECT_EQ(lids[0], std::to_string(SmPort().lid)) << out;
}

TEST_F(SaIbsimTest, SwitchInfoRecordOfASwitchShowsItsProgrammedTop) {
  const SeenPort* sw = Sample().front();
  ASSERT_TRUE(sw->is_switch);
  std::string out = Saquery({"SWIR", std::to_string(sw->lid)});
  auto lids = DumpValues(out, "LID");
  ASSERT_FALSE(lids.empty()) << out;
  EXPECT_EQ(lids[0], std::to_string(sw->lid));
  uint16_t max_lid = 0;
  for (const auto& p: s_->ports) max_lid = std::max(max_lid, p.lid);
  char top[16];
  std::snprintf(top, sizeof(top), "0x%X", max_lid);
  EXPECT_EQ(DumpValues(out, "LinearFDBTop").at(0), top) << out;
}

TEST_F(SaIbsimTest, LftRecordBlockZeroRoutesEveryLidToAPortOfTheSwitch) {
  const SeenPort* sw = Sample().front();
  std::string out = Saquery({"LFTR", std::to_string(sw->lid) + "/0"});
  ASSERT_EQ(DumpValues(out, "LID").at(0), std::to_string(sw->lid)) << out;
  ASSERT_EQ(DumpValues(out, "Block").at(0), "0") << out;
  // "\t\t<lid>\t<port>" lines of the first record.
  std::map<int, int> entries;
  std::regex entry_re(R"(^\t\t(\d+)\t(\d+)$)");
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, entry_re) && !entries.count(std::stoi(m[1])))
      entries[std::stoi(m[1])] = std::stoi(m[2]);
  }
  ASSERT_EQ(entries.size(), 64u) << out;
  EXPECT_EQ(entries.at(sw->lid), 0) << "a switch's own LID goes to port 0";
  for (const auto& p: s_->ports) {
    if (p.lid >= 64 || p.lid == sw->lid) continue;
    EXPECT_GE(entries.at(p.lid), 1) << "LID " << p.lid;
    EXPECT_LE(entries.at(p.lid), sw->num_ports) << "LID " << p.lid;
  }
}

TEST_F(SaIbsimTest, GuidInfoRecordShowsThePortGuidAtIndexZero) {
  const SeenPort* ca = Sample().back();
  std::string out = Saquery({"GIR", std::to_string(ca->lid)});
  ASSERT_FALSE(DumpValues(out, "LID").empty()) << out;
  EXPECT_EQ(DumpValues(out, "LID").at(0), std::to_string(ca->lid));
  EXPECT_EQ(DumpValues(out, "GUID 0").at(0), Hex16(ca->port_guid)) << out;
}

TEST_F(SaIbsimTest, LinkRecordFromAHostLeadsToItsLeafSwitch) {
  const SeenPort* ca = Sample().back();
  std::string out = Saquery({"LR", std::to_string(ca->lid) + "/1"});
  auto from = DumpValues(out, "FromLID");
  ASSERT_EQ(from.size(), 1u) << out;
  EXPECT_EQ(from[0], std::to_string(ca->lid));
  EXPECT_EQ(DumpValues(out, "FromPort").at(0), "1");
  EXPECT_EQ(DumpValues(out, "ToLID").at(0), std::to_string(ca->peer_lid.at(1))) << out;
}

TEST_F(SaIbsimTest, PathRecordBetweenTwoHostsHasTheirLidsAndIbsimsMtuAndRate) {
  const SeenPort& src = SmPort();
  const SeenPort* dst = nullptr;
  for (const auto& p: s_->ports)
    if (!p.is_switch && p.port_guid != src.port_guid) dst = &p;
  ASSERT_NE(dst, nullptr);
  std::string out = Saquery({"PR", "--slid", std::to_string(src.lid), "--dlid",
                             std::to_string(dst->lid)});
  // One record, and no zero padding read as more (the answer went out at its real length).
  auto slids = DumpValues(out, "slid");
  ASSERT_EQ(slids.size(), 1u) << out;
  EXPECT_EQ(slids[0], std::to_string(src.lid)) << out;
  EXPECT_EQ(DumpValues(out, "dlid").at(0), std::to_string(dst->lid)) << out;
  EXPECT_EQ(DumpValues(out, "sgid").at(0), "fe80::" + GidTail(src.port_guid)) << out;
  EXPECT_EQ(DumpValues(out, "dgid").at(0), "fe80::" + GidTail(dst->port_guid)) << out;
  // Selector bits 7-6 = 2 ("exactly"), then the code: MTU 4 = 2048, the MtuCap ibsim gives
  // every port; rate 16 = 100 Gb/s (ibsim's 4x EDR links); PacketLifeTime 18 (subnet_timeout).
  for (const SeenPort* end: {&src, dst}) {
    std::string pir = Saquery({"PIR", std::to_string(end->lid) + "/1"});
    ASSERT_EQ(DumpValues(pir, "MtuCap").at(0), "2048") << pir;
  }
  EXPECT_EQ(DumpValues(out, "mtu").at(0), "0x84") << out;
  EXPECT_EQ(DumpValues(out, "rate").at(0), "0x90") << out;
  EXPECT_EQ(DumpValues(out, "pkt_life").at(0), "0x92") << out;
  EXPECT_EQ(DumpValues(out, "num_path_revers").at(0), "0x80") << "reversible: " << out;
  EXPECT_EQ(DumpValues(out, "pkey").at(0), "0xFFFF") << out;

  // The same path named by --src-to-dst.
  std::string by_name = Saquery(
      {"--src-to-dst", std::to_string(src.lid) + ":" + std::to_string(dst->lid)});
  ASSERT_EQ(DumpValues(by_name, "slid").size(), 1u) << by_name;
  EXPECT_EQ(DumpValues(by_name, "dlid").at(0), std::to_string(dst->lid)) << by_name;
}

}  // namespace
}  // namespace ibsm::test
