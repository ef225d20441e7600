// ibsmd's SA against OpenSM 3.3.23's on the same fabric (single-record saquery
// forms "match OpenSM's answers on the same fabric (compare by GUID)"). Two ibsim instances
// run one net file; ibsmd masters one, opensm the other. The SMs may give a port different
// LIDs, so every answer is compared by GUID with the LID-valued fields left out; everything
// else saquery prints must be the same, field by field.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Port GUID -> LID from ibnetdiscover: switch port 0 ("base port 0 lid N") and CA ports
// ("[1](guid) ... # lid N").
std::map<uint64_t, uint16_t> GuidToLid(const std::string& out) {
  static const std::regex sw_re(R"re(^Switch\s+\d+\s+"S-([0-9a-fA-F]+)".*port 0 lid (\d+))re");
  static const std::regex ca_re(R"re(^\[\d+\]\(([0-9a-fA-F]+)\).*#\s*lid (\d+))re");
  std::map<uint64_t, uint16_t> m;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch s;
    if (std::regex_search(line, s, sw_re) || std::regex_search(line, s, ca_re))
      m[std::stoull(s[1], nullptr, 16)] = static_cast<uint16_t>(std::stoi(s[2]));
  }
  return m;
}

// saquery's "Key.....value" lines as key -> value, minus the fields that carry LIDs (the
// SMs may number ports differently) and those in `skip`.
std::map<std::string, std::string> Fields(const std::string& out,
                                          const std::set<std::string>& skip = {}) {
  static const std::regex re(R"(^\s*([A-Za-z_0-9 ]+?):?\.{2,}:?(.*)$)");
  std::map<std::string, std::string> m;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch s;
    if (!std::regex_match(line, s, re)) continue;
    std::string key = s[1];
    std::string lower = key;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("lid") != std::string::npos || skip.count(key)) continue;
    std::string v = s[2];
    while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.pop_back();
    m[key] = v;
  }
  return m;
}

// The fields where `a` (ibsmd) and `b` (OpenSM) differ, one "key: a | b" line each.
std::string Diff(const std::map<std::string, std::string>& a,
                 const std::map<std::string, std::string>& b) {
  std::string out;
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  for (const auto& k : keys) {
    auto x = a.find(k), y = b.find(k);
    std::string va = x == a.end() ? "(absent)" : x->second;
    std::string vb = y == b.end() ? "(absent)" : y->second;
    if (va != vb) out += k + ": ibsmd " + va + " | opensm " + vb + "\n";
  }
  return out;
}

struct Side {
  std::unique_ptr<IbsimInstance> sim;
  std::optional<ChildProcess> sm;
  std::map<uint64_t, uint16_t> lids;
};

