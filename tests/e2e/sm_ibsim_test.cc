// ibsmd end to end on ibsim: a real ibsmd process brings a
// simulated fabric up, and what a user sees is checked only through tools nobody here wrote
// (infiniband-diags: ibnetdiscover, iblinkinfo, dump_lfts, ibtracert, sminfo), all run under
// libumad2sim with hard timeouts. Each check runs on three fabrics: a 2-tier and a 3-tier fat
// tree of 8-port switches and an irregular random graph.
//
// Cost: one ibsim per fabric is shared by the checks that leave the fabric as it is; the
// suite set-up runs the cold-start ibsmd once and keeps its dumps. The link-down check gets
// its own ibsim (with a console pipe) since it changes the fabric.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "ha/state_store.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto kSmTimeout = 60s;
constexpr uint32_t kSampleSeed = 20240607;

// --- what ibnetdiscover shows ---------------------------------------------------------------

struct Peer {
  uint64_t guid = 0;  // node GUID of the far end
  int port = 0;
};

struct SeenNode {
  bool is_switch = false;
  uint64_t guid = 0;
  std::string description;
  uint16_t lid = 0;                 // switch port 0
  std::map<int, Peer> links;        // cabled ports
  std::map<int, uint16_t> ca_lids;  // CA port -> its LID
  std::map<int, uint64_t> ca_port_guids;
};

struct SeenFabric {
  std::map<uint64_t, SeenNode> nodes;  // by node GUID
  size_t switches() const {
    return std::count_if(nodes.begin(), nodes.end(), [](auto& n) { return n.second.is_switch; });
  }
  size_t cas() const { return nodes.size() - switches(); }
  // Every end-port LID (CA ports and switch port 0), with its owner.
  std::multimap<uint16_t, std::string> Lids() const {
    std::multimap<uint16_t, std::string> lids;
    for (const auto& [g, n] : nodes) {
      if (n.is_switch) lids.emplace(n.lid, n.description + " port 0");
      for (const auto& [p, lid] : n.ca_lids)
        lids.emplace(lid, n.description + " port " + std::to_string(p));
    }
    return lids;
  }
  // port GUID -> LID of every end port.
  std::map<uint64_t, uint16_t> LidsByPortGuid() const {
    std::map<uint64_t, uint16_t> m;
    for (const auto& [g, n] : nodes) {
      if (n.is_switch) m[g] = n.lid;
      for (const auto& [p, lid] : n.ca_lids) m[n.ca_port_guids.at(p)] = lid;
    }
    return m;
  }
};

// Parses ibnetdiscover's default (topology file) output.
SeenFabric ParseSeenFabric(const std::string& out) {
  static const std::regex node_re(
      R"re(^(Switch|Ca)\s+(\d+)\s+"[SH]-([0-9a-fA-F]+)"\s+#\s+"([^"]*)"(.*)$)re");
  static const std::regex port0_re(R"(port 0 lid (\d+) lmc (\d+))");
  static const std::regex port_re(
      R"re(^\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s+"[SHR]-([0-9a-fA-F]+)"\[(\d+)\](?:\([0-9a-fA-F]+\))?\s+#\s*(.*)$)re");
  static const std::regex ca_lid_re(R"(^lid (\d+) lmc (\d+))");
  SeenFabric f;
  SeenNode* cur = nullptr;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, node_re)) {
      uint64_t guid = std::stoull(m[3], nullptr, 16);
      cur = &f.nodes[guid];
      cur->is_switch = m[1] == "Switch";
      cur->guid = guid;
      cur->description = m[4];
      std::string rest = m[5];
      std::smatch p0;
      if (cur->is_switch && std::regex_search(rest, p0, port0_re))
        cur->lid = static_cast<uint16_t>(std::stoul(p0[1]));
    } else if (cur && std::regex_search(line, m, port_re)) {
      int port = std::stoi(m[1]);
      cur->links[port] = Peer{std::stoull(m[3], nullptr, 16), std::stoi(m[4])};
      if (!cur->is_switch) {
        std::string comment = m[5];
        std::smatch l;
        if (std::regex_search(comment, l, ca_lid_re))
          cur->ca_lids[port] = static_cast<uint16_t>(std::stoul(l[1]));
        if (m[2].matched) cur->ca_port_guids[port] = std::stoull(m[2], nullptr, 16);
      }
    } else if (line.empty()) {
      cur = nullptr;
    }
  }
  return f;
}

// --- what dump_lfts shows ---------------------------------------------------------------------

// Switch node GUID -> (LID -> egress port).
using SeenLfts = std::map<uint64_t, std::map<uint16_t, int>>;

SeenLfts ParseDumpLfts(const std::string& out) {
  static const std::regex head_re(R"(^Unicast lids .* guid (0x[0-9a-fA-F]+) )");
  static const std::regex entry_re(R"(^(0x[0-9a-fA-F]+) (\d+) )");
  SeenLfts lfts;
  std::map<uint16_t, int>* cur = nullptr;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, head_re)) {
      cur = &lfts[std::stoull(m[1], nullptr, 16)];
    } else if (cur && std::regex_search(line, m, entry_re)) {
      (*cur)[static_cast<uint16_t>(std::stoul(m[1], nullptr, 16))] = std::stoi(m[2]);
    }
  }
  return lfts;
}

struct Host {
  uint64_t node_guid = 0;
  int port = 0;
  uint16_t lid = 0;
};

std::vector<Host> Hosts(const SeenFabric& f) {
  std::vector<Host> hosts;
  for (const auto& [g, n] : f.nodes)
    for (const auto& [p, lid] : n.ca_lids) hosts.push_back({g, p, lid});
  return hosts;
}

