#include "sm/sweep/subnet_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "fabric/generators.h"
#include "ha/locked_state_file.h"
#include "ha/state_store.h"
#include "sm/record/control_answers.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/testing/sim_test_util.h"

namespace ibsm::sm {
namespace {

using simcheck::ExpectFabricUp;
using simcheck::FirstCaPort;
using simcheck::Reaches;

SubnetManagerOptions Once() {
  SubnetManagerOptions o;
  o.once = true;
  o.send.timeout = std::chrono::milliseconds(20);
  o.send.retries = 4;
  return o;
}

// Sweeps only when something asks (a trap, RequestHeavySweep): no light sweep timer.
SubnetManagerOptions OnDemand() {
  SubnetManagerOptions o;
  o.send.timeout = std::chrono::milliseconds(20);
  o.sweep_interval = std::chrono::seconds(0);
  return o;
}

// Runs one SubnetManager on `sim` until its first heavy sweep ends (or, with `until`, until
// `until` says stop after a sweep). Returns the last sweep's figures.
SweepStats RunSm(boost::asio::io_context& io, sim::Simulator& sim, PortId at,
                 SubnetManagerOptions o, ha::StateFile* store = nullptr,
                 std::function<bool(SubnetManager&, const SweepStats&)> until = {}) {
  sim::SimTransport t(io, sim, at);
  EXPECT_TRUE(t.bind_status().ok());
  SystemClock clock;
  SubnetManager sm(io, t, clock, store, o);
  SweepStats last;
  sm.Start([&](const SweepStats& s) {
    last = s;
    if (!until || until(sm, s)) {
      sm.Stop();
      t.Close();
      io.stop();
    }
  });
  io.restart();
  io.run();
  return last;
}

std::vector<uint16_t> SimCaLids(const Fabric& f, const sim::Simulator& sim) {
  std::vector<uint16_t> lids;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).kind == NodeKind::kCa) lids.push_back(sim.port_info(f.port_id(n, PortNum{1})).lid);
  return lids;
}


TEST(SubnetManagerTest, ColdFabricComesUpWithUniqueLidsActiveLinksAndFullReachability) {
  // No routing_engine: the fat trees get ftree, the random graph updn (never minhop).
  const char* engines[] = {"ftree", "ftree", "updn"};
  int i = 0;
  for (auto fabric: {FatTree2(8), FatTree3(8), RandomGraph(24, 8, 2, 5)}) {
    ASSERT_TRUE(fabric.ok());
    boost::asio::io_context io;
    sim::Simulator sim(*fabric);
    // The simulator answers every SMP, so none may fail; a timeout long enough that a busy
    // machine (sanitizers, parallel tests) delays an answer without failing it.
    SubnetManagerOptions o = Once();
    o.send.timeout = std::chrono::milliseconds(500);
    SweepStats s = RunSm(io, sim, FirstCaPort(*fabric), o);
    EXPECT_TRUE(s.subnet_up);
    EXPECT_EQ(s.smps_failed, 0u);
    EXPECT_EQ(s.engine, engines[i++]);
    ExpectFabricUp(*fabric, sim);
  }
}

TEST(SubnetManagerTest, SmPortGetsLidOneAndEveryPortPointsAtIt) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  PortId sm_port = FirstCaPort(*f);
  RunSm(io, sim, sm_port, Once());
  EXPECT_EQ(sim.port_info(sm_port).lid, 1);
  for (NodeId n = 0; n < f->node_count(); ++n) {
    PortId p = f->node(n).is_switch() ? f->port_id(n, PortNum{0}): f->port_id(n, PortNum{1});
    EXPECT_EQ(sim.port_info(p).master_sm_base_lid, 1);
  }
}