class SaOpenSmCompareTest : public ::testing::Test {
 protected:
  // Options both SMs read: ibsmd from its -F file (after its own state and log lines),
  // OpenSM from `opensm -F`. Empty: OpenSM runs without -F, as installed.
  virtual std::string SharedConf() const { return ""; }
  // The fabric both ibsims run.
  virtual Result<Fabric> MakeFabric() const { return FatTree2(4); }

  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    if (access("/usr/sbin/opensm", X_OK) != 0) GTEST_SKIP() << "opensm not installed";
    ASSERT_EQ(access(Bin("ibsmd").c_str(), X_OK), 0) << "ibsmd not built";
    auto dir = MakeTempDir("ibsm-vs-osm-");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    root_ = *dir;
    auto fabric = MakeFabric();
    ASSERT_TRUE(fabric.ok()) << fabric.status().ToString();
    // ibnetdiscover lists a switch once and every cabled CA port on its own line.
    size_t end_ports = fabric->switch_count();
    for (NodeId n = 0; n < fabric->node_count(); ++n) {
      if (fabric->node(n).kind != NodeKind::kCa) continue;
      if (fabric->node(n).num_ports == 1) far_host_ = fabric->node(n).name;
      for (uint8_t p = 1; p <= fabric->node(n).num_ports; ++p)
        end_ports += fabric->port(fabric->port_id(n, PortNum{p})).connected();
    }
    std::ofstream(root_ + "/fabric.net") << WriteTopology(*fabric);
    // Asked once: a SharedConf may write files the SMs read (a QoS policy), and writing
    // them again once ibsmd runs would let it read one half-written.
    const std::string shared = SharedConf();
    std::ofstream(root_ + "/ibsmd.conf") << "state_db_file " << root_ << "/state.db\nlog_file "
                                         << root_ << "/ibsmd.log\n" << shared;
    std::ofstream(root_ + "/opensm.conf") << shared;
    for (Side* side : {&ibsm_, &osm_}) {
      auto sim = IbsimInstance::Start(root_ + "/fabric.net");
      ASSERT_TRUE(sim.ok()) << sim.status().ToString();
      side->sim = std::move(*sim);
    }
    auto d = ibsm_.sim->StartChild({Bin("ibsmd"), "-F", root_ + "/ibsmd.conf"});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ibsm_.sm.emplace(std::move(*d));
    std::vector<std::string> osm_argv = {"opensm", "-f", root_ + "/opensm.log"};
    if (!shared.empty()) {
      osm_argv.push_back("-F");
      osm_argv.push_back(root_ + "/opensm.conf");
    }
    auto o = osm_.sim->StartChild(osm_argv);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    osm_.sm.emplace(std::move(*o));
    for (Side* side : {&ibsm_, &osm_}) {
      // Up when the SA answers for every node ibnetdiscover finds.
      auto until = std::chrono::steady_clock::now() + 90s;
      bool up = false;
      while (!up && std::chrono::steady_clock::now() < until) {
        auto disc = side->sim->Run({"ibnetdiscover"}, 30s, far_host_);
        if (disc.ok() && disc->exit_code == 0) {
          side->lids = GuidToLid(disc->out);
          bool all = side->lids.size() == end_ports;
          for (const auto& [g, l] : side->lids) all = all && l != 0;
          if (all) {
            auto sa = side->sim->Run({"saquery", "NR", std::to_string(side->lids.begin()->second)},
                                     20s, far_host_);
            up = sa.ok() && sa->exit_code == 0 && sa->out.find("NodeRecord") != std::string::npos;
          }
        }
        if (!up) std::this_thread::sleep_for(500ms);
      }
      ASSERT_TRUE(up) << (side == &ibsm_ ? "ibsmd" : "opensm") << " never answered";
    }
    ASSERT_EQ(std::set<uint64_t>(), Missing()) << "the two sides see different ports";
  }

  std::set<uint64_t> Missing() const {
    std::set<uint64_t> out;
    for (const auto& [g, l] : ibsm_.lids)
      if (!osm_.lids.count(g)) out.insert(g);
    for (const auto& [g, l] : osm_.lids)
      if (!ibsm_.lids.count(g)) out.insert(g);
    return out;
  }

  void TearDown() override {
    for (Side* side : {&ibsm_, &osm_}) {
      if (side->sm) {
        kill(side->sm->pid(), SIGTERM);
        (void)side->sm->Wait(10s);
      }
      side->sim.reset();
    }
    std::error_code ec;
    if (!root_.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(root_, ec);
  }

  // saquery on `side` with every "%<guid>" argument replaced by that port's LID there.
  std::string Saquery(const Side& side, std::vector<std::string> args) {
    std::vector<std::string> argv = {"saquery"};
    for (auto& a : args) argv.push_back(a);
    auto r = side.sim->Run(argv, 20s, far_host_);
    EXPECT_TRUE(r.ok() && r->exit_code == 0)
        << (r.ok() ? r->err : r.status().ToString());
    return r.ok() ? r->out : "";
  }

  std::string Lid(const Side& side, uint64_t guid) { return std::to_string(side.lids.at(guid)); }

  std::string root_, far_host_;
  Side ibsm_, osm_;
};