// Follows the switches' tables from `src` toward `dst`, over the links ibnetdiscover shows.
// Returns "" on arrival, else where the walk stopped.
std::string Walk(const SeenFabric& f, const SeenLfts& lfts, const Host& src, const Host& dst) {
  auto hop = f.nodes.at(src.node_guid).links.find(src.port);
  if (hop == f.nodes.at(src.node_guid).links.end()) return "source port not cabled";
  Peer at = hop->second;
  for (int hops = 0; hops < 64; ++hops) {
    auto n = f.nodes.find(at.guid);
    if (n == f.nodes.end()) return "walked to an undiscovered node";
    if (!n->second.is_switch) {
      return n->second.guid == dst.node_guid && at.port == dst.port
                 ? ""
                 : "arrived at " + n->second.description;
    }
    auto t = lfts.find(at.guid);
    if (t == lfts.end()) return "no table for " + n->second.description;
    auto e = t->second.find(dst.lid);
    if (e == t->second.end()) return "no entry on " + n->second.description;
    auto next = n->second.links.find(e->second);
    if (next == n->second.links.end()) {
      return n->second.description + " forwards to uncabled port " + std::to_string(e->second);
    }
    at = next->second;
  }
  return "loop";
}

// Up to `n` distinct ordered host pairs drawn with a fixed seed.
std::vector<std::pair<Host, Host>> SamplePairs(const std::vector<Host>& hosts, size_t n) {
  std::vector<std::pair<size_t, size_t>> all;
  for (size_t i = 0; i < hosts.size(); ++i)
    for (size_t j = 0; j < hosts.size(); ++j)
      if (i != j) all.emplace_back(i, j);
  std::mt19937 rng(kSampleSeed);
  std::shuffle(all.begin(), all.end(), rng);
  if (all.size() > n) all.resize(n);
  std::vector<std::pair<Host, Host>> pairs;
  for (auto [i, j] : all) pairs.emplace_back(hosts[i], hosts[j]);
  return pairs;
}

// ibtracert SRC DST for every pair, a few at a time (ibsim has 10 client slots, one may be
// held by a running ibsmd). Returns one
// message per pair that does not end at the destination's LID.
std::vector<std::string> TracePairs(const IbsimInstance& sim,
                                    const std::vector<std::pair<Host, Host>>& pairs) {
  static const std::regex to_re(R"(To ca \{0x([0-9a-fA-F]+)\} portnum (\d+) lid (\d+)-(\d+))");
  constexpr size_t kParallel = 4;
  std::vector<std::string> failures;
  for (size_t base = 0; base < pairs.size(); base += kParallel) {
    std::vector<std::pair<size_t, ChildProcess>> running;
    for (size_t i = base; i < std::min(pairs.size(), base + kParallel); ++i) {
      auto c = sim.StartChild({"timeout", "-s", "KILL", "15", "ibtracert",
                               std::to_string(pairs[i].first.lid),
                               std::to_string(pairs[i].second.lid)});
      if (!c.ok()) {
        failures.push_back("cannot start ibtracert: " + c.status().ToString());
        continue;
      }
      running.emplace_back(i, std::move(*c));
    }
    for (auto& [i, child] : running) {
      auto r = child.Wait(kToolTimeout);
      const auto& [src, dst] = pairs[i];
      std::string what = "ibtracert " + std::to_string(src.lid) + " " + std::to_string(dst.lid);
      if (!r.ok()) {
        failures.push_back(what + ": " + r.status().ToString());
        continue;
      }
      std::smatch m;
      if (r->exit_code != 0 || !std::regex_search(r->out, m, to_re)) {
        failures.push_back(what + ": " + Describe(*r));
        continue;
      }
      if (std::stoull(m[1], nullptr, 16) != dst.node_guid ||
          std::stoul(m[3]) != dst.lid) {
        failures.push_back(what + " ended elsewhere: " + m[0].str());
      }
    }
  }
  return failures;
}

// --- the fabrics ------------------------------------------------------------------------------

struct FatTree2K8 {
  static constexpr char kName[] = "FatTree2K8";
  // All 992 pairs through ibtracert took 80 s here; the test walks the full matrix itself
  // over dump_lfts and ibnetdiscover and leaves ibtracert a sample.
  static constexpr size_t kTraceSample = 50;
  static constexpr char kEngine[] = "ftree,updn";
  static Result<Fabric> Make() { return FatTree2(8); }
};
struct FatTree3K8 {
  static constexpr char kName[] = "FatTree3K8";
  static constexpr size_t kTraceSample = 50;
  static constexpr char kEngine[] = "ftree,updn";
  static Result<Fabric> Make() { return FatTree3(8); }
};
struct Random20K8 {
  static constexpr char kName[] = "Random20K8";
  static constexpr size_t kTraceSample = 50;
  // No root file: updn must find roots on an irregular fabric by itself.
  static constexpr char kEngine[] = "updn";
  static Result<Fabric> Make() { return RandomGraph(20, 8, 2, /*seed=*/7); }
};

// A temp dir with one opensm.conf per ibsmd run; every path ibsmd writes is inside it.
struct Workspace {
  std::string root;
  std::string engine;  // routing_engine of every run

