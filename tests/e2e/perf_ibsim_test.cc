// The PerfMgr and `ibsmctl health` end to end on ibsim: errors planted
// with ibsim's console command PerformanceSet on two ports show up, within one PerfMgr sweep,
// as exactly those two cables with both ends named, worst first; the counts ibsmd read and
// stored are what perfquery (infiniband-diags) reads from the same ports.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"
#include "ha/state_store.h"
#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

// The number of the last "PerfMgr sweep N done" line in `log`, 0 if none.
uint64_t LastPerfSweep(const std::string& log) {
  static const std::regex re(R"(PerfMgr sweep (\d+) done)");
  uint64_t last = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it)
    last = std::stoull((*it)[1]);
  return last;
}

// perfquery's "Name:.......value" line.
std::optional<uint64_t> PerfqueryField(const std::string& out, const std::string& name) {
  std::regex re(name + R"(:\.*(\d+))");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return std::nullopt;
  return std::stoull(m[1]);
}

class PerfIbsimTest: public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IbsimInstance::Available()) GTEST_SKIP() << "ibsim-utils not installed";
    ASSERT_EQ(access(Bin("ibsmd").c_str(), X_OK), 0) << "ibsmd not built";
    ASSERT_EQ(access(Bin("ibsmctl").c_str(), X_OK), 0) << "ibsmctl not built";
    dir_ = fs::temp_directory_path() / ("ibsm-perf-e2e-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto f = FatTree2(4);
    ASSERT_TRUE(f.ok());
    fabric_ = std::move(*f);
    std::string net = (dir_ / "fabric.net").string();
    std::ofstream(net) << WriteTopology(fabric_);
    IbsimOptions o;
    o.console = true;
    auto sim = IbsimInstance::Start(net, o);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    sim_ = std::move(*sim);
    sock_ = (dir_ / "ibsmd.sock").string();
    log_ = dir_ / "ibsmd.log";
    state_ = (dir_ / "state.db").string();
    fs::path conf = dir_ / "opensm.conf";
    std::ofstream(conf) << "log_file " << log_.string() << "\n"
                        << "dump_files_dir " << dir_.string() << "\n"
                        << "state_db_file " << state_ << "\n"
                        << "guid2lid_file " << (dir_ / "guid2lid").string() << "\n"
                        << "control_socket " << sock_ << "\n"
                        << "sweep_interval 0\n"
                        << "perfmgr TRUE\n"
                        << "perfmgr_sweep_time_s 1\n"
                        // ibsim's ports claim 12x support on their 4x links, so every ibsim
                        // cable is "degraded"; this test is about the counters.
                        << "health_degraded_links FALSE\n";
    auto d = sim_->StartChild({Bin("ibsmd"), "-F", conf.string()});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_.emplace(std::move(*d));
    ASSERT_TRUE(WaitFor([](const std::string& l) { return LastPerfSweep(l) >= 1; }))
        << ReadFile(log_);
  }
  void TearDown() override {
    if (daemon_) {
      kill(daemon_->pid(), SIGTERM);
      auto done = daemon_->Wait(30s);
      EXPECT_TRUE(done.ok() && !done->timed_out && done->exit_code == 0);
    }
    sim_.reset();
    if (!dir_.empty() && !std::getenv("IBSM_KEEP_E2E_DIR")) fs::remove_all(dir_);
  }

  template <typename Pred>
  bool WaitFor(Pred done, std::chrono::seconds deadline = 60s) {
    for (auto end = std::chrono::steady_clock::now() + deadline;
         std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(50ms))
      if (done(ReadFile(log_))) return true;
    return false;
  }

  CommandResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {Bin("ibsmctl"), "--socket", sock_});
    auto r = RunCommand(args, 60s, dir_.string());
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r: CommandResult{};
  }

  // Leaf switch ports cabled to hosts.
  std::vector<PortId> LeafHostPorts() const {
    std::vector<PortId> out;
    for (PortId p = 0; p < fabric_.port_count(); ++p) {
      const Port& port = fabric_.port(p);
      if (!port.connected() || !fabric_.node(port.node).is_switch()) continue;
      if (fabric_.node(fabric_.port(port.peer).node).is_switch()) continue;
      out.push_back(p);
    }
    return out;
  }

  fs::path dir_, log_;
  std::string sock_, state_;
  Fabric fabric_;
  std::unique_ptr<IbsimInstance> sim_;
  std::optional<ChildProcess> daemon_;
};

