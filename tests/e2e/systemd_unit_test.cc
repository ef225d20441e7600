// The systemd unit shipped for ibsmd (conf/systemd/ibsmd.service), checked by systemd's own
// tools as far as a machine without a running systemd allows: `systemd-analyze verify` parses
// it (with ExecStart pointed at the built binary), and `systemd-analyze security --offline`
// rates its sandbox. Skipped, saying so, where systemd-analyze is not installed.
#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class SystemdUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/bin/systemd-analyze"))
      GTEST_SKIP() << "systemd-analyze is not installed (Debian package systemd)";
    dir_ = fs::temp_directory_path() / ("ibsm-unit-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::string unit = ReadFile(std::string(IBSM_SOURCE_DIR) + "/conf/systemd/ibsmd.service");
    ASSERT_FALSE(unit.empty());
    const std::string installed = "/usr/local/sbin/ibsmd";
    ASSERT_NE(unit.find("ExecStart=" + installed + " "), std::string::npos);
    for (size_t at; (at = unit.find(installed)) != std::string::npos;)
      unit.replace(at, installed.size(), Bin("ibsmd"));
    unit_ = (dir_ / "ibsmd.service").string();
    std::ofstream(unit_) << unit;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  fs::path dir_;
  std::string unit_;
};

TEST_F(SystemdUnitTest, TheUnitVerifiesCleanly) {
  auto r = RunCommand({"systemd-analyze", "verify", unit_}, 60s, dir_.string());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << Describe(*r);
  EXPECT_EQ(r->err, "") << "no warnings about the unit";
}

TEST_F(SystemdUnitTest, TheSandboxRatesBelowFourOnSystemdsExposureScale) {
  auto r = RunCommand({"systemd-analyze", "security", "--offline=yes", "--no-pager", unit_}, 60s,
                      dir_.string());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit_code, 0) << Describe(*r);
  std::smatch m;
  const std::regex overall(R"(Overall exposure level for ibsmd\.service: ([0-9.]+) (\w+))");
  ASSERT_TRUE(std::regex_search(r->out, m, overall)) << r->out;
  const double exposure = std::stod(m[1]);
  // 10 is an unsandboxed root service; this one needs root for /dev/infiniband/umad*.
  EXPECT_LT(exposure, 4.0) << r->out;
  EXPECT_TRUE(m[2] == "OK" || m[2] == "SAFE") << r->out;
  // The settings the issue names: no new privileges, a read-only system, the state dir
  // writable.
  for (const char* line : {"NoNewPrivileges=yes", "ProtectSystem=strict", "StateDirectory=ibsm",
                           "ReadWritePaths=/var/lib/ibsm"})
    EXPECT_NE(ReadFile(unit_).find(line), std::string::npos) << line;
}

}  // namespace
}  // namespace ibsm::test
