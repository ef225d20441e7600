#include "sm/perf/perf_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "ha/memory_state_store.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/record/control_answers.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

constexpr size_t kSymbolErrors = 0;
constexpr size_t kLinkDowned = 2;

// ---- delta arithmetic ---------------------------------------------------------------------

TEST(ComputeDeltaTest, GrowthIsTheDifferenceOfTwoReadings) {
  PerfCounters before{}, now{};
  before[kSymbolErrors] = 5;
  now[kSymbolErrors] = 12;
  now[kPerfXmitData] = 1000;
  PerfDelta d = ComputeDelta(before, now, PortCountersWidths());
  EXPECT_EQ(d.delta[kSymbolErrors], 7u);
  EXPECT_EQ(d.delta[kPerfXmitData], 1000u);
  EXPECT_EQ(d.flags, 0u);
  EXPECT_FALSE(d.near_overflow);
}

TEST(ComputeDeltaTest, AReadingLowerThanBeforeIsAResetNotANegativeDelta) {
  PerfCounters before{}, now{};
  before[kSymbolErrors] = 500;
  before[kPerfXmitData] = 90000;
  now[kSymbolErrors] = 3;  // cleared (or rebooted), then 3 more
  now[kPerfXmitData] = 100;
  now[kLinkDowned] = 1;
  PerfDelta d = ComputeDelta(before, now, PortCountersWidths());
  EXPECT_TRUE(d.flags & ha::kPerfFlagReset);
  EXPECT_EQ(d.delta[kSymbolErrors], 3u);
  EXPECT_EQ(d.delta[kPerfXmitData], 100u) << "every counter counts from zero after a reset";
  EXPECT_EQ(d.delta[kLinkDowned], 1u);
}

TEST(ComputeDeltaTest, ASaturatedCounterIsFlaggedAndNearOverflowFollowsOpenSmsRule) {
  PerfCounters before{}, now{};
  now[kSymbolErrors] = 0xFFFF;  // 16 bits, stuck at the top
  PerfDelta d = ComputeDelta(before, now, PortCountersWidths());
  EXPECT_TRUE(d.flags & ha::kPerfFlagSaturated);
  EXPECT_TRUE(d.near_overflow);
  EXPECT_EQ(d.delta[kSymbolErrors], 0xFFFFu);

  PerfCounters below{};
  below[kSymbolErrors] = 0xFFFF - 0xFFFF / 4 - 1;
  EXPECT_FALSE(ComputeDelta(before, below, PortCountersWidths()).near_overflow);
  below[10] = 10;  // excessive buffer overruns: 4 bits, OpenSM clears at 10
  EXPECT_TRUE(ComputeDelta(before, below, PortCountersWidths()).near_overflow);

  // 64-bit data counters (PortCountersExtended) neither saturate nor need clearing.
  auto wide = PortCountersWidths();
  for (size_t i = kPerfXmitData; i < wide.size(); ++i) wide[i] = 64;
  PerfCounters big{};
  big[kPerfXmitData] = 0xFFFFFFFFull;
  PerfDelta w = ComputeDelta(before, big, wide);
  EXPECT_FALSE(w.near_overflow);
  EXPECT_EQ(w.flags, 0u);
}

// ---- on the in-process simulator ------------------------------------------------------------

// A transport that passes everything to another and records how many requests were in
// flight at most.
class CountingTransport final : public mad::Transport {
 public:
  explicit CountingTransport(mad::Transport& inner) : inner_(inner) {}
  void Send(mad::MadMessage request, const mad::SendOptions& options,
            ResponseHandler done) override {
    auto h = request.header();
    bool perf = h.ok() && h->mgmt_class == static_cast<uint8_t>(mad::MgmtClass::kPerfMgt);
    if (perf) peak_ = std::max(peak_, ++in_flight_);
    inner_.Send(std::move(request), options, [this, perf, done = std::move(done)](auto r) {
      if (perf) --in_flight_;
      done(std::move(r));
    });
  }
  Status Post(mad::MadMessage message) override { return inner_.Post(std::move(message)); }
  void SetUnsolicitedHandler(UnsolicitedHandler h) override { inner_.SetUnsolicitedHandler(std::move(h)); }
  Result<mad::LocalPort> QueryLocalPort() override { return inner_.QueryLocalPort(); }
  const mad::TransportCounters& counters() const override { return inner_.counters(); }
  void Close() override { inner_.Close(); }
  size_t peak() const { return peak_; }

