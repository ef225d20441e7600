// Faults in the in-process simulator during and between sweeps: MAD loss, a dead
// switch, link flaps mid-sweep, a switch reboot, nodes removed and added back. Seeded, so every
// run is the same run. After each, the fabric as the simulated switches hold it passes the
// checks of sim_test_util.h and no LID is duplicated.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "ha/state_store.h"
#include "mad/attr/notice.h"
#include "mad/attr/path_record.h"
#include "mad/attr/sa_records.h"
#include "sm/testing/sim_test_util.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

using simcheck::ExpectFabricUp;
using simcheck::FirstCaPort;
using simcheck::PortLids;
using namespace std::chrono_literals;

SubnetManagerOptions Options() {
  SubnetManagerOptions o;
  // Long enough that a loaded machine's scheduling (an ASan build sharing two cores with
  // ibsim tests) is not taken for loss: what fails must be the loss a test plants.
  o.send.timeout = 100ms;
  o.send.retries = 8;
  o.sweep_interval = 0s;
  o.routing_engine = "ftree";
  return o;
}

// One SM on `sim` until `done` says stop after a sweep (default: after the first).
struct SmRun {
  SmRun(const Fabric& f, sim::Simulator& sim, boost::asio::io_context& io, SubnetManagerOptions o,
        ha::StateStore* store = nullptr)
      : transport(io, sim, FirstCaPort(f)), sm(io, transport, clock, store, o) {}
  SystemClock clock;
  sim::SimTransport transport;
  SubnetManager sm;
};

SweepStats RunUntil(boost::asio::io_context& io, SmRun& r,
                    std::function<bool(const SweepStats&)> done = {}) {
  SweepStats last;
  r.sm.Start([&](const SweepStats& s) {
    last = s;
    if (!done || done(s)) {
      r.sm.Stop();
      io.stop();
    }
  });
  io.restart();
  io.run();
  return last;
}

// Every switch's LFT entry for every LID, as the simulator holds it.
std::vector<uint8_t> AllLfts(const Fabric& f, const sim::Simulator& sim, uint16_t max_lid) {
  std::vector<uint8_t> out;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).is_switch())
      for (uint16_t l = 1; l <= max_lid; ++l) out.push_back(sim.lft_entry(n, Lid{l}));
  return out;
}

// Each lossy test is a suite of its own, so CTest runs them side by side: they spend their time
// waiting for the timeouts of the MADs the simulator drops.
TEST(FaultsMadLossSimTest, MadLossDuringAHeavySweepGivesTheSameFabricAsNoLoss) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  std::vector<std::pair<uint64_t, uint16_t>> want_lids;
  std::vector<uint8_t> want_lfts;
  for (double loss: {0.0, 0.01, 0.05, 0.20}) {
    boost::asio::io_context io;
    sim::SimOptions so;
    so.seed = 7;
    sim::Simulator sim(*f, so);
    sim.SetDropRate(loss);
    SmRun r(*f, sim, io, Options());
    SweepStats s = RunUntil(io, r, [&](const SweepStats& st) {
      // A lossy sweep may end with issues and queue another; the next one finishes the job.
      return st.subnet_up || st.number >= 5;
    });
    EXPECT_TRUE(s.subnet_up) << "loss " << loss;
    sim.SetDropRate(0);  // read back without loss
    ExpectFabricUp(*f, sim);
    auto lids = PortLids(*f, sim);
    auto lfts = AllLfts(*f, sim, static_cast<uint16_t>(f->switch_count() + f->ca_count()));
    if (loss == 0.0) {
      want_lids = lids;
      want_lfts = lfts;
    } else {
      EXPECT_EQ(lids, want_lids) << "loss " << loss << " gave other LIDs";
      EXPECT_EQ(lfts, want_lfts) << "loss " << loss << " gave other tables";
    }
    const mad::TransportCounters& tc = r.transport.counters();
    if (loss > 0) {
      EXPECT_GT(tc.retries, 0u) << "the loss must have been felt";
    }
    std::printf("MAD loss %.0f%%: SUBNET UP after %llu sweep(s); %llu SMPs, %llu resent, "
                "%llu given up\n",
                loss * 100, static_cast<unsigned long long>(s.number),
                static_cast<unsigned long long>(r.sm.smp_counters().gets + r.sm.smp_counters().sets),
                static_cast<unsigned long long>(tc.retries),
                static_cast<unsigned long long>(tc.timeouts));
  }
}

