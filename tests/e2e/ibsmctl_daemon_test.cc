// ibsmctl against a running ibsmd over the control socket, both as operators run them: the
// daemon on the in-process simulator (no ibsim needed), ibsmctl as a separate process.
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

class IbsmctlDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ibsm-ctl-e2e-" + std::to_string(getpid()));
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
                        << "routing_engine ftree\n"
                        << "sweep_interval 0\n";
    std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
    auto child = ChildProcess::Start({Bin("ibsmd"), "-F", conf.string(), "--sim", topo},
                                     dir_.string(), {});
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    daemon_.emplace(std::move(*child));
    ASSERT_TRUE(WaitForLog("SUBNET UP", 1)) << ReadFile(log_);
  }
  void TearDown() override {
    if (daemon_) {
      kill(daemon_->pid(), SIGTERM);
      auto done = daemon_->Wait(30s);
      EXPECT_TRUE(done.ok() && !done->timed_out && done->exit_code == 0);
    }
    EXPECT_FALSE(fs::exists(sock_)) << "the daemon removes its socket on exit";
    fs::remove_all(dir_);
  }

  bool WaitForLog(const std::string& what, size_t times) { return WaitForCount(log_, what, times); }

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

TEST_F(IbsmctlDaemonTest, StatusAndRouteReadTheRunningDaemon) {
  CommandResult status = Ctl({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("SM state:          MASTER"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("ftree"), std::string::npos) << status.out;

  CommandResult js = Ctl({"--json", "status"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  json s = json::parse(js.out);
  EXPECT_EQ(s["state"], "MASTER");
  EXPECT_EQ(s["counts"]["switches"], 80);
  EXPECT_EQ(s["counts"]["cas"], 128);

  // Hosts in different pods: up to a core switch and down again, 5 switches. By port GUID:
  // the strict simulator gives some hosts hostile descriptions (sim/device_profile.h).
  CommandResult route = Ctl({"route", "0x0002c90300000011", "0x0002c90300000801"});
  EXPECT_EQ(route.exit_code, 0) << route.err;
  EXPECT_NE(route.out.find("delivered in 5 switch hops"), std::string::npos) << route.out;

  // The README's example as written: a prefix of one node's names and a NodeDescription
  // (or its beginning, where the strict simulator appended hostile bytes to it).
  CommandResult named = Ctl({"route", "node-0001", "node-0128 HCA-1"});
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_NE(named.out.find("delivered in 5 switch hops"), std::string::npos) << named.out;
  EXPECT_NE(named.out.find("(0x0002c90300000800)"), std::string::npos) << named.out;
  CommandResult by_file_name = Ctl({"route", "node-0001/hca1", "2c90300000801"});
  EXPECT_EQ(by_file_name.exit_code, 0) << by_file_name.err;
  EXPECT_NE(by_file_name.out.find("delivered in 5 switch hops"), std::string::npos)
      << by_file_name.out;
  CommandResult ambiguous = Ctl({"route", "node-00", "node-0128/hca1"});
  EXPECT_EQ(ambiguous.exit_code, 2);
  EXPECT_NE(ambiguous.err.find("'node-00' is ambiguous: 99 nodes match: node-0001/hca1 "
                               "(0x0002c90300000010), "),
            std::string::npos)
      << ambiguous.err;

  CommandResult lft = Ctl({"lft", "pod01-leaf-01", "--json"});
  ASSERT_EQ(lft.exit_code, 0) << lft.err;
  EXPECT_EQ(json::parse(lft.out)["entries"].size(), 80u + 128u) << "one entry per LID";

  CommandResult topo = Ctl({"topo", "--format", "json"});
  ASSERT_EQ(topo.exit_code, 0) << topo.err;
  EXPECT_EQ(json::parse(topo.out)["tiers"], 3) << "leaves, spines, cores";
  CommandResult svg = Ctl({"topo", "--format", "svg"});
  EXPECT_EQ(svg.out.rfind("<svg ", 0), 0u);

  // Without the daemon: its state file, read-only.
  auto offline = RunCommand({Bin("ibsmctl"), "--state-db", (dir_ / "state.db").string(), "status"},
                            30s, dir_.string());
  ASSERT_TRUE(offline.ok());
  EXPECT_EQ(offline->exit_code, 0) << offline->err;
  EXPECT_NE(offline->out.find("SM state:          MASTER"), std::string::npos) << offline->out;

  CommandResult check = Ctl({"check", "--permutations", "10"});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("completeness: OK"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("deadlock: no credit loop"), std::string::npos) << check.out;
}

// After the daemon has stopped, ibsmctl --state-db answers nodes, links and topo as the
// daemon did, marked as a snapshot; a command that needs the daemon says so.
TEST_F(IbsmctlDaemonTest, WithTheDaemonStoppedTheStateFileAnswersAsItDid) {
  CommandResult nodes = Ctl({"--json", "nodes"});
  CommandResult links = Ctl({"--json", "links"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  ASSERT_EQ(links.exit_code, 0) << links.err;
  kill(daemon_->pid(), SIGTERM);
  auto done = daemon_->Wait(30s);
  ASSERT_TRUE(done.ok() && !done->timed_out && done->exit_code == 0);
  daemon_.reset();

  const std::string db = (dir_ / "state.db").string();
  auto offline = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {Bin("ibsmctl"), "--state-db", db});
    auto r = RunCommand(args, 30s, dir_.string());
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : CommandResult{};
  };
  auto strip = [&db](json j) {
    EXPECT_EQ(j.value("source", ""), "state file " + db);
    EXPECT_GT(j.value("as_of_us", int64_t{0}), 0);
    j.erase("source");
    j.erase("as_of_us");
    return j;
  };
  CommandResult n = offline({"--json", "nodes"});
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(strip(json::parse(n.out)), json::parse(nodes.out));
  CommandResult l = offline({"--json", "links"});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(strip(json::parse(l.out)), json::parse(links.out));
  CommandResult table = offline({"nodes"});
  EXPECT_EQ(table.out.rfind("from state file " + db + " as of ", 0), 0u) << table.out;
  CommandResult topo = offline({"topo", "--format", "json"});
  ASSERT_EQ(topo.exit_code, 0) << topo.err;
  EXPECT_EQ(json::parse(topo.out)["tiers"], 3) << "leaves, spines, cores";
  CommandResult route = offline({"route", "1", "2"});
  EXPECT_EQ(route.exit_code, 2);
  EXPECT_NE(route.err.find("'route' needs a running daemon"), std::string::npos) << route.err;
}

TEST_F(IbsmctlDaemonTest, ResweepRunsASweepAndMistakesAreClearErrors) {
  CommandResult resweep = Ctl({"resweep"});
  EXPECT_EQ(resweep.exit_code, 0) << resweep.err;
  EXPECT_TRUE(WaitForLog("SUBNET UP", 2)) << ReadFile(log_);
  CommandResult waited = Ctl({"resweep", "--wait", "120"});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(waited.out.rfind("heavy sweep 3 done in ", 0), 0u) << waited.out;
  EXPECT_NE(waited.out.find(": 208 nodes, "), std::string::npos) << waited.out;
  EXPECT_NE(waited.out.find("; subnet up"), std::string::npos) << waited.out;
  EXPECT_TRUE(WaitForLog("SUBNET UP", 3)) << "the sweep it waited for is in the log";
  CommandResult no_wait = Ctl({"resweep", "--wait", "0"});
  EXPECT_EQ(no_wait.exit_code, 1);
  EXPECT_NE(no_wait.err.find("--wait takes seconds above 0"), std::string::npos) << no_wait.err;

  CommandResult unknown = Ctl({"route", "nowhere", "node-0001 HCA-1"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("'nowhere' is no LID, GUID, node name or description"),
            std::string::npos)
      << unknown.err;
  CommandResult usage = Ctl({"route", "only-one"});
  EXPECT_EQ(usage.exit_code, 1);
  EXPECT_NE(usage.err.find("usage: ibsmctl route SRC DST"), std::string::npos) << usage.err;
  CommandResult no_such = Ctl({"frobnicate"});
  EXPECT_EQ(no_such.exit_code, 1);

  auto no_daemon = RunCommand({Bin("ibsmctl"), "--socket", (dir_ / "none.sock").string(), "status"}, 30s,
                              dir_.string());
  ASSERT_TRUE(no_daemon.ok());
  EXPECT_EQ(no_daemon->exit_code, 2);
  EXPECT_NE(no_daemon->err.find("is ibsmd running"), std::string::npos) << no_daemon->err;

  // The daemon is still there and answering.
  EXPECT_EQ(Ctl({"status"}).exit_code, 0);
}

}  // namespace
}  // namespace ibsm::test
