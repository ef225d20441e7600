// UmadTransport against ibsim, through umad_probe run under libumad2sim, checked against the
// net file and against infiniband-diags' smpquery on the same simulator.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;

std::string SourceDir() {
  const char* s = std::getenv("IBSM_SOURCE_DIR");
  return s ? s : IBSM_SOURCE_DIR;
}

std::string NetFile() { return SourceDir() + "/tests/fixtures/ibsim-ftree2-k4.net"; }

std::string Probe() {
  const char* b = std::getenv("IBSM_BIN_DIR");
  return std::string(b ? b : IBSM_BIN_DIR) + "/umad_probe";
}

// "key value" lines of umad_probe output; the first value of each key wins.
std::map<std::string, std::string> Parse(const std::string& out) {
  std::map<std::string, std::string> kv;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    auto sp = line.find(' ');
    if (sp == std::string::npos) continue;
    kv.emplace(line.substr(0, sp), line.substr(sp + 1));
  }
  return kv;
}

// Node name -> node GUID from an ibsim net file ("switchguid=0x..(..)" / "caguid=0x.." lines
// precede their node's "Switch N "name"" / "Ca N "name"" line).
std::map<std::string, uint64_t> NodeGuids(const std::string& path) {
  std::map<std::string, uint64_t> guids;
  std::ifstream in(path);
  uint64_t last = 0;
  std::regex guid_re(R"(^(switchguid|caguid)=(0x[0-9a-fA-F]+))");
  std::regex node_re(R"re(^(Switch|Ca)\s+\d+\s+"([^"]+)")re");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, guid_re)) last = std::stoull(m[2], nullptr, 16);
    else if (std::regex_search(line, m, node_re)) guids[m[2]] = last;
  }
  return guids;
}

std::string Hex(uint64_t g) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(g));
  return buf;
}

class UmadIbsimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    if (access(Probe().c_str(), X_OK) != 0) {
      FAIL() << "umad_probe not built at " << Probe() << " (set IBSM_BIN_DIR)";
    }
  }

  std::unique_ptr<IbsimInstance> StartSim(bool console = false) {
    IbsimOptions o;
    o.console = console;
    auto sim = IbsimInstance::Start(NetFile(), o);
    EXPECT_TRUE(sim.ok()) << sim.status().ToString();
    return sim.ok() ? std::move(sim).value() : nullptr;
  }
};

TEST_F(UmadIbsimTest, ProbeNodeGuidsMatchTheNetFileAndSmpquery) {
  auto sim = StartSim();
  ASSERT_NE(sim, nullptr);
  auto guids = NodeGuids(NetFile());
  ASSERT_EQ(guids.count("node-0001/hca1"), 1u);
  ASSERT_EQ(guids.count("spine-01"), 1u);

  // The local node: the first record in the file, where ibsim attaches a client by default.
  auto local = sim->Run({Probe(), "nodeinfo", "0"}, 20s);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  ASSERT_EQ(local->exit_code, 0) << local->out << local->err;
  auto lkv = Parse(local->out);
  EXPECT_EQ(lkv["node_guid"], Hex(guids["node-0001/hca1"]));
  EXPECT_EQ(lkv["local_node_guid"], Hex(guids["node-0001/hca1"]));
  EXPECT_EQ(lkv["local_port_guid"], Hex(guids["node-0001/hca1"] + 1));
  EXPECT_EQ(lkv["node_type"], "1");

  // Two hops: out of the HCA to leaf-001, out of leaf-001's port 3 to spine-01.
  auto far = sim->Run({Probe(), "nodeinfo", "0,1,3"}, 20s);
  ASSERT_TRUE(far.ok());
  ASSERT_EQ(far->exit_code, 0) << far->out << far->err;
  auto fkv = Parse(far->out);
  EXPECT_EQ(fkv["node_guid"], Hex(guids["spine-01"]));
  EXPECT_EQ(fkv["node_type"], "2");
  EXPECT_EQ(fkv["local_port_num"], "1");  // spine-01 port 1 faces leaf-001
  EXPECT_EQ(fkv["counter_timeouts"], "0");

  auto smp = sim->Run({"smpquery", "-D", "nodeinfo", "0,1,3"}, 20s);
  ASSERT_TRUE(smp.ok());
  ASSERT_EQ(smp->exit_code, 0) << smp->out << smp->err;
  std::smatch m;
  std::regex guid_line(R"(\nGuid:\.+(0x[0-9a-f]+))");
  ASSERT_TRUE(std::regex_search(smp->out, m, guid_line)) << smp->out;
  EXPECT_EQ(m[1].str(), fkv["node_guid"]);
}