 private:
  mad::Transport& inner_;
  size_t in_flight_ = 0;
  size_t peak_ = 0;
};

class PerfManagerSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = FatTree2(4);
    ASSERT_TRUE(f.ok());
    fabric_ = std::move(*f);
    Shape(fabric_);
    sim_ = std::make_unique<sim::Simulator>(fabric_);
    for (NodeId n = 0; n < fabric_.node_count() && sm_port_ == kNoPort; ++n)
      if (fabric_.node(n).kind == NodeKind::kCa) sm_port_ = fabric_.port_id(n, PortNum{1});
    raw_ = std::make_unique<sim::SimTransport>(io_, *sim_, sm_port_);
    ASSERT_TRUE(raw_->bind_status().ok());
    transport_ = std::make_unique<CountingTransport>(*raw_);
    char tmpl[] = "/tmp/ibsm_perf_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;  // for log captures
    store_ = std::make_unique<ha::MemoryStateStore>(clock_);  // the state file's twin

    SubnetManagerOptions o = SmOptions();
    sm_ = std::make_unique<SubnetManager>(io_, *transport_, clock_, store_.get(), o);
    // As the daemon wires them: the PerfMgr polls the model the SM publishes as master.
    sm_->AddModelObserver([this](std::shared_ptr<const DiscoveryResult> m) {
      model_ = m;
      if (perf_) perf_->SetModel(std::move(m));
    });
    sm_->Start([this](const SweepStats& s) {
      up_ = s.subnet_up;
      io_.stop();
    });
    io_.run();
    ASSERT_TRUE(up_);
  }
  void TearDown() override {
    if (sm_) sm_->set_perf(nullptr);
    perf_.reset();
    if (sm_) sm_->Stop();
    if (raw_) raw_->Close();
    std::filesystem::remove_all(dir_);
  }

  // What a derived fixture changes in the fabric before the simulator is built.
  virtual void Shape(Fabric&) {}
  virtual SubnetManagerOptions SmOptions() const {
    SubnetManagerOptions o;
    o.sweep_interval = std::chrono::seconds(0);
    o.send.timeout = std::chrono::milliseconds(20);
    o.send.retries = 4;
    return o;
  }
  void MakePerf(PerfManagerOptions o = Options()) {
    perf_ = std::make_unique<PerfManager>(io_, *transport_, clock_, store_.get(), store_.get(), o);
    perf_->SetModel(model_);
  }
  static PerfManagerOptions Options() {
    PerfManagerOptions o;
    o.send.timeout = std::chrono::milliseconds(20);
    o.send.retries = 1;
    return o;
  }
  void Sweep() {
    bool done = false;
    perf_->SweepNow([&] {
      done = true;
      io_.stop();
    });
    // An SM sweep that ends meanwhile stops the loop too (a repair started by a trap the
    // fabric sent again, say): the PerfMgr sweep goes on.
    for (int i = 0; i < 100 && !done; ++i) {
      io_.restart();
      io_.run();
    }
    ASSERT_TRUE(done);
  }
  // Switch port `num` of the first switch with a CA behind it, and that CA's port.
  std::pair<PortId, PortId> LeafToHost() const {
    for (PortId p = 0; p < fabric_.port_count(); ++p) {
      const Port& port = fabric_.port(p);
      if (port.connected() && fabric_.node(port.node).is_switch() &&
          !fabric_.node(fabric_.port(port.peer).node).is_switch() && port.peer != sm_port_)
        return {p, port.peer};
    }
    return {kNoPort, kNoPort};
  }
  PortEnd End(PortId p) const {
    const Port& port = fabric_.port(p);
    PortEnd e;
    e.node_guid = fabric_.node(port.node).guid;
    e.port = port.num;
    return e;
  }
  void Plant(PortId p, uint16_t symbol_errors, uint8_t link_downed) {
    mad::PortCounters pc = sim_->port_counters(p);
    pc.symbol_error_counter = symbol_errors;
    pc.link_downed_counter = link_downed;
    ASSERT_TRUE(sim_->SetPortCounters(p, pc).ok());
  }
  const PortPerf& Perf(PortId p) const {
    const Port& port = fabric_.port(p);
    return perf_->ports().at({fabric_.node(port.node).guid, port.num.value()});
  }

  boost::asio::io_context io_;
  SystemClock clock_;
  Fabric fabric_;
  std::unique_ptr<sim::Simulator> sim_;
  PortId sm_port_ = kNoPort;
  std::unique_ptr<sim::SimTransport> raw_;
  std::unique_ptr<CountingTransport> transport_;
  std::string dir_;
  std::unique_ptr<ha::MemoryStateStore> store_;
  std::unique_ptr<SubnetManager> sm_;
  std::shared_ptr<const DiscoveryResult> model_;  // the last one the SM published
  std::unique_ptr<PerfManager> perf_;
  bool up_ = false;
};

