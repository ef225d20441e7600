// Multicast end to end on ibsim: ibsmd runs as a daemon on
// a FatTree2(4) fabric (4 leaves of 2 hosts, 2 spines); a test client (mcast_client, run
// under libumad2sim) joins a group through ibsmd's SA from two hosts on different leaves,
// and infiniband-diags' `ibroute -M` shows the MLID on exactly the switches of the tree;
// leaves take it away again. saquery -m shows the IPoIB broadcast group (first packet of the
// GetTable: ibsim carries no RMPP).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

class McastIbsimTest: public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    for (const char* b: {"ibsmd", "mcast_client"})
      ASSERT_EQ(access(Bin(b).c_str(), X_OK), 0) << Bin(b) << " not built";
    auto dir = MakeTempDir("ibsm-mcast-e2e-");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    root_ = *dir;
    auto fabric = FatTree2(4);
    ASSERT_TRUE(fabric.ok());
    // Hosts other than the SM's (the first), one per leaf.
    std::vector<NodeId> leaves_seen;
    bool first = true;
    for (NodeId n = 0; n < fabric->node_count(); ++n) {
      if (fabric->node(n).kind != NodeKind::kCa) continue;
      NodeId leaf = fabric->port(fabric->port(n, PortNum{1}).peer).node;
      if (first) {
        first = false;
        leaves_seen.push_back(leaf);
        continue;
      }
      if (std::find(leaves_seen.begin(), leaves_seen.end(), leaf) != leaves_seen.end()) continue;
      leaves_seen.push_back(leaf);
      hosts_.push_back(fabric->node(n).name);
    }
    ASSERT_GE(hosts_.size(), 2u);
    switches_ = fabric->switch_count();
    std::ofstream(root_ + "/fabric.net") << WriteTopology(*fabric);
    auto sim = IbsimInstance::Start(root_ + "/fabric.net");
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    sim_ = std::move(*sim);
    std::ofstream(root_ + "/opensm.conf")
        << "state_db_file " << root_ << "/state.db\ndump_files_dir " << root_
        << "\nlog_file " << root_ << "/ibsmd.log\nsweep_interval 0\n";
    auto d = sim_->StartChild({Bin("ibsmd"), "-F", root_ + "/opensm.conf"});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_.emplace(std::move(*d));
    auto until = std::chrono::steady_clock::now() + 60s;
    std::string log;
    while (std::chrono::steady_clock::now() < until) {
      log = ReadFile(root_ + "/ibsmd.log");
      if (log.find("SUBNET UP") != std::string::npos) break;
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_NE(log.find("SUBNET UP"), std::string::npos) << log;
    auto sw = sim_->Run({"ibswitches"}, kToolTimeout, hosts_[0]);
    ASSERT_TRUE(sw.ok() && sw->exit_code == 0) << (sw.ok() ? Describe(*sw): "");
    std::regex lid_re(R"(base port 0 lid (\d+))");
    std::istringstream lines(sw->out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_search(line, m, lid_re)) switch_lids_.push_back(std::stoi(m[1]));
    }
    ASSERT_EQ(switch_lids_.size(), switches_) << sw->out;
  }

  void TearDown() override {
    if (daemon_) {
      kill(daemon_->pid(), SIGTERM);
      (void)daemon_->Wait(10s);
    }
    sim_.reset();
    std::error_code ec;
    if (!root_.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(root_, ec);
  }

  CommandResult Client(const std::string& host, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {Bin("mcast_client")};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = sim_->Run(argv, kToolTimeout, host);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r: CommandResult{};
  }

  // The switches whose MFT (ibroute -M, read over the fabric; it prints only MLIDs with a
  // port set, a row of "x" under the ports) forwards `mlid` anywhere.
  // ibsmd programs MFTs after it answers, so this waits a little for them to settle.
  size_t SwitchesForwarding(const std::string& mlid, size_t want) {
    size_t n = 0;
    for (int attempt = 0; attempt < 50; ++attempt) {
      n = 0;
      for (int lid: switch_lids_) {
        auto r = sim_->Run({"ibroute", "-M", std::to_string(lid)}, kToolTimeout, hosts_[0]);
        if (!r.ok() || r->exit_code != 0) {
          ADD_FAILURE() << "ibroute -M " << lid << ": " << (r.ok() ? Describe(*r): "");
          return 0;
        }
        std::istringstream lines(r->out);
        for (std::string line; std::getline(lines, line);) {
          std::istringstream words(line);
          std::string first, mark;
          words >> first >> mark;
          if (first == mlid && mark == "x") ++n;
        }
      }
      if (n == want) return n;
      std::this_thread::sleep_for(100ms);
    }
    return n;
  }

  std::string root_;
  std::unique_ptr<IbsimInstance> sim_;
  std::optional<ChildProcess> daemon_;
  std::vector<std::string> hosts_;
  std::vector<int> switch_lids_;
  size_t switches_ = 0;
};

TEST_F(McastIbsimTest, SaqueryShowsTheIpoibBroadcastGroup) {
  auto r = sim_->Run({"saquery", "-m"}, kToolTimeout, hosts_[0]);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit_code, 0) << Describe(*r);
  EXPECT_NE(r->out.find("ff12:401b:ffff::ffff:ffff"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("0xC000"), std::string::npos) << r->out;
}

TEST_F(McastIbsimTest, JoinsProgramTheTreeAndLeavesClearIt) {
  const std::string mgid = "ff12:1234::4242";
  CommandResult a = Client(hosts_[0], {"join", mgid, "--create"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  EXPECT_NE(a.out.find("mlid 0xc001"), std::string::npos) << a.out;
  EXPECT_EQ(SwitchesForwarding("0xc001", 1), 1u) << "only the first host's leaf";
  CommandResult b = Client(hosts_[1], {"join", mgid});
  ASSERT_EQ(b.exit_code, 0) << Describe(b);
  EXPECT_EQ(SwitchesForwarding("0xc001", 3), 3u) << "two leaves and the spine between them";
  // A join that names a group that does not exist and lacks what a create needs.
  CommandResult bad = Client(hosts_[1], {"join", "ff12:1234::4343"});
  EXPECT_EQ(bad.exit_code, 3) << Describe(bad);
  EXPECT_NE(bad.out.find("status 0x0600"), std::string::npos) << bad.out;

  CommandResult lb = Client(hosts_[1], {"leave", mgid});
  ASSERT_EQ(lb.exit_code, 0) << Describe(lb);
  EXPECT_EQ(SwitchesForwarding("0xc001", 1), 1u);
  CommandResult la = Client(hosts_[0], {"leave", mgid});
  ASSERT_EQ(la.exit_code, 0) << Describe(la);
  EXPECT_EQ(SwitchesForwarding("0xc001", 0), 0u);
  std::string log = ReadFile(root_ + "/ibsmd.log");
  EXPECT_NE(log.find("deleted: no full member left"), std::string::npos) << log;
}

}  // namespace
}  // namespace ibsm::test
