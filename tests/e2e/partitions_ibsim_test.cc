// Partitions end to end on ibsim:
// ibsmd runs with a partitions.conf of two partitions on FatTree2(4); infiniband-diags'
// saquery, run on a host, gets PathRecords to hosts of its own partition and none to the
// other's, and smpquery pkeys shows every host's P_Key table as configured.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The non-zero P_Keys of `smpquery pkeys` output ("   0: 0xffff 0x8001 0x0000 ..."), in
// index order.
std::vector<unsigned> PKeys(const std::string& out) {
  static const std::regex row(R"(^\s*\d+:((\s+0x[0-9a-fA-F]{4})+)\s*$)");
  static const std::regex key(R"(0x([0-9a-fA-F]{4}))");
  std::vector<unsigned> keys;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    std::string rest = m[1];
    for (std::sregex_iterator it(rest.begin(), rest.end(), key), end; it != end; ++it) {
      unsigned k = static_cast<unsigned>(std::stoul((*it)[1], nullptr, 16));
      if (k) keys.push_back(k);
    }
  }
  return keys;
}

struct PartHost {
  std::string name;  // SIM_HOST
  uint64_t guid = 0;
  uint16_t lid = 0;
};

class PartitionsIbsimTest: public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    error_ = new std::string;
    if (!IbsimInstance::Available() || access(Ibsmd().c_str(), X_OK) != 0) return;
    auto dir = MakeTempDir("ibsm-pkey-e2e-");
    if (!dir.ok()) {
      *error_ = dir.status().ToString();
      return;
    }
    root_ = new std::string(*dir);
    auto fabric = FatTree2(4);  // 8 hosts
    if (!fabric.ok()) {
      *error_ = fabric.status().ToString();
      return;
    }
    hosts_ = new std::vector<PartHost>;
    for (NodeId n = 0; n < fabric->node_count(); ++n) {
      if (fabric->node(n).kind != NodeKind::kCa) continue;
      hosts_->push_back({fabric->node(n).name, fabric->port(n, PortNum{1}).guid.value(), 0});
    }
    auto g = [](int i) {
      char b[32];
      std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>((*hosts_)[i].guid));
      return std::string(b);
    };
    // The SM runs on host 0 (ibsim attaches clients without SIM_HOST to the first CA).
    std::ofstream(*root_ + "/partitions.conf")
        << "# two partitions\n"
        << "red=0x0001, ipoib: " << g(1) << "=full, " << g(2) << "=full, " << g(3)
        << "=full, SELF=full ;\n"
        << "blue=0x0002 :\n    " << g(4) << "=full, " << g(5) << "=full,\n    " << g(6)
        << "=full, SELF=full ;\n";
    std::ofstream(*root_ + "/fabric.net") << WriteTopology(*fabric);
    auto sim = IbsimInstance::Start(*root_ + "/fabric.net");
    if (!sim.ok()) {
      *error_ = "ibsim: " + sim.status().ToString();
      return;
    }
    sim_ = sim->release();
    std::ofstream(*root_ + "/opensm.conf")
        << "guid2lid_file " << *root_ << "/guid2lid\nstate_db_file " << *root_
        << "/state.db\ndump_files_dir " << *root_ << "\nlog_file " << *root_
        << "/ibsmd.log\npartition_config_file " << *root_ << "/partitions.conf\n";
    auto d = sim_->StartChild({Ibsmd(), "-F", *root_ + "/opensm.conf"});
    if (!d.ok()) {
      *error_ = "ibsmd: " + d.status().ToString();
      return;
    }
    daemon_ = new ChildProcess(std::move(*d));
    auto until = std::chrono::steady_clock::now() + 60s;
    std::string log;
    while (std::chrono::steady_clock::now() < until) {
      log = ReadFile(*root_ + "/ibsmd.log");
      if (log.find("SUBNET UP") != std::string::npos) break;
      std::this_thread::sleep_for(50ms);
    }
    if (log.find("SUBNET UP") == std::string::npos) {
      *error_ = "no SUBNET UP:\n" + log;
      return;
    }
    // Each host's LID, as the host itself reads it (smpquery portinfo over DR "0": itself).
    for (PartHost& h: *hosts_) {
      auto r = sim_->Run({"smpquery", "-D", "portinfo", "0"}, kToolTimeout, h.name);
      if (!r.ok() || r->exit_code != 0) {
        *error_ = "smpquery portinfo on " + h.name + ": " +
                  (r.ok() ? Describe(*r): r.status().ToString());
        return;
      }
      std::smatch m;
      if (!std::regex_search(r->out, m, std::regex(R"(\nLid:\.+(\d+))"))) {
        *error_ = "no Lid in smpquery portinfo:\n" + r->out;
        return;
      }
      h.lid = static_cast<uint16_t>(std::stoi(m[1]));
    }
  }

  static void TearDownTestSuite() {
    if (daemon_) {
      kill(daemon_->pid(), SIGTERM);
      (void)daemon_->Wait(10s);
      delete daemon_;
    }
    delete sim_;
    std::error_code ec;
    if (root_ && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(*root_, ec);
    delete root_;
    delete hosts_;
    delete error_;
    daemon_ = nullptr;
    sim_ = nullptr;
    root_ = nullptr;
    hosts_ = nullptr;
    error_ = nullptr;
  }

  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    if (access(Ibsmd().c_str(), X_OK) != 0) FAIL() << "ibsmd not built at " << Ibsmd();
    ASSERT_TRUE(error_->empty()) << *error_;
  }

  // `saquery PR --slid --dlid` run on host `from`: the printed records' DLIDs and P_Keys.
  static std::string PathQuery(int from, int src, int dst) {
    const auto& h = *hosts_;
    auto r = sim_->Run({"saquery", "PR", "--slid", std::to_string(h[src].lid), "--dlid",
                        std::to_string(h[dst].lid)},
                       kToolTimeout, h[from].name);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return "";
    EXPECT_FALSE(r->timed_out) << Describe(*r);
    return r->out + r->err;
  }

  static inline std::string* error_ = nullptr;
  static inline std::string* root_ = nullptr;
  static inline std::vector<PartHost>* hosts_ = nullptr;
  static inline IbsimInstance* sim_ = nullptr;
  static inline ChildProcess* daemon_ = nullptr;
};