TEST_F(UmadIbsimTest, DrSmpThroughAnUnlinkedPortTimesOutAfterTheRetries) {
  auto sim = StartSim(/*console=*/true);
  ASSERT_NE(sim, nullptr);
  const std::vector<std::string> probe = {Probe(), "--timeout-ms", "100", "--retries", "2",
                                          "nodeinfo", "0,1,2"};
  auto before = sim->Run(probe, 20s);
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->exit_code, 0) << before->out << before->err;
  EXPECT_EQ(Parse(before->out)["node_guid"], Hex(NodeGuids(NetFile())["node-0002/hca1"]));

  // Uncable leaf-001 port 2 through ibsim's console.
  ASSERT_TRUE(sim->SendConsoleCommand("unlink \"leaf-001\"[2]").ok());
  std::this_thread::sleep_for(300ms);

  auto t0 = std::chrono::steady_clock::now();
  auto after = sim->Run(probe, 20s);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->timed_out) << "umad_probe hung; ibsim log:\n" << sim->Log();
  EXPECT_EQ(after->exit_code, 2) << after->out << after->err;
  auto kv = Parse(after->out);
  EXPECT_NE(kv["error"].find("Timeout"), std::string::npos) << after->out;
  EXPECT_EQ(kv["counter_sent"], "3");  // first attempt + 2 retries
  EXPECT_EQ(kv["counter_retries"], "2");
  EXPECT_EQ(kv["counter_timeouts"], "1");
  EXPECT_LT(took, 10s);
}

TEST_F(UmadIbsimTest, ConsoleCommandNeedsConsoleMode) {
  auto sim = StartSim(/*console=*/false);
  ASSERT_NE(sim, nullptr);
  EXPECT_EQ(sim->SendConsoleCommand("unlink \"leaf-001\"[2]").code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(UmadIbsimTest, ThreeSegmentRmppRequestAndResponseCrossIbsimBetweenTwoClients) {
  auto sim = StartSim();
  ASSERT_NE(sim, nullptr);
  // GMPs are LID-routed: let OpenSM assign LIDs and program the LFTs once.
  auto env = sim->Environment();
  env.push_back("OSM_TMP_DIR=" + sim->work_dir());
  env.push_back("OSM_CACHE_DIR=" + sim->work_dir());
  auto osm = RunCommand({"opensm", "-o", "-f", sim->work_dir() + "/osm.log"}, 60s,
                        sim->work_dir(), env);
  ASSERT_TRUE(osm.ok());
  ASSERT_EQ(osm->exit_code, 0) << osm->out << osm->err;

  const std::string server_host = "node-0005/hca1";
  auto local = sim->Run({Probe(), "local"}, 20s, server_host);
  ASSERT_TRUE(local.ok());
  std::string server_lid = Parse(local->out)["local_lid"];
  ASSERT_FALSE(server_lid.empty() || server_lid == "0") << local->out;

  // The server claims the SM port (issm) at node-0005: ibsim hands it every QP1 request.
  auto server = sim->StartChild({Probe(), "--linger-ms", "1500", "rmpp-serve"}, server_host);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (server->PeekStdout().find("ready 1") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  ASSERT_NE(server->PeekStdout().find("ready 1"), std::string::npos) << server->PeekStdout();

  // 500 bytes of SA payload = 3 segments of 200. Each direction's last segment (100 bytes
  // of payload) goes out at its real length, 156 bytes, and libumad2sim delivers it so: the
  // receiving UmadTransport must zero-pad it rather than drop it as a short MAD.
  auto client = sim->Run({Probe(), "--timeout-ms", "500", "--retries", "3", "rmpp-send",
                          server_lid, "500"},
                         30s);
  ASSERT_TRUE(client.ok());
  auto done = server->Wait(30s);
  ASSERT_TRUE(done.ok());
  auto ckv = Parse(client->out);
  auto skv = Parse(done->out);
  EXPECT_EQ(client->exit_code, 0) << client->out << client->err;
  EXPECT_EQ(skv["request_bytes"], "500") << done->out << done->err;
  EXPECT_EQ(skv["request_mismatches"], "0");
  EXPECT_EQ(skv["counter_rmpp_reassembled"], "1");
  EXPECT_EQ(skv["post"], "OK");
  EXPECT_EQ(ckv["response_bytes"], "500");
  EXPECT_EQ(ckv["response_mismatches"], "0");
  EXPECT_EQ(ckv["counter_rmpp_reassembled"], "1");
  EXPECT_EQ(ckv["counter_rmpp_aborted"], "0");
}

TEST(RunCommandTest, ChildPastItsTimeoutIsKilled) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = RunCommand({"sleep", "30"}, 300ms, "/tmp");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + 9);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(RunCommandTest, CapturesStdoutStderrAndExitCode) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10s, "/tmp");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(IbsimInstanceTest, BadNetFileIsReportedWithIbsimsLog) {
  if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
  std::string path = "/tmp/ibsm-bad-" + std::to_string(getpid()) + ".net";
  {
    std::ofstream f(path);
    f << "Switch 4 \"sw\"\n[1] \"nowhere\"[1]\n";
  }
  IbsimOptions o;
  o.start_timeout = 10s;
  auto sim = IbsimInstance::Start(path, o);
  std::remove(path.c_str());
  if (sim.ok()) GTEST_SKIP() << "this ibsim accepts a dangling link";
  EXPECT_NE(sim.status().message().find("ibsim"), std::string::npos) << sim.status().ToString();
}

}  // namespace
}  // namespace ibsm::test
