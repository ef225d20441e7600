// Every program says which version and which commit it was built from, so an operator's bug
// report names the code that ran.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;

TEST(VersionTest, EveryProgramPrintsItsVersionAndTheCommitItWasBuiltFrom) {
  // When the sources are a git checkout, the commit named is one of its history (HEAD itself
  // on a fresh build; an older one if the binaries were built before the last commit).
  auto git = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"git", "-c", "safe.directory=*", "-C", IBSM_SOURCE_DIR});
    auto r = RunCommand(args, 10s, IBSM_SOURCE_DIR);
    return r.ok() && r->exit_code == 0;
  };
  const bool checkout = git({"rev-parse", "HEAD"});
  for (const char* program : {"ibsmd", "ibsmctl", "ibsm-routecheck", "ibsm-topogen"}) {
    SCOPED_TRACE(program);
    auto r = RunCommand({Bin(program), "--version"}, 10s, BinDir());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_code, 0) << r->err;
    std::smatch m;
    const std::regex line(std::string("^") + program +
                          " ([0-9]+\\.[0-9]+\\.[0-9]+) \\(commit ([0-9a-f]{12}(-dirty)?|unknown)\\)\n$");
    ASSERT_TRUE(std::regex_match(r->out, m, line)) << r->out;
    // Built from this checkout: the commit is its HEAD (a rebuild after a commit says so).
    if (checkout) {
      const std::string commit = m[2].str().substr(0, 12);
      EXPECT_NE(commit, "unknown") << "built from a git checkout: " << r->out;
      EXPECT_TRUE(git({"merge-base", "--is-ancestor", commit, "HEAD"}))
          << commit << " is not in this checkout's history";
    }
  }
}

// The log's first line says what ran and with which settings, as OpenSM's does.
TEST(VersionTest, TheLogStartsWithTheVersionTheConfigFileAndTheSettingsThatMatter) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ibsm-banner-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path conf = dir / "ibsmd.conf", log = dir / "ibsmd.log";
  std::ofstream(conf) << "state_db_file " << (dir / "state.db").string() << "\nguid2lid_file "
                      << (dir / "guid2lid").string() << "\ndump_files_dir " << dir.string()
                      << "\ncontrol_socket none\nlog_file " << log.string()
                      << "\nlmc 1\nsm_priority 7\n";
  auto r = RunCommand({Bin("ibsmd"), "-o", "-F", conf.string(), "--sim",
                       std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net"},
                      60s, dir.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->err;
  std::ifstream in(log);
  std::string first;
  std::getline(in, first);
  auto version = RunCommand({Bin("ibsmd"), "--version"}, 10s, BinDir());
  ASSERT_TRUE(version.ok());
  std::string v = version->out.substr(0, version->out.find('\n'));
  EXPECT_NE(first.find(v + " starting: config " + conf.string()), std::string::npos) << first;
  EXPECT_NE(first.find("routing ftree,updn; lmc 1;"), std::string::npos) << first;
  EXPECT_NE(first.find("sm_priority 7"), std::string::npos) << first;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ibsm::test
