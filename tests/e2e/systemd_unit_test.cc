// The systemd unit shipped for ibsmd (conf/systemd/ibsmd.service), checked by systemd's own
// tools as far as a machine without a running systemd allows: `systemd-analyze verify` parses
// it (with ExecStart pointed at the built binary), and `systemd-analyze security --offline`
// rates its sandbox. Skipped, saying so, where systemd-analyze is not installed.
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/ibsim_harness.h"

extern char** environ;

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
    const std::string installed = "/usr/sbin/ibsmd";
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
  // --man=no: the unit's man: pages come with the package, not with this machine (the package
  // test verifies the installed unit with its man pages found).
  auto r = RunCommand({"systemd-analyze", "verify", "--man=no", unit_}, 60s, dir_.string());
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

// The value of `key=` in the unit (its last assignment), or "".
std::string UnitValue(const std::string& unit, const std::string& key) {
  std::string value;
  std::istringstream in(unit);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + "=", 0) == 0) value = line.substr(key.size() + 1);
  return value;
}

// True when a user outside the owner's group can reach `path`: every directory above it
// searchable by others, and the file itself with `bits` for others.
bool OthersReach(const fs::path& path, fs::perms bits) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec || (fs::status(p, ec).permissions() & bits) != bits) return false;
  for (p = p.parent_path(); !p.empty(); p = p.parent_path()) {
    if ((fs::status(p, ec).permissions() & fs::perms::others_exec) == fs::perms::none || ec)
      return false;
    if (p == p.root_path()) break;
  }
  return true;
}

// The environment with every sanitizer `suppressions=FILE` pointed at a copy in `dir`, which
// an unprivileged user can read even when the checkout is private (a sanitizer that cannot
// read its suppressions file aborts the process).
std::vector<std::string> EnvWithReadableSuppressions(const fs::path& dir) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    const size_t at = kv.find("suppressions=");
    if (kv.find("SAN_OPTIONS=") != std::string::npos && at != std::string::npos) {
      const size_t from = at + std::string("suppressions=").size();
      const size_t to = std::min(kv.find(':', from), kv.size());
      const fs::path copy = dir / ("supp-" + std::to_string(env.size()));
      std::error_code ec;
      fs::copy_file(kv.substr(from, to - from), copy, fs::copy_options::overwrite_existing, ec);
      if (!ec) {
        fs::permissions(copy, fs::perms(0644), ec);
        kv.replace(from, to - from, copy.string());
      }
    }
    env.push_back(kv);
  }
  return env;
}

// What the unit gives ibsmd, reproduced without systemd: its capability bounding set (the
// capabilities a root service keeps), its UMask and its RuntimeDirectoryMode for the socket's
// directory. Under them ibsmd must still hand the socket to control_socket_group (here
// nogroup, which root is no member of), and a member of that group (nobody) must reach it,
// while a user outside the group may not.
TEST_F(SystemdUnitTest, AMemberOfTheSocketGroupReachesTheDaemonUnderTheUnitsLimits) {
  if (geteuid() != 0 || !fs::exists("/usr/bin/setpriv") || getgrnam("nogroup") == nullptr ||
      getpwnam("nobody") == nullptr)
    GTEST_SKIP() << "needs root, setpriv (util-linux), user nobody and group nogroup";
  if (!OthersReach(Bin("ibsmctl"), fs::perms::others_exec))
    GTEST_SKIP() << Bin("ibsmctl") << " is in a directory user nobody cannot enter "
                 << "(a private checkout); clone into a world-readable directory to run this";
  const std::string unit = ReadFile(unit_);
  std::string caps = "-all";
  std::istringstream names(UnitValue(unit, "CapabilityBoundingSet"));
  for (std::string cap; names >> cap;) {
    ASSERT_EQ(cap.rfind("CAP_", 0), 0u) << cap;
    std::string name = cap.substr(4);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    caps += ",+" + name;
  }
  const std::string umask = UnitValue(unit, "UMask");
  const std::string run_mode = UnitValue(unit, "RuntimeDirectoryMode");
  ASSERT_FALSE(umask.empty() || run_mode.empty());

  fs::permissions(dir_, fs::perms(0755));  // as /run: anyone may traverse
  const fs::path run = dir_ / "run", log = dir_ / "ibsmd.log", conf = dir_ / "ibsmd.conf";
  fs::create_directories(run);
  fs::permissions(run, fs::perms(std::stoi(run_mode, nullptr, 8)));
  const std::string sock = (run / "ibsmd.sock").string();
  std::ofstream(conf) << "log_file " << log.string() << "\n"
                      << "dump_files_dir " << dir_.string() << "\n"
                      << "guid2lid_file " << (dir_ / "guid2lid").string() << "\n"
                      << "control_socket " << sock << "\n"
                      << "control_socket_group nogroup\n"
                      << "sweep_interval 0\n";
  const std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
  auto daemon = ChildProcess::Start({"/bin/sh", "-c", "umask " + umask + " && exec \"$@\"", "sh",
                                     "setpriv", "--bounding-set", caps, "--", Bin("ibsmd"), "-F",
                                     conf.string(), "--sim", topo},
                                    dir_.string(), {});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  ASSERT_TRUE(WaitForCount(log, "SUBNET UP", 1)) << ReadFile(log);
  EXPECT_EQ(ReadFile(log).find("SM-CTL-003"), std::string::npos) << ReadFile(log);

  auto as = [&](const std::string& gid) {
    return RunCommand({"setpriv", "--reuid=65534", "--regid=" + gid, "--clear-groups",
                       Bin("ibsmctl"), "--socket", sock, "status"},
                      60s, dir_.string(), EnvWithReadableSuppressions(dir_));
  };
  auto member = as(std::to_string(getgrnam("nogroup")->gr_gid));
  ASSERT_TRUE(member.ok());
  EXPECT_EQ(member->exit_code, 0) << Describe(*member);
  EXPECT_NE(member->out.find("SM state:          MASTER"), std::string::npos) << member->out;
  auto stranger = as("100");  // group users: not the socket's group
  ASSERT_TRUE(stranger.ok());
  EXPECT_EQ(stranger->exit_code, 2) << "only the socket's group may connect: " << Describe(*stranger);

  kill(daemon->pid(), SIGTERM);
  auto done = daemon->Wait(30s);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code, 0) << Describe(*done);
}

}  // namespace
}  // namespace ibsm::test