TEST_F(SaOpenSmCompareTest, NodePortInfoPathSmInfoRecordsAndClassPortInfoMatchOpenSms) {
  std::vector<uint64_t> cas;
  for (const auto& [guid, lid] : ibsm_.lids) {
    SCOPED_TRACE("port GUID " + std::to_string(guid));
    // NodeRecord: every field.
    auto a = Fields(Saquery(ibsm_, {"NR", Lid(ibsm_, guid)}));
    auto b = Fields(Saquery(osm_, {"NR", Lid(osm_, guid)}));
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(Diff(a, b), "") << "NodeRecord";
    bool is_ca = a.count("node_type") && a["node_type"].find("Channel Adapter") != std::string::npos;
    if (is_ca) cas.push_back(guid);
    // PortInfoRecord of the port (CA port 1; switch port 1, a cabled one).
    auto pa = Fields(Saquery(ibsm_, {"PIR", Lid(ibsm_, guid) + "/1"}));
    auto pb = Fields(Saquery(osm_, {"PIR", Lid(osm_, guid) + "/1"}));
    EXPECT_FALSE(pa.empty());
    if (!is_ca) {
      // A switch's PortInfo LocalPort is the port the SM's reads came in by. Where a switch
      // is as far from the SM by several paths, OpenSM keeps whichever answered first, so
      // its value changes with timing (ibsmd takes the first in breadth-first order); both
      // must name one of the switch's ports.
      int ports = std::atoi(a["num_ports"].c_str());
      for (auto* side : {&pa, &pb}) {
        int local = std::atoi((*side)["LocalPort"].c_str());
        EXPECT_TRUE(local >= 1 && local <= ports)
            << (side == &pa ? "ibsmd" : "opensm") << " LocalPort " << (*side)["LocalPort"];
        side->erase("LocalPort");
      }
    }
    EXPECT_EQ(Diff(pa, pb), "") << "PortInfoRecord of port 1";
  }
  ASSERT_GE(cas.size(), 2u);
  // PathRecord between two hosts on different leaves (first and last).
  auto p = Fields(Saquery(ibsm_, {"--src-to-dst", Lid(ibsm_, cas.front()) + ":" + Lid(ibsm_, cas.back())}));
  auto q = Fields(Saquery(osm_, {"--src-to-dst", Lid(osm_, cas.front()) + ":" + Lid(osm_, cas.back())}));
  EXPECT_FALSE(p.empty());
  EXPECT_EQ(Diff(p, q), "") << "PathRecord";
  // SMInfoRecord: both masters, same priority.
  auto s = Fields(Saquery(ibsm_, {"-s"}), {"GUID", "guid", "ActCount", "act_count"});
  auto t = Fields(Saquery(osm_, {"-s"}), {"GUID", "guid", "ActCount", "act_count"});
  EXPECT_EQ(Diff(s, t), "") << "SMInfoRecord";

  // ClassPortInfo (saquery -c): every field but the capability masks.
  std::string mine = Saquery(ibsm_, {"-c"});
  std::string theirs = Saquery(osm_, {"-c"});
  // CapabilityMask2 differs on purpose: each SA claims what it serves (OpenSM also claims
  // alias GUIDs, multicast ServiceRecords, CapabilityMask2 matching, 2x width and HDR).
  // saquery prints the masks as "Capability mask" and "Capability mask 2".
  auto a = Fields(mine, {"Capability mask 2"}), b = Fields(theirs, {"Capability mask 2"});
  EXPECT_GE(a.size(), 8u) << mine;
  EXPECT_EQ(Diff(a, b), "") << "ClassPortInfo\nibsmd:\n" << mine << "opensm:\n" << theirs;
  std::printf("[ figure ] ClassPortInfo capability masks: ibsmd %s / %s, opensm %s / %s\n",
              Fields(mine)["Capability mask"].c_str(), Fields(mine)["Capability mask 2"].c_str(),
              Fields(theirs)["Capability mask"].c_str(),
              Fields(theirs)["Capability mask 2"].c_str());
}

