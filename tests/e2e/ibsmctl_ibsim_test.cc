// ibsmctl's SA client end to end on ibsim ("the project's own SA client does RMPP
// in user space and reads whole tables from ibsmd on ibsim; the counts match the fabric").
// ibsim carries MADs of 256 bytes and no kernel RMPP, so saquery sees one MAD of a table;
// ibsmctl, whose transport segments and reassembles RMPP itself, must see all of it. The
// reference is ibnetdiscover's view of the same fabric.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// What ibnetdiscover shows: end-port GUIDs (switch GUIDs, CA port GUIDs) and the number of
// port lines with a cable (every cable is listed from both ends).
struct Discovered {
  std::set<uint64_t> end_port_guids;
  size_t switches = 0;
  size_t cabled_port_lines = 0;
};

Discovered ParseDiscovered(const std::string& out) {
  static const std::regex sw_re(R"re(^Switch\s+\d+\s+"S-([0-9a-fA-F]+)")re");
  static const std::regex ca_port_re(R"re(^\[\d+\]\(([0-9a-fA-F]+)\)\s+"[SH]-)re");
  static const std::regex port_re(R"re(^\[\d+\].*"[SH]-[0-9a-fA-F]+"\[\d+\])re");
  Discovered d;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, sw_re)) {
      d.end_port_guids.insert(std::stoull(m[1], nullptr, 16));
      ++d.switches;
    } else if (std::regex_search(line, m, ca_port_re)) {
      d.end_port_guids.insert(std::stoull(m[1], nullptr, 16));
    }
    if (std::regex_search(line, port_re)) ++d.cabled_port_lines;
  }
  return d;
}

class IbsmctlIbsimTest: public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    ASSERT_EQ(access(Bin("ibsmd").c_str(), X_OK), 0) << "ibsmd not built";
    ASSERT_EQ(access(Bin("ibsmctl").c_str(), X_OK), 0) << "ibsmctl not built";
    auto dir = MakeTempDir("ibsm-ctl-e2e-");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    root_ = *dir;
    auto fabric = FatTree3(4);  // 3 tiers, 16 hosts, 20 switches
    ASSERT_TRUE(fabric.ok());
    for (NodeId n = 0; n < fabric->node_count(); ++n) {
      if (fabric->node(n).kind != NodeKind::kCa) continue;
      far_host_ = fabric->node(n).name;
      if (near_host_.empty()) near_host_ = fabric->node(n).name;  // where ibsmd runs
    }
    std::ofstream(root_ + "/fabric.net") << WriteTopology(*fabric);
    auto sim = IbsimInstance::Start(root_ + "/fabric.net");
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    sim_ = std::move(*sim);
    std::ofstream(root_ + "/opensm.conf")
        << "state_db_file " << root_ << "/state.db\nlog_file " << root_
        << "/ibsmd.log\nrouting_engine ftree\n";
    auto d = sim_->StartChild({Bin("ibsmd"), "-F", root_ + "/opensm.conf"});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_.emplace(std::move(*d));
    auto until = std::chrono::steady_clock::now() + 60s;
    std::string log;
    while (std::chrono::steady_clock::now() < until) {
      log = ReadFile(root_ + "/ibsmd.log");
      if (log.find("SUBNET UP") != std::string::npos) break;
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_NE(log.find("SUBNET UP"), std::string::npos) << log;
  }

  void TearDown() override {
    if (daemon_) {
      kill(daemon_->pid(), SIGTERM);
      (void)daemon_->Wait(10s);
    }
    sim_.reset();
    std::error_code ec;
    if (!root_.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(root_, ec);
  }

  // ibsmctl on `host` (default: the far host).
  CommandResult Ctl(const std::vector<std::string>& args, std::string host = "") {
    std::vector<std::string> argv = {Bin("ibsmctl")};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = sim_->Run(argv, 30s, host.empty() ? far_host_ : host);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r: CommandResult{};
  }

  std::string root_, far_host_, near_host_;
  std::unique_ptr<IbsimInstance> sim_;
  std::optional<ChildProcess> daemon_;
};

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

