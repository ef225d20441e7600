// ibsmd's state directory stops taking writes: it fills up while the daemon runs,
// or it is read-only when the daemon starts. Either way the fabric keeps being swept and
// served, the outage is reported once and counted, and when the directory takes writes again
// the daemon says so and writes what it holds.
//
// The directory is real and the errors come from the kernel: a 4 MiB tmpfs that really fills
// (ENOSPC), or the directory bound read-only onto itself (EROFS), in a private user and mount
// namespace (`unshare -rm`), so the test needs no privileges and touches no host mount. Where
// the kernel or the container refuses such namespaces, the tests are skipped and say why.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "ha/state_store.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

// Runs inside the namespace. MODE tmpfs: STATE becomes a 4 MiB tmpfs; ro: STATE is bound
// read-only onto itself. Then it starts the daemon, performs each step the test asks for by
// creating CTL/<step>, and acknowledges it with CTL/<step>.done. At the end a tmpfs's state
// file is copied out (the tmpfs dies with the namespace).
constexpr char kNamespaceScript[] = R"(set -u
mode=$1; state=$2; ctl=$3; shift 3
if [ "$mode" = tmpfs ]; then
  mount -t tmpfs -o size=4m ibsm-state "$state" || exit 90
else
  { mount --bind "$state" "$state" && mount -o remount,bind,ro "$state"; } || exit 90
fi
"$@" &
pid=$!
echo $pid > "$ctl/pid"
step() {
  while [ ! -e "$ctl/$1" ]; do
    kill -0 $pid 2>/dev/null || return 1
    sleep 0.05
  done
}
if [ "$mode" = tmpfs ]; then
  step fill && { dd if=/dev/zero of="$state/filler" bs=64k 2>/dev/null; touch "$ctl/fill.done"; }
  step free && { rm -f "$state/filler"; touch "$ctl/free.done"; }
else
  step rw && { mount -o remount,bind,rw "$state"; touch "$ctl/rw.done"; }
fi
wait $pid
rc=$?
[ "$mode" = tmpfs ] && cp "$state"/state.db* "$ctl/" 2>/dev/null
exit $rc
)";

bool NamespacesWork() {
  auto r = RunCommand({"unshare", "-rm", "sh", "-c",
                       "mount -t tmpfs -o size=64k t /mnt && touch /mnt/x"},
                      10s, fs::temp_directory_path().string());
  return r.ok() && r->exit_code == 0;
}

class StateDirFaultsTest: public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NamespacesWork())
      GTEST_SKIP() << "needs a user and mount namespace (unshare -rm with a tmpfs mount), "
                      "which this kernel or container refuses";
    dir_ = fs::temp_directory_path() / ("ibsm-statedir-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "state");
    fs::create_directories(dir_ / "ctl");
    log_ = (dir_ / "ibsmd.log").string();
    sock_ = (dir_ / "ibsmd.sock").string();
    const fs::path state = dir_ / "state";
    std::ofstream(dir_ / "ibsmd.conf") << "log_file " << log_ << "\n"
                                       << "dump_files_dir " << state.string() << "\n"
                                       << "state_db_file " << (state / "state.db").string() << "\n"
                                       << "guid2lid_file " << (dir_ / "none").string() << "\n"
                                       << "control_socket " << sock_ << "\n"
                                       << "routing_engine ftree\n"
                                       << "force_heavy_sweep TRUE\n"
                                       << "sweep_interval 1\n";
    std::ofstream(dir_ / "ns.sh") << kNamespaceScript;
  }

  // Starts ibsmd in the namespace with its state directory set up as `mode` says.
  void Start(const std::string& mode) {
    const std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
    auto child = ChildProcess::Start(
        {"unshare", "-rm", "sh", (dir_ / "ns.sh").string(), mode, (dir_ / "state").string(),
         (dir_ / "ctl").string(), Bin("ibsmd"), "-F", (dir_ / "ibsmd.conf").string(), "--sim",
         topo},
        dir_.string(), {});
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    wrapper_.emplace(std::move(*child));
    ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 1)) << ReadFile(log_) << wrapper_->PeekStdout();
  }
  void TearDown() override {
    if (wrapper_) (void)Stop();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Asks the namespace script for a step and waits for it to be done.
  bool Step(const std::string& name) {
    std::ofstream(dir_ / "ctl" / name) << "\n";
    for (auto end = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(50ms))
      if (fs::exists(dir_ / "ctl" / (name + ".done"))) return true;
    return false;
  }

  json Status() {
    auto r = RunCommand({Bin("ibsmctl"), "--socket", sock_, "--json", "status"}, 30s,
                        dir_.string());
    if (!r.ok() || r->exit_code != 0) return json::object();
    return json::parse(r->out, nullptr, false);
  }
  uint64_t Counter(const json& status, const std::string& name) {
    return status.contains("counters") ? status["counters"].value(name, uint64_t{0}): 0;
  }
  uint64_t SweepNumber(const json& status) {
    return status.contains("last_sweep") ? status["last_sweep"].value("number", uint64_t{0}): 0;
  }

  // Polls status until `done(status)`; the last status read.
  template <typename Pred>
  json WaitForStatus(Pred done) {
    json s;
    for (auto end = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(200ms)) {
      s = Status();
      if (done(s)) break;
    }
    return s;
  }

  std::optional<CommandResult> Stop() {
    std::string pid = ReadFile((dir_ / "ctl" / "pid").string());
    if (!pid.empty()) kill(std::stoi(pid), SIGTERM);
    auto done = wrapper_->Wait(60s);
    wrapper_.reset();
    if (!done.ok()) return std::nullopt;
    return *done;
  }

  fs::path dir_;
  std::string log_, sock_;
  std::optional<ChildProcess> wrapper_;
};