  // REQUIRES: `name` unique per run. `state` names the state dir (state DB + guid2lid);
  // runs that share it are restarts of the same SM.
  std::string Config(const std::string& name, const std::string& state,
                     const std::string& extra = "") const {
    fs::create_directories(root + "/" + name);
    fs::create_directories(root + "/" + state);
    std::string path = root + "/" + name + "/opensm.conf";
    WriteTextFile(path, "guid2lid_file " + root + "/" + state + "/guid2lid\n" +
                        "state_db_file " + root + "/" + state + "/state.db\n" +
                        "dump_files_dir " + root + "/" + name + "\n" + "log_file " + root +
                        "/" + name + "/ibsmd.log\n" +
                        // OpenSM's routing log bit: opensm-lfts.dump is written too.
                        "log_flags 0x43\n" + "routing_engine " + engine + "\n" + extra);
    return path;
  }
  std::string Dir(const std::string& name) const { return root + "/" + name; }
  std::string Log(const std::string& name) const { return ReadFile(Dir(name) + "/ibsmd.log"); }
};

// Polls `name`'s log until `done(log)` or the deadline; returns the last log read.
template <typename Pred>
std::string WaitForLog(const Workspace& ws, const std::string& name, Pred done,
                       std::chrono::seconds deadline = 30s) {
  auto until = std::chrono::steady_clock::now() + deadline;
  std::string log = ws.Log(name);
  while (!done(log) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
    log = ws.Log(name);
  }
  return log;
}

// Stops a daemon ibsmd with SIGTERM; returns its result (exit code 0 when it shut down).
Result<CommandResult> Terminate(ChildProcess& child) {
  kill(child.pid(), SIGTERM);
  return child.Wait(10s);
}

// What one fabric's suite shares: the fabric, its ibsim, and the cold-start run's results.
struct FabricRun {
  Workspace ws;
  std::string net_file;
  Fabric fabric;
  std::unique_ptr<IbsimInstance> sim;
  CommandResult cold;
  std::string cold_log, cold_lfts_dump, cold_guid2lid;
  std::string discover_out;
  SeenFabric seen;
  std::string error;  // set-up failure, reported by every test
};

template <typename F>
class SmIbsimTest: public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    run_ = new FabricRun;
    if (!IbsimInstance::Available() || access(Ibsmd().c_str(), X_OK) != 0) return;
    FabricRun& r = *run_;
    auto dir = MakeTempDir("ibsm-sm-e2e-");
    if (!dir.ok()) {
      r.error = dir.status().ToString();
      return;
    }
    r.ws.root = *dir;
    r.ws.engine = F::kEngine;
    auto fabric = F::Make();
    if (!fabric.ok()) {
      r.error = "generator: " + fabric.status().ToString();
      return;
    }
    r.fabric = std::move(*fabric);
    r.net_file = r.ws.root + "/fabric.net";
    WriteTextFile(r.net_file, WriteTopology(r.fabric));
    auto sim = IbsimInstance::Start(r.net_file);
    if (!sim.ok()) {
      r.error = "ibsim: " + sim.status().ToString();
      return;
    }
    r.sim = std::move(*sim);

    // Cold start: a fresh state dir, one sweep.
    auto cold = r.sim->Run({Ibsmd(), "-F", r.ws.Config("cold", "state"), "-o"}, kSmTimeout);
    if (!cold.ok()) {
      r.error = "ibsmd: " + cold.status().ToString();
      return;
    }
    r.cold = *cold;
    r.cold_log = r.ws.Log("cold");
    r.cold_lfts_dump = ReadFile(r.ws.Dir("cold") + "/opensm-lfts.dump");
    r.cold_guid2lid = ReadFile(r.ws.Dir("cold") + "/guid2lid");
    if (r.cold.exit_code != 0) {
      r.error = "cold ibsmd -o: " + Describe(r.cold) + "\nlog:\n" + r.cold_log;
      return;
    }
    auto disc = r.sim->Run({"ibnetdiscover"}, kToolTimeout);
    if (!disc.ok() || disc->exit_code != 0) {
      r.error = "ibnetdiscover: " + (disc.ok() ? Describe(*disc): disc.status().ToString());
      return;
    }
    r.discover_out = disc->out;
    r.seen = ParseSeenFabric(disc->out);
  }

  static void TearDownTestSuite() {
    if (run_) {
      run_->sim.reset();
      if (!run_->ws.root.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) {
        std::error_code ec;
        fs::remove_all(run_->ws.root, ec);
      }
    }
    delete run_;
    run_ = nullptr;
  }

  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    if (access(Ibsmd().c_str(), X_OK) != 0)
      FAIL() << "ibsmd not built at " << Ibsmd() << " (set IBSM_BIN_DIR)";
    ASSERT_TRUE(run_->error.empty()) << run_->error;
  }

  static FabricRun& R() { return *run_; }

  // The CA port the SM sits on: the file's first record, where ibsim attaches clients.
  static uint64_t SmPortGuid() {
    const Fabric& f = R().fabric;
    for (NodeId n = 0; n < f.node_count(); ++n)
      if (f.node(n).kind == NodeKind::kCa) return f.port(n, PortNum{1}).guid.value();
    return 0;
  }

  static inline FabricRun* run_ = nullptr;
};

struct FabricNames {
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};

using Fabrics = ::testing::Types<FatTree2K8, FatTree3K8, Random20K8>;
TYPED_TEST_SUITE(SmIbsimTest, Fabrics, FabricNames);

// --- 1. ibnetdiscover -------------------------------------------------------------------------