TEST(SubnetManagerTest, RestartOnAnUnchangedFabricKeepsLidsAndSendsNoLftSet) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  PortId at = FirstCaPort(*f);
  SweepStats first = RunSm(io, sim, at, Once());
  ASSERT_TRUE(first.subnet_up);
  EXPECT_GT(first.lft_blocks_sent, 0u);
  std::vector<uint16_t> before = SimCaLids(*f, sim);
  SweepStats second = RunSm(io, sim, at, Once());
  EXPECT_TRUE(second.subnet_up);
  EXPECT_EQ(second.lft_blocks_sent, 0u);
  EXPECT_EQ(second.lid_changes, 0u);
  EXPECT_EQ(second.switchinfo_sets, 0u);
  EXPECT_GT(second.lft_blocks_read, 0u);
  EXPECT_EQ(SimCaLids(*f, sim), before);
}

TEST(SubnetManagerTest, StateFileGivesEveryPortItsLidBackOnAFreshFabric) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  auto dir = std::filesystem::temp_directory_path() / ("ibsm-sm-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  SystemClock clock;
  PortId at = FirstCaPort(*f);
  std::vector<uint16_t> first_lids;
  {
    auto store = ha::StateStore::Open((dir / "state.db").string(), clock);
    ASSERT_TRUE(store.ok());
    boost::asio::io_context io;
    sim::Simulator sim(*f);
    SubnetManagerOptions o = Once();
    o.lids.lmc = 1;
    RunSm(io, sim, at, o, store->get());
    first_lids = SimCaLids(*f, sim);
    auto rows = (*store)->RecentSweeps(10);
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].outcome, "ok");
    EXPECT_EQ((*rows)[0].nodes, f->node_count());
  }
  // Power-cycled fabric (every LID 0) with the CA order reversed in LID preference: only the
  // state file can give the old LIDs back.
  auto store = ha::StateStore::Open((dir / "state.db").string(), clock);
  ASSERT_TRUE(store.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  SubnetManagerOptions o = Once();
  o.lids.lmc = 1;
  SweepStats s = RunSm(io, sim, at, o, store->get());
  EXPECT_TRUE(s.subnet_up);
  EXPECT_EQ(SimCaLids(*f, sim), first_lids);
  std::filesystem::remove_all(dir);
}

// The daemon's state writer, on its own thread: a heavy sweep and the repair of a cut cable
// each leave their sweep row, and the links snapshot is the links answer after the repair,
// once Stop has drained the writer; the dump file is there too.
TEST(SubnetManagerTest, WithTheStateWriterOnItsOwnThreadEverySweepReachesTheStateFile) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  auto dir = std::filesystem::temp_directory_path() /
             ("ibsm-sm-writer-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  SystemClock clock;
  auto store = ha::StateStore::Open((dir / "state.db").string(), clock);
  ASSERT_TRUE(store.ok());
  ha::LockedStateFile shared(**store);
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  SubnetManagerOptions o = OnDemand();
  o.state_writer_thread = true;
  o.dump_dir = dir.string();
  const PortId cut = testutil::FirstSwitchCable(*f);
  ASSERT_NE(cut, kNoPort);
  std::vector<SweepStats> sweeps;
  nlohmann::json links_after;
  RunSm(io, sim, FirstCaPort(*f), o, &shared, [&](SubnetManager& sm, const SweepStats& s) {
    sweeps.push_back(s);
    if (sweeps.size() == 1) {
      EXPECT_TRUE(sim.LinkDown(cut).ok());
      return false;
    }
    links_after = LinksAnswer(*sm.fabric(), nullptr, nullptr);
    return true;
  });
  ASSERT_EQ(sweeps.size(), 2u);
  EXPECT_TRUE(sweeps[0].subnet_up);
  EXPECT_TRUE(sweeps[1].subnet_up);
  EXPECT_TRUE(sweeps[1].repair);
  auto rows = (*store)->RecentSweeps(10);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 2u);
  auto links = (*store)->LoadSnapshot(ha::kSnapshotLinks);
  ASSERT_TRUE(links.ok() && links->has_value());
  const nlohmann::json stored = nlohmann::json::parse((*links)->json);
  EXPECT_EQ(stored["links"].size(), f->link_count() - 1) << "the cut cable is gone";
  EXPECT_EQ(stored["links"], links_after["links"]);
  EXPECT_TRUE(std::filesystem::exists(dir / "opensm-subnet.lst"));
  std::filesystem::remove_all(dir);
}