TEST_F(StateDirFaultsTest, AFullDiskStopsNoSweepIsReportedOnceAndTheRowsCatchUpWhenSpaceReturns) {
  ASSERT_NO_FATAL_FAILURE(Start("tmpfs"));
  json before = WaitForStatus([&](const json& s) { return SweepNumber(s) >= 2; });
  ASSERT_GE(SweepNumber(before), 2u) << before.dump() << ReadFile(log_);
  EXPECT_EQ(Counter(before, "state_write_failures"), 0u) << before.dump();
  EXPECT_EQ(Counter(before, "light_sweeps"), 0u) << "force_heavy_sweep: every sweep is heavy";
  EXPECT_GE(Counter(before, "heavy_sweeps"), 2u) << before.dump();

  ASSERT_TRUE(Step("fill"));
  // The sweeps go on (sweep numbers are counted in memory too) and their rows fail.
  json full = WaitForStatus([&](const json& s) { return Counter(s, "state_write_failures") >= 3; });
  ASSERT_GE(Counter(full, "state_write_failures"), 3u) << full.dump() << ReadFile(log_);
  EXPECT_EQ(full.value("state", ""), "MASTER") << full.dump();
  const std::string log_full = ReadFile(log_);
  EXPECT_EQ(CountOf(log_full, "not saved:"), 1u)
      << "one error line per outage, not one per failed write:\n" << log_full;
  EXPECT_NE(log_full.find("the fabric is still served from memory"), std::string::npos) << log_full;
  // The dump files share the directory: they fail too, counted, and warned about once.
  EXPECT_GE(Counter(full, "dump_write_failures"), 1u) << full.dump();
  EXPECT_EQ(CountOf(log_full, "SM-DUMP-001"), 1u) << log_full;
  const uint64_t sweeps_at_full = SweepNumber(full);
  json later = WaitForStatus([&](const json& s) { return SweepNumber(s) >= sweeps_at_full + 2; });
  EXPECT_GE(SweepNumber(later), sweeps_at_full + 2) << "sweeps go on while the disk is full";

  const auto freed_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  ASSERT_TRUE(Step("free"));
  ASSERT_TRUE(WaitForCount(log_, "SM-STATE-012", 1)) << ReadFile(log_);
  ASSERT_TRUE(WaitForCount(log_, "SM-DUMP-002", 1)) << ReadFile(log_);
  json after = WaitForStatus([&](const json& s) { return SweepNumber(s) >= SweepNumber(later) + 2; });
  const uint64_t failures = Counter(after, "state_write_failures");
  json settled = WaitForStatus([&](const json& s) { return SweepNumber(s) >= SweepNumber(after) + 2; });
  EXPECT_EQ(Counter(settled, "state_write_failures"), failures)
      << "no write fails once space has returned";

  auto stopped = Stop();
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->exit_code, 0) << Describe(*stopped) << ReadFile(log_);
  auto store = ha::StateStore::OpenReadOnly((dir_ / "ctl" / "state.db").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->CheckIntegrity().ok());
  auto lids = (*store)->LoadGuid2Lid();
  ASSERT_TRUE(lids.ok());
  EXPECT_EQ(lids->size(), 80u + 128u) << "every switch and host keeps its LID in the file";
  auto sweeps = (*store)->RecentSweeps(1);
  ASSERT_TRUE(sweeps.ok());
  ASSERT_FALSE(sweeps->empty());
  EXPECT_GT(sweeps->front().ended_us, freed_us) << "sweeps after the outage are in the file";
  const std::string log_end = ReadFile(log_);
  EXPECT_EQ(CountOf(log_end, "not saved:"), 1u) << log_end;
}