// What each SM wrote into the ports and switches (its link and unicast managers), read back
// with smpquery from ibsim: every field of every cabled port's PortInfo and of every
// switch's SwitchInfo the same on both sides, but those that carry LIDs, the port an SMP came
// in by, and the counters. ibsim keeps OperationalVLs, the link Enabled fields, HOQLife, LMC
// and LifeTimeValue; what it does not keep reads the same on both sides whatever was written
// (the strict simulator's tests check those: sm/sweep/port_programming_sim_test.cc).
TEST_F(SaOpenSmCompareTest, PortInfoAndSwitchInfoAsEachSmProgrammedThemMatchOpenSms) {
  const std::set<std::string> skip = {"LocalPort", "MkeyViolations", "PkeyViolations",
                                      "QkeyViolations"};
  auto smp = [&](const Side& side, std::vector<std::string> args) {
    args.insert(args.begin(), "smpquery");
    auto r = side.sim->Run(args, 20s, far_host_);
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
    return r.ok() ? r->out : std::string();
  };
  size_t ports = 0, switches = 0;
  for (const auto& [guid, lid] : ibsm_.lids) {
    SCOPED_TRACE("port GUID " + std::to_string(guid));
    auto node = Fields(smp(ibsm_, {"nodeinfo", Lid(ibsm_, guid)}));
    const bool is_switch = node["NodeType"].find("Switch") != std::string::npos;
    const int num_ports = std::atoi(node["NumPorts"].c_str());
    ASSERT_GT(num_ports, 0) << "nodeinfo answered nothing";
    if (is_switch) {
      ++switches;
      auto a = Fields(smp(ibsm_, {"switchinfo", Lid(ibsm_, guid)}), skip);
      auto b = Fields(smp(osm_, {"switchinfo", Lid(osm_, guid)}), skip);
      EXPECT_NE(a.count("LifeTime"), 0u) << "smpquery switchinfo printed no LifeTime";
      EXPECT_EQ(Diff(a, b), "") << "SwitchInfo";
    }
    for (int port = 1; port <= (is_switch ? num_ports : 1); ++port) {
      auto a = Fields(smp(ibsm_, {"portinfo", Lid(ibsm_, guid), std::to_string(port)}), skip);
      if (a["PhysLinkState"].find("LinkUp") == std::string::npos) continue;  // no cable
      auto b = Fields(smp(osm_, {"portinfo", Lid(osm_, guid), std::to_string(port)}), skip);
      ++ports;
      EXPECT_EQ(Diff(a, b), "") << "PortInfo of port " << port;
    }
  }
  EXPECT_GT(switches, 0u);
  EXPECT_GT(ports, switches);
  std::printf("[ figure ] PortInfo of %zu cabled ports and SwitchInfo of %zu switches compared\n",
              ports, switches);
}

