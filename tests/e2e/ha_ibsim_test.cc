// High availability end to end on ibsim: several SM processes, each
// attached to its own host of one ibsim fabric, run the SMInfo protocol through ibsim, which
// forwards SMInfo to the SM client bound at the destination port. What a user sees is
// checked with infiniband-diags (sminfo, ibnetdiscover) and the SMs' own logs.
//
// Hosts: ibsmd "a" at node-0001/hca1 (port GUID ...0011), "b" at the last host (a larger
// GUID), so with equal priorities "a" is the better SM.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <algorithm>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "ha/state_store.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Polls the file at `path` until `done(text)` or the deadline; returns the last text read.
template <typename Pred>
std::string WaitFor(const std::string& path, Pred done, std::chrono::seconds deadline = 30s) {
  auto until = std::chrono::steady_clock::now() + deadline;
  std::string text = ReadFile(path);
  while (!done(text) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
    text = ReadFile(path);
  }
  return text;
}

// The text after the first occurrence of `marker` (empty if none).
std::string After(const std::string& text, const std::string& marker) {
  size_t at = text.find(marker);
  return at == std::string::npos ? std::string(): text.substr(at);
}

struct SmInfoSeen {
  uint64_t guid = 0;
  int priority = -1;
  std::string state;  // "SMINFO_MASTER"
  std::string raw;
};

class HaIbsimTest: public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    if (access(Ibsmd().c_str(), X_OK) != 0) FAIL() << "ibsmd not built at " << Ibsmd();
    auto dir = MakeTempDir("ibsm-ha-e2e-");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    root_ = *dir;
  }

  void TearDown() override {
    children_.clear();  // killed by PID
    sim_.reset();
    if (!root_.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) {
      std::error_code ec;
      fs::remove_all(root_, ec);
    }
  }

  void StartFabric(Result<Fabric> fabric, bool console = false) {
    ASSERT_TRUE(fabric.ok()) << fabric.status().ToString();
    fabric_ = std::move(*fabric);
    std::string net = root_ + "/fabric.net";
    WriteTextFile(net, WriteTopology(fabric_));
    IbsimOptions o;
    o.console = console;
    auto sim = IbsimInstance::Start(net, o);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    sim_ = std::move(*sim);
    first_host_.clear();
    for (NodeId n = 0; n < fabric_.node_count(); ++n) {
      if (fabric_.node(n).kind != NodeKind::kCa) continue;
      if (first_host_.empty()) first_host_ = fabric_.node(n).name;
      last_host_ = fabric_.node(n).name;
    }
  }

  std::string Dir(const std::string& name) const { return root_ + "/" + name; }
  std::string LogPath(const std::string& name) const { return Dir(name) + "/sm.log"; }
  std::string Log(const std::string& name) const { return ReadFile(LogPath(name)); }

  // Starts ibsmd `name` at `host` with `conf` added to its opensm.conf. Returns its index.
  size_t StartIbsmd(const std::string& name, const std::string& host, const std::string& conf) {
    fs::create_directories(Dir(name));
    std::string path = Dir(name) + "/opensm.conf";
    WriteTextFile(path, "guid2lid_file " + Dir(name) + "/guid2lid\nstate_db_file " + Dir(name) +
                        "/state.db\ndump_files_dir " + Dir(name) + "\nlog_file " +
                        LogPath(name) + "\n" + conf);
    auto child = sim_->StartChild({Ibsmd(), "-F", path}, host);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    children_.push_back(std::make_unique<ChildProcess>(std::move(*child)));
    return children_.size() - 1;
  }

  // OpenSM 3.3.23 at `host`, its files in Dir(name).
  size_t StartOpensm(const std::string& name, const std::string& host, const std::string& conf) {
    fs::create_directories(Dir(name));
    std::string path = Dir(name) + "/opensm.conf";
    // Flushed lines, so the test sees "SUBNET UP" when OpenSM writes it.
    WriteTextFile(path, "force_log_flush TRUE\n" + conf);
    auto env = sim_->Environment(host);
    env.push_back("OSM_TMP_DIR=" + Dir(name));
    env.push_back("OSM_CACHE_DIR=" + Dir(name));
    auto child = ChildProcess::Start({"opensm", "-F", path, "-f", LogPath(name)},
                                     sim_->work_dir(), env);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    children_.push_back(std::make_unique<ChildProcess>(std::move(*child)));
    return children_.size() - 1;
  }

  void Kill9(size_t child) {
    kill(children_[child]->pid(), SIGKILL);
    (void)children_[child]->Wait(10s);
  }

  // `sminfo` from a host that runs no SM; `lid` empty = ask the master.
  SmInfoSeen Sminfo(const std::string& lid = "") {
    std::vector<std::string> argv = {"sminfo"};
    if (!lid.empty()) argv.push_back(lid);
    SmInfoSeen seen;
    static const std::regex re(
        R"(sm guid (0x[0-9a-f]+), activity count \d+ priority (\d+) state \d+ (\w+))");
    // sminfo under libumad2sim now and then dies of SIGSEGV in its own receive thread (seen
    // in dmesg); such a run says nothing about the SM and is run once more.
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto r = sim_->Run(argv, kToolTimeout, ProbeHost());
      if (!r.ok()) return seen;
      seen.raw = r->out + r->err;
      std::smatch m;
      if (std::regex_search(seen.raw, m, re)) {
        seen.guid = std::stoull(m[1], nullptr, 16);
        seen.priority = std::stoi(m[2]);
        seen.state = m[3];
        return seen;
      }
      if (r->exit_code < 128) return seen;
      std::printf("[ retry ] sminfo %s killed by signal %d; run again\n",
                  lid.empty() ? "(master)" : lid.c_str(), r->exit_code - 128);
    }
    return seen;
  }

  // The LID a host's port holds (ibstat under the preload at that host).
  std::string LidOf(const std::string& host) {
    auto r = sim_->Run({"ibstat"}, kToolTimeout, host);
    if (!r.ok()) return "";
    std::smatch m;
    static const std::regex re(R"(Base lid: (\d+))");
    return std::regex_search(r->out, m, re) ? m[1].str(): "";
  }

  // ibnetdiscover's topology (every node, cable and LID) from a host without an SM,
  // without its header comment (which carries the time).
  std::string Topology() {
    auto r = sim_->Run({"ibnetdiscover"}, kToolTimeout, ProbeHost());
    for (int attempt = 1; attempt < 3 && r.ok() && r->exit_code >= 128; ++attempt) {
      // Killed by a signal (libumad2sim's receive thread, as with sminfo): run again.
      std::printf("[ retry ] ibnetdiscover killed by signal %d; run again\n", r->exit_code - 128);
      r = sim_->Run({"ibnetdiscover"}, kToolTimeout, ProbeHost());
    }
    if (!r.ok() || r->exit_code != 0)
      return "ibnetdiscover failed: " + (r.ok() ? std::to_string(r->exit_code) + " " + r->err
                                                : r.status().ToString());
    std::istringstream in(r->out);
    std::string line, out;
    while (std::getline(in, line))
      if (!line.empty() && line[0] != '#') out += line + "\n";
    return out;
  }

  std::string ProbeHost() const {
    for (NodeId n = 1; n < fabric_.node_count(); ++n)
      if (fabric_.node(n).kind == NodeKind::kCa && fabric_.node(n).name != first_host_ &&
          fabric_.node(n).name != last_host_)
        return fabric_.node(n).name;
    return first_host_;
  }

  // The CA hosts of the fabric in node order.
  std::vector<std::string> Hosts() const {
    std::vector<std::string> out;
    for (NodeId n = 0; n < fabric_.node_count(); ++n)
      if (fabric_.node(n).kind == NodeKind::kCa) out.push_back(fabric_.node(n).name);
    return out;
  }

  // `saquery args...` from the probe host (it asks the master its port points at).
  std::string Saquery(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"saquery"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = sim_->Run(argv, kToolTimeout, ProbeHost());
    if (!r.ok()) return r.status().ToString();
    return r->out + r->err;
  }

  uint64_t PortGuidOf(const std::string& host) const {
    auto n = fabric_.FindNodeByName(host);
    return n ? fabric_.port(*n, PortNum{1}).guid.value(): 0;
  }

  std::string root_;
  Fabric fabric_;
  std::unique_ptr<IbsimInstance> sim_;
  std::vector<std::unique_ptr<ChildProcess>> children_;
  std::string first_host_, last_host_;
};