TEST_F(PerfManagerSimTest, PlantedErrorsBecomeFindingsNamingBothEndsOfTheCable) {
  MakePerf();
  Sweep();  // the baseline
  EXPECT_TRUE(perf_->findings().empty());
  const size_t cabled = 2 * fabric_.link_count();
  EXPECT_EQ(perf_->ports().size(), cabled) << "every cabled port of every node";
  EXPECT_EQ(perf_->counters().timeouts, 0u);

  auto [sw, host] = LeafToHost();
  ASSERT_NE(sw, kNoPort);
  Plant(sw, 500, 0);
  Plant(host, 0, 2);
  Sweep();
  const auto& f = perf_->findings();
  ASSERT_EQ(f.size(), 2u);
  auto cables = GroupByCable(f);
  ASSERT_EQ(cables.size(), 1u) << "both findings are on the same cable";
  const HealthFinding* sym = nullptr;
  const HealthFinding* down = nullptr;
  for (const auto& h : f) (h.rule == HealthRule::kSymbolErrors ? sym : down) = &h;
  ASSERT_NE(sym, nullptr);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->rule, HealthRule::kLinkDowned);
  EXPECT_EQ(sym->delta, 500u);
  EXPECT_EQ(sym->value, 500u);
  EXPECT_EQ(sym->port.node_guid, End(sw).node_guid);
  EXPECT_EQ(sym->port.port, End(sw).port);
  ASSERT_TRUE(sym->peer.has_value());
  EXPECT_EQ(sym->peer->node_guid, End(host).node_guid);
  EXPECT_EQ(sym->peer->port, End(host).port);
  EXPECT_EQ(down->delta, 2u);
  EXPECT_EQ(down->port.node_guid, End(host).node_guid);
  EXPECT_EQ(perf_->counters().findings_by_rule[static_cast<size_t>(HealthRule::kSymbolErrors)], 1u);

  // The findings are events, and the deltas history rows.
  auto events = store_->RecentEvents(10);
  ASSERT_TRUE(events.ok());
  size_t health = 0;
  for (const auto& e : *events)
    if (e.kind == ha::kEventHealth) {
      ++health;
      EXPECT_NE(e.message.find("other end"), std::string::npos) << e.message;
    }
  EXPECT_EQ(health, 2u);
  auto rows = store_->LoadPerfHistory(End(sw).node_guid, 1000);
  ASSERT_TRUE(rows.ok());
  bool found = false;
  for (const auto& r : *rows)
    if (r.port_num == End(sw).port && r.sweep == static_cast<int64_t>(perf_->sweep_number())) {
      found = true;
      EXPECT_EQ(r.deltas[kSymbolErrors], 500u);
    }
  EXPECT_TRUE(found);

  // Nothing new: the next sweep finds nothing.
  Sweep();
  EXPECT_TRUE(perf_->findings().empty());
}

