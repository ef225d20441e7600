// Adaptive routing as an operator sees it: ibsmd on the in-process simulator with AR-capable
// switches (--sim-ar-switches), ibsmctl ar / traffic as a separate process.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

class ArDaemonTest : public ::testing::Test {
 protected:
  // `ar_switches`: the --sim-ar-switches value; the pod-1 leaves are legacy in the mixed case.
  void Start(const std::string& engine, const std::string& ar_switches) {
    dir_ = fs::temp_directory_path() / ("ibsm-ar-e2e-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    sock_ = (dir_ / "ibsmd.sock").string();
    log_ = dir_ / "ibsmd.log";
    fs::path conf = dir_ / "ibsmd.conf";
    std::ofstream(conf) << "log_file " << log_.string() << "\n"
                        << "dump_files_dir " << dir_.string() << "\n"
                        << "state_db_file " << (dir_ / "state.db").string() << "\n"
                        << "guid2lid_file " << (dir_ / "guid2lid").string() << "\n"
                        << "control_socket " << sock_ << "\n"
                        << "routing_engine " << engine << "\n"
                        << "ar_enable 1\n"
                        << "ar_sl_mask 0x0001\n"
                        << "ar_lid_mode free\n"
                        << "transaction_timeout 50\n"
                        << "transaction_retries 1\n"
                        << "sweep_interval 0\n";
    std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
    auto child = ChildProcess::Start(
        {Bin("ibsmd"), "-F", conf.string(), "--sim", topo, "--sim-ar-switches", ar_switches},
        dir_.string(), {});
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    daemon_.emplace(std::move(*child));
    ASSERT_TRUE(WaitForLog("SUBNET UP")) << ReadFile(log_);
  }
  void TearDown() override {
    if (daemon_) {
      kill(daemon_->pid(), SIGTERM);
      auto done = daemon_->Wait(30s);
      EXPECT_TRUE(done.ok() && !done->timed_out && done->exit_code == 0);
    }
    fs::remove_all(dir_);
  }
  bool WaitForLog(const std::string& what) { return WaitForCount(log_, what, 1); }
  CommandResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {Bin("ibsmctl"), "--socket", sock_});
    auto r = RunCommand(args, 60s, dir_.string());
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : CommandResult{};
  }

  fs::path dir_, log_;
  std::string sock_;
  std::optional<ChildProcess> daemon_;
};

TEST_F(ArDaemonTest, IbsmctlShowsArOnEverySwitchAndTrafficComparesItWithStatic) {
  Start("ar_ftree", "all");
  EXPECT_NE(ReadFile(log_).find("AR enabled on 80 of 80 switches, SLs 0x0001, mode free, engine "
                             "ar_ftree; 0 switches not capable"),
            std::string::npos)
      << ReadFile(log_);
  CommandResult js = Ctl({"--json", "ar"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  json r = json::parse(js.out);
  ASSERT_EQ(r["switches"].size(), 80u);
  for (const json& s : r["switches"]) {
    EXPECT_EQ(s["capable"], true);
    EXPECT_EQ(s["enabled"], true);
    EXPECT_EQ(s["sl_mask"], 1);
    EXPECT_EQ(s["mode"], "free");
  }
  EXPECT_EQ(r["destinations"].size(), 32u);  // one group per leaf
  CommandResult table = Ctl({"ar"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("AR enabled on 80 of 80 switches"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("DESTINATION"), std::string::npos) << table.out;

  CommandResult t = Ctl({"--json", "traffic", "--pattern", "random", "--count", "50", "--seed", "2"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  json tr = json::parse(t.out);
  EXPECT_EQ(tr["matrices"], 50);
  EXPECT_LT(tr["ar"]["max_link_load"].get<double>(), tr["static"]["max_link_load"].get<double>());
  EXPECT_GT(tr["ar"]["ebb"].get<double>(), tr["static"]["ebb"].get<double>());
  CommandResult human = Ctl({"traffic", "--pattern", "shift", "--count", "3"});
  EXPECT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("MAX LINK LOAD"), std::string::npos) << human.out;
  CommandResult bad = Ctl({"traffic", "--pattern", "ring"});
  EXPECT_NE(bad.exit_code, 0);
}

TEST_F(ArDaemonTest, APlainEngineWithArEnableRunsArOnTopOfIt) {
  Start("ftree", "all");
  EXPECT_NE(ReadFile(log_).find("AR enabled on top of ftree"), std::string::npos)
      << ReadFile(log_);
  EXPECT_EQ(ReadFile(log_).find("SM-AR-001"), std::string::npos) << ReadFile(log_);
  CommandResult table = Ctl({"ar"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("AR enabled on 80 of 80 switches"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace ibsm::test
