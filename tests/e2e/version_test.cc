// Every program says which version and which commit it was built from, so an operator's bug
// report names the code that ran.
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;

TEST(VersionTest, EveryProgramPrintsItsVersionAndTheCommitItWasBuiltFrom) {
  // The commit of the source tree the binaries were built from, when it is a git checkout.
  std::string head;
  auto git = RunCommand({"git", "-c", "safe.directory=*", "-C", IBSM_SOURCE_DIR, "rev-parse",
                         "--short=12", "HEAD"},
                        10s, IBSM_SOURCE_DIR);
  if (git.ok() && git->exit_code == 0 && git->out.size() >= 12) head = git->out.substr(0, 12);
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
    if (!head.empty()) {
      EXPECT_EQ(m[2].str().substr(0, 12), head) << r->out;
    }
  }
}

}  // namespace
}  // namespace ibsm::test