// As ibsmd wires them: each PerfMgr sweep leaves its health answer (and the links answer
// with its error counters) in the state file, and a fault that goes on is one event.
TEST_F(PerfManagerSimTest, TheStateFileHoldsThePlantedFindingAndALastingFaultIsOneEvent) {
  MakePerf();
  sm_->set_perf(perf_.get());
  perf_->set_on_sweep([this] { sm_->SaveSweepSnapshots(); });
  Sweep();  // the baseline
  auto health_json = [&] {
    auto row = store_->LoadSnapshot(ha::kSnapshotHealth);
    EXPECT_TRUE(row.ok() && row->has_value());
    return row.ok() && row->has_value() ? nlohmann::json::parse((*row)->json) : nlohmann::json();
  };
  EXPECT_EQ(health_json()["healthy"], true);

  auto [sw, host] = LeafToHost();
  ASSERT_NE(sw, kNoPort);
  Plant(sw, 500, 0);
  Sweep();
  nlohmann::json h = health_json();
  EXPECT_EQ(h["healthy"], false);
  EXPECT_EQ(h["perfmgr"]["sweep"], perf_->sweep_number());
  EXPECT_TRUE(h["perfmgr"].contains("last_sweep_end_us")) << "the reader computes the age";
  ASSERT_EQ(h["cables"].size(), 1u) << h.dump(2);
  const nlohmann::json& cable = h["cables"][0];
  std::set<std::string> ends = {cable["a"]["guid"], cable["b"]["guid"]};
  EXPECT_EQ(ends, (std::set<std::string>{GuidText(End(sw).node_guid),
                                         GuidText(End(host).node_guid)}));
  ASSERT_EQ(cable["findings"].size(), 1u);
  EXPECT_EQ(cable["findings"][0]["rule"], "symbol_errors");
  EXPECT_EQ(cable["findings"][0]["delta"], 500);
  // The links answer carries the errors of that sweep, so links --errors works from the file.
  auto links_row = store_->LoadSnapshot(ha::kSnapshotLinks);
  ASSERT_TRUE(links_row.ok() && links_row->has_value());
  auto with_errors = FilterLinks(nlohmann::json::parse((*links_row)->json), false, true);
  ASSERT_TRUE(with_errors.ok()) << with_errors.status().ToString();
  EXPECT_EQ((*with_errors)["links"].size(), 1u) << with_errors->dump(2);

  // The errors go on: a finding again, but the same fault, so no second event.
  Plant(sw, 1000, 0);
  Sweep();
  ASSERT_EQ(perf_->findings().size(), 1u);
  auto history = HealthHistory(*store_, 0, 100);
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ((*history)["history"].size(), 1u) << history->dump(2);
  const std::string msg = (*history)["history"][0]["message"];
  EXPECT_NE(msg.find("symbol errors +500"), std::string::npos) << msg;
  EXPECT_NE(msg.find("other end"), std::string::npos) << msg;
  // A new kind of finding on the same cable is a new event, listed first.
  Plant(host, 0, 2);
  Sweep();
  history = HealthHistory(*store_, 0, 100);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ((*history)["history"].size(), 2u) << history->dump(2);
  EXPECT_NE((*history)["history"][0]["message"].get<std::string>().find("link downed"),
            std::string::npos);
  EXPECT_EQ(sm_->counters().state_write_failures, 0u);
}

// SIGHUP re-reads the health thresholds: the next sweep judges by the new ones.
TEST_F(PerfManagerSimTest, ReconfiguredThresholdsJudgeTheNextSweep) {
  MakePerf();
  Sweep();  // the baseline
  auto [sw, host] = LeafToHost();
  ASSERT_NE(sw, kNoPort);
  Plant(sw, 50, 0);
  Sweep();
  ASSERT_EQ(perf_->findings().size(), 1u) << "50 symbol errors pass the default threshold of 10";

  PerfManagerOptions stricter_for_others = Options();
  stricter_for_others.thresholds.symbol_errors = 100;
  perf_->Reconfigure(stricter_for_others);
  EXPECT_EQ(perf_->options().thresholds.symbol_errors, 100u);
  Plant(sw, 100, 0);  // 50 more
  Sweep();
  EXPECT_TRUE(perf_->findings().empty()) << "50 errors in a sweep are below the new threshold";
  Plant(sw, 250, 0);  // 150 more
  Sweep();
  EXPECT_EQ(perf_->findings().size(), 1u);
}