// ClientReregister only where SA state was lost: a client re-registers its
// ServiceRecords, multicast joins and subscriptions when told to; an SM that restarts with
// the state file it kept as master holds them all, so nobody needs telling.
class ClientReregisterTest: public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = FatTree2(4);
    ASSERT_TRUE(f.ok());
    fabric_ = std::move(*f);
    sim_ = std::make_unique<sim::Simulator>(fabric_);
    dir_ = std::filesystem::temp_directory_path() /
           ("ibsm-rereg-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // One SM run (once) at `at` with the state file `db` (empty: none). Returns how many CA
  // ports it told to re-register, as the CAs saw it.
  uint64_t Run(PortId at, const std::string& db, SweepStats* stats = nullptr) {
    uint64_t before = sim_->client_reregisters();
    std::unique_ptr<ha::StateStore> store;
    if (!db.empty()) {
      auto s = ha::StateStore::Open((dir_ / db).string(), clock_);
      EXPECT_TRUE(s.ok());
      if (s.ok()) store = std::move(*s);
    }
    boost::asio::io_context io;
    SweepStats s = RunSm(io, *sim_, at, Once(), store.get());
    EXPECT_TRUE(s.subnet_up);
    EXPECT_EQ(s.client_reregisters, sim_->client_reregisters() - before);
    if (stats) *stats = s;
    return sim_->client_reregisters() - before;
  }

  std::vector<PortId> Cas() const {
    std::vector<PortId> out;
    for (NodeId n = 0; n < fabric_.node_count(); ++n)
      if (fabric_.node(n).kind == NodeKind::kCa) out.push_back(fabric_.port_id(n, PortNum{1}));
    return out;
  }

  Fabric fabric_;
  std::unique_ptr<sim::Simulator> sim_;
  std::filesystem::path dir_;
  SystemClock clock_;
};

TEST_F(ClientReregisterTest, AMasterRestartedWithItsStateFileTellsNoClientToReregister) {
  PortId at = Cas().front();
  EXPECT_EQ(Run(at, "a.db"), fabric_.ca_count()) << "a fresh SM holds nothing";
  EXPECT_EQ(Run(at, "a.db"), 0u) << "its state file holds every registration";
}

TEST_F(ClientReregisterTest, AMasterRestartedWithoutItsStateFileTellsEveryClient) {
  PortId at = Cas().front();
  EXPECT_EQ(Run(at, "a.db"), fabric_.ca_count());
  EXPECT_EQ(Run(at, ""), fabric_.ca_count());
  EXPECT_EQ(Run(at, "fresh.db"), fabric_.ca_count());
}

TEST_F(ClientReregisterTest, AfterAnotherSmWasMasterEveryClientIsToldAgain) {
  PortId a = Cas().front(), b = Cas().back();
  EXPECT_EQ(Run(a, "a.db"), fabric_.ca_count());
  // "b" masters the subnet meanwhile (its own state file): clients registered with it.
  EXPECT_EQ(Run(b, "b.db"), fabric_.ca_count());
  // "a" comes back with a state file that says it was master, but every port names "b":
  // what clients registered with "b" is not in "a"'s file.
  EXPECT_EQ(Run(a, "a.db"), fabric_.ca_count());
  // Now "a" has told them all: the next restart owes nobody anything.
  EXPECT_EQ(Run(a, "a.db"), 0u);
}

TEST_F(ClientReregisterTest, AnSmThatStoodByDoesNotCountItsFileAsComplete) {
  PortId a = Cas().front();
  EXPECT_EQ(Run(a, "a.db"), fabric_.ca_count());
  {
    // The state file says STANDBY (another master served meanwhile).
    auto store = ha::StateStore::Open((dir_ / "a.db").string(), clock_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->SetValue("sm_state", "STANDBY").ok());
  }
  EXPECT_EQ(Run(a, "a.db"), fabric_.ca_count());
}