constexpr char kFastPolling[] = "sminfo_polling_timeout 1000\npolling_retry_number 2\n";

auto SubnetUp = [](const std::string& l) { return Has(l, "SUBNET UP"); };
auto Standby = [](const std::string& l) { return Has(l, "Entering STANDBY state"); };

// The sweep that followed "Entering MASTER state" after `marker`, as logged: a heavy sweep,
// or the repair sweep of every switch that a takeover from a standby's model runs.
std::string TakeoverSweepLine(const std::string& log, const std::string& marker) {
  std::string tail = After(log, marker);
  std::smatch m;
  static const std::regex re(R"((heavy|repair) sweep \d+ done .*)");
  return std::regex_search(tail, m, re) ? m[0].str(): "";
}

TEST_F(HaIbsimTest, TwoIbsmdElectOneMasterAndTheStandbyTakesOverAfterKill9KeepingLidsAndLfts) {
  StartFabric(FatTree2(4));
  size_t a = StartIbsmd("a", first_host_, std::string("sm_priority 5\n") + kFastPolling);
  std::string log_a = WaitFor(LogPath("a"), SubnetUp);
  ASSERT_TRUE(Has(log_a, "SUBNET UP")) << log_a;
  const std::string sock_b = Dir("b") + "/ctl.sock";
  StartIbsmd("b", last_host_,
             std::string("sm_priority 3\ncontrol_socket ") + sock_b + "\n" + kFastPolling);
  std::string log_b = WaitFor(LogPath("b"), Standby);
  ASSERT_TRUE(Has(log_b, "Entering STANDBY state")) << log_b;
  EXPECT_FALSE(Has(log_b, "Entering MASTER state")) << log_b;

  SmInfoSeen master = Sminfo();
  EXPECT_EQ(master.state, "SMINFO_MASTER") << master.raw;
  EXPECT_EQ(master.guid, PortGuidOf(first_host_)) << master.raw;
  EXPECT_EQ(master.priority, 5) << master.raw;
  SmInfoSeen standby = Sminfo(LidOf(last_host_));
  EXPECT_EQ(standby.state, "SMINFO_STANDBY") << standby.raw;
  EXPECT_EQ(standby.guid, PortGuidOf(last_host_)) << standby.raw;

  std::string before = Topology();
  auto killed = std::chrono::steady_clock::now();
  Kill9(a);
  log_b = WaitFor(LogPath("b"), [](const std::string& l) {
    return Has(After(l, "Entering MASTER state"), "SUBNET UP");
  });
  auto up = std::chrono::steady_clock::now();
  ASSERT_TRUE(Has(After(log_b, "Entering MASTER state"), "SUBNET UP")) << log_b;
  std::printf("[ figure ] 2-tier k=4: master killed -> standby SUBNET UP in %.2f s "
              "(polling 1000 ms x 2)\n",
              std::chrono::duration<double>(up - killed).count());
  std::string sweep = TakeoverSweepLine(log_b, "Entering MASTER state");
  EXPECT_TRUE(Has(sweep, " 0 LID changes")) << sweep;
  EXPECT_TRUE(Has(sweep, " 0 LFT blocks sent")) << sweep;
  EXPECT_TRUE(Has(log_b, "SM-HA-005")) << "the lost polls are logged\n" << log_b;
  // The HA counters, logged on every state change for operators (and the control socket).
  std::smatch counters;
  EXPECT_TRUE(std::regex_search(
      log_b, counters,
      std::regex(R"(SM-HA-010 DISCOVERING -> MASTER; HA counters: state changes 4, takeovers 1, )"
                 R"(handovers sent 0 received 0, acknowledges sent 0, polls sent \d+ missed 2,)")))
      << log_b;
  // The clients registered with "a" (SA state is per SM): every CA is told to re-register.
  EXPECT_TRUE(Has(sweep, "(" + std::to_string(fabric_.ca_count()) + " ClientReregister)"))
      << sweep;

  // What the operator sees on the new master: the dead master is not answering, since the
  // first missed poll, with when it was last seen; not MASTER.
  const std::string a_guid = fmt::format("{:#018x}", PortGuidOf(first_host_));
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"--socket", sock_b}, {"--state-db", Dir("b") + "/state.db"}}) {
    std::vector<std::string> argv{Bin("ibsmctl")};
    argv.insert(argv.end(), how.begin(), how.end());
    argv.push_back("ha");
    auto ha = RunCommand(argv, 30s, root_);
    ASSERT_TRUE(ha.ok());
    EXPECT_EQ(ha->exit_code, 0) << ha->err;
    std::smatch row;
    ASSERT_TRUE(std::regex_search(ha->out, row, std::regex(a_guid + "  NOT ANSWERING since [-0-9: ]+ "
                                                          "UTC \\([0-9]+ missed; was MASTER\\) +5  "
                                                          "[-0-9: ]+  yes")))
        << ha->out;
  }

  EXPECT_EQ(Topology(), before) << "LIDs or links changed over the failover";
  SmInfoSeen after = Sminfo();
  EXPECT_EQ(after.state, "SMINFO_MASTER") << after.raw;
  EXPECT_EQ(after.guid, PortGuidOf(last_host_)) << after.raw;

  // The new master's state file: its state, the path it took, the peer it followed, and
  // a digest of what it programmed into every switch.
  auto store = ha::StateStore::OpenReadOnly(Dir("b") + "/state.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->GetValue("sm_state");
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_EQ(**state, "MASTER");
  auto events = (*store)->RecentEvents(20);
  ASSERT_TRUE(events.ok());
  std::string path;
  for (auto it = events->rbegin(); it != events->rend(); ++it)
    if (it->kind == ha::kEventStateChange) path += it->message.substr(0, it->message.find(':')) + "; ";
  EXPECT_EQ(path, "NOTACTIVE -> DISCOVERING; DISCOVERING -> STANDBY; STANDBY -> DISCOVERING; "
                  "DISCOVERING -> MASTER; ");
  auto peers = (*store)->Peers();
  ASSERT_TRUE(peers.ok());
  ASSERT_EQ(peers->size(), 1u);
  EXPECT_EQ(peers->front().guid.value(), PortGuidOf(first_host_));
  EXPECT_EQ(peers->front().priority, 5);
  EXPECT_TRUE(peers->front().sm_key_match);
  auto digests = (*store)->LoadLftDigests();
  ASSERT_TRUE(digests.ok());
  EXPECT_EQ(digests->size(), fabric_.switch_count());
}

