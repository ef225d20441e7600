// ibsmd as an operator runs it: a daemon that answers SIGHUP (re-read config, re-sweep),
// SIGUSR1 (reopen log) and SIGTERM (clean exit), and that writes only its log, state file,
// guid2lid file and dumps. On the in-process simulator, so no ibsim is needed.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST(DaemonSignalsTest, HupRereadsTheConfigUsr1ReopensTheLogAndTermExitsCleanly) {
  const std::string ibsmd = Bin("ibsmd");
  fs::path dir = fs::temp_directory_path() / ("ibsm-signals-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "run");
  fs::path conf = dir / "ibsmd.conf";
  fs::path log = dir / "ibsmd.log";
  {
    std::ofstream c(conf);
    c << "log_file " << log.string() << "\n"
      << "dump_files_dir " << dir.string() << "\n"
      << "state_db_file " << (dir / "state.db").string() << "\n"
      << "guid2lid_file " << (dir / "guid2lid").string() << "\n"
      << "control_socket " << (dir / "ibsmd.sock").string() << "\n"
      << "perfmgr TRUE\n"
      << "perfmgr_sweep_time_s 180\n"
      << "sweep_interval 0\n";
  }
  std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
  // OpenSM's -J, as init scripts pass it: the running process's PID, gone after exit.
  const fs::path pid_file = dir / "ibsmd.pid";
  auto child = ChildProcess::Start(
      {ibsmd, "-F", conf.string(), "--sim", topo, "-J", pid_file.string()},
      (dir / "run").string(), {});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  ASSERT_TRUE(WaitForCount(log, "SUBNET UP", 1)) << ReadFile(log);
  EXPECT_EQ(ReadFile(pid_file), std::to_string(child->pid()) + "\n");

  // An engine the operator misspelt: warned about, routed without, and a new sweep. The
  // PerfMgr takes its new period too (a later line overrides an earlier one, as in OpenSM).
  std::ofstream(conf, std::ios::app) << "routing_engine bogus,minhop\n"
                                     << "perfmgr_sweep_time_s 7\n";
  ASSERT_EQ(kill(child->pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForCount(log, "SUBNET UP", 2)) << ReadFile(log);
  std::string text = ReadFile(log);
  EXPECT_NE(text.find("SM-ROUTE-004 routing engine 'bogus' is not known"), std::string::npos);
  EXPECT_NE(text.find("Entering heavy sweep 2 (SIGHUP)"), std::string::npos);
  EXPECT_NE(text.find("PerfMgr settings re-read: every 7 s"), std::string::npos) << text;

  // logrotate moved the file away; SIGUSR1 makes ibsmd write a new one.
  fs::rename(log, dir / "ibsmd.log.1");
  ASSERT_EQ(kill(child->pid(), SIGUSR1), 0);
  ASSERT_TRUE(WaitForCount(log, "log reopened", 1));

  ASSERT_EQ(kill(child->pid(), SIGTERM), 0);
  auto done = child->Wait(30s);
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->timed_out);
  EXPECT_EQ(done->exit_code, 0) << done->err;
  EXPECT_FALSE(fs::exists(dir / "ibsmd.sock")) << "the control socket is removed on exit";
  EXPECT_FALSE(fs::exists(pid_file)) << "the PID file is removed on exit";

  // Nothing but the configured files (and SQLite's WAL companions) was written.
  std::set<std::string> written;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) written.insert(e.path().filename().string());
  std::set<std::string> allowed = {"ibsmd.conf", "ibsmd.log",       "ibsmd.log.1",
                                   "state.db",   "state.db-wal",    "state.db-shm",
                                   "guid2lid",   "opensm-subnet.lst"};
  for (const auto& f : written) EXPECT_TRUE(allowed.count(f)) << "unexpected file " << f;
  EXPECT_TRUE(written.count("opensm-subnet.lst"));
  EXPECT_TRUE(written.count("guid2lid"));
  fs::remove_all(dir);
}