TEST(SubnetManagerTest, LinkDownTrapReroutesAroundTheLinkWithinOneSweep) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::SimOptions so;
  so.io = &io;
  sim::Simulator sim(*f, so);
  PortId at = FirstCaPort(*f);
  SubnetManagerOptions o = OnDemand();  // only the trap can start the second sweep
  NodeId leaf = *f->FindNodeByName("leaf-002");
  PortId uplink = f->port_id(leaf, PortNum{5});
  int sweeps = 0;
  SweepStats s = RunSm(io, sim, at, o, nullptr, [&](SubnetManager&, const SweepStats& st) {
    ++sweeps;
    if (sweeps == 1) {
      EXPECT_TRUE(st.subnet_up);
      EXPECT_TRUE(sim.LinkDown(uplink).ok());
      return false;
    }
    return true;
  });
  EXPECT_EQ(sweeps, 2);
  EXPECT_TRUE(s.subnet_up);
  EXPECT_EQ(s.links, f->link_count() - 1);
  EXPECT_GT(s.lft_blocks_sent, 0u);
  // No route leaves leaf-002 by the dead port, and every host still reaches every host.
  for (uint16_t lid: SimCaLids(*f, sim)) EXPECT_NE(sim.lft_entry(leaf, Lid{lid}), 5);
  Fabric g = *f;
  g.Disconnect(uplink);
  ExpectFabricUp(g, sim);
}

// The SM keeps what each switch's LFT holds across heavy sweeps, per block: a sweep of the
// same fabric sends no block and reads none back; a re-route sends exactly the blocks whose
// entries changed on the switches, and the switches then hold the new routes.
TEST(SubnetManagerTest, LftCacheSendsNothingForAnUnchangedFabricAndOnlyChangedBlocksOnReroute) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  PortId at = FirstCaPort(*f);
  SubnetManagerOptions o = OnDemand();
  NodeId leaf = *f->FindNodeByName("leaf-002");
  PortId uplink = f->port_id(leaf, PortNum{5});
  std::vector<SweepStats> sweeps;
  bool link_down = false;
  // Every switch's LFT (LIDs 1..63, one block: the fabric's LIDs fit in it) as the switches
  // hold it.
  auto held = [&] {
    std::vector<std::vector<uint8_t>> out;
    for (NodeId n = 0; n < f->node_count(); ++n) {
      if (!f->node(n).is_switch()) continue;
      out.emplace_back();
      for (uint16_t lid = 1; lid < 64; ++lid) out.back().push_back(sim.lft_entry(n, Lid{lid}));
    }
    return out;
  };
  std::vector<std::vector<uint8_t>> before_cut;
  SweepStats last = RunSm(io, sim, at, o, nullptr, [&](SubnetManager& sm, const SweepStats& st) {
    sweeps.push_back(st);
    if (sweeps.size() == 1) {
      sm.RequestHeavySweep("test: same fabric again");
      return false;
    }
    if (!link_down) {
      link_down = true;
      before_cut = held();
      EXPECT_TRUE(sim.LinkDown(uplink).ok());
      return false;
    }
    return st.links == f->link_count() - 1 || sweeps.size() > 6;
  });
  ASSERT_GE(sweeps.size(), 3u);
  EXPECT_GT(sweeps[0].lft_blocks_sent, 0u);
  EXPECT_EQ(sweeps[1].links, f->link_count());
  EXPECT_EQ(sweeps[1].lft_blocks_sent, 0u);
  EXPECT_EQ(sweeps[1].lft_blocks_read, 0u);
  ASSERT_EQ(last.links, f->link_count() - 1);
  ASSERT_LT(f->node_count(), 64u);  // one LID each (LMC 0): all in block 0
  const std::vector<std::vector<uint8_t>> after_cut = held();
  ASSERT_EQ(after_cut.size(), before_cut.size());
  size_t changed = 0;
  for (size_t i = 0; i < after_cut.size(); ++i) changed += after_cut[i] != before_cut[i];
  uint64_t sent = 0;
  for (size_t i = 2; i < sweeps.size(); ++i) sent += sweeps[i].lft_blocks_sent;
  EXPECT_GT(changed, 0u);
  EXPECT_EQ(sent, changed);
  for (uint16_t lid: SimCaLids(*f, sim)) EXPECT_NE(sim.lft_entry(leaf, Lid{lid}), 5);
  Fabric g = *f;
  g.Disconnect(uplink);
  ExpectFabricUp(g, sim);
}