TEST_F(IbsmctlIbsimTest, WholeTablesFromIbsmdMatchWhatIbnetdiscoverSees) {
  auto disc = sim_->Run({"ibnetdiscover"}, 30s, far_host_);
  ASSERT_TRUE(disc.ok() && disc->exit_code == 0) << (disc.ok() ? Describe(*disc): "");
  Discovered want = ParseDiscovered(disc->out);
  ASSERT_EQ(want.end_port_guids.size(), 36u);  // 20 switches + 16 hosts

  // Every NodeRecord, in many RMPP segments (36 x 112 bytes), each GUID once.
  CommandResult nodes = Ctl({"sa", "nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << Describe(nodes);
  std::set<uint64_t> seen;
  static const std::regex guid_re(R"(port_guid (0x[0-9a-f]+))");
  for (const auto& l: Lines(nodes.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(l, m, guid_re)) << l;
    EXPECT_TRUE(seen.insert(std::stoull(m[1], nullptr, 16)).second) << "listed twice: " << l;
  }
  EXPECT_EQ(seen, want.end_port_guids);

  CommandResult links = Ctl({"sa", "links", "--count"});
  ASSERT_EQ(links.exit_code, 0) << Describe(links);
  EXPECT_EQ(std::stoul(links.out), want.cabled_port_lines);

  CommandResult switches = Ctl({"sa", "switches", "--count"});
  ASSERT_EQ(switches.exit_code, 0) << Describe(switches);
  EXPECT_EQ(std::stoul(switches.out), want.switches);

  // Paths from the asking host to every end port (36 x 64 bytes).
  CommandResult paths = Ctl({"sa", "paths"});
  ASSERT_EQ(paths.exit_code, 0) << Describe(paths);
  EXPECT_EQ(Lines(paths.out).size(), want.end_port_guids.size());

  CommandResult sm = Ctl({"sa", "sminfo"});
  ASSERT_EQ(sm.exit_code, 0) << Describe(sm);
  EXPECT_NE(sm.out.find("state MASTER"), std::string::npos) << sm.out;

  // --json, as on every command (before or after the table): the same records as JSON.
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"--json", "sa", "nodes"}, {"sa", "nodes", "--json"}}) {
    CommandResult js = Ctl(argv);
    ASSERT_EQ(js.exit_code, 0) << Describe(js);
    auto j = nlohmann::json::parse(js.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << js.out;
    EXPECT_EQ(j["table"], "nodes");
    ASSERT_EQ(j["records"].size(), want.end_port_guids.size()) << js.out;
    std::set<uint64_t> json_guids;
    for (const auto& r : j["records"])
      json_guids.insert(std::stoull(r["port_guid"].get<std::string>(), nullptr, 16));
    EXPECT_EQ(json_guids, want.end_port_guids);
  }
  CommandResult count = Ctl({"--json", "sa", "switches", "--count"});
  ASSERT_EQ(count.exit_code, 0) << Describe(count);
  EXPECT_EQ(nlohmann::json::parse(count.out)["count"], want.switches) << count.out;
}

TEST_F(IbsmctlIbsimTest, EmptyTablesLostAnswersAndUsageErrorsAreToldApart) {
  // A table with no match is empty, not an error.
  CommandResult none = Ctl({"sa", "nodes", "--lid", "0xbff0", "--count"});
  EXPECT_EQ(none.exit_code, 0) << Describe(none);
  EXPECT_EQ(none.out, "0\n");
  // Nobody at the SA LID: the client's own timers give up (ibsim never times a MAD out).
  CommandResult lost =
      Ctl({"--sa-lid", "0xbff0", "--timeout", "200", "--retries", "1", "sa", "nodes"});
  EXPECT_EQ(lost.exit_code, 2) << Describe(lost);
  EXPECT_NE(lost.err.find("SA at LID 49136"), std::string::npos) << lost.err;
  CommandResult bad = Ctl({"sa", "nosuchtable"});
  EXPECT_EQ(bad.exit_code, 1) << Describe(bad);
  EXPECT_NE(bad.err.find("unknown table"), std::string::npos) << bad.err;
}

TEST_F(IbsmctlIbsimTest, AHostRegistersFindsAndDeletesAServiceRecord) {
  // Registered by the far host, on its own GID, with a 60 s lease.
  CommandResult reg = Ctl({"sa", "register-service", "--service-id", "0x1000000000000abc",
                           "--name", "ibsm-e2e", "--lease", "60"});
  ASSERT_EQ(reg.exit_code, 0) << Describe(reg);
  EXPECT_NE(reg.out.find("id 0x1000000000000abc"), std::string::npos) << reg.out;
  // Found by ID and by name from another host.
  CommandResult by_id = Ctl({"sa", "services", "--service-id", "0x1000000000000abc"}, near_host_);
  ASSERT_EQ(by_id.exit_code, 0) << Describe(by_id);
  ASSERT_EQ(Lines(by_id.out).size(), 1u) << by_id.out;
  EXPECT_NE(by_id.out.find("\"ibsm-e2e\""), std::string::npos) << by_id.out;
  EXPECT_NE(by_id.out.find("lease 60"), std::string::npos) << by_id.out;
  CommandResult by_name = Ctl({"sa", "services", "--name", "ibsm-e2e", "--count"}, near_host_);
  EXPECT_EQ(by_name.out, "1\n") << Describe(by_name);
  CommandResult other = Ctl({"sa", "services", "--name", "nobody", "--count"}, near_host_);
  EXPECT_EQ(other.out, "0\n") << Describe(other);
  // Deleted by its owner: gone for everyone.
  CommandResult del = Ctl({"sa", "delete-service", "--service-id", "0x1000000000000abc"});
  ASSERT_EQ(del.exit_code, 0) << Describe(del);
  CommandResult gone = Ctl({"sa", "services", "--service-id", "0x1000000000000abc", "--count"},
                           near_host_);
  EXPECT_EQ(gone.out, "0\n") << Describe(gone);
  // A registration without a name is refused before anything is sent.
  CommandResult bad = Ctl({"sa", "register-service", "--service-id", "5"});
  EXPECT_EQ(bad.exit_code, 1) << Describe(bad);
}

}  // namespace
}  // namespace ibsm::test
