// The hostile world on ibsim, a simulator nobody here wrote: MAD loss on switch ports (ibsim's
// console "Error" drops packets through a port), and a NodeDescription that is not UTF-8.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class HostileIbsimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    ASSERT_EQ(access(Ibsmd().c_str(), X_OK), 0) << "ibsmd not built";
    auto dir = MakeTempDir("ibsm-hostile-");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    root_ = *dir;
  }
  void TearDown() override {
    std::error_code ec;
    if (!root_.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(root_, ec);
  }

  // A config of its own per run: state file, log and dumps in root_/name.
  std::string Config(const std::string& name, const std::string& extra = "") {
    const std::string dir = root_ + "/" + name;
    fs::create_directories(dir);
    WriteTextFile(dir + "/opensm.conf", "state_db_file " + dir + "/state.db\nlog_file " + dir +
                                            "/ibsmd.log\ndump_files_dir " + dir +
                                            "\nrouting_engine ftree\ncontrol_socket none\n" +
                                            extra);
    return dir + "/opensm.conf";
  }

  std::string root_;
};

// Every LID ibnetdiscover shows, by port GUID: the LIDs the SM gave.
std::set<std::pair<std::string, std::string>> DiscoveredLids(const std::string& ibnetdiscover) {
  std::set<std::pair<std::string, std::string>> out;
  std::istringstream lines(ibnetdiscover);
  static const std::regex node_re(R"re(^(Switch|Ca)\s+\d+\s+"([SH]-[0-9a-fA-F]+)".*lid (\d+))re");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, node_re)) out.insert({m[2], m[3]});
  }
  return out;
}

// One ibsmd -o on a fabric with 10% MAD loss on 12 switch ports (the SM's leaf's uplinks and
// two more leaves'): ports refuse a transition to the state they are in (ibsim answers status
// 7), so a Set whose reply was lost fails its retry. The sweep still ends with SUBNET UP, and
// LIDs and LFTs are those of the same fabric without loss.
TEST_F(HostileIbsimTest, TenPercentLossOnTwelveSwitchPortsStillComesUpInOneSweepAsWithoutLoss) {
  auto fabric = FatTree3(8);
  ASSERT_TRUE(fabric.ok());
  const std::string net = root_ + "/fabric.net";
  ASSERT_TRUE(WriteTextFile(net, WriteTopology(*fabric)));
  IbsimOptions console;
  console.console = true;
  auto clean = IbsimInstance::Start(net);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  auto lossy = IbsimInstance::Start(net, console);
  ASSERT_TRUE(lossy.ok()) << lossy.status().ToString();
  std::vector<std::string> leaves;
  for (NodeId n = 0; n < fabric->node_count() && leaves.size() < 3; ++n) {
    const Node& node = fabric->node(n);
    if (!node.is_switch()) continue;
    bool has_host = false;
    for (uint8_t p = 1; p <= node.num_ports; ++p)
      if (fabric->port(n, PortNum{p}).connected() &&
          !fabric->node(fabric->port(fabric->port(n, PortNum{p}).peer).node).is_switch())
        has_host = true;
    if (has_host) leaves.push_back(node.name);
  }
  ASSERT_EQ(leaves.size(), 3u);
  for (const auto& leaf : leaves)
    for (int p = 5; p <= 8; ++p)
      ASSERT_TRUE((*lossy)->SendConsoleCommand("Error \"" + leaf + "\"[" + std::to_string(p) +
                                               "] 10")
                      .ok());
  std::this_thread::sleep_for(200ms);  // the console is read between MADs

  auto a = (*clean)->Run({Ibsmd(), "-F", Config("clean"), "-o"}, 120s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->exit_code, 0) << Describe(*a) << ReadFile(root_ + "/clean/ibsmd.log");
  auto b = (*lossy)->Run({Ibsmd(), "-F", Config("lossy"), "-o"}, 120s);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const std::string log = ReadFile(root_ + "/lossy/ibsmd.log");
  EXPECT_EQ(b->exit_code, 0) << Describe(*b) << log;
  EXPECT_EQ(CountOf(log, "SUBNET UP"), 1u) << log;
  EXPECT_EQ(CountOf(log, "SM-SWEEP-001"), 0u) << log;
  // The loss was felt where it matters: some port state Set lost its reply.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(\((\d+) port state Sets read back\))")))
      << log;
  EXPECT_GT(std::stoul(m[1]), 0u) << log;

  // What the fabric holds, read back without loss.
  for (const auto& leaf : leaves)
    for (int p = 5; p <= 8; ++p)
      ASSERT_TRUE((*lossy)->SendConsoleCommand("Error \"" + leaf + "\"[" + std::to_string(p) +
                                               "] 0")
                      .ok());
  std::this_thread::sleep_for(200ms);
  auto lids_a = (*clean)->Run({"ibnetdiscover"}, kToolTimeout);
  auto lids_b = (*lossy)->Run({"ibnetdiscover"}, kToolTimeout);
  ASSERT_TRUE(lids_a.ok() && lids_b.ok());
  EXPECT_FALSE(DiscoveredLids(lids_a->out).empty()) << lids_a->out;
  EXPECT_EQ(DiscoveredLids(lids_a->out), DiscoveredLids(lids_b->out));
  auto lft_a = (*clean)->Run({"dump_lfts"}, 60s);
  auto lft_b = (*lossy)->Run({"dump_lfts"}, 60s);
  ASSERT_TRUE(lft_a.ok() && lft_b.ok());
  EXPECT_EQ(lft_a->exit_code, 0) << Describe(*lft_a);
  EXPECT_EQ(lft_a->out, lft_b->out);
  auto state = (*lossy)->Run({"iblinkinfo", "--line"}, 60s);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(CountOf(state->out, "Init"), 0u) << state->out;
  EXPECT_EQ(CountOf(state->out, "Armed"), 0u) << state->out;
}