// SMInfoRecords as saquery prints them: port GUID -> "priority/state".
std::map<std::string, std::string> SmirByGuid(const std::string& out) {
  auto guids = DumpValues(out, "GUID");
  auto prios = DumpValues(out, "Priority");
  auto states = DumpValues(out, "SMState");
  std::map<std::string, std::string> m;
  if (guids.size() != prios.size() || guids.size() != states.size()) return m;
  for (size_t i = 0; i < guids.size(); ++i) m[guids[i]] = prios[i] + "/" + states[i];
  return m;
}

// The warm standby on ibsim (ARCHITECTURE.md "Warm standby"): the standby refreshes its model
// every second with Gets and reads the LFT blocks once the fabric held still; killed, the
// master is replaced by a repair sweep of every switch over that model: no discovery, no
// LFT block read back or written, no LID changed; the heavy sweep after it reads the blocks
// back and writes none. ibnetdiscover sees the same LIDs and links.
TEST_F(HaIbsimTest, AWarmStandbyTakesOverFromItsModelWithoutReadingTheBlocksBack) {
  StartFabric(FatTree2(4));
  const std::string conf = std::string(kFastPolling) + "sweep_interval 1\n";
  size_t a = StartIbsmd("a", first_host_, "sm_priority 5\n" + conf);
  ASSERT_TRUE(Has(WaitFor(LogPath("a"), SubnetUp), "SUBNET UP")) << Log("a");
  const std::string sock_b = Dir("b") + "/ctl.sock";
  StartIbsmd("b", last_host_, "sm_priority 3\ncontrol_socket " + sock_b + "\n" + conf);
  std::string log_b = WaitFor(LogPath("b"), [](const std::string& l) {
    return Has(l, "a takeover starts from this model");
  });
  ASSERT_TRUE(Has(log_b, "a takeover starts from this model")) << log_b;
  // The operator's view on the standby: its model, and that a takeover starts from it.
  auto ha = RunCommand({Bin("ibsmctl"), "--socket", sock_b, "ha"}, 30s, root_);
  ASSERT_TRUE(ha.ok()) << ha.status().ToString();
  EXPECT_TRUE(Has(ha->out, "standby model: " + std::to_string(fabric_.node_count()) + " nodes"))
      << ha->out;
  EXPECT_TRUE(Has(ha->out, "a takeover starts from it")) << ha->out;
  std::string before = Topology();
  Kill9(a);
  // The takeover's SUBNET UP, then the heavy sweep's.
  log_b = WaitFor(LogPath("b"), [](const std::string& l) {
    const std::string t = After(l, "Entering MASTER state");
    const size_t first = t.find("SUBNET UP");
    return first != std::string::npos && t.find("SUBNET UP", first + 1) != std::string::npos;
  });
  ASSERT_TRUE(Has(log_b, "takeover from the standby's model")) << log_b;
  const std::string tail = After(log_b, "takeover from the standby's model");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(tail, m, std::regex(R"(repair sweep \d+ done .*)"))) << tail;
  const std::string takeover = m[0].str();
  EXPECT_TRUE(Has(takeover, " 0 LID changes")) << takeover;
  EXPECT_TRUE(Has(takeover, " 0 LFT blocks sent (0 read)")) << takeover;
  // The takeover Sets PortInfo on the end ports alone (one per node here: the new
  // MasterSMLID); ibsim's switch ports, which keep no VLStallCount or thresholds, are left to
  // the heavy sweep after it.
  std::smatch counts;
  ASSERT_TRUE(std::regex_search(takeover, counts,
                                std::regex(R"((\d+) nodes .* (\d+) PortInfo Sets)")))
      << takeover;
  EXPECT_EQ(counts[2].str(), counts[1].str()) << takeover;
  ASSERT_TRUE(std::regex_search(tail, m, std::regex(R"(heavy sweep \d+ done .*)"))) << tail;
  const std::string check = m[0].str();
  EXPECT_TRUE(Has(check, " 0 LFT blocks sent")) << check;
  EXPECT_FALSE(Has(check, "(0 read)")) << "the heavy sweep did not read the blocks back: " << check;
  EXPECT_FALSE(Has(check, " 0 PortInfo Sets")) << "the switch ports were not set after: " << check;
  // Scripts wait for "SUBNET UP": no other line may carry those words.
  std::istringstream lines(log_b);
  for (std::string l; std::getline(lines, l);) {
    if (Has(l, "SUBNET UP")) {
      EXPECT_TRUE(l.ends_with("] info: SUBNET UP")) << l;
    }
  }
  EXPECT_EQ(Topology(), before) << "LIDs or links changed over the failover";
}