TEST_F(PerfManagerSimTest, ACounterResetCountsFromZeroInsteadOfGoingNegative) {
  MakePerf();
  auto [sw, host] = LeafToHost();
  Plant(sw, 100, 0);
  Sweep();
  Plant(sw, 30, 0);  // lower than before: cleared behind our back, then 30 more
  Sweep();
  const PortPerf& pp = Perf(sw);
  EXPECT_TRUE(pp.flags & ha::kPerfFlagReset);
  EXPECT_EQ(pp.delta[kSymbolErrors], 30u);
  EXPECT_EQ(perf_->counters().resets_seen, 1u);
  ASSERT_EQ(perf_->findings().size(), 1u);
  EXPECT_EQ(perf_->findings()[0].delta, 30u);
}

TEST_F(PerfManagerSimTest, ASwitchRebootIsAResetEvenWhereAnErrorCounterEndsUpHigher) {
  MakePerf();
  auto [sw, host] = LeafToHost();
  Plant(sw, 3, 0);
  for (int i = 0; i < 4; ++i) Sweep();  // traffic piles up on the port
  const uint64_t pkts_before = Perf(sw).last->at(kPerfXmitData + 2);
  ASSERT_TRUE(sim_->RebootSwitch(fabric_.port(sw).node).ok());
  sm_->RequestHeavySweep("test: a switch rebooted");
  io_.restart();
  io_.run();  // until the heavy sweep ends
  ASSERT_TRUE(up_);
  ASSERT_LT(sim_->port_counters_extended(sw).port_xmit_pkts + 10, pkts_before)
      << "precondition: the reboot took the packet counters down";
  Plant(sw, 10, 0);  // higher than the 3 before the reboot: all 10 are new
  Sweep();
  EXPECT_TRUE(Perf(sw).flags & ha::kPerfFlagReset);
  EXPECT_EQ(Perf(sw).delta[kSymbolErrors], 10u);
  size_t symbol = 0, downed = 0;
  for (const auto& h : perf_->findings()) {
    if (h.rule == HealthRule::kSymbolErrors) {
      ++symbol;
      EXPECT_EQ(h.delta, 10u);
      EXPECT_EQ(h.port.node_guid, End(sw).node_guid);
    }
    // The neighbours saw their links go down while the switch was off.
    if (h.rule == HealthRule::kLinkDowned) {
      ++downed;
      EXPECT_NE(h.port.node_guid, End(sw).node_guid);
      ASSERT_TRUE(h.peer.has_value());
      EXPECT_EQ(h.peer->node_guid, End(sw).node_guid);
    }
  }
  EXPECT_EQ(symbol, 1u);
  EXPECT_GT(downed, 0u);
  EXPECT_EQ(symbol + downed, perf_->findings().size());
}

TEST_F(PerfManagerSimTest, CountersNearTheirMaximumAreClearedAndTheNextDeltaIsExact) {
  MakePerf();
  auto [sw, host] = LeafToHost();
  Sweep();
  Plant(sw, 0xFFFF, 0);  // saturated
  Sweep();
  EXPECT_TRUE(Perf(sw).flags & ha::kPerfFlagSaturated);
  EXPECT_TRUE(Perf(sw).flags & ha::kPerfFlagCleared);
  EXPECT_EQ(perf_->counters().clears_sent, 1u);
  EXPECT_EQ(sim_->port_counters(sw).symbol_error_counter, 0u) << "the PortCounters Set cleared it";
  Plant(sw, 40, 0);
  Sweep();
  EXPECT_EQ(Perf(sw).delta[kSymbolErrors], 40u);
  EXPECT_FALSE(Perf(sw).flags & ha::kPerfFlagReset) << "our own clear is not a reset";
}