// A CA whose NodeDescription holds a Latin-1 byte (a Latin-1 hostname does it by accident):
// ibsmd aborted right after every SUBNET UP. Now it sweeps on, and what it stores is JSON.
TEST_F(HostileIbsimTest, ALatin1NodeDescriptionIsStoredAsValidJsonAndTheDaemonSweepsOn) {
  auto fabric = FatTree2(4);
  ASSERT_TRUE(fabric.ok());
  std::string text = WriteTopology(*fabric);
  const std::string plain = "node-0003 HCA-1", latin1 = "r\xE9seau-03 HCA-1";
  // Every mention: the CA's own record (where ibsim takes it from) and its switch's port lines.
  size_t replaced = 0;
  for (size_t at; (at = text.find(plain)) != std::string::npos; ++replaced)
    text.replace(at, plain.size(), latin1);
  ASSERT_GT(replaced, 0u);
  const std::string net = root_ + "/fabric.net";
  ASSERT_TRUE(WriteTextFile(net, text));
  auto sim = IbsimInstance::Start(net);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto d = (*sim)->StartChild({Ibsmd(), "-F", Config("d", "sweep_interval 1\nforce_heavy_sweep TRUE\n")});
  ASSERT_TRUE(d.ok());
  const std::string log = root_ + "/d/ibsmd.log";
  ASSERT_TRUE(WaitForCount(log, "SUBNET UP", 3, 60s)) << ReadFile(log);
  EXPECT_EQ(kill(d->pid(), 0), 0) << "ibsmd is still running after three heavy sweeps";
  kill(d->pid(), SIGTERM);
  auto done = d->Wait(10s);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code, 0) << Describe(*done);
  auto nodes = RunCommand({Bin("ibsmctl"), "--json", "--state-db", root_ + "/d/state.db", "nodes"},
                          30s, root_);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->exit_code, 0) << Describe(*nodes);
  auto j = nlohmann::json::parse(nodes->out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << nodes->out;
  EXPECT_NE(nodes->out.find("r\xEF\xBF\xBDseau-03 HCA-1"), std::string::npos) << nodes->out;
}

}  // namespace
}  // namespace ibsm::test
