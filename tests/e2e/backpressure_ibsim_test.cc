// A transport that stops taking writes never freezes the daemon (README "MAD transport:
// backpressure"). With `perfmgr TRUE` at the default perfmgr_max_outstanding_queries (500)
// on a 3-tier k=8 fat tree, the PerfMgr's first burst after SUBNET UP fills ibsim's socket;
// ibsmd used to block in write() with libumad2sim's lock held, and ibsim spun on the full
// socket back to it. Now: control answers keep coming, sminfo gets SMInfo, the PerfMgr
// completes sweeps, and SIGTERM ends ibsmd with exit 0.
//
// Also: the same with ibsim stopped outright (SIGSTOP), and forged inbound RMPP transfers
// capped per source (mad/rmpp_inbound.h).
//
// IBSM_BACKPRESSURE_K=16 runs the same test on a k=16 fabric (1024 hosts, 320 switches);
// it takes minutes, so it is not the default.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

uint64_t BackpressurePerfSweeps(const std::string& log) {
  static const std::regex re(R"(PerfMgr sweep (\d+) done)");
  uint64_t last = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it)
    last = std::stoull((*it)[1]);
  return last;
}

class BackpressureIbsimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    ASSERT_EQ(access(Bin("ibsmd").c_str(), X_OK), 0) << "ibsmd not built";
    ASSERT_EQ(access(Bin("ibsmctl").c_str(), X_OK), 0) << "ibsmctl not built";
    dir_ = fs::temp_directory_path() / ("ibsm-backpressure-e2e-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (daemon_) kill(daemon_->pid(), SIGKILL);  // only when an assertion left it running
    daemon_.reset();
    if (sim_ && sim_stopped_) kill(sim_->pid(), SIGCONT);
    sim_.reset();
    if (!dir_.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(dir_);
  }

  template <typename Pred>
  bool WaitFor(Pred done, std::chrono::seconds deadline) {
    for (auto end = std::chrono::steady_clock::now() + deadline;
         std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(50ms))
      if (done(ReadFile(log_.string()))) return true;
    return false;
  }

  // `ibsmctl --json status`, with the tools' timeout: a frozen daemon fails it.
  Result<json> Status() {
    auto r = RunCommand({Bin("ibsmctl"), "--socket", sock_, "--json", "status"}, kToolTimeout,
                        dir_.string());
    if (!r.ok()) return r.status();
    if (r->timed_out || r->exit_code != 0) return Internal("ibsmctl status: " + Describe(*r));
    json j = json::parse(r->out, nullptr, false);
    if (j.is_discarded()) return Internal("ibsmctl status printed no JSON: " + r->out);
    return j;
  }

  void Run(int k) {
    auto f = FatTree3(k);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const std::string net = (dir_ / "fabric.net").string();
    ASSERT_TRUE(WriteTextFile(net, WriteTopology(*f)));
    auto sim = IbsimInstance::Start(net);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    sim_ = std::move(*sim);
    sock_ = (dir_ / "ibsmd.sock").string();
    log_ = dir_ / "ibsmd.log";
    const fs::path conf = dir_ / "opensm.conf";
    // The PerfMgr at its defaults (perfmgr_max_outstanding_queries 500): the case that froze.
    ASSERT_TRUE(WriteTextFile(conf.string(),
                              "log_file " + log_.string() + "\n" + "dump_files_dir " +
                                  dir_.string() + "\n" + "state_db_file " +
                                  (dir_ / "state.db").string() + "\n" + "guid2lid_file " +
                                  (dir_ / "guid2lid").string() + "\n" + "control_socket " +
                                  sock_ + "\n" + "sweep_interval 0\n" + "perfmgr TRUE\n"));
    auto d = sim_->StartChild({Bin("ibsmd"), "-F", conf.string()});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_.emplace(std::move(*d));

    const auto sweep_deadline = std::chrono::seconds(k >= 16 ? 600 : 180);
    ASSERT_TRUE(WaitFor([](const std::string& l) { return l.find("SUBNET UP") != l.npos; },
                        sweep_deadline))
        << ReadFile(log_.string());
    // Right after SUBNET UP the PerfMgr starts its burst: the daemon must keep answering.
    auto during = Status();
    ASSERT_TRUE(during.ok()) << during.status().ToString() << ReadFile(log_.string());
    EXPECT_EQ((*during)["state"], "MASTER");
    auto sminfo = sim_->Run({"sminfo"}, kToolTimeout);
    ASSERT_TRUE(sminfo.ok()) << sminfo.status().ToString();
    EXPECT_EQ(sminfo->exit_code, 0) << Describe(*sminfo);
    EXPECT_NE(sminfo->out.find("SMINFO_MASTER"), std::string::npos) << sminfo->out;

    ASSERT_TRUE(WaitFor([](const std::string& l) { return BackpressurePerfSweeps(l) >= 1; },
                        sweep_deadline))
        << ReadFile(log_.string());
    auto after = Status();
    ASSERT_TRUE(after.ok()) << after.status().ToString();
    const json& t = (*after)["transport"];
    ASSERT_TRUE(t.is_object()) << after->dump();
    // The budget held every sender under it; nothing was lost to a full backlog.
    EXPECT_LE(t["in_flight_high_water"].get<uint64_t>(), 256u) << t.dump();
    EXPECT_EQ(t["backlog_dropped"].get<uint64_t>(), 0u) << t.dump();
    EXPECT_GT(t["received"].get<uint64_t>(), 0u) << t.dump();
    EXPECT_NE(ReadFile(log_.string()).find("MAD-UMAD-022"), std::string::npos);
    std::printf("k=%d transport: %s\n", k, t.dump().c_str());

    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(kill(daemon_->pid(), SIGTERM), 0);
    auto done = daemon_->Wait(30s);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    daemon_.reset();
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_FALSE(done->timed_out) << Describe(*done);
    EXPECT_EQ(done->exit_code, 0) << Describe(*done) << ReadFile(log_.string());
    std::printf("k=%d: ibsmd exited %.3f s after SIGTERM\n", k, took);
  }

  fs::path dir_, log_;
  std::string sock_;
  std::unique_ptr<IbsimInstance> sim_;
  bool sim_stopped_ = false;
  std::optional<ChildProcess> daemon_;
};