TEST_F(HaIbsimTest, ThreeIbsmdShowOneMasterTwoStandbysAndTheBestStandbyTakesOverAfterKill9) {
  StartFabric(FatTree2(4));
  std::vector<std::string> hosts = Hosts();
  ASSERT_GE(hosts.size(), 4u);
  const std::string host_a = hosts.front(), host_b = hosts.back(), host_c = hosts[hosts.size() - 2];
  ASSERT_NE(host_c, ProbeHost());
  // Light sweeps every second keep the master's view of the standbys' states fresh.
  std::string conf = std::string(kFastPolling) + "sweep_interval 1\n";
  size_t a = StartIbsmd("a", host_a, "sm_priority 5\n" + conf);
  ASSERT_TRUE(Has(WaitFor(LogPath("a"), SubnetUp), "SUBNET UP")) << Log("a");
  StartIbsmd("b", host_b, "sm_priority 4\n" + conf);
  StartIbsmd("c", host_c, "sm_priority 3\n" + conf);
  ASSERT_TRUE(Has(WaitFor(LogPath("b"), Standby), "Entering STANDBY state")) << Log("b");
  ASSERT_TRUE(Has(WaitFor(LogPath("c"), Standby), "Entering STANDBY state")) << Log("c");

  const std::string ga = Hex16(PortGuidOf(host_a)), gb = Hex16(PortGuidOf(host_b)),
                    gc = Hex16(PortGuidOf(host_c));
  // The master's SA lists every SM it knows, with the state each is in.
  const std::map<std::string, std::string> want = {{ga, "5/3"}, {gb, "4/2"}, {gc, "3/2"}};
  std::string smir;
  for (auto until = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(250ms)) {
    smir = Saquery({"SMIR"});
    if (SmirByGuid(smir) == want) break;
  }
  EXPECT_EQ(SmirByGuid(smir), want) << smir;
  EXPECT_EQ(DumpValues(smir, "SM_Key"), std::vector<std::string>(3, Hex16(0)))
      << "keys are shown only to the trusted\n" << smir;
  // `saquery -s`: the PortInfoRecords of the ports that claim IsSM. Three of them (72 bytes
  // each) do not fit the 256 bytes ibsim carries, so saquery sees the first two here.
  std::string issm = Saquery({"-s"});
  std::vector<std::string> sm_lids = DumpValues(issm, "EndPortLid");
  std::set<std::string> lids = {LidOf(host_a), LidOf(host_b), LidOf(host_c)};
  EXPECT_GE(sm_lids.size(), 2u) << issm;
  for (const auto& l: sm_lids) EXPECT_TRUE(lids.count(l)) << "LID " << l << " is no SM's\n" << issm;

  SmInfoSeen master = Sminfo();
  EXPECT_EQ(master.state, "SMINFO_MASTER") << master.raw;
  EXPECT_EQ(master.guid, PortGuidOf(host_a)) << master.raw;
  EXPECT_EQ(Sminfo(LidOf(host_b)).state, "SMINFO_STANDBY");
  EXPECT_EQ(Sminfo(LidOf(host_c)).state, "SMINFO_STANDBY");

  std::string before = Topology();
  auto killed = std::chrono::steady_clock::now();
  Kill9(a);
  std::string log_b = WaitFor(LogPath("b"), [](const std::string& l) {
    return Has(After(l, "Entering MASTER state"), "SUBNET UP");
  });
  auto up = std::chrono::steady_clock::now();
  ASSERT_TRUE(Has(After(log_b, "Entering MASTER state"), "SUBNET UP")) << log_b;
  std::printf("[ figure ] 3 SMs, 2-tier k=4: master killed -> best standby SUBNET UP in %.2f s "
              "(polling 1000 ms x 2, bound 3 s + one sweep)\n",
              std::chrono::duration<double>(up - killed).count());
  std::string sweep = TakeoverSweepLine(log_b, "Entering MASTER state");
  EXPECT_TRUE(Has(sweep, " 0 LID changes")) << sweep;
  EXPECT_TRUE(Has(sweep, " 0 LFT blocks sent")) << sweep;
  // The third SM never becomes master: it follows the new one.
  std::string log_c = WaitFor(LogPath("c"), [&](const std::string& l) {
    return Has(l, "polling master SM " + gb);
  });
  EXPECT_TRUE(Has(log_c, "polling master SM " + gb)) << log_c;
  EXPECT_FALSE(Has(log_c, "Entering MASTER state")) << log_c;

  EXPECT_EQ(Topology(), before) << "LIDs or links changed over the failover";
  SmInfoSeen after = Sminfo();
  EXPECT_EQ(after.state, "SMINFO_MASTER") << after.raw;
  EXPECT_EQ(after.guid, PortGuidOf(host_b)) << after.raw;
  EXPECT_EQ(Sminfo(LidOf(host_c)).state, "SMINFO_STANDBY");
  // The new master's SA: itself and the standby; the dead SM does not answer and is gone.
  const std::map<std::string, std::string> want_after = {{gb, "4/3"}, {gc, "3/2"}};
  for (auto until = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(250ms)) {
    smir = Saquery({"SMIR"});
    if (SmirByGuid(smir) == want_after) break;
  }
  EXPECT_EQ(SmirByGuid(smir), want_after) << smir;
}

