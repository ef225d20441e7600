// partitions.conf as an operator edits it under a running ibsmd (on the in-process
// simulator): SIGHUP applies a good file by sending only the P_Key blocks that change; a file
// with a bad line is reported with file and line and the partition set in force stays; a bad
// file at start stops ibsmd with the reason.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// "N P_Key blocks sent" of heavy sweep `sweep` in the log; -1 if absent.
int PKeyBlocksSent(const std::string& log, int sweep) {
  std::smatch m;
  std::regex re("heavy sweep " + std::to_string(sweep) + " done[^\n]* (\\d+) P_Key blocks sent");
  if (!std::regex_search(log, m, re)) return -1;
  return std::stoi(m[1]);
}

class PartitionsReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* b = std::getenv("IBSM_BIN_DIR");
    ibsmd_ = std::string(b ? b : IBSM_BIN_DIR) + "/ibsmd";
    dir_ = fs::temp_directory_path() / ("ibsm-pkey-reload-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "run");
    conf_ = dir_ / "ibsmd.conf";
    log_ = dir_ / "ibsmd.log";
    parts_ = dir_ / "partitions.conf";
    std::ofstream(conf_) << "log_file " << log_.string() << "\n"
                         << "dump_files_dir " << dir_.string() << "\n"
                         << "state_db_file " << (dir_ / "state.db").string() << "\n"
                         << "guid2lid_file " << (dir_ / "guid2lid").string() << "\n"
                         << "partition_config_file " << parts_.string() << "\n"
                         << "sweep_interval 0\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<ChildProcess> Start() {
    std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
    return ChildProcess::Start({ibsmd_, "-F", conf_.string(), "--sim", topo},
                               (dir_ / "run").string(), {});
  }

  std::string ibsmd_;
  fs::path dir_, conf_, log_, parts_;
};

TEST_F(PartitionsReloadTest, HupAppliesAGoodFileAndKeepsTheSetInForceOverABadOne) {
  std::ofstream(parts_) << "Default=0x7fff : ALL=full ;\nred=0x0001 : ALL_CAS=full ;\n";
  auto child = Start();
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 1)) << ReadFile(log_);
  std::string text = ReadFile(log_);
  EXPECT_NE(text.find("2 partition(s) loaded"), std::string::npos) << text;
  EXPECT_GT(PKeyBlocksSent(text, 1), 0) << text;

  // A typo on line 3: reported with file and line; the running set stays, nothing is sent.
  std::ofstream(parts_) << "Default=0x7fff : ALL=full ;\nred=0x0001 : ALL_CAS=full ;\n"
                        << "blue=0x0002 : 0xnotaguid ;\n";
  ASSERT_EQ(kill(child->pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 2)) << ReadFile(log_);
  text = ReadFile(log_);
  EXPECT_NE(text.find(parts_.string() + ":3: PART-004 bad PortGUID '0xnotaguid'"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("PART-020 the previous partition set stays in force"), std::string::npos)
      << text;
  EXPECT_EQ(PKeyBlocksSent(text, 2), 0) << text;

  // Fixed: blue on every CA too, one block more per CA port and per switch port facing one.
  std::ofstream(parts_) << "Default=0x7fff : ALL=full ;\nred=0x0001 : ALL_CAS=full ;\n"
                        << "blue=0x0002 : ALL_CAS=full ;\n";
  ASSERT_EQ(kill(child->pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 3)) << ReadFile(log_);
  text = ReadFile(log_);
  EXPECT_EQ(PKeyBlocksSent(text, 3), PKeyBlocksSent(text, 1)) << text;

  ASSERT_EQ(kill(child->pid(), SIGTERM), 0);
  auto done = child->Wait(30s);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code, 0) << done->err;
}

// Options SIGHUP does not apply (the port, keys, LMC, priority, ...) keep their value until a
// restart: each one a reload changes is named, and no option SIGHUP applies is.
TEST_F(PartitionsReloadTest, HupNamesEachChangedOptionThatWaitsForARestart) {
  std::ofstream(parts_) << "Default=0x7fff : ALL=full ;\n";
  auto child = Start();
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 1)) << ReadFile(log_);
  std::ofstream(conf_, std::ios::app) << "sm_priority 9\nlmc 1\nsweep_on_trap FALSE\n";
  ASSERT_EQ(kill(child->pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 2)) << ReadFile(log_);
  const std::string text = ReadFile(log_);
  EXPECT_NE(text.find("CONF-104 sm_priority changed from 0 to 9: it takes effect when ibsmd "
                      "restarts"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("CONF-104 lmc changed from 0 to 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("CONF-104 sweep_on_trap"), std::string::npos) << text;
  // The LIDs keep LMC 0: the second sweep changed none.
  EXPECT_NE(text.find("heavy sweep 2 done"), std::string::npos) << text;
  EXPECT_NE(text.find(" 0 LID changes"), std::string::npos) << text;
  ASSERT_EQ(kill(child->pid(), SIGTERM), 0);
  auto done = child->Wait(30s);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code, 0) << done->err;
}

TEST_F(PartitionsReloadTest, ABadFileAtStartStopsIbsmdWithFileAndLine) {
  std::ofstream(parts_) << "red=0x0001 : ALL_CAS=full ;\nblue=0x12345 : ALL ;\n";
  auto child = Start();
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto done = child->Wait(30s);
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->timed_out);
  EXPECT_NE(done->exit_code, 0);
  EXPECT_NE(done->err.find(parts_.string() + ":2: PART-002"), std::string::npos) << done->err;
}

}  // namespace
}  // namespace ibsm::test
