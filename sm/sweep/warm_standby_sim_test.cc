// The warm standby on the in-process simulator (sm/sweep/subnet_manager_standby.cc): a
// STANDBY keeps a model of the fabric with Gets alone, and when the master stops answering it
// takes over from that model without a discovery and without reading every LFT block back;
// a heavy sweep right after reads back what it took on trust. Where the fabric changed after
// the standby's last refresh, the takeover reads the blocks back itself.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/sim_test_util.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using namespace std::chrono_literals;

SubnetManagerOptions HaOptions(uint8_t priority) {
  SubnetManagerOptions o;
  o.send.timeout = 20ms;
  o.send.retries = 4;
  o.sm_priority = priority;
  o.sm_key = 0x77;
  o.sminfo_polling_timeout = 150ms;
  o.polling_retry_number = 3;
  return o;
}

struct TakeoverRun {
  std::optional<SubnetManager::StandbyModel> model;  // the standby's, just before the kill
  std::vector<SweepStats> master;   // the first master's sweeps
  std::vector<SweepStats> standby;  // the standby's sweeps as master (the takeover first)
  SmCounters counters;              // the standby's
  bool took_over = false;
};

// Master a at the first host, standby b at the last. Once b has read the LFT blocks,
// `before_kill` runs (a change the master handles), then a stops; b takes over, and the run
// ends after b's `sweeps`-th sweep as master.
TakeoverRun KillMasterAndTakeOver(sim::Simulator& sim, const Fabric& f,
                                  std::chrono::seconds refresh, size_t sweeps,
                                  std::function<void(SubnetManager& a)> before_kill = {}) {
  TakeoverRun run;
  boost::asio::io_context io;
  auto cas = testutil::CaPorts(f);
  sim::SimTransport ta(io, sim, cas[0]), tb(io, sim, cas.back());
  EXPECT_TRUE(ta.bind_status().ok() && tb.bind_status().ok());
  EXPECT_TRUE(sim.SetIsSm(cas[0], true).ok());
  EXPECT_TRUE(sim.SetIsSm(cas.back(), true).ok());
  SystemClock clock;
  SubnetManagerOptions oa = HaOptions(5), ob = HaOptions(3);
  oa.sweep_interval = 0s;
  ob.sweep_interval = refresh;  // the standby's refresh period
  SubnetManager a(io, ta, clock, nullptr, oa);
  SubnetManager b(io, tb, clock, nullptr, ob);
  boost::asio::steady_timer tick(io), deadline(io);
  deadline.expires_after(60s);
  deadline.async_wait([&](boost::system::error_code ec) {
    if (!ec) io.stop();
  });
  int phase = 0;
  size_t master_sweeps_at_change = 0;
  std::function<void()> step = [&] {
    if (phase == 0 && b.state() == mad::SmState::kStandby &&
        b.counters().standby_lft_blocks_read > 0 && b.quiescent()) {
      phase = 1;
      run.model = b.standby_model();
      master_sweeps_at_change = run.master.size();
      if (before_kill) before_kill(a);
    }
    if (phase == 1 && (!before_kill || run.master.size() > master_sweeps_at_change) &&
        a.quiescent()) {
      a.Stop();
      ta.Close();
      phase = 2;
    }
    if (phase == 2) return;
    tick.expires_after(10ms);
    tick.async_wait([&](boost::system::error_code ec) {
      if (!ec) step();
    });
  };
  a.Start([&](const SweepStats& s) {
    run.master.push_back(s);
    if (run.master.size() == 1 && s.subnet_up) {
      b.Start([&](const SweepStats& t) {
        if (b.state() != mad::SmState::kMaster) return;
        run.standby.push_back(t);
        if (run.standby.size() == sweeps) {
          run.took_over = true;
          b.Stop();
          tb.Close();
          io.stop();
        }
      });
      step();
    }
  });
  io.run();
  run.counters = b.counters();
  return run;
}