TEST_F(PerfManagerSimTest, HistoryKeepsOnlyTheConfiguredNumberOfSweeps) {
  PerfManagerOptions o = Options();
  o.history_sweeps = 2;
  MakePerf(o);
  auto [sw, host] = LeafToHost();
  for (uint16_t i = 1; i <= 5; ++i) {
    Plant(sw, static_cast<uint16_t>(i * 20), 0);
    Sweep();
  }
  auto rows = store_->LoadPerfHistory(std::nullopt, 100000);
  ASSERT_TRUE(rows.ok());
  std::set<int64_t> sweeps;
  for (const auto& r : *rows) sweeps.insert(r.sweep);
  EXPECT_EQ(sweeps, (std::set<int64_t>{4, 5}));
  // Sweep numbers go on after a restart, so retention stays right.
  perf_.reset();
  MakePerf(o);
  perf_->Start();
  Sweep();
  EXPECT_EQ(perf_->sweep_number(), 6u);
}

TEST_F(PerfManagerSimTest, ADeadNodeTimesOutCountedAndTheRestIsStillRead) {
  PerfManagerOptions o = Options();
  o.max_outstanding = 3;
  MakePerf(o);
  Sweep();
  auto [sw, host] = LeafToHost();
  NodeId dead = fabric_.port(host).node;
  ASSERT_TRUE(sim_->SetNodeDropRate(dead, 1.0).ok());
  Plant(sw, 50, 0);
  Sweep();
  EXPECT_GT(perf_->counters().timeouts, 0u);
  EXPECT_GT(Perf(host).timeouts, 0u);
  ASSERT_EQ(perf_->findings().size(), 1u) << "the other ports were still read";
  EXPECT_EQ(perf_->findings()[0].delta, 50u);
  EXPECT_LE(transport_->peak(), 3u) << "never more than max_outstanding in flight";
  EXPECT_GT(transport_->peak(), 1u);
}

// Health remembers: a finding and the port's error counts stay for the health window after
// the sweep that saw them, with when first and last seen, and go when it has passed.
TEST_F(PerfManagerSimTest, FindingsAndErrorCountsLastTheHealthWindow) {
  MakePerf();
  Sweep();  // the baseline
  auto [sw, host] = LeafToHost();
  ASSERT_NE(sw, kNoPort);
  Plant(sw, 500, 0);
  Sweep();
  Plant(sw, 1000, 0);
  Sweep();
  Sweep();  // quiet
  EXPECT_TRUE(perf_->findings().empty()) << "the last sweep found nothing";
  ASSERT_EQ(perf_->window_findings().size(), 1u);
  const HealthFinding& w = perf_->window_findings()[0];
  EXPECT_EQ(w.rule, HealthRule::kSymbolErrors);
  EXPECT_EQ(w.sweeps, 2u);
  EXPECT_EQ(w.total_delta, 1000u);
  EXPECT_EQ(w.delta, 500u) << "the last sweep that saw it";
  EXPECT_GT(w.last_seen_us, w.first_seen_us);
  nlohmann::json h = HealthAnswer(sm_->discovered(), perf_.get());
  EXPECT_EQ(h["healthy"], false) << "healthy only when the window holds nothing";
  ASSERT_EQ(h["cables"].size(), 1u);
  EXPECT_EQ(h["cables"][0]["findings"][0]["total_delta"], 1000);
  EXPECT_EQ(h["cables"][0]["findings"][0]["sweeps"], 2);
  auto errors = FilterLinks(LinksAnswer(sm_->discovered()->fabric, sm_->discovered(), perf_.get()),
                            false, true);
  ASSERT_TRUE(errors.ok());
  ASSERT_EQ((*errors)["links"].size(), 1u) << "links --errors still lists the cable";
  const nlohmann::json& e = (*errors)["links"][0]["errors"];
  EXPECT_EQ((e["a"].empty() ? e["b"] : e["a"])["symbol_errors"], 1000);

  // A window of nothing: the next quiet sweep forgets both.
  PerfManagerOptions o = Options();
  o.health_window = std::chrono::seconds(0);
  perf_->Reconfigure(o);
  Sweep();
  EXPECT_TRUE(perf_->window_findings().empty());
  EXPECT_EQ(HealthAnswer(sm_->discovered(), perf_.get())["healthy"], true);
  errors = FilterLinks(LinksAnswer(sm_->discovered()->fabric, sm_->discovered(), perf_.get()),
                       false, true);
  ASSERT_TRUE(errors.ok());
  EXPECT_TRUE((*errors)["links"].empty()) << errors->dump(2);
}