// A switch that drops out of the fabric forgets what its LFT held (the cache would otherwise
// keep that sweep's tables alive); when it comes back it is read again and programmed.
TEST(SubnetManagerTest, ASwitchThatLeavesAndComesBackIsReadAgainAndRoutedRight) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  SubnetManagerOptions o = OnDemand();
  o.send.retries = 1;
  const NodeId spine = *f->FindNodeByName("spine-01");
  std::vector<SweepStats> sweeps;
  SweepStats last = RunSm(io, sim, FirstCaPort(*f), o, nullptr,
                          [&](SubnetManager& sm, const SweepStats& st) {
                            sweeps.push_back(st);
                            if (sweeps.size() == 1) {
                              EXPECT_TRUE(sim.SetNodeDropRate(spine, 1.0).ok());
                            } else if (sweeps.size() == 2) {
                              EXPECT_TRUE(sim.SetNodeDropRate(spine, 0.0).ok());
                            } else {
                              return true;
                            }
                            sm.RequestHeavySweep("test");
                            return false;
                          });
  ASSERT_EQ(sweeps.size(), 3u);
  EXPECT_EQ(sweeps[1].switches, sweeps[0].switches - 1);
  EXPECT_EQ(last.switches, sweeps[0].switches);
  EXPECT_EQ(sweeps[1].lft_blocks_read, 0u);
  EXPECT_GT(last.lft_blocks_read, 0u) << "the returning spine's table is read back";
  EXPECT_TRUE(last.subnet_up);
  ExpectFabricUp(*f, sim);
}

// A trap that arrives between "Entering MASTER state" and the first sweep (ibsim's trap 144 for
// the SM's own IsSM claim on a warm fabric) is covered by that sweep: one sweep, not two.
TEST(SubnetManagerTest, ASweepRequestBeforeTheFirstSweepBeginsIsMergedIntoIt) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f, {});
  sim::SimTransport t(io, sim, FirstCaPort(*f));
  SystemClock clock;
  SubnetManagerOptions o = OnDemand();
  SubnetManager sm(io, t, clock, nullptr, o);
  int sweeps = 0;
  auto stop = [&] {
    sm.Stop();
    t.Close();
    io.stop();
  };
  // A second sweep would follow the first at once; give it two seconds to show up.
  boost::asio::steady_timer grace(io);
  sm.Start([&](const SweepStats&) {
    if (++sweeps > 1) return stop();
    grace.expires_after(std::chrono::seconds(2));
    grace.async_wait([&](boost::system::error_code) { stop(); });
  });
  sm.RequestHeavySweep("trap 144 from LID 1");
  io.run_for(std::chrono::seconds(20));
  EXPECT_EQ(sweeps, 1);
  EXPECT_EQ(sm.counters().heavy_sweeps, 1u);
}