TYPED_TEST(SmIbsimTest, IbnetdiscoverListsEveryNodeWithAUniqueNonZeroLid) {
  FabricRun& r = this->R();
  const SeenFabric& seen = r.seen;
  EXPECT_EQ(seen.switches(), r.fabric.switch_count()) << r.discover_out;
  EXPECT_EQ(seen.cas(), r.fabric.ca_count()) << r.discover_out;
  for (NodeId n = 0; n < r.fabric.node_count(); ++n) {
    const Node& node = r.fabric.node(n);
    auto it = seen.nodes.find(node.guid.value());
    ASSERT_NE(it, seen.nodes.end()) << node.name << " is missing from ibnetdiscover";
    EXPECT_EQ(it->second.description, node.description);
    if (!node.is_switch()) {
      for (uint32_t p = 1; p <= node.num_ports; ++p) {
        if (!r.fabric.port(n, PortNum{static_cast<uint8_t>(p)}).connected()) continue;
        EXPECT_EQ(it->second.ca_lids.count(static_cast<int>(p)), 1u)
            << node.name << " port " << p << " shows no LID";
      }
    }
  }
  auto lids = seen.Lids();
  EXPECT_EQ(lids.size(), r.fabric.switch_count() + r.fabric.ca_count());
  for (auto it = lids.begin(); it != lids.end(); ++it) {
    EXPECT_NE(it->first, 0) << it->second << " has LID 0";
    EXPECT_LT(it->first, 0xC000) << it->second << " has a multicast LID";
    EXPECT_EQ(lids.count(it->first), 1u) << "LID " << it->first << " is shared; one is "
                                         << it->second;
  }
}

// --- 2. iblinkinfo ----------------------------------------------------------------------------

TYPED_TEST(SmIbsimTest, IblinkinfoShowsEveryCabledPortLinkUpAndActive) {
  FabricRun& r = this->R();
  auto info = r.sim->Run({"iblinkinfo"}, kToolTimeout);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->exit_code, 0) << Describe(*info);
  // A cabled port's line names the far end: `==( 4X ... Active/  LinkUp)==>  9 4[  ] "leaf"`.
  static const std::regex cabled_re(R"re(==\((.*)\)==>\s+\d+\s+\d+\[.*\]\s+"[^"]+")re");
  size_t cabled = 0, up = 0;
  std::istringstream in(info->out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, cabled_re)) continue;
    ++cabled;
    std::string state = m[1];
    if (std::regex_search(state, std::regex(R"(Active/\s+LinkUp)"))) {
      ++up;
    } else {
      ADD_FAILURE() << "not Active/LinkUp: " << line;
    }
  }
  // Every cable shows from both ends.
  EXPECT_EQ(cabled, 2 * r.fabric.link_count()) << info->out;
  EXPECT_EQ(up, 2 * r.fabric.link_count());
}

// --- 3. dump_lfts / ibtracert -----------------------------------------------------------------

TYPED_TEST(SmIbsimTest, DumpLftsHasAnEntryForEveryLidAndEveryHostReachesEveryOther) {
  FabricRun& r = this->R();
  auto dump = r.sim->Run({"dump_lfts"}, kToolTimeout);
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  ASSERT_EQ(dump->exit_code, 0) << Describe(*dump);
  SeenLfts lfts = ParseDumpLfts(dump->out);
  const SeenFabric& seen = r.seen;
  EXPECT_EQ(lfts.size(), r.fabric.switch_count()) << dump->out.substr(0, 4000);

  std::set<uint16_t> all_lids;
  for (const auto& [lid, owner] : seen.Lids()) all_lids.insert(lid);
  for (const auto& [guid, node] : seen.nodes) {
    if (!node.is_switch) continue;
    auto t = lfts.find(guid);
    ASSERT_NE(t, lfts.end()) << node.description << " missing from dump_lfts";
    std::set<uint16_t> has;
    for (const auto& [lid, port] : t->second) {
      has.insert(lid);
      if (lid == node.lid) {
        EXPECT_EQ(port, 0) << node.description << " does not deliver its own LID to port 0";
      } else {
        EXPECT_EQ(node.links.count(port), 1u)
            << node.description << " sends LID " << lid << " to uncabled port " << port;
      }
    }
    EXPECT_EQ(has, all_lids) << node.description << " lacks entries";
  }

  // The full host matrix, walking the tables dump_lfts shows over ibnetdiscover's links.
  std::vector<Host> hosts = Hosts(seen);
  ASSERT_EQ(hosts.size(), r.fabric.ca_count());
  size_t failed = 0;
  for (const Host& s: hosts) {
    for (const Host& d: hosts) {
      if (s.lid == d.lid) continue;
      std::string why = Walk(seen, lfts, s, d);
      if (!why.empty() && ++failed <= 10)
        ADD_FAILURE() << "LID " << s.lid << " -> " << d.lid << ": " << why;
    }
  }
  EXPECT_EQ(failed, 0u) << "of " << hosts.size() * (hosts.size() - 1) << " host pairs";

  // And ibtracert, which follows the switches' own tables, on a seeded sample.
  auto failures = TracePairs(*r.sim, SamplePairs(hosts, TypeParam::kTraceSample));
  EXPECT_TRUE(failures.empty()) << failures.size() << " traces failed; first: "
                                << (failures.empty() ? "" : failures.front());
}

// --- 3b. ibdmchk -----------------------------------------------------------------------------