TEST_F(PartitionsIbsimTest, PathRecordsWithinAPartitionAreAnsweredAcrossThemNone) {
  const auto& h = *hosts_;
  // red: hosts 1-3; blue: hosts 4-6; host 7 in neither.
  std::string red = PathQuery(1, 1, 3);
  ASSERT_EQ(DumpValues(red, "dlid").size(), 1u) << red;
  EXPECT_EQ(DumpValues(red, "dlid")[0], std::to_string(h[3].lid)) << red;
  EXPECT_EQ(DumpValues(red, "pkey")[0], "0x8001") << red;
  std::string blue = PathQuery(5, 5, 6);
  ASSERT_EQ(DumpValues(blue, "dlid").size(), 1u) << blue;
  EXPECT_EQ(DumpValues(blue, "pkey")[0], "0x8002") << blue;
  for (auto [from, to] : {std::pair{1, 4}, std::pair{4, 1}, std::pair{6, 2}, std::pair{7, 1},
                          std::pair{2, 7}}) {
    std::string across = PathQuery(from, from, to);
    EXPECT_TRUE(DumpValues(across, "dlid").empty())
        << "host " << from << " -> host " << to << ":\n" << across;
  }
  // Every host still reaches the SM, a full member of the default partition.
  std::string to_sm = PathQuery(7, 7, 0);
  ASSERT_EQ(DumpValues(to_sm, "dlid").size(), 1u) << to_sm;
  EXPECT_EQ(DumpValues(to_sm, "pkey")[0], "0x7FFF") << to_sm;
}

TEST_F(PartitionsIbsimTest, SmpqueryPkeysOnEveryHostShowsItsPartitions) {
  const auto& h = *hosts_;
  std::vector<std::vector<unsigned>> want = {
      {0xFFFF, 0x8001, 0x8002},  // the SM: full member of all
      {0x7FFF, 0x8001}, {0x7FFF, 0x8001}, {0x7FFF, 0x8001},
      {0x7FFF, 0x8002}, {0x7FFF, 0x8002}, {0x7FFF, 0x8002},
      {0x7FFF},
  };
  ASSERT_EQ(h.size(), want.size());
  for (size_t i = 0; i < h.size(); ++i) {
    auto r = sim_->Run({"smpquery", "pkeys", std::to_string(h[i].lid)}, kToolTimeout);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->exit_code, 0) << Describe(*r);
    EXPECT_EQ(PKeys(r->out), want[i]) << "host " << i << " (" << h[i].name << "):\n" << r->out;
  }
}

}  // namespace
}  // namespace ibsm::test