TEST_F(HaIbsimTest, AHigherPrioritySmJoiningTakesOverByHandoverWithoutLftSets) {
  StartFabric(FatTree2(4));
  StartIbsmd("b", last_host_, std::string("sm_priority 3\n") + kFastPolling);
  ASSERT_TRUE(Has(WaitFor(LogPath("b"), SubnetUp), "SUBNET UP"));
  std::string before = Topology();
  StartIbsmd("a", first_host_, std::string("sm_priority 7\n") + kFastPolling);
  std::string log_a = WaitFor(LogPath("a"), [](const std::string& l) {
    return Has(After(l, "Entering MASTER state"), "SUBNET UP");
  });
  ASSERT_TRUE(Has(log_a, "Entering STANDBY state")) << "it first follows the master\n" << log_a;
  ASSERT_TRUE(Has(log_a, "Entering MASTER state (SMInfo Set 1 from SM")) << log_a;
  std::string sweep = TakeoverSweepLine(log_a, "Entering MASTER state");
  EXPECT_TRUE(Has(sweep, " 0 LID changes")) << sweep;
  EXPECT_TRUE(Has(sweep, " 0 LFT blocks sent")) << sweep;
  std::string log_b = WaitFor(LogPath("b"), [](const std::string& l) {
    return Has(l, "SMInfo Set 2 from SM");  // the ACKNOWLEDGE
  });
  EXPECT_TRUE(Has(log_b, "handing over to SM")) << log_b;
  EXPECT_TRUE(Has(After(log_b, "handing over"), "Entering STANDBY state")) << log_b;
  EXPECT_TRUE(Has(log_b, "SMInfo Set 2 from SM")) << log_b;

  SmInfoSeen master = Sminfo();
  EXPECT_EQ(master.guid, PortGuidOf(first_host_)) << master.raw;
  EXPECT_EQ(master.state, "SMINFO_MASTER") << master.raw;
  EXPECT_EQ(Sminfo(LidOf(last_host_)).state, "SMINFO_STANDBY");
  EXPECT_EQ(Topology(), before);
}