// Five switches in a ring, one host each: minhop's shortest paths chase each other round the
// ring (a credit loop). The SM reports it and still brings the fabric up; updn's routes have
// none.
Fabric Ring5() {
  Fabric f;
  for (int s = 1; s <= 5; ++s) {
    std::string name = "sw-" + std::to_string(s);
    EXPECT_TRUE(f.AddNode(NodeKind::kSwitch, Guid(0x1000 + s), 3, name, name).ok());
  }
  for (int s = 1; s <= 5; ++s) {
    std::string name = "host-" + std::to_string(s);
    auto ca = f.AddNode(NodeKind::kCa, Guid(0x100000 + 16 * s), 1, name, name);
    EXPECT_TRUE(ca.ok());
    EXPECT_TRUE(f.Connect(*ca, PortNum(1), *f.FindNodeByName("sw-" + std::to_string(s)), PortNum(1)).ok());
  }
  for (int s = 1; s <= 5; ++s)
    EXPECT_TRUE(f.Connect(*f.FindNodeByName("sw-" + std::to_string(s)), PortNum(2),
                          *f.FindNodeByName("sw-" + std::to_string(s % 5 + 1)), PortNum(3))
                    .ok());
  return f;
}

// One sweep of `f` routed by `engine` (routing_engine as written in opensm.conf); the sweep's
// stats and the credit loops the SM found.
struct EngineRun {
  SweepStats last;
  uint64_t credit_loops = 0;
};
EngineRun SweepWithEngine(const Fabric& f, sim::Simulator& sim, const char* engine) {
  boost::asio::io_context io;
  SubnetManagerOptions o = Once();
  o.routing_engine = engine;
  sim::SimTransport t(io, sim, FirstCaPort(f));
  SystemClock clock;
  SubnetManager sm(io, t, clock, nullptr, o);
  EngineRun r;
  sm.Start([&](const SweepStats& s) {
    r.last = s;
    sm.Stop();
    t.Close();
    io.stop();
  });
  io.run();
  r.credit_loops = sm.counters().credit_loops_found;
  return r;
}

TEST(SubnetManagerTest, MinhopCreditLoopIsReportedButUpdnRoutesHaveNone) {
  Fabric f = Ring5();
  for (const char* engine: {"minhop", "updn"}) {
    SCOPED_TRACE(engine);
    sim::Simulator sim(f, {});
    const EngineRun run = SweepWithEngine(f, sim, engine);
    const SweepStats& last = run.last;
    EXPECT_TRUE(last.subnet_up);
    EXPECT_EQ(last.engine, engine);
    EXPECT_EQ(run.credit_loops, std::string(engine) == "minhop" ? 1u: 0u);
    ExpectFabricUp(f, sim);
  }
}

// Safe by default: with no routing_engine (OpenSM would use minhop) and with a chain of
// engines that decline this fabric, the ring is routed by updn, loop-free, never by minhop,
// whose routes on it have a credit loop (the test above).
TEST(SubnetManagerTest, WithoutMinhopNamedTheRoutesAreFreeOfCreditLoops) {
  Fabric f = Ring5();
  for (const char* engine: {"", "ftree"}) {
    SCOPED_TRACE(std::string("routing_engine '") + engine + "'");
    sim::Simulator sim(f, {});
    const EngineRun run = SweepWithEngine(f, sim, engine);
    const SweepStats& last = run.last;
    EXPECT_TRUE(last.subnet_up);
    EXPECT_EQ(last.engine, "updn");
    EXPECT_EQ(run.credit_loops, 0u);
    ExpectFabricUp(f, sim);
  }
}

// The SM's own HCA stops answering (on ibsim: the simulator died under the daemon): the sweep
// is abandoned with SM-SWEEP-002, and nothing of the previous sweep is used on the empty
// result. This crashed the daemon once.
TEST(SubnetManagerTest, OwnPortGoneAfterASweepIsReportedNotACrash) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f, {});
  PortId at = FirstCaPort(*f);
  SubnetManagerOptions o;
  o.send.timeout = std::chrono::milliseconds(10);
  o.send.retries = 1;
  o.sweep_interval = std::chrono::seconds(0);
  int sweeps = 0;
  SweepStats s = RunSm(io, sim, at, o, nullptr, [&](SubnetManager& sm, const SweepStats& st) {
    if (++sweeps == 1) {
      EXPECT_TRUE(st.subnet_up);
      sim.SetDropRate(1.0);  // every MAD lost, our own port's answers too
      sm.RequestHeavySweep("test");
      return false;
    }
    return true;
  });
  EXPECT_EQ(sweeps, 2);
  EXPECT_FALSE(s.subnet_up);
  EXPECT_EQ(s.nodes, 0u);
}