// qos TRUE on both sides with the same non-default qos_* keys (docs/qos.md): what each SM
// wrote into the SL2VL and VL arbitration tables, read back with smpquery from ibsim, must be
// the same. ibsim keeps SL2VL Sets per (input, output) port pair and VLArb Sets per port and
// block (its sim_mad.c do_sl2vl, do_vlarb); it does not keep VLHighLimit, which reads the
// same on both sides whatever was written (sm/sweep/qos_program_sim_test.cc checks it on the
// strict simulator). Every class has its own values so a table written from the wrong class
// shows: swe and ca differ from the defaults and from each other.
class QosOpenSmCompareTest : public SaOpenSmCompareTest {
 protected:
  std::string SharedConf() const override {
    // force_log_flush: OpenSM's "SUBNET UP" reaches its log when written, not at exit.
    return "force_log_flush TRUE\n"
           "qos TRUE\n"
           "qos_max_vls 8\n"
           "qos_high_limit 3\n"
           "qos_vlarb_high 0:8,1:16,2:32\n"
           "qos_vlarb_low 0:4,1:2,2:2,3:2,4:4,5:8,6:16,7:32\n"
           "qos_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7\n"
           "qos_swe_sl2vl 7,6,5,4,3,2,1,0,7,6,5,4,3,2,1,0\n"
           "qos_swe_vlarb_high 3:64,4:1\n"
           "qos_ca_vlarb_low 0:1,1:1,2:1,3:1,4:1,5:1,6:1,7:200\n"
           "qos_ca_sl2vl 1,1,2,2,3,3,4,4,5,5,6,6,7,7,0,0\n"
           "qos_ca_high_limit 9\n";
  }
  // FatTree2(4) with three leaves, and a dual-port CA cabled to both spines' free port: its
  // second port takes its PortInfo, SL2VL and VLArb Sets only through the spine cabled to it
  // (ibsim refuses a Set of a CA port other than the arrival port, and applies SL2VL and
  // VLArb to the arrival port whatever the modifier says, as IBA 14.2.5.6-9 have it).
  Result<Fabric> MakeFabric() const override {
    FatTree2Options o;
    o.leaves = 3;
    IBSM_ASSIGN_OR_RETURN(Fabric f, FatTree2(4, o));
    std::vector<NodeId> spines;
    for (NodeId n = 0; n < f.node_count(); ++n)
      if (f.node(n).is_switch() && !f.port(f.port_id(n, PortNum{4})).connected())
        spines.push_back(n);
    if (spines.size() != 2) return InvalidArgument("expected two spines with port 4 free");
    const Guid g{kGenCaGuidBase + 0xd000};
    IBSM_ASSIGN_OR_RETURN(NodeId d, f.AddNode(NodeKind::kCa, g, 2, "dual", "dual HCA"));
    for (uint8_t p : {uint8_t{1}, uint8_t{2}}) {
      IBSM_RETURN_IF_ERROR(f.SetPortGuid(f.port_id(d, PortNum{p}), Guid{g.value() + p}));
      IBSM_RETURN_IF_ERROR(f.Connect(spines[p - 1], PortNum{4}, d, PortNum{p}));
    }
    return f;
  }
  void SetUp() override {
    SaOpenSmCompareTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // Both SMs write their QoS tables before they declare the subnet up.
    ASSERT_TRUE(WaitForCount(root_ + "/ibsmd.log", "SUBNET UP", 1)) << "ibsmd never up";
    ASSERT_TRUE(WaitForCount(root_ + "/opensm.log", "SUBNET UP", 1)) << "opensm never up";
  }
};

// smpquery's table dump without what names the port by LID ("Lid 12"): the SMs may number
// ports differently. Every other line and character is compared.
std::string TableDump(const std::string& out) {
  static const std::regex lid(R"(Lid \d+)");
  return std::regex_replace(out, lid, "Lid *");
}