// Every cable at 1x of 4x, as every ibsim cable is 4x of 12x.
class PerfManagerDegradedTest : public PerfManagerSimTest {
 protected:
  void Shape(Fabric& f) override {
    for (PortId p = 0; p < f.port_count(); ++p)
      if (f.port(p).connected()) f.mutable_port(p).width = LinkWidth::k1x;
  }
  SubnetManagerOptions SmOptions() const override {
    SubnetManagerOptions o = PerfManagerSimTest::SmOptions();
    o.health_degraded_links = degraded_rule_;
    return o;
  }
  bool degraded_rule_ = true;
};

// A condition on every cable is one summary line per sweep and one event while it is new,
// not a line and an event per cable.
TEST_F(PerfManagerDegradedTest, ManyDegradedCablesAreOneSummaryLineAndOneEventPerSweep) {
  MakePerf();
  const std::string log_path = dir_ + "/log";
  size_t per_cable = 0, summaries = 0;
  {
    testutil::LogCapture log(log_path);
    Sweep();
    Sweep();
    per_cable = log.Count("SM-PERF-007 degraded link:");
    summaries = log.Count("SM-PERF-007 " + std::to_string(fabric_.link_count()) +
                          " cables run below what both ends support");
  }
  EXPECT_EQ(per_cable, 0u);
  EXPECT_EQ(summaries, 2u) << "one per PerfMgr sweep";
  EXPECT_EQ(perf_->findings().size(), fabric_.link_count()) << "health still has every cable";
  auto events = store_->RecentEvents(100, 0, ha::kEventHealth);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u) << "one event, when they were new";
  EXPECT_NE((*events)[0].message.find(std::to_string(fabric_.link_count()) +
                                      " cables run below what both ends support (" +
                                      std::to_string(fabric_.link_count()) + " new since"),
            std::string::npos)
      << (*events)[0].message;
  EXPECT_NE((*events)[0].message.find("ibsmctl links --degraded"), std::string::npos);
}

// health_degraded_links FALSE: the rule is off for links (and so topo, drawn from links) and
// health alike, live and in the state file.
class PerfManagerDegradedRuleOffTest : public PerfManagerDegradedTest {
 protected:
  void SetUp() override {
    degraded_rule_ = false;
    PerfManagerDegradedTest::SetUp();
  }
};

TEST_F(PerfManagerDegradedRuleOffTest, NoCableIsDegradedInLinksOrHealth) {
  PerfManagerOptions o = Options();
  o.thresholds.degraded_links = false;
  MakePerf(o);
  sm_->set_perf(perf_.get());
  perf_->set_on_sweep([this] { sm_->SaveSweepSnapshots(); });
  Sweep();
  EXPECT_TRUE(perf_->findings().empty());
  auto links_row = store_->LoadSnapshot(ha::kSnapshotLinks);
  ASSERT_TRUE(links_row.ok() && links_row->has_value());
  const nlohmann::json links = nlohmann::json::parse((*links_row)->json);
  EXPECT_EQ(links["degraded"], 0) << "every cable is 1x of 4x, but the rule is off";
  for (const auto& l : links["links"]) EXPECT_EQ(l["degraded"], false) << l.dump();
  auto health_row = store_->LoadSnapshot(ha::kSnapshotHealth);
  ASSERT_TRUE(health_row.ok() && health_row->has_value());
  EXPECT_EQ(nlohmann::json::parse((*health_row)->json)["healthy"], true);
}

}  // namespace
}  // namespace ibsm::sm