TEST_F(HaIbsimTest, AtEqualPriorityTheLowerGuidJoiningTakesOver) {
  StartFabric(FatTree2(4));
  StartIbsmd("b", last_host_, kFastPolling);
  ASSERT_TRUE(Has(WaitFor(LogPath("b"), SubnetUp), "SUBNET UP"));
  StartIbsmd("a", first_host_, kFastPolling);
  std::string log_a = WaitFor(LogPath("a"), [](const std::string& l) {
    return Has(After(l, "Entering MASTER state"), "SUBNET UP");
  });
  ASSERT_TRUE(Has(log_a, "Entering MASTER state (SMInfo Set 1")) << log_a;
  EXPECT_EQ(Sminfo().guid, PortGuidOf(first_host_));
}

TEST_F(HaIbsimTest, SmsWithDifferentSmKeysIgnoreEachOtherAndSayWhy) {
  StartFabric(FatTree2(4));
  StartIbsmd("a", first_host_, std::string("sm_priority 5\nsm_key 0x1\n") + kFastPolling);
  ASSERT_TRUE(Has(WaitFor(LogPath("a"), SubnetUp), "SUBNET UP"));
  StartIbsmd("b", last_host_, std::string("sm_priority 3\nsm_key 0x2\n") + kFastPolling);
  std::string log_b = WaitFor(LogPath("b"), SubnetUp);
  // OpenSM's behaviour: an SM with another key does not count, so "b" finds no master.
  EXPECT_TRUE(Has(log_b, "SM-HA-003 SM 0x")) << log_b;
  EXPECT_TRUE(Has(log_b, "has another SM_Key: ignored")) << log_b;
  // Neither key reaches the log: a reader of it could take over as master.
  EXPECT_FALSE(Has(log_b, "0x0000000000000002")) << log_b;
  EXPECT_FALSE(Has(log_b, "SM_Key 0x")) << log_b;
  EXPECT_TRUE(Has(log_b, "Entering MASTER state")) << log_b;
  EXPECT_FALSE(Has(log_b, "Entering STANDBY state")) << log_b;
  EXPECT_EQ(Sminfo(LidOf(last_host_)).state, "SMINFO_MASTER");
}

TEST_F(HaIbsimTest, IgnoreOtherSmMakesASecondMasterThatNeverStandsBy) {
  StartFabric(FatTree2(4));
  StartIbsmd("a", first_host_, std::string("sm_priority 5\n") + kFastPolling);
  ASSERT_TRUE(Has(WaitFor(LogPath("a"), SubnetUp), "SUBNET UP"));
  StartIbsmd("b", last_host_, std::string("sm_priority 3\nignore_other_sm TRUE\n") + kFastPolling);
  std::string log_b = WaitFor(LogPath("b"), SubnetUp);
  EXPECT_TRUE(Has(log_b, "Entering MASTER state")) << log_b;
  EXPECT_FALSE(Has(log_b, "found SM")) << log_b;
}