// `check --permutations 100000` and `traffic --count 100000` on a 3-tier k=16 fat tree (1,024
// hosts) take about 6 s and 30 s of worker time in a release build, minutes under the
// sanitizers. SIGTERM while both run must not wait for them: systemd kills a daemon that has
// not stopped 15 s after it (TimeoutStopSec in conf/systemd/ibsmd.service).
// Mistakes said loudly: at start, warnings that change what ibsmd does reach stderr as well
// as the log, and an unknown engine with no_fallback routes nothing (not minhop).
TEST(DaemonSignalsTest, MistakesInTheConfigAreOnStderrAndNoFallbackWithoutAnEngineRoutesNothing) {
  fs::path dir = fs::temp_directory_path() / ("ibsm-loud-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path conf = dir / "ibsmd.conf";
  fs::path log = dir / "ibsmd.log";
  std::ofstream(conf) << "log_file " << log.string() << "\n"
                      << "dump_files_dir " << dir.string() << "\n"
                      << "state_db_file " << (dir / "state.db").string() << "\n"
                      << "guid2lid_file " << (dir / "guid2lid").string() << "\n"
                      << "partition_config_file " << (dir / "no-such-partitions.conf").string()
                      << "\n"
                      << "routing_engin ftree\n"
                      << "routing_engine bogus,no_fallback\n";
  std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
  auto r = RunCommand({Bin("ibsmd"), "-F", conf.string(), "--sim", topo, "-o"}, 120s,
                      dir.string());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1) << "no SUBNET UP: nothing was routed\n" << r->err;
  EXPECT_NE(r->err.find("ibsmd: warning: " + conf.string() + ":6: CONF-001 unknown option "
                        "'routing_engin'"),
            std::string::npos)
      << r->err;
  EXPECT_NE(r->err.find("ibsmd: warning: PART-021 partition_config_file " +
                        (dir / "no-such-partitions.conf").string() +
                        " does not exist: every port is a full member of the default "
                        "partition, no partition isolation"),
            std::string::npos)
      << r->err;
  EXPECT_NE(r->err.find("ibsmd: warning: SM-ROUTE-004 routing engine 'bogus' is not known"),
            std::string::npos)
      << r->err;
  EXPECT_NE(r->err.find("ibsmd: error: routing_engine 'bogus,no_fallback' names no engine "
                        "ibsmd knows and no_fallback forbids minhop: nothing will be routed"),
            std::string::npos)
      << r->err;
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("PART-021"), std::string::npos) << "in the log as well";
  EXPECT_NE(text.find("SM-ROUTE-001"), std::string::npos) << text;
  EXPECT_EQ(text.find("minhop tables configured"), std::string::npos) << text;
  EXPECT_EQ(text.find("SUBNET UP"), std::string::npos) << text;
  fs::remove_all(dir);
}

// A SIGHUP reload that is refused keeps the running configuration, and says so where the
// operator looks: `ibsmctl status` and `ibsmctl events`.
TEST(DaemonSignalsTest, ARefusedReloadShowsInStatusAndEvents) {
  fs::path dir = fs::temp_directory_path() / ("ibsm-reload-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path conf = dir / "ibsmd.conf";
  fs::path log = dir / "ibsmd.log";
  const std::string sock = (dir / "ibsmd.sock").string();
  std::ofstream(conf) << "log_file " << log.string() << "\n"
                      << "dump_files_dir " << dir.string() << "\n"
                      << "state_db_file " << (dir / "state.db").string() << "\n"
                      << "guid2lid_file " << (dir / "guid2lid").string() << "\n"
                      << "control_socket " << sock << "\n"
                      << "sweep_interval 0\n";
  std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
  auto child = ChildProcess::Start({Bin("ibsmd"), "-F", conf.string(), "--sim", topo},
                                   dir.string(), {});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  ASSERT_TRUE(WaitForCount(log, "SUBNET UP", 1)) << ReadFile(log);
  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {Bin("ibsmctl"), "--socket", sock});
    auto r = RunCommand(args, 30s, dir.string());
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : CommandResult{};
  };
  EXPECT_EQ(ctl({"status"}).out.find("last reload"), std::string::npos) << "none yet";
  std::ofstream(conf, std::ios::app) << "part_enforce sometimes\n";
  ASSERT_EQ(kill(child->pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForCount(log, "CONF-100", 1)) << ReadFile(log);
  CommandResult status = ctl({"status"});
  EXPECT_NE(status.out.find("last reload:       refused at 20"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("sometimes"), std::string::npos) << "and why\n" << status.out;
  CommandResult events = ctl({"events"});
  EXPECT_NE(events.out.find("SIGHUP reload refused, the running configuration stays: "),
            std::string::npos)
      << events.out;
  kill(child->pid(), SIGTERM);
  auto done = child->Wait(30s);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code, 0);
  fs::remove_all(dir);
}