TEST_F(PerfIbsimTest, PlantedErrorsAreExactlyTheTwoCablesHealthListsWorstFirstAsPerfqueryReads) {
  // Two host cables, neither the SM's (the first CA record is where ibsmd attaches).
  std::vector<std::pair<PortId, PortId>> cables;
  const NodeId sm_node = [&] {
    for (NodeId n = 0; n < fabric_.node_count(); ++n)
      if (fabric_.node(n).kind == NodeKind::kCa) return n;
    return kNoNode;
  }();
  for (PortId sw: LeafHostPorts()) {
    PortId host = fabric_.port(sw).peer;
    if (fabric_.port(host).node == sm_node) continue;
    cables.push_back({sw, host});
  }
  ASSERT_GE(cables.size(), 3u);
  auto [sym_sw, sym_host] = cables[0];
  auto [down_sw, down_host] = cables.back();
  auto name = [&](PortId p) { return fabric_.node(fabric_.port(p).node).name; };
  auto guid = [&](PortId p) {
    return fmt::format("{:#018x}", fabric_.node(fabric_.port(p).node).guid.value());
  };

  const uint64_t before = LastPerfSweep(ReadFile(log_));
  // Symbol errors on a switch port, a link-downed count on a host port.
  ASSERT_TRUE(sim_->SendConsoleCommand("PerformanceSet \"" + name(sym_sw) + "\"[" +
                                       std::to_string(fabric_.port(sym_sw).num.value()) +
                                       "] PortCounters.SymbolErrorCounter=500")
                  .ok());
  ASSERT_TRUE(sim_->SendConsoleCommand("PerformanceSet \"" + name(down_host) + "\"[" +
                                       std::to_string(fabric_.port(down_host).num.value()) +
                                       "] PortCounters.LinkDownedCounter=3")
                  .ok());
  // `health` shows the findings of the health window; the first sweep that starts after
  // the plant has ended by sweep before + 2. Ask after each sweep until then.
  CommandResult js;
  json h;
  for (uint64_t n = before + 1; n <= before + 2; ++n) {
    ASSERT_TRUE(WaitFor([&](const std::string& l) { return LastPerfSweep(l) >= n; }))
        << ReadFile(log_) << "\nibsim:\n" << sim_->Log();
    js = Ctl({"--json", "health"});
    ASSERT_EQ(js.exit_code, 0) << Describe(js);
    h = json::parse(js.out);
    if (!h["cables"].empty()) break;
  }
  ASSERT_EQ(h["cables"].size(), 2u) << js.out;
  EXPECT_FALSE(h["healthy"].get<bool>());
  // Worst first: 500 symbol errors (threshold 10) before 3 link-downs (threshold 1).
  const json& first = h["cables"][0];
  const json& second = h["cables"][1];
  auto ends = [](const json& c) {
    return std::set<std::pair<std::string, int>>{
        {c["a"]["guid"].get<std::string>(), c["a"]["port"].get<int>()},
        {c["b"]["guid"].get<std::string>(), c["b"]["port"].get<int>()}};
  };
  EXPECT_EQ(ends(first), (std::set<std::pair<std::string, int>>{
                             {guid(sym_sw), fabric_.port(sym_sw).num.value()},
                             {guid(sym_host), fabric_.port(sym_host).num.value()}}))
      << js.out;
  EXPECT_EQ(ends(second), (std::set<std::pair<std::string, int>>{
                              {guid(down_sw), fabric_.port(down_sw).num.value()},
                              {guid(down_host), fabric_.port(down_host).num.value()}}))
      << js.out;
  ASSERT_EQ(first["findings"].size(), 1u);
  ASSERT_EQ(second["findings"].size(), 1u);
  const json& sym = first["findings"][0];
  const json& down = second["findings"][0];
  EXPECT_EQ(sym["rule"], "symbol_errors");
  EXPECT_EQ(sym["delta"], 500);
  EXPECT_EQ(down["rule"], "link_downed");
  EXPECT_EQ(down["delta"], 3);
  EXPECT_FALSE(first["a"]["description"].get<std::string>().empty()) << "ends carry the node description";

  // The human table names both ends of both cables.
  CommandResult table = Ctl({"health"});
  ASSERT_EQ(table.exit_code, 0) << Describe(table);
  for (PortId p: {sym_sw, sym_host, down_sw, down_host})
    EXPECT_NE(table.out.find(guid(p)), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2 cables with findings, worst first"), std::string::npos) << table.out;
  EXPECT_LT(table.out.find("symbol_errors"), table.out.find("link_downed")) << table.out;

  // `links --errors` lists the same two cables.
  CommandResult links = Ctl({"--json", "links", "--errors"});
  ASSERT_EQ(links.exit_code, 0) << Describe(links);
  EXPECT_EQ(json::parse(links.out)["links"].size(), 2u) << links.out;

  // perfquery reads the same counters from the same ports.
  auto perfquery = [&](const json& at) {
    auto r = sim_->Run({"perfquery", std::to_string(at["lid"].get<int>()),
                        std::to_string(at["port"].get<int>())},
                       30s);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->exit_code, 0) << Describe(*r);
    return r->out;
  };
  std::string pq_sym = perfquery(sym["at"]);
  EXPECT_EQ(PerfqueryField(pq_sym, "SymbolErrorCounter"), sym["value"].get<uint64_t>()) << pq_sym;
  EXPECT_EQ(sym["value"], 500);
  std::string pq_down = perfquery(down["at"]);
  EXPECT_EQ(PerfqueryField(pq_down, "LinkDownedCounter"), down["value"].get<uint64_t>()) << pq_down;

  // Each finding is an event naming the other end. The daemon writes a PerfMgr sweep's
  // history and then its events on the state writer's thread, after the sweep's log line:
  // once both events are there, so is the history.
  json ev;
  size_t health_events = 0;
  for (int tries = 0; tries < 100 && health_events < 2; ++tries) {
    if (tries > 0) std::this_thread::sleep_for(100ms);
    CommandResult events = Ctl({"--json", "events"});
    ASSERT_EQ(events.exit_code, 0);
    ev = json::parse(events.out);
    health_events = 0;
    for (const auto& e: ev["events"])
      if (e["kind"] == "health") ++health_events;
  }
  EXPECT_EQ(health_events, 2u) << ev.dump().substr(0, 1500);
  for (const auto& e: ev["events"]) {
    if (e["kind"] == "health") {
      EXPECT_NE(e["message"].get<std::string>().find("other end"), std::string::npos);
    }
  }

  // And the stored history holds those deltas for those ports.
  auto store = ha::StateStore::OpenReadOnly(state_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rows = (*store)->LoadPerfHistory(std::nullopt, 100000);
  ASSERT_TRUE(rows.ok());
  uint64_t stored_sym = 0, stored_down = 0;
  for (const auto& r: *rows) {
    std::string g = fmt::format("{:#018x}", r.node_guid.value());
    if (g == sym["at"]["guid"] && r.port_num.value() == sym["at"]["port"]) stored_sym += r.deltas[0];
    if (g == down["at"]["guid"] && r.port_num.value() == down["at"]["port"]) stored_down += r.deltas[2];
  }
  EXPECT_EQ(stored_sym, *PerfqueryField(pq_sym, "SymbolErrorCounter"));
  EXPECT_EQ(stored_down, *PerfqueryField(pq_down, "LinkDownedCounter"));
}

}  // namespace
}  // namespace ibsm::test
