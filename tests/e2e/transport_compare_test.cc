// The two transports behind one interface see one fabric: ibsmd walks the same topology
// file once through UmadTransport on ibsim (libumad2sim preload) and once through
// SimTransport on the in-process simulator, and lists the same nodes, ports and cables.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;


class TransportCompareTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    dir_ = std::filesystem::temp_directory_path() /
           ("ibsm-compare-" + std::to_string(getpid()) + "-" + std::to_string(GetParam()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A config that keeps every file ibsmd writes inside `sub`.
  std::string Config(const std::string& sub) {
    auto d = dir_ / sub;
    std::filesystem::create_directories(d);
    std::ofstream c(d / "ibsmd.conf");
    c << "log_file " << (d / "ibsmd.log").string() << "\n"
      << "dump_files_dir " << d.string() << "\n"
      << "state_db_file " << (d / "state.db").string() << "\n"
      << "guid2lid_file " << (d / "guid2lid").string() << "\n";
    return (d / "ibsmd.conf").string();
  }

  std::filesystem::path dir_;
};

TEST_P(TransportCompareTest, UmadOnIbsimAndTheSimulatorListTheSameNodesPortsAndCables) {
  Result<Fabric> fabric = GetParam() == 0 ? FatTree3(8) : RandomGraph(20, 8, 2, 42);
  ASSERT_TRUE(fabric.ok());
  std::string net = (dir_ / "fabric.net").string();
  {
    std::ofstream out(net);
    out << WriteTopology(*fabric);
  }
  auto ibsim = IbsimInstance::Start(net);
  ASSERT_TRUE(ibsim.ok()) << ibsim.status().ToString();
  auto on_ibsim = (*ibsim)->Run({BinDir() + "/ibsmd", "-o", "--print-fabric", "-F", Config("umad")},
                                60s);
  ASSERT_TRUE(on_ibsim.ok()) << on_ibsim.status().ToString();
  ASSERT_EQ(on_ibsim->exit_code, 0) << on_ibsim->err;
  auto on_sim = RunCommand(
      {BinDir() + "/ibsmd", "-o", "--print-fabric", "--sim", net, "--sim-profile",
       "strict-plain-names", "-F", Config("sim")},
      60s,
      dir_.string());
  ASSERT_TRUE(on_sim.ok()) << on_sim.status().ToString();
  ASSERT_EQ(on_sim->exit_code, 0) << on_sim->err;
  // One line per node plus one per cabled port.
  size_t lines = 0;
  for (char c : on_sim->out) lines += c == '\n';
  EXPECT_EQ(lines, fabric->node_count() + 2 * fabric->link_count());
  EXPECT_EQ(on_ibsim->out, on_sim->out);
}

INSTANTIATE_TEST_SUITE_P(FatTreeAndRandom, TransportCompareTest, ::testing::Values(0, 1));

}  // namespace
}  // namespace ibsm::test
