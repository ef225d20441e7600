// Event subscriptions end to end on ibsim: a client written
// on libibumad (inform_client) subscribes with InformInfo through ibsmd's SA, a host's
// cable is pulled through ibsim's console, and the client receives the Report of trap 65
// (GID out of service) for that host and answers it with a ReportResponse.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;


// Polls until `done()` or the deadline.
template <typename Pred>
bool WaitUntil(Pred done, std::chrono::seconds deadline) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

TEST(InformIbsimTest, ASubscriberReceivesAReportWhenAHostsLinkGoesDown) {
  if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
  const std::string ibsmd = BinDir() + "/ibsmd";
  const std::string client = BinDir() + "/inform_client";
  ASSERT_EQ(access(ibsmd.c_str(), X_OK), 0) << "ibsmd not built at " << ibsmd;
  ASSERT_EQ(access(client.c_str(), X_OK), 0) << "inform_client not built at " << client;

  auto dir = MakeTempDir("ibsm-inform-e2e-");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  const std::string root = *dir;

  auto fabric = FatTree2(4);
  ASSERT_TRUE(fabric.ok());
  // The SM attaches to the first CA (ibsim's default host), the subscriber to the second;
  // the third loses its cable.
  std::vector<NodeId> cas;
  for (NodeId n = 0; n < fabric->node_count(); ++n)
    if (fabric->node(n).kind == NodeKind::kCa) cas.push_back(n);
  ASSERT_GE(cas.size(), 3u);
  const std::string subscriber = fabric->node(cas[1]).name;
  const Port& victim = fabric->port(cas[2], PortNum{1});
  const Port& leaf_port = fabric->port(victim.peer);
  std::ofstream(root + "/fabric.net") << WriteTopology(*fabric);

  IbsimOptions so;
  so.console = true;
  auto sim = IbsimInstance::Start(root + "/fabric.net", so);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  std::ofstream(root + "/opensm.conf")
      << "guid2lid_file " << root << "/guid2lid\nstate_db_file " << root
      << "/state.db\ndump_files_dir " << root << "\nlog_file " << root
      << "/ibsmd.log\nrouting_engine minhop\n";
  auto daemon = (*sim)->StartChild({ibsmd, "-F", root + "/opensm.conf", "-s", "2"});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  auto log = [&] { return ReadFile(root + "/ibsmd.log"); };
  ASSERT_TRUE(WaitUntil([&] { return log().find("SUBNET UP") != std::string::npos; }, 60s))
      << log();

  auto sub = (*sim)->StartChild({client, "--timeout-ms", "60000", "65"}, subscriber);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(WaitUntil(
      [&] { return sub->PeekStdout().find("subscribed status") != std::string::npos; }, 30s))
      << "no answer to the InformInfo Set; client:\n"
      << sub->PeekStdout() << "\nibsmd log:\n"
      << log();
  ASSERT_NE(sub->PeekStdout().find("subscribed status 0\n"), std::string::npos)
      << sub->PeekStdout();

  const std::string cmd = fmt::format("unlink \"{}\"[{}]", fabric->node(leaf_port.node).name,
                                      leaf_port.num.value());
  ASSERT_TRUE((*sim)->SendConsoleCommand(cmd).ok());
  auto done = sub->Wait(70s);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->exit_code, 0) << "client:\n"
                                << done->out << done->err << "\nibsmd log:\n"
                                << log() << "\nibsim log:\n"
                                << (*sim)->Log();
  // The Report names the lost host's port GID in its data details, and was answered.
  const std::string victim_gid = fmt::format("fe80000000000000{:016x}", victim.guid.value());
  EXPECT_NE(done->out.find("report trap 65"), std::string::npos) << done->out;
  EXPECT_NE(done->out.find("details_gid 0x" + victim_gid), std::string::npos) << done->out;
  EXPECT_NE(done->out.find("acked"), std::string::npos) << done->out;
  // ibsmd saw the ReportResponse: no Report given up (that takes 4 x 200 ms).
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(log().find("SA-INF-010"), std::string::npos) << log();

  kill(daemon->pid(), SIGTERM);
  auto stopped = daemon->Wait(10s);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->exit_code, 0);
  std::error_code ec;
  if (!std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(root, ec);
}

}  // namespace
}  // namespace ibsm::test
