// The QoS policy file (qos_policy_file, docs/qos.md) as an operator uses it under a running
// ibsmd on ibsim: the PathRecords saquery gets carry the policy's SL; a SIGHUP with a bad
// file is reported with file and line and the policy in force stays; a good one takes over;
// a bad file at start stops ibsmd with the reason.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The SL of every PathRecord saquery printed ("sl....0x9" or "SL...9"), in order.
std::vector<int> Sls(const std::string& out) {
  static const std::regex re(R"(^\s*[Ss][Ll]\.{2,}\s*(0x[0-9a-fA-F]+|\d+)\s*$)");
  std::vector<int> sls;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, re)) sls.push_back(std::stoi(m[1], nullptr, 0));
  }
  return sls;
}

// A TCP port on 127.0.0.1 nobody listens on now (bound to 0, read, closed); 0 on failure.
uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// The body of GET /metrics from 127.0.0.1:`port`; empty on failure.
std::string Scrape(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

class QosPolicyIbsimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    ASSERT_EQ(access(Bin("ibsmd").c_str(), X_OK), 0) << "ibsmd not built";
    auto dir = MakeTempDir("ibsm-qos-policy-");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    root_ = *dir;
    auto fabric = FatTree2(4);
    ASSERT_TRUE(fabric.ok());
    for (NodeId n = 0; n < fabric->node_count(); ++n) {
      if (fabric->node(n).kind != NodeKind::kCa) continue;
      host_ = fabric->node(n).name;
      host_guid_ = fabric->port(fabric->port_id(n, PortNum(1))).guid.value();
      ca_guids_.push_back(host_guid_);
    }
    std::ofstream(root_ + "/fabric.net") << WriteTopology(*fabric);
    policy_ = root_ + "/qos-policy.conf";
    metrics_port_ = FreePort();
    ASSERT_NE(metrics_port_, 0);
    log_ = root_ + "/ibsmd.log";
    std::ofstream(root_ + "/ibsmd.conf") << "state_db_file " << root_ << "/state.db\n"
                                         << "log_file " << log_ << "\n"
                                         << "qos TRUE\n"
                                         << "qos_policy_file " << policy_ << "\n"
                                         << "sweep_interval 0\n"
                                         << "metrics_port " << metrics_port_ << "\n";
  }
  void TearDown() override {
    std::error_code ec;
    if (!root_.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(root_, ec);
  }

  // The policy: every path from `host_` gets `sl`; all others `default_sl`.
  void WritePolicy(int sl, int default_sl, const std::string& extra = "") {
    std::ofstream(policy_) << "qos-ulps\n"
                           << "  default : " << default_sl << "\n"
                           << "  any, source-port-guid " << Hex16(host_guid_) << " : " << sl
                           << "\n"
                           << extra << "end-qos-ulps\n";
  }

  // The SLs of the PathRecords from `host_` to every other CA, one query each (saquery on
  // ibsim sees only the first MAD of a table).
  std::vector<int> PathSls(const IbsimInstance& sim) {
    std::vector<int> all;
    for (uint64_t g : ca_guids_) {
      if (g == host_guid_) continue;
      auto sl = Sls(Saquery(sim, {"--sgid-to-dgid", Gid(host_guid_) + "-" + Gid(g)}));
      EXPECT_EQ(sl.size(), 1u) << "one PathRecord to " << Hex16(g);
      all.insert(all.end(), sl.begin(), sl.end());
    }
    return all;
  }
  static std::string Gid(uint64_t guid) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "fe80::%x:%x:%x:%x", unsigned(guid >> 48),
                  unsigned((guid >> 32) & 0xFFFF), unsigned((guid >> 16) & 0xFFFF),
                  unsigned(guid & 0xFFFF));
    return buf;
  }
  std::string Saquery(const IbsimInstance& sim, std::vector<std::string> args) {
    args.insert(args.begin(), "saquery");
    auto r = sim.Run(args, kToolTimeout, host_);
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? Describe(*r) : r.status().ToString());
    return r.ok() ? r->out : std::string();
  }

  std::string root_, host_, policy_, log_;
  uint64_t host_guid_ = 0;
  std::vector<uint64_t> ca_guids_;
  uint16_t metrics_port_ = 0;
};

TEST_F(QosPolicyIbsimTest, PathRecordsCarryThePolicysSlAndAHupKeepsItOverABadFile) {
  WritePolicy(9, 2);
  auto sim = IbsimInstance::Start(root_ + "/fabric.net");
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto d = (*sim)->StartChild({Bin("ibsmd"), "-F", root_ + "/ibsmd.conf"});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 1)) << ReadFile(log_);
  EXPECT_NE(ReadFile(log_).find("QoS policy loaded: 1 qos-ulps rule(s), default SL 2"),
            std::string::npos)
      << ReadFile(log_);
  auto sls = PathSls(**sim);
  EXPECT_EQ(sls.size(), ca_guids_.size() - 1);
  EXPECT_EQ(std::set<int>(sls.begin(), sls.end()), std::set<int>{9});

  // An SL of 16 on line 4: the file is refused with its line, the policy in force stays.
  WritePolicy(11, 2, "  sdp : 16\n");
  ASSERT_EQ(kill(d->pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 2)) << ReadFile(log_);
  std::string text = ReadFile(log_);
  EXPECT_NE(text.find(policy_ + ":4: QOS-POL-003 SL 16 is above 15"), std::string::npos) << text;
  EXPECT_NE(text.find("QOS-POL-020 the previous QoS policy stays in force"), std::string::npos)
      << text;
  sls = PathSls(**sim);
  EXPECT_EQ(std::set<int>(sls.begin(), sls.end()), std::set<int>{9});
  // Counted where an operator's monitoring sees it.
  std::string metrics = Scrape(metrics_port_);
  EXPECT_NE(metrics.find("\nibsm_qos_policy_refused_total 1\n"), std::string::npos) << metrics;

  // Fixed: the new SL reaches the PathRecords.
  WritePolicy(11, 2);
  ASSERT_EQ(kill(d->pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForCount(log_, "SUBNET UP", 3)) << ReadFile(log_);
  sls = PathSls(**sim);
  EXPECT_EQ(sls.size(), ca_guids_.size() - 1);
  EXPECT_EQ(std::set<int>(sls.begin(), sls.end()), std::set<int>{11});

  ASSERT_EQ(kill(d->pid(), SIGTERM), 0);
  auto done = d->Wait(30s);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code, 0) << done->err;
}

TEST_F(QosPolicyIbsimTest, ASectionIbsmDoesNotImplementStopsIbsmdAtStartWithFileAndLine) {
  std::ofstream(policy_) << "qos-ulps\n  default : 0\nend-qos-ulps\n"
                         << "qos-match-rules\nend-qos-match-rules\n";
  auto child = ChildProcess::Start(
      {Bin("ibsmd"), "-F", root_ + "/ibsmd.conf", "--sim",
       std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net"},
      root_, {});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto done = child->Wait(30s);
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->timed_out);
  EXPECT_NE(done->exit_code, 0);
  EXPECT_NE((done->err + ReadFile(log_)).find(policy_ + ":4: QOS-POL-010"), std::string::npos)
      << done->err << ReadFile(log_);
}

}  // namespace
}  // namespace ibsm::test