// Three hosts each open 100 inbound RMPP transfers at the SA and never finish them: each
// keeps 16 (the per-source cap), the rest are refused with an ABORT and counted, the log says
// so ten times (rate-limited), and the SA still answers.
TEST_F(BackpressureIbsimTest, ForgedRmppSessionsFromThreeHostsAreCappedPerSource) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<std::string> hosts;
  for (NodeId n = 0; n < f->node_count(); ++n)
    if (!f->node(n).is_switch()) hosts.push_back(f->node(n).name);
  ASSERT_GE(hosts.size(), 5u);
  const std::string net = (dir_ / "fabric.net").string();
  ASSERT_TRUE(WriteTextFile(net, WriteTopology(*f)));
  auto sim = IbsimInstance::Start(net);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  sim_ = std::move(*sim);
  sock_ = (dir_ / "ibsmd.sock").string();
  log_ = dir_ / "ibsmd.log";
  const fs::path conf = dir_ / "opensm.conf";
  ASSERT_TRUE(WriteTextFile(conf.string(), "log_file " + log_.string() + "\n" +
                                               "dump_files_dir " + dir_.string() + "\n" +
                                               "guid2lid_file " + (dir_ / "guid2lid").string() +
                                               "\n" + "control_socket " + sock_ + "\n" +
                                               "sweep_interval 0\n"));
  auto d = sim_->StartChild({Bin("ibsmd"), "-F", conf.string()}, hosts[0]);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  daemon_.emplace(std::move(*d));
  ASSERT_TRUE(WaitFor([](const std::string& l) { return l.find("SUBNET UP") != l.npos; }, 120s))
      << ReadFile(log_.string());

  constexpr int kPerHost = 100;
  for (size_t h = 1; h <= 3; ++h) {
    auto r = sim_->Run({Bin("umad_probe"), "--linger-ms", "300", "rmpp-forge", "1",
                        std::to_string(kPerHost)},
                       kToolTimeout, hosts[h]);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->exit_code, 0) << Describe(*r);
    EXPECT_NE(r->out.find("forged " + std::to_string(kPerHost)), std::string::npos) << r->out;
  }
  auto st = Status();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  const json& t = (*st)["transport"];
  EXPECT_EQ(t["rmpp_refused"].get<uint64_t>(), 3u * (kPerHost - 16)) << t.dump();
  EXPECT_EQ(CountOf(ReadFile(log_.string()), "MAD-RMPP-004"), 10u);
  // The SA still answers (saquery on ibsim reads one segment: a one-record query).
  auto nodes = sim_->Run({"saquery", "NR", "1"}, kToolTimeout, hosts[4]);
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(nodes->exit_code, 0) << Describe(*nodes);
  EXPECT_EQ(CountOf(nodes->out, "NodeRecord dump"), 1u) << nodes->out;

  ASSERT_EQ(kill(daemon_->pid(), SIGTERM), 0);
  auto done = daemon_->Wait(30s);
  daemon_.reset();
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code, 0) << Describe(*done);
}