// The strict simulator's ports refuse a transition to the state they are in (status 7), as
// ibsim and the spec do: when the reply of an applied ARMED or ACTIVE Set is lost, the retry
// fails. One sweep must still bring the fabric up: the port is read back and counts as done
// when it holds the state.
TEST(FaultsAppliedSetLossSimTest, OneSweepBringsALossyFabricUpWhenRepliesOfAppliedSetsAreLost) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  for (double loss: {0.05, 0.10}) {
    boost::asio::io_context io;
    sim::SimOptions so;
    so.seed = 11;
    sim::Simulator sim(*f, so);
    sim.SetDropRate(loss);
    SubnetManagerOptions o = Options();
    // Enough retries that a plain Get is not lost four times over at 10% loss each way (with
    // OpenSM's 3, one of the ~5,000 SMPs of a sweep is, one run in four): what this test is
    // about is the applied Set whose retry is refused, which any retry count meets.
    o.send.retries = 6;
    // Long enough that a loaded machine's scheduling delay is not taken for loss (80 ms failed
    // a SwitchInfo after both rounds under ctest -j4 on two cores).
    o.send.timeout = 250ms;
    o.once = true;
    SmRun r(*f, sim, io, o);
    SweepStats s = RunUntil(io, r);
    EXPECT_EQ(s.number, 1u);
    EXPECT_TRUE(s.subnet_up) << "loss " << loss << ": " << s.issues << " issues";
    EXPECT_GT(r.sm.counters().sets_confirmed_by_readback, 0u) << "loss " << loss;
    std::printf("MAD loss %.0f%%: %llu SMPs sent round again, %llu state Sets confirmed by a "
                "read-back\n",
                loss * 100, static_cast<unsigned long long>(r.sm.smp_counters().resent),
                static_cast<unsigned long long>(r.sm.counters().sets_confirmed_by_readback));
    sim.SetDropRate(0);
    ExpectFabricUp(*f, sim);
  }
}

TEST(FaultsSimTest, ASwitchThatAnswersNothingIsReportedAndTheRestIsConfigured) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  NodeId core = *f->FindNodeByName("core-001");
  ASSERT_TRUE(sim.SetNodeDropRate(core, 1.0).ok());
  SubnetManagerOptions o = Options();
  o.send.retries = 2;
  SmRun r(*f, sim, io, o);
  SweepStats s = RunUntil(io, r);
  EXPECT_GT(s.issues, 0u);
  EXPECT_GT(r.sm.counters().issues_by_id.count("SM-DISC-001"), 0u) << "the dead switch is named";
  EXPECT_EQ(s.switches, f->switch_count() - 1);
  // Without core-001 the 3-tier tree still connects every host: all of them are configured.
  ExpectFabricUp(*f, sim, {core});
}

TEST(FaultsSimTest, LinksFlappingDuringASweepEndInAConsistentFabric) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::SimOptions so;
  so.io = &io;
  so.seed = 3;
  sim::Simulator sim(*f, so);
  sim.SetLatency(200us, 100us);  // a sweep long enough to flap links inside it
  // Three spine-core and leaf-spine cables go down and come back while the first sweep runs.
  std::vector<PortId> flapping;
  for (const char* name: {"pod01-spine-01", "pod03-leaf-02", "pod05-spine-04"}) {
    NodeId n = *f->FindNodeByName(name);
    flapping.push_back(f->port_id(n, PortNum{static_cast<uint8_t>(f->node(n).num_ports)}));
  }
  std::vector<std::unique_ptr<boost::asio::steady_timer>> timers;
  int k = 0;
  for (PortId p: flapping) {
    for (bool up: {false, true}) {
      auto t = std::make_unique<boost::asio::steady_timer>(io, std::chrono::milliseconds(5 + 7 * k++));
      t->async_wait([&sim, p, up](boost::system::error_code ec) {
        if (!ec) (void)(up ? sim.LinkUp(p): sim.LinkDown(p));
      });
      timers.push_back(std::move(t));
    }
  }
  SmRun r(*f, sim, io, Options());
  int sweeps = 0;
  SweepStats s = RunUntil(io, r, [&](const SweepStats& st) {
    ++sweeps;
    if (sweeps == 1) {
      r.sm.RequestHeavySweep("test: after the flaps");
      return false;
    }
    return st.subnet_up || sweeps >= 6;
  });
  EXPECT_TRUE(s.subnet_up);
  ExpectFabricUp(*f, sim);
}