// ibutils' checker reads the dumps ibsmd wrote (as OpenSM's -D 0x43 does), follows every CA to
// CA path through the tables and builds its own channel dependency graph.
TYPED_TEST(SmIbsimTest, IbdmchkFindsEveryCaPairRoutedAndNoCreditLoop) {
  FabricRun& r = this->R();
  const std::string dir = r.ws.Dir("cold");
  // The first engine of the chain routed (no fallback to minhop, whose routes may loop).
  const std::string engine = std::string(TypeParam::kEngine).substr(0, std::string(TypeParam::kEngine).find(','));
  EXPECT_NE(r.cold_log.find("[routing] info: " + engine + " tables configured"), std::string::npos)
      << r.cold_log;
  for (const char* f: {"opensm-subnet.lst", "opensm.fdbs", "opensm.mcfdbs"})
    ASSERT_TRUE(fs::exists(dir + "/" + f)) << f << " not written";
  auto chk = RunCommand({"ibdmchk", "-s", dir + "/opensm-subnet.lst", "-f", dir + "/opensm.fdbs",
                         "-m", dir + "/opensm.mcfdbs"},
                        120s, dir);
  ASSERT_TRUE(chk.ok()) << chk.status().ToString();
  const std::string& out = chk->out;
  // ibutils 1.5.7 (Debian 12) crashes on exit after its last report, also on OpenSM 3.3.23's own
  // dumps (tests/fixtures/opensm-ftree2-k4): judge it by what it printed, which must be complete.
  EXPECT_TRUE(chk->exit_code == 0 || chk->exit_code == 128 + SIGSEGV) << Describe(*chk);
  const size_t cas = r.fabric.ca_count();
  EXPECT_NE(out.find("-I- Scanned:" + std::to_string(cas * (cas - 1)) + " CA to CA paths"),
            std::string::npos)
      << out.substr(0, 6000);
  EXPECT_NE(out.find("-I- no credit loops found"), std::string::npos) << out.substr(0, 6000);
  size_t errors = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("-E-", 0) == 0 && ++errors <= 10) ADD_FAILURE() << line;
  EXPECT_EQ(errors, 0u);
}

// --- 4. sminfo --------------------------------------------------------------------------------

TYPED_TEST(SmIbsimTest, SminfoReportsTheRunningIbsmdAsMaster) {
  FabricRun& r = this->R();
  auto daemon = r.sim->StartChild({Ibsmd(), "-F", r.ws.Config("daemon", "state")});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  std::string log = WaitForLog(r.ws, "daemon", [](const std::string& l) {
    return l.find("SUBNET UP") != std::string::npos;
  });
  ASSERT_NE(log.find("SUBNET UP"), std::string::npos) << log;

  char guid[32];
  std::snprintf(guid, sizeof(guid), "0x%llx", static_cast<unsigned long long>(this->SmPortGuid()));
  static const std::regex sminfo_re(R"(sm lid (\d+) sm guid (0x[0-9a-f]+), .* state (\d+) (\w+))");
  // From the SM's own node and from the last host in the file.
  std::string far_host;
  for (NodeId n = 0; n < r.fabric.node_count(); ++n)
    if (r.fabric.node(n).kind == NodeKind::kCa) far_host = r.fabric.node(n).name;
  for (const std::string& host: {std::string(), far_host}) {
    auto info = r.sim->Run({"sminfo"}, kToolTimeout, host);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->exit_code, 0) << "from " << host << ": " << Describe(*info);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(info->out, m, sminfo_re)) << Describe(*info);
    EXPECT_EQ(m[2].str(), guid) << info->out;
    EXPECT_EQ(m[4].str(), "SMINFO_MASTER") << info->out;
    EXPECT_EQ(std::stoul(m[1]), r.seen.LidsByPortGuid().at(this->SmPortGuid()));
  }

  auto done = Terminate(*daemon);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_FALSE(done->timed_out) << "ibsmd did not exit after SIGTERM";
  EXPECT_EQ(done->exit_code, 0) << Describe(*done);
}

// --- 5. restart -------------------------------------------------------------------------------

TYPED_TEST(SmIbsimTest, RestartedIbsmdKeepsEveryLidAndSendsNoLftSet) {
  FabricRun& r = this->R();
  auto again = r.sim->Run({Ibsmd(), "-F", r.ws.Config("restart", "state"), "-o"}, kSmTimeout);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  std::string log = r.ws.Log("restart");
  ASSERT_EQ(again->exit_code, 0) << Describe(*again) << "\nlog:\n" << log;
  EXPECT_NE(log.find("SUBNET UP"), std::string::npos) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(heavy sweep 1 done .*)"))) << log;
  EXPECT_NE(m[0].str().find(" 0 LID changes"), std::string::npos) << m[0];
  EXPECT_NE(m[0].str().find(" 0 LFT blocks sent"), std::string::npos) << m[0];
  // It restored every SA registration from its own state file and every port still names
  // it master: no client has anything to re-register (OpenSM would tell them all).
  EXPECT_NE(m[0].str().find("(0 ClientReregister)"), std::string::npos) << m[0];

  auto disc = r.sim->Run({"ibnetdiscover"}, kToolTimeout);
  ASSERT_TRUE(disc.ok());
  ASSERT_EQ(disc->exit_code, 0) << Describe(*disc);
  EXPECT_EQ(ParseSeenFabric(disc->out).LidsByPortGuid(), r.seen.LidsByPortGuid());

  auto store = ha::StateStore::OpenReadOnly(r.ws.Dir("state") + "/state.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto sweeps = (*store)->RecentSweeps(1);
  ASSERT_TRUE(sweeps.ok()) << sweeps.status().ToString();
  ASSERT_EQ(sweeps->size(), 1u);
  EXPECT_EQ(sweeps->front().lft_blocks_sent, 0u);
  EXPECT_EQ(sweeps->front().lid_changes, 0u);
  EXPECT_EQ(sweeps->front().nodes, r.fabric.node_count());
}

// --- 6. link down -----------------------------------------------------------------------------

// A switch-to-switch cable whose loss leaves every node reachable: the first one, in node
// order, that is not a bridge.
std::optional<std::pair<PortId, PortId>> CutCandidate(const Fabric& f) {
  auto connected_without = [&](PortId a, PortId b) {
    std::vector<bool> seen(f.node_count(), false);
    std::vector<NodeId> todo = {0};
    seen[0] = true;
    while (!todo.empty()) {
      NodeId n = todo.back();
      todo.pop_back();
      for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
        PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
        const Port& port = f.port(id);
        if (!port.connected() || id == a || id == b) continue;
        NodeId m = f.port(port.peer).node;
        if (!seen[m]) {
          seen[m] = true;
          todo.push_back(m);
        }
      }
    }
    return std::all_of(seen.begin(), seen.end(), [](bool s) { return s; });
  };
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
      const Port& port = f.port(id);
      if (!port.connected() || !f.node(f.port(port.peer).node).is_switch()) continue;
      if (connected_without(id, port.peer)) return std::make_pair(id, port.peer);
    }
  }
  return std::nullopt;
}