// ibsim stopped outright (SIGSTOP) while the PerfMgr keeps sweeping: MADs pile up in the
// write backlog, the control socket still answers, and SIGTERM still ends ibsmd with exit 0.
TEST_F(BackpressureIbsimTest, AStoppedIbsimNeitherSilencesControlNorKeepsSigtermWaiting) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string net = (dir_ / "fabric.net").string();
  ASSERT_TRUE(WriteTextFile(net, WriteTopology(*f)));
  auto sim = IbsimInstance::Start(net);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  sim_ = std::move(*sim);
  sock_ = (dir_ / "ibsmd.sock").string();
  log_ = dir_ / "ibsmd.log";
  const fs::path conf = dir_ / "opensm.conf";
  ASSERT_TRUE(WriteTextFile(conf.string(), "log_file " + log_.string() + "\n" +
                                               "dump_files_dir " + dir_.string() + "\n" +
                                               "guid2lid_file " + (dir_ / "guid2lid").string() +
                                               "\n" + "control_socket " + sock_ + "\n" +
                                               "sweep_interval 0\nperfmgr TRUE\n" +
                                               "perfmgr_sweep_time_s 1\n"));
  auto d = sim_->StartChild({Bin("ibsmd"), "-F", conf.string()});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  daemon_.emplace(std::move(*d));
  ASSERT_TRUE(WaitFor([](const std::string& l) { return BackpressurePerfSweeps(l) >= 1; }, 120s))
      << ReadFile(log_.string());

  ASSERT_EQ(kill(sim_->pid(), SIGSTOP), 0);
  sim_stopped_ = true;
  // The next PerfMgr sweep's queries find the socket full and wait in the backlog.
  std::optional<json> t;
  for (auto end = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(100ms)) {
    auto st = Status();
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    t = (*st)["transport"];
    if ((*t)["backlog"].get<uint64_t>() > 0) break;
  }
  ASSERT_TRUE(t.has_value());
  EXPECT_GT((*t)["backlog"].get<uint64_t>(), 0u) << t->dump();
  EXPECT_GT((*t)["write_eagain"].get<uint64_t>(), 0u) << t->dump();
  std::printf("stopped ibsim, transport: %s\n", t->dump().c_str());

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(daemon_->pid(), SIGTERM), 0);
  auto done = daemon_->Wait(30s);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  daemon_.reset();
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_FALSE(done->timed_out) << Describe(*done);
  EXPECT_EQ(done->exit_code, 0) << Describe(*done) << ReadFile(log_.string());
  std::printf("stopped ibsim: ibsmd exited %.3f s after SIGTERM\n", took);
}

TEST_F(BackpressureIbsimTest, PerfMgrDefaultsOnThreeTierK8KeepAnsweringAndStopOnSigterm) {
  const char* k = std::getenv("IBSM_BACKPRESSURE_K");
  Run(k ? std::atoi(k) : 8);
}

}  // namespace
}  // namespace ibsm::test
