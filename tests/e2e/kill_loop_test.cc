// ibsmd killed with SIGKILL at random points of its first sweep, 50 times, and started again
// each time: the state file always opens, the LIDs it holds never change, and a
// final run still brings the fabric up with the same LIDs. On the in-process simulator, whose
// fabric starts cold (LIDs 0) at every start, so every run really re-assigns from the file.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "ha/state_store.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// LIDs by port GUID (the time each row was written does not matter here).
std::map<uint64_t, std::pair<uint16_t, uint16_t>> Lids(const std::string& db) {
  auto store = ha::StateStore::OpenReadOnly(db);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  std::map<uint64_t, std::pair<uint16_t, uint16_t>> out;
  if (!store.ok()) return out;
  EXPECT_TRUE((*store)->CheckIntegrity().ok());
  auto rows = (*store)->LoadGuid2Lid();
  EXPECT_TRUE(rows.ok());
  if (rows.ok())
    for (const auto& r: *rows) out[r.port_guid.value()] = {r.min_lid.value(), r.max_lid.value()};
  return out;
}

TEST(KillLoopTest, SigkillAtRandomPointsNeverLosesOrChangesALid) {
  fs::path dir = fs::temp_directory_path() / ("ibsm-kill-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "state.db").string();
  fs::path conf = dir / "ibsmd.conf";
  std::ofstream(conf) << "log_file " << (dir / "ibsmd.log").string() << "\n"
                      << "dump_files_dir " << dir.string() << "\n"
                      << "state_db_file " << db << "\n"
                      << "guid2lid_file " << (dir / "none").string() << "\n"
                      << "control_socket none\n"
                      << "routing_engine ftree\n"
                      << "sweep_interval 0\n";
  const std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";

  auto first = RunCommand({Bin("ibsmd"), "-F", conf.string(), "--sim", topo, "-o"}, 60s,
                          dir.string());
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->exit_code, 0) << first->err;
  const auto want = Lids(db);
  ASSERT_EQ(want.size(), 80u + 128u) << "every switch and host has its LID in the file";

  std::mt19937 rng(20261130);
  int killed_mid_run = 0;
  for (int i = 0; i < 50; ++i) {
    auto child = ChildProcess::Start({Bin("ibsmd"), "-F", conf.string(), "--sim", topo},
                                     dir.string(), {});
    ASSERT_TRUE(child.ok());
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 150000));
    ASSERT_EQ(kill(child->pid(), SIGKILL), 0);
    auto done = child->Wait(30s);
    ASSERT_TRUE(done.ok());
    if (done->exit_code == 128 + SIGKILL) ++killed_mid_run;
    EXPECT_EQ(Lids(db), want) << "after kill " << i + 1;
  }
  EXPECT_GT(killed_mid_run, 40) << "the daemon was running when killed";

  auto last = RunCommand({Bin("ibsmd"), "-F", conf.string(), "--sim", topo, "-o"}, 60s,
                         dir.string());
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->exit_code, 0) << last->err;
  EXPECT_EQ(Lids(db), want);
  std::printf("50 SIGKILLs at random points (0-150 ms after start): state file opened and "
              "intact every time, %zu LIDs unchanged\n",
              want.size());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ibsm::test
