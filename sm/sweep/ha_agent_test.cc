// HaAgent without the sweep engine: two agents on the in-process simulator, each with its
// own transport, pipeline and a host that records what the agent asked of it.
#include "sm/sweep/ha_agent.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "ha/memory_state_store.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using testutil::CaPorts;

class RecordingHaHost : public HaAgent::Host {
 public:
  std::shared_ptr<const DiscoveryResult> discovered;
  std::vector<bool> fences;
  std::vector<uint32_t> actions;
  std::vector<bool> continues;  // qos_reads of each HaContinueSweep
  int left_master = 0, flushes = 0, standbys = 0, ends = 0;
  std::vector<mad::SmInfoRecord> other_sms;

  const DiscoveryResult* HaDiscovered() const override { return discovered.get(); }
  bool HaStopped() const override { return false; }
  void HaFence(bool fenced) override { fences.push_back(fenced); }
  void HaApplyActions(uint32_t a, const std::string&) override { actions.push_back(a); }
  void HaLeftMaster() override { ++left_master; }
  void HaFlushState() override { ++flushes; }
  void HaStandby() override { ++standbys; }
  void HaContinueSweep(bool qos_reads) override { continues.push_back(qos_reads); }
  void HaEndSweep() override { ++ends; }
  void HaPublishOtherSms(std::vector<mad::SmInfoRecord> r) override { other_sms = std::move(r); }
  bool HaNoteStateWrite(const char*, const Status& s, std::string_view) override { return s.ok(); }
};

SubnetManagerOptions HaOptions(uint8_t priority) {
  SubnetManagerOptions o;
  o.send.timeout = std::chrono::milliseconds(20);
  o.send.retries = 1;
  o.sm_priority = priority;
  o.sm_key = 0x77;
  o.sminfo_polling_timeout = std::chrono::milliseconds(50);
  o.polling_retry_number = 2;
  return o;
}

// One SM without its sweep engine: the agent, what it sends through, and its host.
struct HaSm {
  HaSm(boost::asio::io_context& io, sim::Simulator& sim, const Fabric& f, PortId at,
     uint8_t priority)
      : options(HaOptions(priority)),
        transport(io, sim, at),
        pipeline(transport, 16, options.send, 0),
        store(clock),
        agent(io, transport, pipeline, clock, &store, &store, options, counters, host) {
    agent.set_port_guid(f.port(at).guid);
    // What the engine's unsolicited handler does for SMInfo.
    transport.SetUnsolicitedHandler([this](mad::MadMessage m) {
      auto smp = mad::Decode<mad::Smp>(m.bytes);
      if (smp.ok() && smp->attr_id == mad::attr::kSmInfo) agent.AnswerSmInfo(*smp, m);
    });
  }
  // Enable, discover, elect: what the engine's first heavy sweep does before it writes.
  void Start() {
    agent.SetSmState(ha::SmEvent::kEnable, "start");
    discovery = std::make_unique<Discovery>(pipeline);
    discovery->Run([this](DiscoveryResult r) {
      host.discovered = std::make_shared<const DiscoveryResult>(std::move(r));
      agent.QueryOtherSms();
    });
  }

  SystemClock clock;
  SubnetManagerOptions options;
  SmCounters counters;
  RecordingHaHost host;
  sim::SimTransport transport;
  SmpPipeline pipeline;
  ha::MemoryStateStore store;  // the state file's twin: the SM state, events, peers
  HaAgent agent;
  std::unique_ptr<Discovery> discovery;
};

// Runs `io` until `done` holds, for at most 5 s of wall time.
bool RunHaUntil(boost::asio::io_context& io, const std::function<bool()>& done) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.run_one_for(std::chrono::milliseconds(10));
    if (io.stopped()) io.restart();
  }
  return done();
}