TEST(FaultsSimTest, ASwitchRebootAndNodesLeavingAndComingBackKeepEveryLid) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::SimOptions so;
  so.io = &io;
  sim::Simulator sim(*f, so);
  SmRun r(*f, sim, io, Options());
  NodeId spine = *f->FindNodeByName("pod02-spine-02");
  NodeId host = f->port(f->port(f->port_id(*f->FindNodeByName("pod04-leaf-03"), PortNum{1})).peer).node;
  std::vector<std::pair<uint64_t, uint16_t>> first;
  // Each step ends with the heavy sweep it asks for. A trap that comes while that sweep walks
  // the fabric (the reboot's neighbours report their links) hands it to a repair first, and
  // the heavy sweep runs after it; one that comes while it routes hands it to a repair that
  // does the rest in its place (in_place_of_heavy): a step's LFT blocks are those of its
  // repairs and its heavy sweep together.
  int heavy = 0;
  uint64_t blocks = 0;
  SweepStats s = RunUntil(io, r, [&](const SweepStats& st) {
    EXPECT_TRUE(st.subnet_up) << "sweep " << st.number;
    blocks += st.lft_blocks_sent;
    if (st.repair && !st.in_place_of_heavy) return false;
    ++heavy;
    const uint64_t step_blocks = std::exchange(blocks, 0);
    switch (heavy) {
      case 1:
        first = PortLids(*f, sim);
        EXPECT_TRUE(sim.RebootSwitch(spine).ok());  // tables cleared, ports back to INIT
        r.sm.RequestHeavySweep("test: switch rebooted");
        return false;
      case 2:
        EXPECT_EQ(PortLids(*f, sim), first) << "the rebooted switch got its LID back";
        EXPECT_GT(step_blocks, 0u) << "its table was written again";
        EXPECT_TRUE(sim.RemoveNode(host).ok());
        r.sm.RequestHeavySweep("test: host removed");
        return false;
      case 3:
        EXPECT_EQ(st.cas, f->ca_count() - 1);
        EXPECT_TRUE(sim.AddNode(host).ok());
        r.sm.RequestHeavySweep("test: host back");
        return false;
      default:
        return true;
    }
  });
  EXPECT_EQ(heavy, 4);
  EXPECT_TRUE(!s.repair || s.in_place_of_heavy);
  EXPECT_EQ(s.cas, f->ca_count());
  EXPECT_EQ(PortLids(*f, sim), first) << "the host came back with its LID";
  ExpectFabricUp(*f, sim);
}