// The state directory is read-only when ibsmd starts (a mount gone wrong, a sandbox that
// forgot it): the daemon reads the LIDs the file holds, brings the fabric up with them, and
// writes the file once the directory is writable again.
TEST_F(StateDirFaultsTest, AReadOnlyStateDirectoryAtStartStillBringsTheFabricUpWithTheFilesLids) {
  const std::string db = (dir_ / "state" / "state.db").string();
  auto first = RunCommand({Bin("ibsmd"), "-F", (dir_ / "ibsmd.conf").string(), "--sim",
                           std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net", "-o"},
                          60s, dir_.string());
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->exit_code, 0) << Describe(*first);
  // Move every LID up by 1000, so a fabric that comes up with them took them from the file
  // (the simulated fabric starts cold, and a fresh assignment would start at 1).
  std::map<uint64_t, uint16_t> want;
  {
    SystemClock clock;
    auto store = ha::StateStore::Open(db, clock);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto rows = (*store)->LoadGuid2Lid();
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 80u + 128u);
    for (auto& r: *rows) {
      r.min_lid = Lid{static_cast<uint16_t>(r.min_lid.value() + 1000)};
      r.max_lid = r.min_lid;
      want[r.port_guid.value()] = r.min_lid.value();
    }
    ASSERT_TRUE((*store)->ReplaceGuid2Lid(*rows).ok());
  }

  fs::remove(log_);  // the daemon's run below writes its own
  ASSERT_NO_FATAL_FAILURE(Start("ro"));
  const std::string log_up = ReadFile(log_);
  EXPECT_NE(log_up.find("SM-STATE-015 state file " + db + " cannot be opened for writing"),
            std::string::npos) << log_up;
  EXPECT_NE(log_up.find("with the 208 guid2lid row(s) it holds"), std::string::npos) << log_up;
  auto nodes = RunCommand({Bin("ibsmctl"), "--socket", sock_, "--json", "nodes"}, 30s,
                          dir_.string());
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->exit_code, 0) << Describe(*nodes);
  json answer = json::parse(nodes->out, nullptr, false);
  ASSERT_TRUE(answer.contains("nodes")) << nodes->out;
  size_t lids = 0;
  for (const auto& n: answer["nodes"])
    for (const auto& l: n["lids"]) {
      ++lids;
      EXPECT_GT(l.get<int>(), 1000) << n.dump() << ": every LID is the one the file holds";
    }
  EXPECT_EQ(lids, 208u);
  json ro = WaitForStatus([&](const json& s) { return Counter(s, "state_write_failures") >= 2; });
  EXPECT_GE(Counter(ro, "state_write_failures"), 2u) << ro.dump();
  EXPECT_TRUE(ro.value("subnet_up", false)) << ro.dump();

  const auto writable_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
  ASSERT_TRUE(Step("rw"));
  ASSERT_TRUE(WaitForCount(log_, "SM-STATE-016", 1)) << ReadFile(log_);
  ASSERT_TRUE(WaitForCount(log_, "SM-STATE-012", 1)) << ReadFile(log_);
  json after = WaitForStatus([&](const json& s) { return SweepNumber(s) >= SweepNumber(ro) + 3; });
  const uint64_t failures = Counter(after, "state_write_failures");
  json settled =
      WaitForStatus([&](const json& s) { return SweepNumber(s) >= SweepNumber(after) + 2; });
  EXPECT_EQ(Counter(settled, "state_write_failures"), failures)
      << "no write fails once the directory is writable";

  auto stopped = Stop();
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->exit_code, 0) << Describe(*stopped) << ReadFile(log_);
  auto store = ha::StateStore::OpenReadOnly(db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rows = (*store)->LoadGuid2Lid();
  ASSERT_TRUE(rows.ok());
  std::map<uint64_t, uint16_t> got;
  for (const auto& r: *rows) got[r.port_guid.value()] = r.min_lid.value();
  EXPECT_EQ(got, want) << "no LID changed";
  auto sweeps = (*store)->RecentSweeps(1);
  ASSERT_TRUE(sweeps.ok());
  ASSERT_FALSE(sweeps->empty());
  EXPECT_GT(sweeps->front().ended_us, writable_us) << "sweeps after the outage are in the file";
  auto sm_state = (*store)->GetValue("sm_state");
  ASSERT_TRUE(sm_state.ok());
  EXPECT_EQ(*sm_state, std::optional<std::string>("MASTER"));
}

}  // namespace
}  // namespace ibsm::test