TEST_F(HaIbsimTest, FailoverOnThreeTierK8WithFastPollingIsMeasured) {
  StartFabric(FatTree3(8));
  std::string conf = std::string("routing_engine ftree,updn\n") + kFastPolling;
  size_t a = StartIbsmd("a", first_host_, "sm_priority 5\n" + conf);
  ASSERT_TRUE(Has(WaitFor(LogPath("a"), SubnetUp, 60s), "SUBNET UP")) << Log("a");
  StartIbsmd("b", last_host_, "sm_priority 3\n" + conf);
  ASSERT_TRUE(Has(WaitFor(LogPath("b"), Standby, 60s), "Entering STANDBY state")) << Log("b");
  std::string before = Topology();
  auto killed = std::chrono::steady_clock::now();
  Kill9(a);
  std::string log_b = WaitFor(
      LogPath("b"),
      [](const std::string& l) { return Has(After(l, "Entering MASTER state"), "SUBNET UP"); },
      60s);
  auto up = std::chrono::steady_clock::now();
  ASSERT_TRUE(Has(After(log_b, "Entering MASTER state"), "SUBNET UP")) << log_b;
  std::printf("[ figure ] 3-tier k=8 (%zu nodes): master killed -> standby SUBNET UP in %.2f s "
              "(polling 1000 ms x 2)\n",
              fabric_.node_count(), std::chrono::duration<double>(up - killed).count());
  std::string sweep = TakeoverSweepLine(log_b, "Entering MASTER state");
  std::printf("[ figure ] takeover sweep: %s\n", sweep.c_str());
  EXPECT_TRUE(Has(sweep, " 0 LID changes")) << sweep;
  EXPECT_TRUE(Has(sweep, " 0 LFT blocks sent")) << sweep;
  EXPECT_EQ(Topology(), before);
}

// Split brain: two halves of one fabric, each with its own master, are cabled together.
// The worse master hands over before it writes again, the better one re-sweeps, and the
// joined subnet has one master and no LID twice.
TEST_F(HaIbsimTest, TwoMastersOfJoinedHalvesLeaveOneMasterAndNoDuplicateLid) {
  StartFabric(FatTree2(4), /*console=*/true);
  // leaf-004 (hosts 7 and 8) loses both uplinks: its own island.
  ASSERT_TRUE(sim_->SendConsoleCommand("unlink \"leaf-004\"[3]").ok());
  ASSERT_TRUE(sim_->SendConsoleCommand("unlink \"leaf-004\"[4]").ok());
  std::string conf = std::string(kFastPolling) + "sweep_interval 1\n";
  StartIbsmd("a", first_host_, "sm_priority 5\n" + conf);
  StartIbsmd("b", last_host_, "sm_priority 3\n" + conf);
  ASSERT_TRUE(Has(WaitFor(LogPath("a"), SubnetUp), "SUBNET UP")) << Log("a");
  ASSERT_TRUE(Has(WaitFor(LogPath("b"), SubnetUp), "SUBNET UP")) << Log("b");
  ASSERT_FALSE(Has(Log("b"), "found SM")) << "the halves must not see each other\n" << Log("b");

  ASSERT_TRUE(sim_->SendConsoleCommand("relink \"leaf-004\"[3]").ok());
  ASSERT_TRUE(sim_->SendConsoleCommand("relink \"leaf-004\"[4]").ok());
  std::string log_b = WaitFor(LogPath("b"), Standby);
  ASSERT_TRUE(Has(log_b, "Entering STANDBY state")) << log_b;
  EXPECT_TRUE(Has(log_b, "handing over to SM")) << log_b;
  // The loser wrote nothing after it saw the better master: no sweep of "b" ends after it.
  EXPECT_FALSE(Has(After(log_b, "handing over to SM"), "heavy sweep")) << log_b;
  // "a" has swept the joined fabric once the handover is in.
  std::string log_a = WaitFor(LogPath("a"), [](const std::string& l) {
    return Has(After(l, "SMInfo Set 1 from SM"), "SUBNET UP");
  });
  ASSERT_TRUE(Has(After(log_a, "SMInfo Set 1 from SM"), "SUBNET UP")) << log_a;

  SmInfoSeen master = Sminfo();
  EXPECT_EQ(master.state, "SMINFO_MASTER") << master.raw;
  EXPECT_EQ(master.guid, PortGuidOf(first_host_)) << master.raw;
  EXPECT_EQ(Sminfo(LidOf(last_host_)).state, "SMINFO_STANDBY");
  std::string topo = Topology();
  std::map<std::string, int> lids;  // "lid N" of every end port, from each port's own line
  static const std::regex ca_re(R"(^\[\d+\]\([0-9a-f]+\)\s.*# lid (\d+) lmc)");
  static const std::regex sw_re(R"(^Switch.*base port 0 lid (\d+))");
  std::istringstream in(topo);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, ca_re) || std::regex_search(line, m, sw_re)) ++lids[m[1]];
  }
  EXPECT_EQ(lids.size(), fabric_.switch_count() + fabric_.ca_count()) << topo;
  for (const auto& [lid, n] : lids) EXPECT_EQ(n, 1) << "LID " << lid << " held " << n << " times";
}

// --- interop with OpenSM 3.3.23 -------------------------------------------------------------

bool OpensmAvailable() { return access("/usr/sbin/opensm", X_OK) == 0; }