// Runs a daemon ibsmd (light sweeps every 2 s, `config` added to its opensm.conf) on a
// private ibsim, uncables a redundant switch link through ibsim's console, and checks that
// the next heavy sweep routes around it: no entry on either switch points at the dead port
// and every host still reaches every other.
// `repair`: the trap names the switch, so a repair sweep of it must do; without traps the
// light sweep may meet a switch whose DR path crossed the cut cable and that no longer
// answers by it, which takes a heavy sweep.
void CheckUnlinkedCableIsRoutedAround(const FabricRun& r, const std::string& run,
                                      const std::string& config, bool repair) {
  const Fabric& f = r.fabric;
  auto cut = CutCandidate(f);
  ASSERT_TRUE(cut.has_value()) << "the fabric has no redundant switch link";
  const Port& a = f.port(cut->first);
  const Port& b = f.port(cut->second);

  IbsimOptions o;
  o.console = true;
  auto sim = IbsimInstance::Start(r.net_file, o);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto daemon = (*sim)->StartChild({Ibsmd(), "-F", r.ws.Config(run, run + "-state", config), "-s",
                                    "2"});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  std::string log = WaitForLog(r.ws, run, [](const std::string& l) {
    return l.find("SUBNET UP") != std::string::npos;
  });
  ASSERT_NE(log.find("SUBNET UP"), std::string::npos) << log;

  size_t offset = r.ws.Log(run).size();
  std::string cmd = "unlink \"" + f.node(a.node).name + "\"[" + std::to_string(a.num.value()) +
                    "]";
  ASSERT_TRUE((*sim)->SendConsoleCommand(cmd).ok());
  // A sweep that starts after the unlink and ends with SUBNET UP; with traps, a repair sweep
  // of the switch that reported it (the cable is redundant, so the model can be patched),
  // without a rediscovery.
  const std::string kind = repair ? "Entering repair sweep" : "Entering ";
  auto swept = [offset, kind](const std::string& l) {
    if (l.size() <= offset) return false;
    size_t start = l.find(kind, offset);
    if (start != std::string::npos && kind == "Entering ") {
      // "Entering repair sweep" or "Entering heavy sweep", not a state change.
      while (start != std::string::npos && l.compare(start, 22, "Entering repair sweep ") != 0 &&
             l.compare(start, 21, "Entering heavy sweep ") != 0)
        start = l.find(kind, start + 1);
    }
    return start != std::string::npos && l.find("SUBNET UP", start) != std::string::npos;
  };
  log = WaitForLog(r.ws, run, swept);
  ASSERT_TRUE(swept(log)) << "no re-route after `" << cmd << "`; ibsmd log:\n"
                          << log << "\nibsim log:\n" << (*sim)->Log();
  if (repair) {
    EXPECT_EQ(log.find("heavy sweep instead", offset), std::string::npos) << log.substr(offset);
    EXPECT_NE(log.find("1 cables and 0 nodes taken out of the model", offset), std::string::npos)
        << log.substr(offset);
  }

  auto disc = (*sim)->Run({"ibnetdiscover"}, kToolTimeout);
  ASSERT_TRUE(disc.ok());
  ASSERT_EQ(disc->exit_code, 0) << Describe(*disc);
  SeenFabric seen = ParseSeenFabric(disc->out);
  EXPECT_EQ(seen.nodes.at(f.node(a.node).guid.value()).links.count(a.num.value()), 0u)
      << "ibnetdiscover still shows the unlinked cable";
  auto dump = (*sim)->Run({"dump_lfts"}, kToolTimeout);
  ASSERT_TRUE(dump.ok());
  ASSERT_EQ(dump->exit_code, 0) << Describe(*dump);
  SeenLfts lfts = ParseDumpLfts(dump->out);
  for (const Port* end: {&a, &b}) {
    const Node& sw = f.node(end->node);
    auto t = lfts.find(sw.guid.value());
    ASSERT_NE(t, lfts.end()) << sw.name << " missing from dump_lfts";
    for (const auto& [lid, port] : t->second)
      EXPECT_NE(port, end->num.value()) << sw.name << " still sends LID " << lid
                                        << " to its dead port " << port;
  }

  std::vector<Host> hosts = Hosts(seen);
  ASSERT_EQ(hosts.size(), f.ca_count());
  size_t failed = 0;
  for (const Host& s: hosts)
    for (const Host& d: hosts)
      if (s.lid != d.lid && !Walk(seen, lfts, s, d).empty() && ++failed <= 10)
        ADD_FAILURE() << "LID " << s.lid << " -> " << d.lid << ": " << Walk(seen, lfts, s, d);
  EXPECT_EQ(failed, 0u);
  auto failures = TracePairs(**sim, SamplePairs(hosts, 20));
  EXPECT_TRUE(failures.empty()) << failures.size() << " traces failed; first: "
                                << (failures.empty() ? "" : failures.front());

  auto done = Terminate(*daemon);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->exit_code, 0) << Describe(*done);
}