TEST(DaemonSignalsTest, TermWhileCheckAndTrafficRunExitsWithinSeconds) {
  fs::path dir = fs::temp_directory_path() / ("ibsm-term-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path topo = dir / "k16.net";
  auto gen = RunCommand({Bin("ibsm-topogen"), "ftree3", "-k", "16", "-o", topo.string()}, 60s,
                        dir.string());
  ASSERT_TRUE(gen.ok() && gen->exit_code == 0) << (gen.ok() ? Describe(*gen) : "");
  const fs::path conf = dir / "ibsmd.conf", log = dir / "ibsmd.log";
  const std::string sock = (dir / "ibsmd.sock").string();
  std::ofstream(conf) << "log_file " << log.string() << "\n"
                      << "dump_files_dir " << dir.string() << "\n"
                      << "guid2lid_file " << (dir / "guid2lid").string() << "\n"
                      << "control_socket " << sock << "\n"
                      << "routing_engine ftree\n"
                      << "sweep_interval 0\n";
  auto daemon = ChildProcess::Start({Bin("ibsmd"), "-F", conf.string(), "--sim", topo.string()},
                                    dir.string(), {});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  ASSERT_TRUE(WaitForCount(log, "SUBNET UP", 1)) << ReadFile(log);

  const std::string ctl = Bin("ibsmctl");
  auto check = ChildProcess::Start({ctl, "--socket", sock, "--timeout", "600000", "check",
                                    "--permutations", "100000"},
                                   dir.string(), {});
  auto traffic = ChildProcess::Start({ctl, "--socket", sock, "--timeout", "600000", "traffic",
                                      "--pattern", "random", "--count", "100000"},
                                     dir.string(), {});
  ASSERT_TRUE(check.ok() && traffic.ok());
  // Both workers run once a second request of each kind is told so. A probe is itself a long
  // request that ibsmctl gives up on after 2 s: if it reaches the daemon before the request
  // above (which is then refused), the long run it starts is the one the next probe meets, so
  // a long check and a long traffic run are going either way.
  std::string last_answer;
  auto running = [&](std::vector<std::string> args, const std::string& says) {
    args.insert(args.begin(), {ctl, "--socket", sock, "--timeout", "2000"});
    for (int i = 0; i < 200; ++i) {
      auto r = RunCommand(args, 30s, dir.string());
      if (r.ok() && r->err.find(says) != std::string::npos) return true;
      last_answer = r.ok() ? Describe(*r) : r.status().ToString();
      std::this_thread::sleep_for(50ms);
    }
    return false;
  };
  ASSERT_TRUE(running({"check", "--permutations", "100000"}, "a check is already running"))
      << last_answer;
  ASSERT_TRUE(running({"traffic", "--pattern", "random", "--count", "100000"},
                      "a traffic run is already going"))
      << last_answer;

  const auto term = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(daemon->pid(), SIGTERM), 0);
  auto done = daemon->Wait(10s);
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->timed_out) << "ibsmd was still running 10 s after SIGTERM";
  EXPECT_EQ(done->exit_code, 0) << done->err;
  std::printf("ibsmd exited %.2f s after SIGTERM\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - term).count());
  // The two requests were cut off with the daemon, or refused because a probe's run came
  // first; ibsmctl reports either as exit status 2.
  auto c = check->Wait(30s), t = traffic->Wait(30s);
  ASSERT_TRUE(c.ok() && t.ok());
  EXPECT_EQ(c->exit_code, 2) << Describe(*c);
  EXPECT_EQ(t->exit_code, 2) << Describe(*t);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ibsm::test