// A standby's model follows the fabric between takeovers: a cable cut after it stood by is
// gone from what it shows (ibsmctl nodes and links read SubnetManager::model()) once it has
// refreshed, not only after it takes over.
TEST(WarmStandbyTest, TheStandbyShowsItsLatestRefreshNotItsFirstDiscovery) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  boost::asio::io_context io;
  auto cas = testutil::CaPorts(*f);
  sim::SimTransport ta(io, sim, cas[0]), tb(io, sim, cas.back());
  ASSERT_TRUE(ta.bind_status().ok() && tb.bind_status().ok());
  ASSERT_TRUE(sim.SetIsSm(cas[0], true).ok());
  ASSERT_TRUE(sim.SetIsSm(cas.back(), true).ok());
  SystemClock clock;
  SubnetManagerOptions oa = HaOptions(5), ob = HaOptions(3);
  oa.sweep_interval = 0s;
  ob.sweep_interval = 1s;  // the standby's refresh period
  // The standby must stay one: it may miss a poll while the master repairs.
  ob.sminfo_polling_timeout = 1s;
  ob.polling_retry_number = 10;
  SubnetManager a(io, ta, clock, nullptr, oa);
  SubnetManager b(io, tb, clock, nullptr, ob);
  // A spine-to-core cable of a pod neither SM is in: the fabric stays whole without it.
  const std::string pod_a = f->node(f->port(f->port(cas[0]).peer).node).name.substr(0, 5);
  const std::string pod_b = f->node(f->port(f->port(cas.back()).peer).node).name.substr(0, 5);
  PortId cut = kNoPort;
  for (PortId p = 0; p < f->port_count() && cut == kNoPort; ++p) {
    const Port& port = f->port(p);
    const std::string& name = f->node(port.node).name;
    if (port.connected() && name.find("-spine-") != std::string::npos &&
        !name.starts_with(pod_a) && !name.starts_with(pod_b) &&
        f->node(f->port(port.peer).node).name.starts_with("core"))
      cut = p;
  }
  ASSERT_NE(cut, kNoPort);
  const size_t links = f->link_count();
  boost::asio::steady_timer tick(io), deadline(io);
  deadline.expires_after(30s);
  deadline.async_wait([&](boost::system::error_code ec) {
    if (!ec) io.stop();
  });
  uint64_t refreshes_at_cut = 0;
  size_t b_sweeps = 0;
  bool cut_done = false, seen = false;
  size_t first_links = 0;
  std::function<void()> step = [&] {
    if (!cut_done && b.state() == mad::SmState::kStandby && b.counters().standby_refreshes > 0 &&
        b.quiescent()) {
      first_links = b.published()->fabric().link_count();
      refreshes_at_cut = b.counters().standby_refreshes;
      EXPECT_TRUE(sim.LinkDown(cut).ok());
      cut_done = true;
    }
    // Two refreshes after the cut: one began after it.
    if (cut_done && b.counters().standby_refreshes >= refreshes_at_cut + 2) {
      seen = true;
      a.Stop();
      b.Stop();
      ta.Close();
      tb.Close();
      io.stop();
      return;
    }
    tick.expires_after(10ms);
    tick.async_wait([&](boost::system::error_code ec) {
      if (!ec) step();
    });
  };
  a.Start([&](const SweepStats& s) {
    if (s.number == 1 && s.subnet_up) {
      b.Start([&](const SweepStats&) { ++b_sweeps; });
      step();
    }
  });
  io.run();
  ASSERT_TRUE(seen);
  EXPECT_EQ(b.state(), mad::SmState::kStandby);
  // It stood by throughout (NOTACTIVE -> DISCOVERING -> STANDBY, nothing after) and finished
  // no sweep of its own: its model is the refreshes'.
  EXPECT_EQ(b.counters().state_changes, 2u);
  EXPECT_EQ(b_sweeps, 0u);
  EXPECT_EQ(first_links, links);
  ASSERT_TRUE(b.published());
  EXPECT_EQ(b.published()->fabric().link_count(), links - 1);
}