TEST(HaAgentTest, AloneItBecomesMasterAfterDiscoveryAndTellsTheHostToWrite) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  HaSm a(io, sim, *f, CaPorts(*f)[0], 1);
  a.Start();
  // Enabled: DISCOVERING, writers fenced, a heavy sweep asked for.
  EXPECT_EQ(a.agent.state(), mad::SmState::kDiscovering);
  ASSERT_FALSE(a.host.fences.empty());
  EXPECT_TRUE(a.host.fences.back());
  ASSERT_FALSE(a.host.actions.empty());
  EXPECT_TRUE(a.host.actions.back() & ha::sm_action::kHeavySweep);

  ASSERT_TRUE(RunHaUntil(io, [&] { return !a.host.continues.empty(); }));
  EXPECT_EQ(a.agent.state(), mad::SmState::kMaster);
  EXPECT_EQ(a.host.continues, std::vector<bool>{true});  // with the optional QoS reads
  EXPECT_FALSE(a.host.fences.back());
  EXPECT_EQ(a.agent.act_count(), 1u);
  EXPECT_EQ(a.counters.state_changes, 2u);
  EXPECT_EQ(a.host.flushes, 2);  // before each new role
  EXPECT_EQ(a.host.standbys, 0);
  EXPECT_TRUE(a.host.other_sms.empty());
  EXPECT_FALSE(a.agent.took_over());
  // Each change is in the state file: the state, and one event per change, newest first.
  EXPECT_EQ(a.store.GetValue("sm_state")->value_or(""), "MASTER");
  auto events = a.store.RecentEvents(10, 0, ha::kEventStateChange);
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].message.rfind("DISCOVERING -> MASTER", 0), 0u) << (*events)[0].message;
  EXPECT_EQ((*events)[0].node_guid, f->port(CaPorts(*f)[0]).guid);
}

TEST(HaAgentTest, ASecondSmStandsByPollsTheMasterAndTakesOverWhenItStopsAnswering) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  auto cas = CaPorts(*f);
  HaSm master(io, sim, *f, cas.back(), 1);
  ASSERT_TRUE(sim.SetIsSm(cas.back(), true).ok());
  master.Start();
  ASSERT_TRUE(RunHaUntil(io, [&] { return master.agent.state() == mad::SmState::kMaster; }));

  // A better SM (priority 9) still stands by for a master it finds (IBA 14.4.1).
  HaSm b(io, sim, *f, cas[0], 9);
  b.Start();
  ASSERT_TRUE(RunHaUntil(io, [&] { return b.agent.state() == mad::SmState::kStandby; }));
  const Guid master_guid = f->port(cas.back()).guid;
  EXPECT_EQ(b.agent.polled_master(), master_guid);
  EXPECT_EQ(b.host.standbys, 1);
  EXPECT_TRUE(b.host.continues.empty());  // nothing written by a standby
  EXPECT_TRUE(b.host.fences.back());
  EXPECT_EQ(b.counters.other_sms_seen, 1u);
  ASSERT_EQ(b.host.other_sms.size(), 1u);
  auto peers = b.store.Peers();  // the master it found, as ibsmctl ha lists it
  ASSERT_EQ(peers->size(), 1u);
  EXPECT_EQ((*peers)[0].guid, master_guid);
  EXPECT_EQ((*peers)[0].state, static_cast<uint8_t>(mad::SmState::kMaster));
  EXPECT_EQ(b.host.other_sms[0].sm_info.guid, master_guid.value());
  EXPECT_EQ(b.host.other_sms[0].sm_info.sm_state, mad::SmState::kMaster);

  // Polls answered: it stays standby.
  ASSERT_TRUE(RunHaUntil(io, [&] { return b.counters.polls_sent >= 2; }));
  EXPECT_EQ(b.agent.state(), mad::SmState::kStandby);
  EXPECT_EQ(b.counters.polls_missed, 0u);

  // The master dies: its port answers SMInfo "unsupported" from now on. After
  // polling_retry_number missed polls the standby takes over with a heavy sweep.
  const size_t actions_before = b.host.actions.size();
  master.agent.Stop();
  master.transport.Close();
  ASSERT_TRUE(RunHaUntil(io, [&] { return b.agent.state() == mad::SmState::kDiscovering; }));
  EXPECT_EQ(b.counters.polls_missed, 2u);
  EXPECT_TRUE(b.agent.took_over());
  ASSERT_GT(b.host.actions.size(), actions_before);
  EXPECT_TRUE(b.host.actions.back() & ha::sm_action::kHeavySweep);
  EXPECT_EQ(b.agent.polled_master(), Guid{0});
  ASSERT_EQ(b.agent.peer_liveness().count(master_guid), 1u);
  EXPECT_EQ(b.agent.peer_liveness().at(master_guid).misses, 2u);
  b.agent.Stop();
  b.transport.Close();
}

}  // namespace
}  // namespace ibsm::sm