TYPED_TEST(SmIbsimTest, UnlinkedCableIsRoutedAroundWithinOneSweep) {
  CheckUnlinkedCableIsRoutedAround(this->R(), "unlink", "sweep_on_trap TRUE\n", true);
}

// Without traps only the light sweep (SwitchInfo PortStateChange) can notice the cable.
TYPED_TEST(SmIbsimTest, UnlinkedCableIsFoundByTheLightSweepWhenTrapsAreIgnored) {
  CheckUnlinkedCableIsRoutedAround(this->R(), "unlink-light", "sweep_on_trap FALSE\n", false);
}

// A switch with no hosts whose loss leaves every other node connected (a spine), if any.
std::optional<NodeId> TransitSwitch(const Fabric& f) {
  for (NodeId x = 0; x < f.node_count(); ++x) {
    if (!f.node(x).is_switch()) continue;
    bool hosts = false;
    for (uint32_t p = 1; p <= f.node(x).num_ports; ++p) {
      const Port& port = f.port(f.port_id(x, PortNum{static_cast<uint8_t>(p)}));
      hosts |= port.connected() && !f.node(f.port(port.peer).node).is_switch();
    }
    if (hosts) continue;
    std::vector<bool> seen(f.node_count(), false);
    NodeId start = x == 0 ? 1 : 0;
    std::vector<NodeId> todo{start};
    seen[start] = seen[x] = true;
    while (!todo.empty()) {
      const NodeId n = todo.back();
      todo.pop_back();
      for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
        const Port& port = f.port(f.port_id(n, PortNum{static_cast<uint8_t>(p)}));
        if (!port.connected() || seen[f.port(port.peer).node]) continue;
        seen[f.port(port.peer).node] = true;
        todo.push_back(f.port(port.peer).node);
      }
    }
    if (std::all_of(seen.begin(), seen.end(), [](bool v) { return v; })) return x;
  }
  return std::nullopt;
}