TEST(SubnetManagerTest, LmcTwoGivesEveryHostFourReachableLids) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  SubnetManagerOptions o = Once();
  o.lids.lmc = 2;
  ASSERT_TRUE(RunSm(io, sim, FirstCaPort(*f), o).subnet_up);
  PortId src = f->port_id(*f->FindNodeByName("node-0001/hca1"), PortNum{1});
  PortId dst = f->port_id(*f->FindNodeByName("node-0032/hca1"), PortNum{1});
  const mad::PortInfo& d = sim.port_info(dst);
  EXPECT_EQ(d.lmc, 2);
  EXPECT_EQ(d.lid % 4, 0);
  for (uint16_t i = 0; i < 4; ++i) EXPECT_TRUE(Reaches(*f, sim, src, d.lid + i));
}

// A NodeDescription is whatever a host's root writes (a Latin-1 hostname, escapes): the
// sweep that stores the nodes, links and health answers in the state file must take it as
// data. It aborted ibsmd (nlohmann type_error.316) right after SUBNET UP.
TEST(SubnetManagerTest, NodeDescriptionsThatAreNotUtf8AreStoredAsValidJsonAfterEverySweep) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  NodeId latin1 = kNoNode, controls = kNoNode;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    if (f->node(n).kind != NodeKind::kCa) continue;
    if (latin1 == kNoNode) {
      latin1 = n;
      f->mutable_node(n).description = "r\xE9seau-01 HCA-1";
    } else if (controls == kNoNode) {
      controls = n;
      f->mutable_node(n).description = "x\n\x1b[2J\"<b>";
    }
  }
  auto dir = std::filesystem::temp_directory_path() /
             ("ibsm-sm-utf8-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  SystemClock clock;
  auto store = ha::StateStore::Open((dir / "state.db").string(), clock);
  ASSERT_TRUE(store.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f, sim::SimOptions::Kind());
  SweepStats s = RunSm(io, sim, FirstCaPort(*f), Once(), store->get());
  EXPECT_TRUE(s.subnet_up);
  auto nodes = (*store)->LoadSnapshot(ha::kSnapshotNodes);
  ASSERT_TRUE(nodes.ok() && nodes->has_value());
  auto j = nlohmann::json::parse((*nodes)->json, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded());
  std::set<std::string> descriptions;
  for (const auto& n: j["nodes"]) descriptions.insert(n["description"].get<std::string>());
  EXPECT_TRUE(descriptions.count("r\xEF\xBF\xBDseau-01 HCA-1")) << (*nodes)->json;
  EXPECT_TRUE(descriptions.count("x\n\x1b[2J\"<b>")) << (*nodes)->json;
  std::filesystem::remove_all(dir);
}

// The daemon's io loop hands every exception a handler threw to NoteInternalError: counted,
// logged, and the fabric swept again from scratch, so a broken sweep chain cannot leave the
// SM stuck with no sweep ever again.
TEST(SubnetManagerTest, AnInternalErrorIsCountedAndFollowedByAFreshHeavySweep) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  int sweeps = 0;
  uint64_t errors = 0;
  SweepStats last = RunSm(io, sim, FirstCaPort(*f), OnDemand(), nullptr,
                          [&](SubnetManager& sm, const SweepStats& st) {
                            if (++sweeps == 1) {
                              EXPECT_TRUE(st.subnet_up);
                              sm.NoteInternalError("test: a handler threw");
                              return false;
                            }
                            errors = sm.counters().internal_errors;
                            return true;
                          });
  EXPECT_EQ(sweeps, 2);
  EXPECT_TRUE(last.subnet_up);
  EXPECT_EQ(errors, 1u);
}

}  // namespace
}  // namespace ibsm::sm