// The state file stops taking writes (the file-size limit makes every file write fail, as a
// full disk does; ibsmd ignores SIGXFSZ as this test does): sweeps go on and the fabric stays
// up, the failures are counted and logged, and the guid2lid row of a host that arrived
// meanwhile is written once the file takes writes again, so a restart keeps its LID.
TEST(FaultsSimTest, AStateFileThatRefusesWritesStopsNothingAndCatchesUpLater) {
  ::signal(SIGXFSZ, SIG_IGN);
  const std::string dir = ::testing::TempDir() + "/ibsm_state_full_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/state.db";
  SystemClock clock;
  auto store = ha::StateStore::Open(path, clock);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::SimOptions so;
  so.io = &io;
  sim::Simulator sim(*f, so);
  NodeId late = f->port(f->port(f->port_id(*f->FindNodeByName("leaf-004"), PortNum{1})).peer).node;
  ASSERT_TRUE(sim.RemoveNode(late).ok());
  const Guid late_port = f->port(f->port_id(late, PortNum{1})).guid;
  rlimit unlimited{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &unlimited), 0);
  auto saved_lids = [&] {
    std::map<uint64_t, uint16_t> m;
    auto ro = ha::StateStore::OpenReadOnly(path);
    EXPECT_TRUE(ro.ok());
    if (!ro.ok()) return m;
    auto rows = (*ro)->LoadGuid2Lid();
    EXPECT_TRUE(rows.ok());
    if (rows.ok())
      for (const auto& r: *rows) m[r.port_guid.value()] = r.min_lid.value();
    return m;
  };
  SmRun r(*f, sim, io, Options(), store->get());
  int sweeps = 0;
  uint16_t late_lid = 0;
  SweepStats s = RunUntil(io, r, [&](const SweepStats& st) {
    ++sweeps;
    EXPECT_TRUE(st.subnet_up) << "sweep " << sweeps;
    if (sweeps == 1) {
      EXPECT_EQ(r.sm.counters().state_write_failures, 0u);
      EXPECT_EQ(saved_lids().count(late_port.value()), 0u);
      rlimit full = unlimited;
      full.rlim_cur = 1;  // no regular file can grow or be written past its first byte
      EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &full), 0);
      EXPECT_TRUE(sim.AddNode(late).ok());
      r.sm.RequestHeavySweep("test: a host arrives while the disk is full");
      return false;
    }
    if (sweeps == 2) {
      EXPECT_GT(r.sm.counters().state_write_failures, 0u);
      EXPECT_GT(r.sm.counters().issues_by_id.count("SM-STATE-002"), 0u);
      late_lid = sim.port_info(f->port_id(late, PortNum{1})).lid;
      EXPECT_NE(late_lid, 0) << "the new host is configured all the same";
      ExpectFabricUp(*f, sim);
      EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &unlimited), 0);  // space is back
      r.sm.RequestHeavySweep("test: space is back");
      return false;
    }
    return true;
  });
  ::setrlimit(RLIMIT_FSIZE, &unlimited);
  EXPECT_EQ(sweeps, 3);
  EXPECT_TRUE(s.subnet_up);
  const auto lids = saved_lids();
  ASSERT_EQ(lids.count(late_port.value()), 1u) << "the row refused during the outage is saved";
  EXPECT_EQ(lids.at(late_port.value()), late_lid);
  auto integrity = (*store)->CheckIntegrity();
  EXPECT_TRUE(integrity.ok()) << integrity.ToString();
  store->reset();
  std::filesystem::remove_all(dir);
}

// A long-running SM keeps its history bounded: after each heavy sweep the state file holds
// at most keep_sweeps sweep rows and keep_events events, the newest.
TEST(FaultsSimTest, TheStateFileKeepsOnlyTheNewestSweepsAndEvents) {
  char tmpl[] = "/tmp/ibsm_prune_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/state.db";
  SystemClock clock;
  auto store = ha::StateStore::Open(path, clock);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (int i = 0; i < 20; ++i) {  // events of an earlier life of this file
    ha::EventRow e;
    e.time_us = i;
    e.kind = "test";
    e.message = "old event " + std::to_string(i);
    ASSERT_TRUE((*store)->RecordEvent(e).ok());
  }
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::SimOptions so;
  so.io = &io;
  sim::Simulator sim(*f, so);
  SubnetManagerOptions o = Options();
  o.keep_sweeps = 3;
  o.keep_events = 5;
  SmRun r(*f, sim, io, o, store->get());
  int sweeps = 0;
  RunUntil(io, r, [&](const SweepStats&) {
    if (++sweeps == 6) return true;
    r.sm.RequestHeavySweep("test: another sweep");
    return false;
  });
  auto rows = (*store)->RecentSweeps(100);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u);
  auto events = (*store)->RecentEvents(100, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 5u);
  // The SM's own (its two state changes) and the three newest of the old ones.
  std::set<std::string> kept;
  for (const auto& e: *events) kept.insert(e.kind == "test" ? e.message : e.kind);
  EXPECT_EQ(kept.count("old event 19") + kept.count("old event 18") + kept.count("old event 17"),
            3u);
  EXPECT_EQ(kept.count(std::string(ha::kEventStateChange)), 1u);
  EXPECT_EQ(r.sm.counters().state_write_failures, 0u);
  store->reset();
  std::filesystem::remove_all(tmpl);
}