// A spine switch dies: ibsim's console uncables every port of it at once. Its neighbours'
// traps (some lost on routes through it) start a repair sweep that re-reads the reporting
// switches, checks the dead switch's other cables from their far ends, takes it out of the
// model and re-routes, without a rediscovery or a heavy sweep; then no neighbour sends a
// LID towards it and every host reaches every other. Then it comes back, again without a
// heavy sweep.
TYPED_TEST(SmIbsimTest, ADeadSpineSwitchIsRepairedWithoutAHeavySweep) {
  const FabricRun& r = this->R();
  const Fabric& f = r.fabric;
  auto dead = TransitSwitch(f);
  if (!dead) GTEST_SKIP() << "every switch has hosts or holds the fabric together";
  IbsimOptions o;
  o.console = true;
  auto sim = IbsimInstance::Start(r.net_file, o);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  const std::string run = "dead-spine";
  auto daemon = (*sim)->StartChild(
      {Ibsmd(), "-F", r.ws.Config(run, run + "-state", "sweep_on_trap TRUE\n"), "-s", "2"});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  std::string log = WaitForLog(r.ws, run, [](const std::string& l) {
    return l.find("SUBNET UP") != std::string::npos;
  });
  ASSERT_NE(log.find("SUBNET UP"), std::string::npos) << log;
  const size_t offset = r.ws.Log(run).size();
  ASSERT_TRUE((*sim)->SendConsoleCommand("unlink \"" + f.node(*dead).name + "\"").ok());
  log = WaitForLog(r.ws, run, [offset](const std::string& l) {
    const size_t at = l.find("1 nodes taken out of the model", offset);
    return at != std::string::npos && l.find("SUBNET UP", at) != std::string::npos;
  });
  ASSERT_NE(log.find("1 nodes taken out of the model", offset), std::string::npos)
      << log.substr(offset) << "\nibsim log:\n" << (*sim)->Log();
  EXPECT_EQ(log.find("Entering heavy sweep", offset), std::string::npos) << log.substr(offset);

  auto disc = (*sim)->Run({"ibnetdiscover"}, kToolTimeout);
  ASSERT_TRUE(disc.ok());
  ASSERT_EQ(disc->exit_code, 0) << Describe(*disc);
  SeenFabric seen = ParseSeenFabric(disc->out);
  EXPECT_EQ(seen.nodes.count(f.node(*dead).guid.value()), 0u) << "ibnetdiscover still finds it";
  auto dump = (*sim)->Run({"dump_lfts"}, kToolTimeout);
  ASSERT_TRUE(dump.ok());
  ASSERT_EQ(dump->exit_code, 0) << Describe(*dump);
  SeenLfts lfts = ParseDumpLfts(dump->out);
  for (uint32_t p = 1; p <= f.node(*dead).num_ports; ++p) {
    const Port& sp = f.port(f.port_id(*dead, PortNum{static_cast<uint8_t>(p)}));
    if (!sp.connected()) continue;
    const Port& nb = f.port(sp.peer);
    auto t = lfts.find(f.node(nb.node).guid.value());
    ASSERT_NE(t, lfts.end()) << f.node(nb.node).name << " missing from dump_lfts";
    for (const auto& [lid, port] : t->second)
      EXPECT_NE(port, nb.num.value()) << f.node(nb.node).name << " still sends LID " << lid
                                      << " to the dead switch";
  }
  auto every_pair_reached = [](const SeenFabric& seen, const SeenLfts& lfts,
                               const std::vector<Host>& hosts) {
    size_t failed = 0;
    for (const Host& a : hosts)
      for (const Host& b : hosts)
        if (a.lid != b.lid && !Walk(seen, lfts, a, b).empty() && ++failed <= 10)
          ADD_FAILURE() << "LID " << a.lid << " -> " << b.lid << ": " << Walk(seen, lfts, a, b);
    EXPECT_EQ(failed, 0u);
  };
  const std::vector<Host> hosts = Hosts(seen);
  ASSERT_EQ(hosts.size(), f.ca_count());
  every_pair_reached(seen, lfts, hosts);

  // It comes back with its cables (`relink`): its neighbours report their ports up, and a
  // repair sweep finds it behind them, reads it alone, gives it its LID again and routes over
  // it, without a rediscovery; ibnetdiscover finds it cabled as before, its neighbours send
  // LIDs through it again, and every host still reaches every other with the LIDs it had.
  const size_t back = r.ws.Log(run).size();
  ASSERT_TRUE((*sim)->SendConsoleCommand("relink \"" + f.node(*dead).name + "\"").ok());
  log = WaitForLog(r.ws, run, [back](const std::string& l) {
    const size_t at = l.find("nodes joined", back);
    return at != std::string::npos && l.find("SUBNET UP", at) != std::string::npos;
  });
  ASSERT_NE(log.find("1 nodes joined", back), std::string::npos)
      << log.substr(back) << "\nibsim log:\n" << (*sim)->Log();
  EXPECT_EQ(log.find("Entering heavy sweep", back), std::string::npos) << log.substr(back);
  disc = (*sim)->Run({"ibnetdiscover"}, kToolTimeout);
  ASSERT_TRUE(disc.ok());
  ASSERT_EQ(disc->exit_code, 0) << Describe(*disc);
  const SeenFabric again = ParseSeenFabric(disc->out);
  ASSERT_EQ(again.nodes.count(f.node(*dead).guid.value()), 1u) << "ibnetdiscover does not find it";
  size_t cabled = 0;
  for (uint32_t p = 1; p <= f.node(*dead).num_ports; ++p)
    cabled += f.port(f.port_id(*dead, PortNum{static_cast<uint8_t>(p)})).connected();
  EXPECT_EQ(again.nodes.at(f.node(*dead).guid.value()).links.size(), cabled);
  dump = (*sim)->Run({"dump_lfts"}, kToolTimeout);
  ASSERT_TRUE(dump.ok());
  ASSERT_EQ(dump->exit_code, 0) << Describe(*dump);
  lfts = ParseDumpLfts(dump->out);
  size_t through = 0;
  for (uint32_t p = 1; p <= f.node(*dead).num_ports; ++p) {
    const Port& sp = f.port(f.port_id(*dead, PortNum{static_cast<uint8_t>(p)}));
    if (!sp.connected()) continue;
    const Port& nb = f.port(sp.peer);
    auto t = lfts.find(f.node(nb.node).guid.value());
    if (t == lfts.end()) continue;
    for (const auto& [lid, port] : t->second) through += port == nb.num.value();
  }
  EXPECT_GT(through, 0u) << "no neighbour routes through the switch that came back";
  const std::vector<Host> hosts_again = Hosts(again);
  EXPECT_EQ(hosts_again.size(), hosts.size());
  std::set<std::pair<uint64_t, uint16_t>> lids_before, lids_after;
  for (const Host& h : hosts) lids_before.emplace(h.node_guid, h.lid);
  for (const Host& h : hosts_again) lids_after.emplace(h.node_guid, h.lid);
  EXPECT_EQ(lids_after, lids_before) << "a host's LID changed";
  every_pair_reached(again, lfts, hosts_again);
  auto done = Terminate(*daemon);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->exit_code, 0) << Describe(*done);
}

// --- 7. the in-process simulator gives the same answer ----------------------------------------

// Strict devices (loss, duplicates, silent optional attributes) but the topology file's own
// descriptions, which are ibsim's: the LFT dump names every destination by its description.
TYPED_TEST(SmIbsimTest, InProcessSimulatorGivesIdenticalLidsAndLfts) {
  FabricRun& r = this->R();
  auto sim_run = RunCommand({Ibsmd(), "-F", r.ws.Config("sim", "sim-state"), "-o", "--sim",
                             r.net_file, "--sim-profile", "strict-plain-names"},
                            kSmTimeout, r.ws.Dir("sim"));
  ASSERT_TRUE(sim_run.ok()) << sim_run.status().ToString();
  ASSERT_EQ(sim_run->exit_code, 0) << Describe(*sim_run) << "\nlog:\n" << r.ws.Log("sim");
  std::string lfts = ReadFile(r.ws.Dir("sim") + "/opensm-lfts.dump");
  std::string guid2lid = ReadFile(r.ws.Dir("sim") + "/guid2lid");
  ASSERT_FALSE(r.cold_lfts_dump.empty());
  ASSERT_FALSE(r.cold_guid2lid.empty());
  EXPECT_TRUE(lfts == r.cold_lfts_dump) << "opensm-lfts.dump differs: diff "
                                        << r.ws.Dir("sim") << " and the ibsim run's";
  EXPECT_EQ(guid2lid, r.cold_guid2lid);
}

}  // namespace
}  // namespace ibsm::test