// The fabric did not change: the takeover re-reads the switches (no discovery), changes no
// LID, writes no LFT block or P_Key table and reads none back; the heavy sweep after it
// reads every one back and finds nothing to write either.
TEST(WarmStandbyTest, ATakeoverOnAnUnchangedFabricStartsFromTheStandbysModel) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  TakeoverRun run = KillMasterAndTakeOver(sim, *f, 1s, 2);
  ASSERT_TRUE(run.took_over);
  ASSERT_EQ(run.standby.size(), 2u);
  const SweepStats& cold = run.master.front();
  const SweepStats& takeover = run.standby[0];
  const SweepStats& check = run.standby[1];
  EXPECT_EQ(run.counters.warm_takeovers, 1u);
  EXPECT_GE(run.counters.standby_refreshes, 1u);
  // What `ibsmctl ha` shows on the standby before the kill.
  ASSERT_TRUE(run.model.has_value());
  EXPECT_TRUE(run.model->tables_read);
  EXPECT_TRUE(run.model->usable);
  EXPECT_EQ(run.model->nodes, cold.nodes);
  EXPECT_EQ(run.model->links, cold.links);
  EXPECT_LT(run.model->age_s, 5.0);
  EXPECT_TRUE(takeover.repair) << "the takeover ran a discovery";
  EXPECT_TRUE(takeover.subnet_up);
  EXPECT_EQ(takeover.nodes, cold.nodes);
  EXPECT_EQ(takeover.links, cold.links);
  EXPECT_EQ(takeover.lid_changes, 0u);
  EXPECT_EQ(takeover.lft_blocks_sent, 0u);
  EXPECT_EQ(takeover.lft_blocks_read, 0u) << "the standby's reads were not used";
  // The standby routed its model once the blocks were read; the takeover, finding the fabric
  // unchanged, took those tables instead of routing.
  EXPECT_EQ(run.counters.engine_tables_reused, 1u) << "the takeover routed anew";
  EXPECT_EQ(takeover.pkey_blocks_read, 0u) << "the standby's P_Key reads were not used";
  EXPECT_EQ(takeover.pkey_blocks_sent, 0u);
  // PortInfo Sets: the takeover writes the new MasterSMLID into every end port (each CA port
  // and switch port 0) and nothing else; the active ports of the switches that keep no error
  // thresholds or VLStallCount (which read 0 whatever the old master wrote) wait for the
  // heavy sweep after.
  // Likewise the partition enforcement of the ports facing CAs on switches that keep none
  // (they read 0 whatever the old master wrote): the heavy sweep after sets it, once.
  size_t end_ports = 0, threshold_ports = 0, enforcement_ports = 0;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const Node& node = f->node(n);
    if (!node.is_switch()) {
      for (uint8_t p = 1; p <= node.num_ports; ++p)
        if (f->port(f->port_id(n, PortNum{p})).connected()) ++end_ports;
      continue;
    }
    ++end_ports;
    if (sim.quirks(n).drops_partition_enforcement) {
      for (uint8_t p = 1; p <= node.num_ports; ++p) {
        const Port& port = f->port(f->port_id(n, PortNum{p}));
        if (port.connected() && !f->node(f->port(port.peer).node).is_switch())
          ++enforcement_ports;
      }
    }
    if (!sim.quirks(n).drops_port_tuning) continue;
    for (uint8_t p = 1; p <= node.num_ports; ++p)
      if (f->port(f->port_id(n, PortNum{p})).connected()) ++threshold_ports;
  }
  ASSERT_GT(threshold_ports, 0u) << "no simulated switch drops its error thresholds";
  EXPECT_EQ(takeover.portinfo_sets, end_ports);
  EXPECT_EQ(check.portinfo_sets, threshold_ports);
  ASSERT_GT(enforcement_ports, 0u) << "no simulated leaf drops its partition enforcement";
  EXPECT_EQ(takeover.enforcement_sets, 0u);
  EXPECT_EQ(check.enforcement_sets, enforcement_ports);
  std::printf("[ figure ] 3-tier k=8 takeover from the standby's model: %lu SMPs (the master's "
              "cold sweep %lu); the heavy sweep after it %lu SMPs, %lu LFT blocks read back\n",
              static_cast<unsigned long>(takeover.smps), static_cast<unsigned long>(cold.smps),
              static_cast<unsigned long>(check.smps),
              static_cast<unsigned long>(check.lft_blocks_read));
  EXPECT_FALSE(check.repair);
  EXPECT_TRUE(check.subnet_up);
  EXPECT_GT(check.lft_blocks_read, 0u) << "what the takeover took on trust was not read back";
  EXPECT_GT(check.pkey_blocks_read, 0u) << "the P_Key tables taken on trust were not read back";
  EXPECT_EQ(check.pkey_blocks_sent, 0u);
  EXPECT_EQ(check.lft_blocks_sent, 0u);
  EXPECT_EQ(check.lid_changes, 0u);
  simcheck::ExpectFabricUp(*f, sim);
}

// The master re-routes around a cut cable after the standby's last refresh and then stops:
// the takeover finds the cable down, so the standby's blocks (read before the master wrote
// its re-route) are not trusted; it reads the blocks back, and the fabric ends routed around
// the cut with every host reaching every other. The cable is one no DR path of the
// standby's model crosses (a core's last cable into a pod), so every switch answers the
// takeover's reads.
TEST(WarmStandbyTest, AChangeAfterTheStandbysLastRefreshIsFoundAndItsBlocksReadBack) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId core = *f->FindNodeByName("core-016");
  PortId cut = kNoPort;
  for (uint32_t p = 1; p <= f->node(core).num_ports && cut == kNoPort; ++p) {
    const PortId id = f->port_id(core, PortNum{static_cast<uint8_t>(p)});
    if (f->port(id).connected() && f->node(f->port(f->port(id).peer).node).name == "pod03-spine-04")
      cut = id;
  }
  ASSERT_NE(cut, kNoPort);
  // A refresh period longer than the run: the standby's model is the one before the cut.
  TakeoverRun run = KillMasterAndTakeOver(sim, *f, 3s, 2, [&](SubnetManager&) {
    EXPECT_TRUE(sim.LinkDown(cut).ok());
  });
  ASSERT_TRUE(run.took_over);
  ASSERT_EQ(run.standby.size(), 2u);
  const SweepStats& takeover = run.standby[0];
  EXPECT_TRUE(run.master.back().repair) << "the master did not repair the cut before it stopped";
  EXPECT_EQ(run.counters.warm_takeovers, 1u);
  EXPECT_TRUE(takeover.repair) << "the takeover fell back to a discovery";
  EXPECT_TRUE(takeover.subnet_up);
  EXPECT_EQ(takeover.repair_links_lost, 1u);
  EXPECT_EQ(takeover.links, run.master.front().links - 1);
  EXPECT_GT(takeover.lft_blocks_read, 0u) << "the standby's stale blocks were trusted";
  EXPECT_GT(takeover.pkey_blocks_read, 0u) << "the standby's P_Key tables were trusted";
  EXPECT_EQ(takeover.lid_changes, 0u);
  EXPECT_EQ(run.standby[1].lft_blocks_sent, 0u);
  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(cut);
  simcheck::ExpectFabricUp(cut_fabric, sim);
}

}  // namespace
}  // namespace ibsm::sm