// A storm of traps (1,000 port-health traps 129 naming one leaf port, and 500 copies of one
// trap 128) while every host on the other leaves asks the SA for a path (all of them in
// flight at once) and the heavy sweeps trap 128 starts re-route: every query is answered, the
// repeats are ignored after the tenth (no sweep each, no Reports), the tracker stays small,
// and with babbling_port_policy the port the traps name is disabled.
TEST(FaultsSimTest, ATrapStormIsSilencedWhileTheSaKeepsAnswering) {
  auto f = FatTree2(8);  // 32 hosts: 27 SA clients
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::SimOptions so;
  so.io = &io;
  sim::Simulator sim(*f, so);
  SubnetManagerOptions o = Options();
  o.babbling_port_policy = true;
  SmRun r(*f, sim, io, o);
  int sweeps = 0;
  r.sm.Start([&](const SweepStats&) {
    ++sweeps;
    io.stop();
  });
  io.run();
  ASSERT_EQ(sweeps, 1);
  const uint16_t sm_lid = r.sm.sm_lid().value();
  const NodeId leaf = *f->FindNodeByName("leaf-002");
  const PortId leaf0 = f->port_id(leaf, PortNum{0});
  const uint16_t leaf_lid = sim.port_info(leaf0).lid;
  const PortId noisy = f->port_id(leaf, PortNum{1});  // faces a host
  ASSERT_TRUE(f->port(noisy).connected());
  // Every host on the other leaves is an SA client; each asks for the path to the next one.
  std::vector<PortId> hosts;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    if (f->node(n).kind != NodeKind::kCa) continue;
    const PortId p = f->port_id(n, PortNum{1});
    if (f->port(f->port(p).peer).node == leaf || p == FirstCaPort(*f)) continue;
    hosts.push_back(p);
  }
  ASSERT_EQ(hosts.size(), 27u);
  auto trap = [&](uint16_t num) {
    mad::Smp smp = mad::MakeLidSmp(mad::method::kTrap, mad::attr::kNotice, 0);
    mad::Notice n = mad::MakeTrap128(leaf_lid);
    if (num != mad::trap::kLinkStateChanged) {
      n.trap_number_or_device_id = num;
      n.data_details = {};
      n.data_details[2] = static_cast<uint8_t>(leaf_lid >> 8);
      n.data_details[3] = static_cast<uint8_t>(leaf_lid);
      n.data_details[5] = f->port(noisy).num.value();
    }
    mad::EncodeSmpNotice(n, smp.data);
    return mad::ToMessage(smp, Lid{sm_lid});
  };
  std::vector<std::unique_ptr<sim::SimTransport>> clients;
  for (PortId h: hosts) {
    clients.push_back(std::make_unique<sim::SimTransport>(io, sim, h));
    ASSERT_TRUE(clients.back()->bind_status().ok());
  }
  size_t answered = 0, replies = 0;
  const uint64_t sweeps_before = r.sm.counters().heavy_sweeps;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 100; ++i) sim.Inject(leaf0, trap(mad::trap::kLinkIntegrityThreshold));
    for (int i = 0; i < 50; ++i) sim.Inject(leaf0, trap(mad::trap::kLinkStateChanged));
    // All clients' queries in flight at once, behind the storm's traps.
    for (size_t c = 0; c < clients.size(); ++c) {
      mad::SaMad q;
      q.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
      q.hdr.class_version = mad::kSaClassVersion;
      q.hdr.method = mad::method::kGet;
      q.hdr.attr_id = mad::sa_attr::kPathRecord;
      q.comp_mask = mad::path_comp::kSlid | mad::path_comp::kDlid;
      mad::PathRecord pr;
      pr.slid = sim.port_info(hosts[c]).lid;
      pr.dlid = sim.port_info(hosts[(c + 1) % hosts.size()]).lid;
      mad::EncodeTo(pr, std::span<uint8_t>(q.data));
      mad::MadMessage m;
      m.bytes.resize(mad::kMadSize);
      mad::EncodeSa(q, m.bytes);
      m.addr.lid = Lid{sm_lid};
      clients[c]->Send(std::move(m), mad::SendOptions{500ms, 2}, [&](Result<mad::MadMessage> a) {
        ++replies;
        if (!a.ok()) return;
        mad::SaMad resp;
        std::vector<uint8_t> b = a->bytes;
        b.resize(mad::kMadSize, 0);
        if (mad::DecodeSa(b, &resp).ok() && resp.hdr.status == 0) ++answered;
      });
    }
    const size_t want = (round + 1) * clients.size();
    for (int i = 0; i < 500 && replies < want; ++i) {
      io.restart();
      io.run_for(10ms);
    }
  }
  for (int i = 0; i < 100; ++i) {  // let the sweeps the first traps asked for finish
    io.restart();
    io.run_for(10ms);
  }
  for (auto& c: clients) c->Close();
  EXPECT_EQ(answered, 10 * clients.size())
      << "every PathRecord query of every client answered during the storm";
  const SmCounters& c = r.sm.counters();
  EXPECT_EQ(c.traps_received, 1500u);
  EXPECT_EQ(c.traps_suppressed, 1500u - 2 * 10);  // ten of each kind got through
  EXPECT_LE(c.heavy_sweeps - sweeps_before, 10u) << "not one sweep per trap";
  EXPECT_EQ(c.issues_by_id.count("SM-TRAP-001"), 1u);
  EXPECT_EQ(c.babbling_ports_disabled, 1u);
  EXPECT_EQ(sim.port_info(noisy).port_phys_state, 3) << "the babbling port is disabled";
  r.sm.Stop();
}