TEST_F(QosOpenSmCompareTest, Sl2VlVlArbAndVlHighLimitAsEachSmProgrammedThemMatchOpenSms) {
  auto smp = [&](const Side& side, std::vector<std::string> args) {
    args.insert(args.begin(), "smpquery");
    auto r = side.sim->Run(args, 20s, far_host_);
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
    return r.ok() ? r->out : std::string();
  };
  size_t sl2vl_tables = 0, vlarb_ports = 0, programmed = 0, non_default = 0;
  for (const auto& [guid, lid] : ibsm_.lids) {
    SCOPED_TRACE("port GUID " + Hex16(guid));
    auto node = Fields(smp(ibsm_, {"nodeinfo", Lid(ibsm_, guid)}));
    const bool is_switch = node["NodeType"].find("Switch") != std::string::npos;
    const int num_ports = std::atoi(node["NumPorts"].c_str());
    ASSERT_GT(num_ports, 0) << "nodeinfo answered nothing";
    // The ports to compare: a CA's port (the one its LID names); a switch's port 0 and its
    // cabled ports.
    std::vector<int> ports;
    bool enhanced0 = false;
    if (is_switch) {
      auto si = Fields(smp(ibsm_, {"switchinfo", Lid(ibsm_, guid)}));
      ASSERT_NE(si.count("EnhancedPort0"), 0u) << "smpquery switchinfo printed no EnhancedPort0";
      enhanced0 = si["EnhancedPort0"] != "0";
      ports.push_back(0);
      for (int port = 1; port <= num_ports; ++port) {
        auto pi = Fields(smp(ibsm_, {"portinfo", Lid(ibsm_, guid), std::to_string(port)}));
        if (pi["PhysLinkState"].find("LinkUp") != std::string::npos) ports.push_back(port);
      }
    } else {
      ports.push_back(1);
    }
    for (int port : ports) {
      const std::string p = std::to_string(port);
      // SL2VL: a switch's dump for output port `port` has one line per input port 0..N
      // ("ports: in  3, out  1: | 7| 6|..."); a CA's is its one table.
      std::string a = TableDump(smp(ibsm_, {"sl2vl", Lid(ibsm_, guid), p}));
      std::string b = TableDump(smp(osm_, {"sl2vl", Lid(osm_, guid), p}));
      EXPECT_NE(a.find("ports: in"), std::string::npos) << "no SL2VL table printed:\n" << a;
      EXPECT_EQ(a, b) << "SL2VL tables out of port " << p;
      sl2vl_tables += CountOf(a, "ports: in");
      // ibsim's power-on table is 0,1,...,14,7 (its sim_net.c): a row that differs from it
      // shows the keys were applied to this output port. Neither SM writes the tables of a
      // base switch port 0 (docs/qos.md).
      if (!is_switch || port != 0 || enhanced0) {
        ++programmed;
        std::istringstream rows(a);
        bool applied = false;
        for (std::string row; std::getline(rows, row);)
          applied = applied || (row.find("ports: in") != std::string::npos &&
                                row.find("| 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14| 7|") ==
                                    std::string::npos);
        non_default += applied;
      }
      // VL arbitration, every block the port's caps give.
      std::string c = TableDump(smp(ibsm_, {"vlarb", Lid(ibsm_, guid), p}));
      std::string d = TableDump(smp(osm_, {"vlarb", Lid(osm_, guid), p}));
      EXPECT_NE(c.find("VLArbitration"), std::string::npos) << "no VLArb printed:\n" << c;
      EXPECT_EQ(c, d) << "VLArb tables of port " << p;
      ++vlarb_ports;
      // VLHighLimit as PortInfo reports it.
      // (On a CA, port 0: the port the LID names, the one whose tables were read.)
      const std::string pp = is_switch ? p : "0";
      auto e = Fields(smp(ibsm_, {"portinfo", Lid(ibsm_, guid), pp}));
      auto f = Fields(smp(osm_, {"portinfo", Lid(osm_, guid), pp}));
      EXPECT_NE(e.count("VLHighLimit"), 0u) << "smpquery portinfo printed no VLHighLimit";
      EXPECT_EQ(e["VLHighLimit"], f["VLHighLimit"]) << "VLHighLimit of port " << p;
    }
  }
  // The dual-port CA's second port has a LID and is ACTIVE on both sides (its PortInfo Sets
  // arrived on it), and its tables were among those compared.
  const uint64_t second = kGenCaGuidBase + 0xd000 + 2;
  ASSERT_EQ(ibsm_.lids.count(second), 1u);
  for (Side* side : {&ibsm_, &osm_}) {
    auto pi = Fields(smp(*side, {"portinfo", Lid(*side, second)}));
    EXPECT_NE(pi["LinkState"].find("Active"), std::string::npos)
        << (side == &ibsm_ ? "ibsmd" : "opensm") << ": " << pi["LinkState"];
  }
  // The keys were applied, not both sides left at power-on: every programmed output port has
  // a row that is not ibsim's default.
  EXPECT_GT(programmed, 0u);
  EXPECT_EQ(non_default, programmed);
  EXPECT_GT(sl2vl_tables, vlarb_ports);
  std::printf("[ figure ] %zu SL2VL tables and the VLArb tables of %zu ports compared\n",
              sl2vl_tables, vlarb_ports);
}