TEST_F(HaIbsimTest, OpensmStandsByBehindIbsmdAndTakesOverWhenIbsmdIsKilled) {
  if (!OpensmAvailable()) GTEST_SKIP() << "opensm not installed";
  StartFabric(FatTree2(4));
  size_t a = StartIbsmd("a", first_host_, std::string("sm_priority 5\n") + kFastPolling);
  ASSERT_TRUE(Has(WaitFor(LogPath("a"), SubnetUp), "SUBNET UP")) << Log("a");
  StartOpensm("osm", last_host_, std::string("sm_priority 3\n") + kFastPolling);
  std::string osm = WaitFor(LogPath("osm"), Standby);
  ASSERT_TRUE(Has(osm, "Entering STANDBY state")) << osm;
  SmInfoSeen master = Sminfo();
  EXPECT_EQ(master.guid, PortGuidOf(first_host_)) << master.raw;
  EXPECT_EQ(master.state, "SMINFO_MASTER") << master.raw;
  EXPECT_EQ(Sminfo(LidOf(last_host_)).state, "SMINFO_STANDBY");

  Kill9(a);
  osm = WaitFor(LogPath("osm"), [](const std::string& l) {
    return Has(After(l, "Entering MASTER state"), "SUBNET UP");
  });
  ASSERT_TRUE(Has(After(osm, "Entering MASTER state"), "SUBNET UP")) << osm;
  SmInfoSeen after = Sminfo();
  EXPECT_EQ(after.state, "SMINFO_MASTER") << after.raw;
  EXPECT_EQ(after.guid, PortGuidOf(last_host_)) << after.raw;
}

TEST_F(HaIbsimTest, IbsmdStandsByBehindOpensmAndTakesOverWhenOpensmIsKilled) {
  if (!OpensmAvailable()) GTEST_SKIP() << "opensm not installed";
  StartFabric(FatTree2(4));
  size_t o = StartOpensm("osm", last_host_, std::string("sm_priority 5\n") + kFastPolling);
  ASSERT_TRUE(Has(WaitFor(LogPath("osm"), SubnetUp), "SUBNET UP")) << Log("osm");
  SmInfoSeen master = Sminfo();
  ASSERT_EQ(master.state, "SMINFO_MASTER") << master.raw << Log("osm");
  ASSERT_EQ(master.guid, PortGuidOf(last_host_));
  StartIbsmd("a", first_host_, std::string("sm_priority 3\n") + kFastPolling);
  std::string log_a = WaitFor(LogPath("a"), Standby);
  ASSERT_TRUE(Has(log_a, "Entering STANDBY state (master SM")) << log_a;
  EXPECT_EQ(Sminfo(LidOf(first_host_)).state, "SMINFO_STANDBY");
  std::string before = Topology();

  Kill9(o);
  log_a = WaitFor(LogPath("a"), [](const std::string& l) {
    return Has(After(l, "Entering MASTER state"), "SUBNET UP");
  });
  ASSERT_TRUE(Has(After(log_a, "Entering MASTER state"), "SUBNET UP")) << log_a;
  std::string sweep = TakeoverSweepLine(log_a, "Entering MASTER state");
  // OpenSM's LIDs are kept; its routes may differ from ibsmd's engine, so LFT blocks may be
  // rewritten here (only the ones that differ).
  EXPECT_TRUE(Has(sweep, " 0 LID changes")) << sweep;
  SmInfoSeen after = Sminfo();
  EXPECT_EQ(after.state, "SMINFO_MASTER") << after.raw;
  EXPECT_EQ(after.guid, PortGuidOf(first_host_)) << after.raw;
}

TEST_F(HaIbsimTest, IbsmdWithTheHigherPriorityTakesOverFromOpensmByHandover) {
  if (!OpensmAvailable()) GTEST_SKIP() << "opensm not installed";
  StartFabric(FatTree2(4));
  StartOpensm("osm", last_host_, std::string("sm_priority 2\n") + kFastPolling);
  ASSERT_TRUE(Has(WaitFor(LogPath("osm"), SubnetUp), "SUBNET UP")) << Log("osm");
  SmInfoSeen master = Sminfo();
  ASSERT_EQ(master.state, "SMINFO_MASTER") << master.raw << Log("osm");
  StartIbsmd("a", first_host_, std::string("sm_priority 6\n") + kFastPolling);
  // OpenSM hands over (SMInfo Set HANDOVER = 1) either while ibsmd is still DISCOVERING
  // (OpenSM swept on ibsmd's IsSM trap and found the better SM), or after ibsmd stood by
  // and sent trap 144; OpenSM sends no ACKNOWLEDGE and none is needed.
  std::string log_a = WaitFor(LogPath("a"), [](const std::string& l) {
    return Has(After(l, "Entering MASTER state"), "SUBNET UP");
  });
  char handover[64];
  std::snprintf(handover, sizeof(handover), "SMInfo Set 1 from SM 0x%016llx",
                static_cast<unsigned long long>(PortGuidOf(last_host_)));
  ASSERT_TRUE(Has(log_a, handover)) << log_a;
  EXPECT_TRUE(Has(After(log_a, "Entering MASTER state"), "SUBNET UP")) << log_a;
  std::string osm = WaitFor(LogPath("osm"), Standby);
  EXPECT_TRUE(Has(osm, "Entering STANDBY state")) << osm;
  EXPECT_EQ(Sminfo().guid, PortGuidOf(first_host_));
}

}  // namespace
}  // namespace ibsm::test