// The details of a trap are the sender's bytes: a host that names a switch port in 250
// trap 129s must not get the SM to disable that port (babbling_port_policy); a host whose
// own port babbles still gets it disabled.
TEST(FaultsSimTest, AForgedHealthTrapNamingAnotherNodesPortDisablesNothing) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  SubnetManagerOptions o = Options();
  o.babbling_port_policy = true;
  SmRun r(*f, sim, io, o);
  RunUntil(io, r);
  ASSERT_TRUE(r.sm.last_sweep().subnet_up);
  // The attacker: the last host. The victim: port 1 of the first leaf.
  PortId attacker = kNoPort;
  for (NodeId n = 0; n < f->node_count(); ++n)
    if (f->node(n).kind == NodeKind::kCa) attacker = f->port_id(n, PortNum{1});
  const NodeId leaf = *f->FindNodeByName("leaf-001");
  const PortId victim = f->port_id(leaf, PortNum{1});
  const uint16_t leaf_lid = sim.port_info(f->port_id(leaf, PortNum{0})).lid;
  const uint16_t own_lid = sim.port_info(attacker).lid;
  auto health_trap = [](uint16_t lid, uint8_t port, uint16_t issuer) {
    mad::Notice n = mad::MakeTrap128(issuer);
    n.trap_number_or_device_id = mad::trap::kLinkIntegrityThreshold;
    n.data_details = {};
    n.data_details[2] = static_cast<uint8_t>(lid >> 8);
    n.data_details[3] = static_cast<uint8_t>(lid);
    n.data_details[5] = port;
    return n;
  };
  auto pump = [&] {
    for (int i = 0; i < 20; ++i) {
      io.restart();
      io.run_for(5ms);
    }
  };
  for (int i = 0; i < 300; ++i) {
    // Forged twice over: the switch's port in the details, the switch as IssuerLID.
    ASSERT_TRUE(sim.InjectTrap(attacker, health_trap(leaf_lid, 1, leaf_lid)).ok());
    if (i % 50 == 0) pump();
  }
  pump();
  const SmCounters& c = r.sm.counters();
  EXPECT_EQ(sim.port_info(victim).port_phys_state, 5) << "the switch port stays LinkUp";
  EXPECT_EQ(c.babbling_ports_disabled, 0u);
  EXPECT_EQ(c.issues_by_id.count("SM-TRAP-004"), 1u);
  EXPECT_EQ(c.traps_issuer_mismatch, 300u);
  // Its own port babbling: disabled, as the policy says.
  for (int i = 0; i < 300; ++i) {
    // Once its port is disabled the host cannot reach the SM any more.
    if (!sim.InjectTrap(attacker, health_trap(own_lid, 1, own_lid)).ok()) break;
    if (i % 50 == 0) pump();
  }
  pump();
  EXPECT_EQ(r.sm.counters().babbling_ports_disabled, 1u);
  // Disabled at the switch end of its cable, so the SM's answer came back.
  EXPECT_EQ(sim.port_info(f->port(attacker).peer).port_phys_state, 3);
  EXPECT_NE(sim.port_info(attacker).port_phys_state, 5);
  r.sm.Stop();
}

}  // namespace
}  // namespace ibsm::sm