// qos TRUE with a QoS policy file (qos-ulps, docs/qos.md) on both sides: the PathRecords
// between hosts carry the same SL from ibsmd as from OpenSM, and it is the policy's.
class QosPolicyOpenSmCompareTest : public SaOpenSmCompareTest {
 protected:
  // The port GUIDs of the fabric's CAs, in NodeId order (the fixture's fabric, FatTree2(4)).
  static std::vector<uint64_t> CaGuids() {
    std::vector<uint64_t> out;
    auto f = FatTree2(4);
    for (NodeId n = 0; f.ok() && n < f->node_count(); ++n)
      if (f->node(n).kind == NodeKind::kCa)
        out.push_back(f->port(f->port_id(n, PortNum(1))).guid.value());
    return out;
  }
  std::string SharedConf() const override {
    // Written here: the fixture asks for the options once root_ exists, before either SM
    // starts.
    const auto cas = CaGuids();
    std::ofstream(root_ + "/qos-policy.conf")
        << "qos-ulps\n"
        << "  default : 2\n"
        << "  any, source-port-guid " << Hex16(cas.front()) << " : 5\n"
        << "  any, source-port-guid " << Hex16(cas[3]) << " : 9\n"
        << "  any, target-port-guid " << Hex16(cas.back()) << " : 7\n"
        << "end-qos-ulps\n";
    // Switch external ports send SL 9 to VL 15: a path the policy gives SL 9 has none.
    return "force_log_flush TRUE\nqos TRUE\nqos_policy_file " + root_ +
           "/qos-policy.conf\nqos_swe_sl2vl 0,1,2,3,4,5,6,7,0,15,2,3,4,5,6,7\n";
  }
  void SetUp() override {
    SaOpenSmCompareTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(WaitForCount(root_ + "/ibsmd.log", "SUBNET UP", 1)) << "ibsmd never up";
    ASSERT_TRUE(WaitForCount(root_ + "/opensm.log", "SUBNET UP", 1)) << "opensm never up";
  }
};

TEST_F(QosPolicyOpenSmCompareTest, PathRecordSlsFromTheQosPolicyMatchOpenSms) {
  const auto cas = CaGuids();
  ASSERT_GE(cas.size(), 3u);
  // (source, destination, the policy's SL): the source rule first, then the target rule,
  // then the default.
  const std::vector<std::tuple<uint64_t, uint64_t, std::string>> pairs = {
      {cas.front(), cas.back(), "0x5"},
      {cas[1], cas.back(), "0x7"},
      {cas[1], cas[2], "0x2"},
  };
  for (const auto& [src, dst, sl] : pairs) {
    SCOPED_TRACE(Hex16(src) + " -> " + Hex16(dst));
    auto a = Fields(Saquery(ibsm_, {"--src-to-dst", Lid(ibsm_, src) + ":" + Lid(ibsm_, dst)}));
    auto b = Fields(Saquery(osm_, {"--src-to-dst", Lid(osm_, src) + ":" + Lid(osm_, dst)}));
    ASSERT_NE(a.count("sl"), 0u) << "saquery printed no sl";
    EXPECT_EQ(a["sl"], sl);
    EXPECT_EQ(Diff(a, b), "") << "PathRecord";
  }
  // The policy's SL 9 leads to VL 15 on every switch: neither SA has a path (OpenSM's
  // ERR 1F24), while the same source with an SL of its own choosing still has one.
  ASSERT_GE(cas.size(), 4u);
  for (Side* side : {&ibsm_, &osm_}) {
    SCOPED_TRACE(side == &ibsm_ ? "ibsmd" : "opensm");
    auto r = side->sim->Run(
        {"saquery", "--src-to-dst", Lid(*side, cas[3]) + ":" + Lid(*side, cas[2])}, 20s,
        far_host_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Fields(r->out).count("sl"), 0u) << "a PathRecord with SL 9:\n" << r->out;
    auto back = Fields(Saquery(*side, {"--src-to-dst", Lid(*side, cas[2]) + ":" +
                                                           Lid(*side, cas[3])}));
    EXPECT_EQ(back["sl"], "0x2") << "the default rule, the other way";
  }
}

}  // namespace
}  // namespace ibsm::test
