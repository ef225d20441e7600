// Repair sweeps on the in-process simulator (sm/sweep/subnet_manager_repair.cc): a cable cut, a
// host that left or a switch that died after SUBNET UP is repaired from the reporting
// switches' ports, with no rediscovery, and leaves the fabric exactly as a full heavy sweep
// of the changed fabric programs it.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/testing/sim_test_util.h"
#include "sm/testing/test_util.h"
#include "sm/testing/sm_on_sim.h"
#include "routing/quality.h"
#include "routing/verify.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

using namespace std::chrono_literals;
using simcheck::ExpectFabricUp;
using simcheck::FirstCaPort;

SubnetManagerOptions Quiet() { return testutil::QuietOptions(); }

// A core-facing cable of a spine of a 3-tier fat tree: redundant, so every host keeps a path.
PortId SpineUplink(const Fabric& f) {
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (f.node(n).name.find("-spine-") == std::string::npos) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      const PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
      if (f.port(id).connected() && f.node(f.port(f.port(id).peer).node).name.starts_with("core"))
        return id;
    }
  }
  return kNoPort;
}

struct CutRun {
  std::vector<SweepStats> sweeps;
  SmCounters counters;
  // (switch, LFT block) of every LFT Set the switches took in after the cut, in order.
  std::vector<std::pair<NodeId, uint32_t>> lft_sets;
  // The blocks of the cut's end switches that sent a LID to the cut port before the cut.
  std::set<std::pair<NodeId, uint32_t>> towards_cut;
  // What every switch held (LIDs 1-1023) when the repairs were over, before the heavy sweep
  // that compares.
  std::map<NodeId, std::vector<uint8_t>> repaired;
  // The P_Key plan the SA answered from after each sweep (null before the first).
  std::vector<std::shared_ptr<const PKeyPlan>> pkey_plans;
};

// The SM on the first host of `f`, driven by the in-process simulator `sim`.
using Harness = testutil::SmOnSim;

// Stops `h` once its SM is quiescent (no SMP of the sweep or of the optional reads in
// flight), looking every 50 ms from Arm() on.
struct QuietStop {
  explicit QuietStop(Harness& h) : h(h), poll(h.io) {}
  void Arm() {
    poll.expires_after(50ms);
    poll.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      if (h.sm.quiescent()) return h.Stop();
      Arm();
    });
  }
  Harness& h;
  boost::asio::steady_timer poll;
};

// Brings `f` up, applies `fault` (traps 128 from the switches it touches), waits for the
// repairs, then asks for one heavy sweep of the changed fabric and stops after it. With
// `cut`, records which LFT blocks sent LIDs into that cable before the fault.
// `then`, when given, is a second fault, made on the io thread once the first repair sends
// its first SMP (its traps arrive while that repair reads), or, with `then_at`, at once
// when the simulator first takes in an SMP (node, method, attribute) it accepts, before
// answering it. `after`, when given, is one made once the first sweep after `fault` has
// ended (a cable or a switch coming back).
CutRun FaultAndCompare(sim::Simulator& sim, const Fabric& f, std::function<void()> fault,
                       SubnetManagerOptions o, PortId cut = kNoPort,
                       std::function<void()> then = {}, std::function<void()> after = {},
                       std::function<bool(NodeId, uint8_t, uint16_t)> then_at = {}) {
  Harness h(sim, f, std::move(o));
  boost::asio::steady_timer settle(h.io);
  CutRun run;
  bool compared = false, cut_done = false;
  sim.SetSmpObserver([&](NodeId node, uint8_t method, uint16_t attr, uint32_t mod) {
    if (cut_done && then && then_at) {
      if (then_at(node, method, attr)) std::exchange(then, {})();
    } else if (cut_done && then) {
      boost::asio::post(h.io, std::move(then));
      then = {};
    }
    if (cut_done && !compared && method == mad::method::kSet &&
        attr == mad::attr::kLinearForwardingTable)
      run.lft_sets.emplace_back(node, mod);
  });
  h.Run([&](const SweepStats& s) {
    run.sweeps.push_back(s);
    const auto published = h.sm.sa().snapshot();
    run.pkey_plans.push_back(published ? published->pkeys : nullptr);
    if (run.sweeps.size() == 1) {
      EXPECT_TRUE(s.subnet_up);
      for (PortId end : {cut, cut == kNoPort ? kNoPort : f.port(cut).peer}) {
        if (end == kNoPort || !f.node(f.port(end).node).is_switch()) continue;
        const NodeId sw = f.port(end).node;
        for (uint32_t lid = 1; lid < 1024; ++lid)
          if (sim.lft_entry(sw, Lid{static_cast<uint16_t>(lid)}) == f.port(end).num.value())
            run.towards_cut.emplace(sw, lid / 64);
      }
      cut_done = true;
      fault();
      return;
    }
    if (compared) {
      run.counters = h.sm.counters();
      h.Stop();
      return;
    }
    if (after) std::exchange(after, {})();
    // Each sweep after the fault pushes the comparison back; once traps stop, compare.
    settle.expires_after(500ms);
    settle.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      compared = true;
      for (NodeId n = 0; n < f.node_count(); ++n) {
        if (!f.node(n).is_switch()) continue;
        std::vector<uint8_t>& lft = run.repaired[n];
        lft.resize(1024);
        for (uint32_t lid = 1; lid < lft.size(); ++lid)
          lft[lid] = sim.lft_entry(n, Lid{static_cast<uint16_t>(lid)});
      }
      h.sm.RequestHeavySweep("test: a full sweep of the changed fabric");
    });
  });
  sim.SetSmpObserver({});
  return run;
}

CutRun CutAndCompare(sim::Simulator& sim, const Fabric& f, PortId cut, SubnetManagerOptions o) {
  return FaultAndCompare(
      sim, f, [&sim, cut] { EXPECT_TRUE(sim.LinkDown(cut).ok()); }, std::move(o), cut);
}

// With the engine re-routing the repair (incremental_reroute FALSE), what the repair leaves
// is exactly what a full heavy sweep of the cut fabric computes.
TEST(RepairSweepTest, ACutSpineCableIsRepairedFromTheReportingSwitchesAlone) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const PortId cut = SpineUplink(*f);
  ASSERT_NE(cut, kNoPort);
  const PortId far = f->port(cut).peer;
  SubnetManagerOptions o = Quiet();
  o.incremental_reroute = false;
  CutRun run = CutAndCompare(sim, *f, cut, o);
  ASSERT_GE(run.sweeps.size(), 3u);
  const SweepStats& cold = run.sweeps.front();
  const SweepStats& full = run.sweeps.back();
  size_t repairs = 0, lost = 0;
  uint64_t repair_smps = 0;
  for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) {
    const SweepStats& s = run.sweeps[i];
    EXPECT_TRUE(s.repair) << "sweep " << s.number << " was a heavy sweep";
    EXPECT_TRUE(s.subnet_up);
    EXPECT_EQ(s.lid_changes, 0u);
    repairs += s.repair;
    lost += s.repair_links_lost;
    repair_smps += s.smps;
  }
  EXPECT_GE(repairs, 1u);
  EXPECT_EQ(lost, 1u);  // the cable, once, whichever end reported first
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  // The blocks that sent LIDs into the cut cable went out before any other LFT Set.
  ASSERT_FALSE(run.towards_cut.empty());
  ASSERT_GE(run.lft_sets.size(), run.towards_cut.size());
  EXPECT_EQ(run.sweeps[1].lft_blocks_urgent, run.towards_cut.size());
  std::set<std::pair<NodeId, uint32_t>> first(run.lft_sets.begin(),
                                              run.lft_sets.begin() + run.towards_cut.size());
  EXPECT_EQ(first, run.towards_cut);
  std::printf("[ figure ] %zu of the repair's %zu LFT Sets were the blocks towards the cut, "
              "sent first\n",
              run.towards_cut.size(), run.lft_sets.size());
  std::printf("[ figure ] 3-tier k=8, one spine-core cable cut: cold heavy sweep %lu SMPs, "
              "%zu repair sweep(s) %lu SMPs in all\n",
              static_cast<unsigned long>(cold.smps), repairs,
              static_cast<unsigned long>(repair_smps));
  EXPECT_LT(repair_smps * 5, cold.smps);
  // What the repair left is what a full heavy sweep of the cut fabric computes: it finds the
  // same links and writes no LFT block and no LID.
  EXPECT_FALSE(full.repair);
  EXPECT_TRUE(full.subnet_up);
  EXPECT_EQ(full.links, cold.links - 1);
  EXPECT_EQ(full.lft_blocks_sent, 0u);
  EXPECT_EQ(full.lid_changes, 0u);
  // The repair compared port settings and partitions on the cut's switches alone (the sweep
  // before was clean); the full sweep finds nothing else to write either.
  EXPECT_GE(run.counters.repair_sweeps_local, 1u);
  EXPECT_EQ(full.portinfo_sets, 0u);
  EXPECT_EQ(full.pkey_blocks_sent, 0u);
  EXPECT_EQ(full.enforcement_sets, 0u);
  // Read back from the switches: no entry points at either dead port; every host reaches
  // every host.
  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(cut);
  ExpectFabricUp(cut_fabric, sim);
  for (PortId end : {cut, far}) {
    const NodeId sw = f->port(end).node;
    for (uint32_t lid = 1; lid < 512; ++lid)
      EXPECT_NE(sim.lft_entry(sw, Lid{static_cast<uint16_t>(lid)}), f->port(end).num.value())
          << f->node(sw).name << " still sends LID " << lid << " to its dead port";
  }
}

// `run`'s tables as the switches held them after the repairs, and `f` with the LIDs the SM
// gave.
routing::RoutingTables TablesRepaired(Fabric& f, const sim::Simulator& sim, const CutRun& run) {
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& port = f.port(p);
    if (port.num.value() == 0 || !f.node(port.node).is_switch()) {
      f.mutable_port(p).lid = Lid{sim.port_info(p).lid};
      f.mutable_port(p).lmc = 0;
    }
  }
  f.IndexLids();
  const routing::LidMap lids(f);
  routing::RoutingTables t;
  t.switch_index.assign(f.node_count(), SIZE_MAX);
  for (const auto& [n, lft] : run.repaired) {
    routing::SwitchTable st;
    st.node = n;
    st.lft.assign(lft.begin(), lft.begin() + std::min<size_t>(lft.size(), lids.max_lid() + 1u));
    t.switch_index[n] = t.switches.size();
    t.switches.push_back(std::move(st));
  }
  return t;
}

// What the switches held after the repairs of `run` (TablesRepaired) delivers on `now`, the
// fabric after the faults, and has no credit loop.
void ExpectHeldTablesVerify(Fabric now, const sim::Simulator& sim, const CutRun& run) {
  const routing::RoutingTables held = TablesRepaired(now, sim, run);
  const routing::LidMap lids(now);
  const routing::VerifyReport v = routing::VerifyTables(now, lids, held);
  EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems.front());
  EXPECT_TRUE(routing::CheckCreditLoops(now, lids, held).acyclic);
}

// The first node whose name starts with `prefix` ("pod02-spine-"), or kNoNode.
NodeId FirstNamed(const Fabric& f, std::string_view prefix) {
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).name.starts_with(prefix)) return n;
  return kNoNode;
}

// Takes every cable of `n` down, in port order (each sends its traps). Returns how many.
size_t AllCablesDown(sim::Simulator& sim, const Fabric& f, NodeId n) {
  size_t down = 0;
  for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
    const PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
    if (!f.port(id).connected()) continue;
    EXPECT_TRUE(sim.LinkDown(id).ok());
    ++down;
  }
  return down;
}

// Switch `n` sends a trap 128 and from then on answers nothing (a switch that hangs or dies).
void TrapThenSilence(sim::Simulator& sim, const Fabric& f, NodeId n) {
  const PortId p0 = f.port_id(n, PortNum{0});
  EXPECT_TRUE(sim.SetNodeDropRate(n, 1.0).ok());
  EXPECT_TRUE(sim.InjectTrap(p0, mad::MakeTrap128(sim.port_info(p0).lid)).ok());
}

// Every sweep of `run` between the first and the last (the heavy sweep after) was a repair,
// ended SUBNET UP and lost no SMP. Returns the nodes and cables they took out.
std::pair<size_t, size_t> ExpectOnlyCleanRepairs(const CutRun& run) {
  size_t nodes = 0, links = 0;
  for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) {
    const SweepStats& s = run.sweeps[i];
    EXPECT_TRUE(s.repair) << "sweep " << s.number << " was a heavy sweep";
    EXPECT_TRUE(s.subnet_up) << "sweep " << s.number;
    EXPECT_EQ(s.smps_failed, 0u) << "sweep " << s.number;
    nodes += s.repair_nodes_lost;
    links += s.repair_links_lost;
  }
  return {nodes, links};
}

// `f` without the switch `dead` (every cable of it out, its port 0 without a LID), and what
// the switches held after the repairs (`run.repaired`, the dead one's left out): verified,
// and free of credit loops. Returns the fabric it checked.
Fabric ExpectTablesDeliverWithout(const Fabric& f, NodeId dead, const sim::Simulator& sim,
                                  CutRun& run) {
  Fabric without = f;
  for (uint32_t p = 1; p <= f.node(dead).num_ports; ++p)
    without.Disconnect(f.port_id(dead, PortNum{static_cast<uint8_t>(p)}));
  // The dead switch, alone in `without`, owns no LID and holds no table the fabric uses.
  run.repaired.erase(dead);
  const routing::RoutingTables held = TablesRepaired(without, sim, run);
  without.mutable_port(without.port_id(dead, PortNum{0})).lid = Lid{0};
  without.IndexLids();
  const routing::LidMap lids(without);
  const routing::VerifyReport v = routing::VerifyTables(without, lids, held);
  EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems.front());
  EXPECT_TRUE(routing::CheckCreditLoops(without, lids, held).acyclic);
  return without;
}

// By default a repair keeps every route that still delivers and re-routes only what crossed
// the cut (routing/reroute.h); what the switches then hold is verified, sends nothing into
// the dead ports, and every host reaches every host.
TEST(RepairSweepTest, ARepairReroutesOnlyWhatCrossedTheCut) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  const PortId cut = SpineUplink(*f);
  ASSERT_NE(cut, kNoPort);
  auto repair_blocks = [](const CutRun& run) {
    uint64_t blocks = 0;
    for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) blocks += run.sweeps[i].lft_blocks_sent;
    return blocks;
  };
  sim::Simulator engine_sim(*f);
  SubnetManagerOptions off = Quiet();
  off.incremental_reroute = false;
  const CutRun engine = CutAndCompare(engine_sim, *f, cut, off);
  EXPECT_EQ(engine.counters.repair_reroutes, 0u);

  sim::Simulator sim(*f);
  const CutRun run = CutAndCompare(sim, *f, cut, Quiet());
  ASSERT_GE(run.sweeps.size(), 3u);
  // Each sweep names its stages in the order they ran ("sweep N stages" in the log): a
  // repair's start with its re-reads where a heavy sweep's start with the discovery.
  auto stage_names = [](const SweepStats& s) {
    std::vector<std::string> names;
    for (const auto& [name, took] : s.stages) names.push_back(name);
    return names;
  };
  const std::vector<std::string> after_reads = {
      "election", "partitions", "lids and ports", "routing", "switch info", "lft blocks",
      "adaptive routing", "multicast", "links", "publish"};
  auto expect_stages = [&](const SweepStats& s, const std::string& first) {
    std::vector<std::string> want = {first};
    want.insert(want.end(), after_reads.begin(), after_reads.end());
    std::vector<std::string> got = stage_names(s);
    // A heavy sweep waits for the optional reads when they are not in by its end (here
    // they usually are not: the silent devices' probes time out); a repair never does.
    if (!s.repair) std::erase(got, std::string("waiting for SL2VL and VLArb reads"));
    EXPECT_EQ(got, want) << "sweep " << s.number;
  };
  expect_stages(run.sweeps.front(), "discovery");
  for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) {
    EXPECT_TRUE(run.sweeps[i].repair);
    EXPECT_EQ(run.sweeps[i].lid_changes, 0u);
    expect_stages(run.sweeps[i], "re-reads");
  }
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  EXPECT_GE(run.counters.repair_reroutes, 1u);
  EXPECT_EQ(run.counters.repair_reroutes_refused, 0u);
  // Checked from the LIDs it changed alone (the proof of the heavy sweep's tables renewed);
  // the whole-fabric checks below are the test's own.
  EXPECT_GE(run.counters.repair_reroutes_proven, 1u);
  // Built in the copy of the tables the routing worker made once the heavy sweep was
  // published (the cut comes after it settled), not in one made when the repair began.
  EXPECT_GE(run.counters.repair_tables_kept, 1u);
  std::printf("[ figure ] 3-tier k=8, one spine-core cable cut: the repair wrote %lu LFT blocks "
              "re-routing incrementally, %lu with the engine\n",
              static_cast<unsigned long>(repair_blocks(run)),
              static_cast<unsigned long>(repair_blocks(engine)));
  // (At k=8, with 4 LFT blocks a switch, this writes a few more blocks than ftree's re-route;
  // from k=16 on it writes fewer: routing/reroute_test.cc, tests/bench/reroute_bench.cc.)
  EXPECT_GT(repair_blocks(run), 0u);

  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(cut);
  ExpectFabricUp(cut_fabric, sim);
  // What the switches held after the repair: verified, free of credit loops, and nothing
  // sent into the dead ports.
  const routing::RoutingTables held = TablesRepaired(cut_fabric, sim, run);
  const routing::LidMap lids(cut_fabric);
  const routing::VerifyReport v = routing::VerifyTables(cut_fabric, lids, held);
  EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems.front());
  for (PortId end : {cut, f->port(cut).peer}) {
    const routing::SwitchTable* st = held.table(f->port(end).node);
    ASSERT_NE(st, nullptr);
    for (size_t lid = 1; lid < st->lft.size(); ++lid)
      EXPECT_NE(st->lft[lid], f->port(end).num.value()) << "LID " << lid;
  }
  EXPECT_TRUE(routing::CheckCreditLoops(cut_fabric, lids, held).acyclic);
}

// Off, the same cut costs a heavy sweep, as before repair sweeps existed.
// A cable cut while the first heavy sweep waits for its optional SL2VL and VLArb reads (a
// silent device costs a timeout per attribute; here 1 s, 4 tries) is repaired at once: the
// heavy sweep ends without them, the repair runs while they are still in flight (by the
// repaired paths), and their records reach the SA once they are in.
TEST(RepairSweepTest, ACutWhileTheOptionalReadsRunIsRepairedWithoutWaitingForThem) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  const PortId cut = SpineUplink(*f);
  ASSERT_NE(cut, kNoPort);
  sim::Simulator sim(*f);
  SubnetManagerOptions o = Quiet();
  o.send.timeout = 1s;
  o.optional_reads_wait = 30s;  // the cut comes while the heavy sweep waits for the reads
  Harness h(sim, *f, o);
  boost::asio::steady_timer later(h.io);
  bool lfts_seen = false, cut_done = false, repair_pushing = false, held_at_first_block = false;
  // The reads a SMA saw (node, attribute, modifier): those begun between the cut and the
  // repair's first LFT block would have taken the wire from it (their retries may not).
  std::set<std::tuple<NodeId, uint16_t, uint32_t>> qos_read;
  size_t reads_begun_in_repair = 0;
  sim.SetSmpObserver([&](NodeId n, uint8_t method, uint16_t attr, uint32_t mod) {
    if (attr == mad::attr::kSlToVlTable || attr == mad::attr::kVlArbitrationTable) {
      const bool fresh = qos_read.insert({n, attr, mod}).second;
      if (fresh && cut_done && !repair_pushing) ++reads_begun_in_repair;
      return;
    }
    if (cut_done && !repair_pushing && method == mad::method::kSet &&
        attr == mad::attr::kLinearForwardingTable) {
      repair_pushing = true;
      held_at_first_block = h.sm.optional_reads_held();
    }
    if (cut_done || method != mad::method::kSet) return;
    if (attr == mad::attr::kLinearForwardingTable) lfts_seen = true;
    // From the first LFT Set the heavy sweep is programming; cut once it is through: 300 ms
    // after its last Set (the link stage's port states, well before the 4 s the silent
    // devices' reads take), not after a fixed time, which a loaded machine overran.
    if (!lfts_seen) return;
    later.expires_after(300ms);
    later.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      cut_done = true;
      EXPECT_TRUE(sim.LinkDown(cut).ok());
    });
  });
  std::vector<SweepStats> sweeps;
  bool reads_in_flight_at_repair = false, sa_had_qos_at_repair = true, held_at_end = true;
  QuietStop quiet(h);
  h.Run([&](const SweepStats& s) {
    sweeps.push_back(s);
    if (!s.repair || sweeps.size() > 2) return;  // the first repair (both ends may report)
    reads_in_flight_at_repair = !h.sm.quiescent();
    held_at_end = h.sm.optional_reads_held();
    auto snap = h.sm.sa().snapshot();
    sa_had_qos_at_repair = snap && snap->qos && !snap->qos->empty();
    quiet.Arm();
  });
  sim.SetSmpObserver({});
  ASSERT_TRUE(cut_done);
  ASSERT_GE(sweeps.size(), 2u);
  EXPECT_FALSE(sweeps[0].repair);
  EXPECT_TRUE(sweeps[0].subnet_up);
  size_t lost = 0;
  for (size_t i = 1; i < sweeps.size(); ++i) {
    EXPECT_TRUE(sweeps[i].repair) << "sweep " << sweeps[i].number;
    EXPECT_TRUE(sweeps[i].subnet_up);
    lost += sweeps[i].repair_links_lost;
  }
  EXPECT_EQ(lost, 1u);
  EXPECT_EQ(h.sm.counters().qos_waits_cut_short, 1u);
  EXPECT_TRUE(reads_in_flight_at_repair);
  EXPECT_FALSE(sa_had_qos_at_repair);
  // Until its last LFT block the repair holds the reads back (SmpPipeline::set_held); from
  // its next stage they go on.
  EXPECT_TRUE(repair_pushing);
  EXPECT_TRUE(held_at_first_block);
  EXPECT_FALSE(held_at_end);
  EXPECT_EQ(reads_begun_in_repair, 0u);
  // Once the reads are in, the SA answers SL2VL and VLArb records from them.
  auto snap = h.sm.sa().snapshot();
  ASSERT_TRUE(snap && snap->qos);
  EXPECT_FALSE(snap->qos->empty());
  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(cut);
  ExpectFabricUp(cut_fabric, sim);
}

// A cable cut while the first heavy sweep programs the switches, at the Set `cut_at` picks
// (the Sets go out by DR paths, many over that cable; here 300 ms and 4 tries each): the
// stage stops and a repair takes over at once, instead of every Set over the cut cable
// failing after its timeouts (minutes at 64 in flight) and the sweep ending without SUBNET
// UP. The repair writes what the stage left, and no host is told to re-register twice.
// `ar`: every switch AR-capable and ar_mode 1; `then` looks at what is left once the SM
// stopped.
void CutWhileTheFirstSweepPrograms(std::function<bool(uint16_t attr)> cut_at, bool ar = false,
                                   std::function<void(Harness&, const Fabric&)> then = {}) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  const PortId cut = SpineUplink(*f);
  ASSERT_NE(cut, kNoPort);
  sim::Simulator sim(*f);
  SubnetManagerOptions o = Quiet();
  o.send.timeout = 300ms;
  if (ar) {
    o.ar.mode = 1;
    for (NodeId n = 0; n < f->node_count(); ++n) {
      if (f->node(n).is_switch()) {
        ASSERT_TRUE(sim.SetArCapable(n, true).ok());
      }
    }
  }
  Harness h(sim, *f, o);
  bool cut_done = false;
  sim.SetSmpObserver([&](NodeId, uint8_t method, uint16_t attr, uint32_t) {
    if (cut_done || method != mad::method::kSet || !cut_at(attr)) return;
    cut_done = true;
    boost::asio::post(h.io, [&] { EXPECT_TRUE(sim.LinkDown(cut).ok()); });
  });
  std::vector<SweepStats> sweeps;
  QuietStop quiet(h);
  h.Run([&](const SweepStats& s) {
    sweeps.push_back(s);
    quiet.Arm();
  });
  sim.SetSmpObserver({});
  ASSERT_TRUE(cut_done);
  ASSERT_FALSE(sweeps.empty());
  // The heavy sweep did not end: the repair that took over is the first sweep to.
  EXPECT_TRUE(sweeps[0].repair);
  EXPECT_TRUE(sweeps[0].subnet_up);
  EXPECT_EQ(sweeps[0].repair_links_lost, 1u);
  EXPECT_GT(sweeps[0].lft_blocks_sent, 0u);  // what the stopped push left, or the re-route
  EXPECT_GT(sweeps[0].ports_activated, 0u);  // what the stopped link stage left
  EXPECT_EQ(h.sm.counters().heavy_sweeps_cut_short, 1u);
  EXPECT_EQ(h.sm.counters().issues_by_id.count("SM-LINK-001"), 0u);
  EXPECT_EQ(h.sm.counters().issues_by_id.count("SM-LFT-002"), 0u);
  EXPECT_GT(h.sm.smp_counters().abandoned, 0u);
  size_t ca_ports = 0;
  for (PortId p = 0; p < f->port_count(); ++p)
    ca_ports += f->port(p).connected() && !f->node(f->port(p).node).is_switch();
  EXPECT_EQ(sim.client_reregisters(), ca_ports);
  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(cut);
  ExpectFabricUp(cut_fabric, sim);
  if (then) then(h, cut_fabric);
}

TEST(RepairSweepTest, ACutWhileTheFirstSweepPushesItsLftBlocksIsRepairedAtOnce) {
  int lft_sets = 0;
  CutWhileTheFirstSweepPrograms([&](uint16_t attr) {
    return attr == mad::attr::kLinearForwardingTable && ++lft_sets == 40;
  });
}

TEST(RepairSweepTest, ACutWhileTheFirstSweepBringsTheLinksUpIsRepairedAtOnce) {
  bool lfts_seen = false;
  CutWhileTheFirstSweepPrograms([&](uint16_t attr) {
    lfts_seen = lfts_seen || attr == mad::attr::kLinearForwardingTable;
    // The first PortInfo Set after the LFT blocks is the link stage's first.
    return lfts_seen && attr == mad::attr::kPortInfo;
  });
}

// The first switch-facing port of the leaf of the SM's host (the SM sits on the first host).
PortId SmLeafUplink(const Fabric& f) {
  const NodeId sm_leaf = f.port(f.port(FirstCaPort(f)).peer).node;
  for (uint32_t p = 1; p <= f.node(sm_leaf).num_ports; ++p) {
    const PortId id = f.port_id(sm_leaf, PortNum{static_cast<uint8_t>(p)});
    if (f.port(id).connected() && f.node(f.port(f.port(id).peer).node).is_switch()) return id;
  }
  return kNoPort;
}

// A cable cut while a repair pushes its blocks: the SM's leaf's first uplink, the first hop of
// most DR paths, so most of the repair's Sets in flight never arrive. The repair hands over to
// the next one (before, it waited for every try of each, ended with failed Sets and no SUBNET
// UP, and a heavy sweep followed after a pause). `at`: the repair's LFT Set that the cut
// comes at (1: its first).
void ASecondCutWhileARepairPushes(int at) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  const PortId first = SpineUplink(*f);
  ASSERT_NE(first, kNoPort);
  const PortId second = SmLeafUplink(*f);
  ASSERT_NE(second, kNoPort);
  sim::Simulator sim(*f);
  SubnetManagerOptions o = Quiet();
  o.send.timeout = 300ms;
  int lft_sets = 0;
  CutRun run = FaultAndCompare(
      sim, *f, [&] { EXPECT_TRUE(sim.LinkDown(first).ok()); }, o, first,
      [&] { EXPECT_TRUE(sim.LinkDown(second).ok()); }, {},
      [&](NodeId, uint8_t method, uint16_t attr) {
        return method == mad::method::kSet && attr == mad::attr::kLinearForwardingTable &&
               ++lft_sets == at;
      });
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repairs_handed_over, 1u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  EXPECT_EQ(run.counters.issues_by_id.count("SM-LFT-002"), 0u);
  // The repair that took over reports both: two cables, no heavy sweep, SUBNET UP.
  const auto [nodes, links] = ExpectOnlyCleanRepairs(run);
  EXPECT_EQ(nodes, 0u);
  EXPECT_EQ(links, 2u);
  EXPECT_GT(run.sweeps[1].lft_blocks_sent, 0u);
  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(first);
  cut_fabric.Disconnect(second);
  ExpectFabricUp(cut_fabric, sim);
  ExpectHeldTablesVerify(cut_fabric, sim, run);
}

// The same while a repair brings a cable that came back up: the cut comes at its link stage's
// first Set (the first PortInfo Set after its LFT blocks).
TEST(RepairSweepTest, ACutWhileARepairBringsACableUpIsRepairedAtOnce) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  const PortId back = SpineUplink(*f);
  ASSERT_NE(back, kNoPort);
  const PortId cut = SmLeafUplink(*f);
  ASSERT_NE(cut, kNoPort);
  sim::Simulator sim(*f);
  ASSERT_TRUE(sim.LinkDown(back).ok());  // down from the start: the first sweep routes without
  SubnetManagerOptions o = Quiet();
  o.send.timeout = 300ms;
  bool lfts_seen = false;
  CutRun run = FaultAndCompare(
      sim, *f, [&] { EXPECT_TRUE(sim.LinkUp(back).ok()); }, o, kNoPort,
      [&] { EXPECT_TRUE(sim.LinkDown(cut).ok()); }, {},
      [&](NodeId, uint8_t method, uint16_t attr) {
        lfts_seen = lfts_seen || (method == mad::method::kSet &&
                                  attr == mad::attr::kLinearForwardingTable);
        return lfts_seen && method == mad::method::kSet && attr == mad::attr::kPortInfo;
      });
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repairs_handed_over, 1u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  EXPECT_EQ(run.counters.issues_by_id.count("SM-LINK-001"), 0u);
  size_t lost = 0, up = 0, activated = 0;
  for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) {
    const SweepStats& s = run.sweeps[i];
    EXPECT_TRUE(s.repair) << "sweep " << s.number << " was a heavy sweep";
    EXPECT_TRUE(s.subnet_up) << "sweep " << s.number;
    lost += s.repair_links_lost;
    up += s.repair_links_up;
    activated += s.ports_activated;
  }
  EXPECT_EQ(lost, 1u);
  EXPECT_EQ(up, 1u);
  EXPECT_EQ(activated, 2u);  // both ends of the cable back, each once
  Fabric now = *f;
  now.Disconnect(cut);
  ExpectFabricUp(now, sim);
}

TEST(RepairSweepTest, ASecondCutAtARepairsFirstLftSetIsRepairedAtOnce) {
  ASecondCutWhileARepairPushes(1);
}

TEST(RepairSweepTest, ASecondCutWhileARepairPushesItsLftBlocksIsRepairedAtOnce) {
  ASecondCutWhileARepairPushes(20);
}

// The same during adaptive routing's AR LFT push: the stage stops, and the repair programs
// AR on every switch, of the cut fabric.
TEST(RepairSweepTest, ACutWhileTheFirstSweepProgramsAdaptiveRoutingIsRepairedAtOnce) {
  int ar_sets = 0;
  CutWhileTheFirstSweepPrograms(
      [&](uint16_t attr) {
        return attr == mad::attr::kArLinearForwardingTable && ++ar_sets == 40;
      },
      /*ar=*/true,
      [](Harness& h, const Fabric& cut_fabric) {
        const auto snap = h.sm.ar().snapshot();
        ASSERT_NE(snap, nullptr);
        ASSERT_NE(snap->ar, nullptr);
        EXPECT_EQ(h.sm.ar().counters().set_failures, 0u);
        size_t enabled = 0;
        for (const ArSwitchStatus& s : snap->switches) {
          EXPECT_TRUE(s.enabled) << s.name << ": " << s.why_not;
          enabled += s.enabled;
        }
        EXPECT_EQ(enabled, cut_fabric.switch_count());
        // The AR tables were computed on the cut fabric: no group sends into the cut cable.
        EXPECT_EQ(snap->fabric->link_count(), cut_fabric.link_count());
      });
}

// A host that came back is found by a heavy sweep (its leaf's trap lost), which tells it to
// re-register; a cable cut while that sweep sets the ports hands the sweep over to a repair
// before it routes, and the repair's LIDs stage does not tell the host a second time (before
// the ClientReregister rules kept the ports told until the sweep closed, it did).
TEST(RepairSweepTest, ANewPortIsToldToReregisterOnceThoughARepairTakesItsSweepOver) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  const PortId cut = SpineUplink(*f);
  ASSERT_NE(cut, kNoPort);
  const NodeId sm_host = f->port(FirstCaPort(*f)).node;
  PortId host_port = kNoPort;
  for (PortId p = 0; p < f->port_count() && host_port == kNoPort; ++p) {
    const Port& port = f->port(p);
    if (port.connected() && !f->node(port.node).is_switch() && port.node != sm_host)
      host_port = p;
  }
  ASSERT_NE(host_port, kNoPort);
  const NodeId host = f->port(host_port).node;
  const NodeId leaf = f->port(f->port(host_port).peer).node;
  sim::Simulator sim(*f);
  ASSERT_TRUE(sim.SetNodeTrapsLost(leaf, true).ok());
  ASSERT_TRUE(sim.LinkDown(host_port).ok());
  Harness h(sim, *f, Quiet());
  bool cut_done = false, back = false;
  sim.SetSmpObserver([&](NodeId node, uint8_t method, uint16_t attr, uint32_t) {
    // The LIDs stage's PortInfo Set to the host that came back: the cut comes now, its trap
    // while the stage still runs.
    if (!back || cut_done || node != host || method != mad::method::kSet ||
        attr != mad::attr::kPortInfo)
      return;
    cut_done = true;
    EXPECT_TRUE(sim.LinkDown(cut).ok());
  });
  std::vector<SweepStats> sweeps;
  uint64_t told_before = 0;
  QuietStop quiet(h);
  h.Run([&](const SweepStats& s) {
    sweeps.push_back(s);
    if (sweeps.size() == 1) {
      EXPECT_TRUE(s.subnet_up);
      told_before = sim.client_reregisters();
      back = true;
      EXPECT_TRUE(sim.LinkUp(host_port).ok());  // no trap: its leaf's are lost
      h.sm.RequestHeavySweep("test: a heavy sweep finds the host");
      return;
    }
    quiet.Arm();
  });
  sim.SetSmpObserver({});
  ASSERT_TRUE(cut_done);
  ASSERT_GE(sweeps.size(), 2u);
  EXPECT_TRUE(sweeps[1].repair);  // the heavy sweep did not end: the repair did
  EXPECT_TRUE(sweeps.back().subnet_up);
  EXPECT_EQ(h.sm.counters().heavy_sweeps_cut_short, 1u);
  EXPECT_EQ(sim.client_reregisters() - told_before, 1u);
  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(cut);
  ExpectFabricUp(cut_fabric, sim);
}

// The same optional reads, no fault: the heavy sweep waits for them only
// optional_reads_wait (250 ms), ends with SUBNET UP while they still run (the SA already
// serving its fabric), and their records reach the SA when they are in.
TEST(RepairSweepTest, TheOptionalReadsDelaySubnetUpByTheirBoundedWaitAtMost) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  SubnetManagerOptions o = Quiet();
  o.send.timeout = 300ms;  // a silent device's read: 4 tries of 300 ms
  Harness h(sim, *f, o);
  std::vector<SweepStats> sweeps;
  bool reads_running_at_up = false, sa_had_qos_at_up = true;
  QuietStop quiet(h);
  h.Run([&](const SweepStats& s) {
    sweeps.push_back(s);
    reads_running_at_up = !h.sm.quiescent();
    auto snap = h.sm.sa().snapshot();
    sa_had_qos_at_up = snap && snap->qos && !snap->qos->empty();
    quiet.Arm();
  });
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_TRUE(sweeps[0].subnet_up);
  EXPECT_TRUE(reads_running_at_up);
  EXPECT_FALSE(sa_had_qos_at_up);
  EXPECT_EQ(h.sm.counters().qos_waits_timed_out, 1u);
  EXPECT_EQ(h.sm.counters().qos_waits_cut_short, 0u);
  auto snap = h.sm.sa().snapshot();
  ASSERT_TRUE(snap && snap->qos);
  EXPECT_FALSE(snap->qos->empty());
}

TEST(RepairSweepTest, WithIncrementalRepairOffACutCausesAHeavySweep) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  SubnetManagerOptions o = Quiet();
  o.incremental_repair = false;
  CutRun run = CutAndCompare(sim, *f, SpineUplink(*f), o);
  ASSERT_GE(run.sweeps.size(), 3u);
  for (const SweepStats& s : run.sweeps) EXPECT_FALSE(s.repair);
  EXPECT_EQ(run.counters.repair_sweeps, 0u);
  EXPECT_EQ(run.sweeps.back().lft_blocks_sent, 0u);
}

// A host cable cut leaves a node the SM cannot reach: the repair takes it out of the model
// (its LID stays reserved for its return) without a rediscovery, and a heavy sweep of the
// fabric afterwards finds exactly what the repair left.
TEST(RepairSweepTest, AHostThatLeftIsTakenOutWithoutARediscovery) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  // The last host's cable, cut at its leaf.
  PortId host_cable = kNoPort;
  for (NodeId n = f->node_count(); n-- > 0 && host_cable == kNoPort;)
    if (!f->node(n).is_switch()) host_cable = f->port(f->port_id(n, PortNum{1})).peer;
  ASSERT_NE(host_cable, kNoPort);
  ASSERT_NE(host_cable, f->port(FirstCaPort(*f)).peer);
  CutRun run = CutAndCompare(sim, *f, host_cable, Quiet());
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  size_t nodes_lost = 0;
  for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) {
    EXPECT_TRUE(run.sweeps[i].repair) << "sweep " << run.sweeps[i].number;
    EXPECT_TRUE(run.sweeps[i].subnet_up);
    EXPECT_EQ(run.sweeps[i].lid_changes, 0u);
    nodes_lost += run.sweeps[i].repair_nodes_lost;
  }
  EXPECT_EQ(nodes_lost, 1u);
  const SweepStats& full = run.sweeps.back();
  EXPECT_FALSE(full.repair);
  EXPECT_EQ(full.nodes, run.sweeps.front().nodes - 1);
  EXPECT_EQ(full.lft_blocks_sent, 0u) << "the repair left the tables a full sweep computes";
  EXPECT_EQ(full.lid_changes, 0u);
}

// A spine switch dies (every cable of it goes dark; its neighbours send trap 128): the
// repair re-reads the neighbours, takes the spine out of the model and re-routes, with no
// rediscovery; no LFT entry of a neighbour points at the dead switch and every host reaches
// every host. The re-route keeps what still delivers and is proven from the LIDs it changed
// (the cores above the dead spine reach its pod through one hub leaf, routing/reroute.h);
// what the switches hold is verified and free of credit loops. A full heavy sweep afterwards
// finds the same fabric and changes no LID (its engine spreads the routes anew).
TEST(RepairSweepTest, ADeadSpineSwitchIsRepairedFromItsNeighboursAlone) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  NodeId spine = kNoNode;
  for (NodeId n = 0; n < f->node_count() && spine == kNoNode; ++n)
    if (f->node(n).name.find("-spine-") != std::string::npos) spine = n;
  ASSERT_NE(spine, kNoNode);
  // The SM's own leaf keeps its other spines: the SM still reaches everything else.
  CutRun run = FaultAndCompare(
      sim, *f, [&] { EXPECT_TRUE(sim.RemoveNode(spine).ok()); }, Quiet());
  const std::vector<SweepStats>& sweeps = run.sweeps;
  const SmCounters& counters = run.counters;
  ASSERT_GE(sweeps.size(), 3u);
  EXPECT_EQ(counters.repair_fallbacks, 0u);
  size_t links_lost = 0, nodes_lost = 0;
  uint64_t repair_smps = 0;
  for (size_t i = 1; i + 1 < sweeps.size(); ++i) {
    EXPECT_TRUE(sweeps[i].repair) << "sweep " << sweeps[i].number << " was a heavy sweep";
    EXPECT_TRUE(sweeps[i].subnet_up);
    EXPECT_EQ(sweeps[i].lid_changes, 0u);
    links_lost += sweeps[i].repair_links_lost;
    nodes_lost += sweeps[i].repair_nodes_lost;
    repair_smps += sweeps[i].smps;
  }
  size_t spine_links = 0;
  for (uint32_t p = 1; p <= f->node(spine).num_ports; ++p)
    spine_links += f->port(f->port_id(spine, PortNum{static_cast<uint8_t>(p)})).connected();
  EXPECT_EQ(links_lost, spine_links);
  EXPECT_EQ(nodes_lost, 1u);
  std::printf("[ figure ] 3-tier k=8, a spine switch dies: cold heavy sweep %lu SMPs, repair "
              "sweeps %lu SMPs in all (%zu sweeps)\n",
              static_cast<unsigned long>(sweeps.front().smps),
              static_cast<unsigned long>(repair_smps), sweeps.size() - 2);
  EXPECT_LT(repair_smps * 5, sweeps.front().smps);
  const SweepStats& full = sweeps.back();
  EXPECT_FALSE(full.repair);
  EXPECT_EQ(full.nodes, sweeps.front().nodes - 1);
  EXPECT_EQ(full.lid_changes, 0u);
  EXPECT_GE(counters.repair_reroutes, 1u);
  EXPECT_EQ(counters.repair_reroutes_refused, 0u);
  EXPECT_GE(counters.repair_reroutes_proven, 1u);
  const Fabric without = ExpectTablesDeliverWithout(*f, spine, sim, run);
  ExpectFabricUp(without, sim, {spine});
  for (uint32_t p = 1; p <= f->node(spine).num_ports; ++p) {
    const PortId sp = f->port_id(spine, PortNum{static_cast<uint8_t>(p)});
    if (!f->port(sp).connected()) continue;
    const Port& nb = f->port(f->port(sp).peer);
    for (uint32_t lid = 1; lid < 512; ++lid)
      EXPECT_NE(sim.lft_entry(nb.node, Lid{static_cast<uint16_t>(lid)}), nb.num.value())
          << f->node(nb.node).name << " still sends LID " << lid << " to the dead spine";
  }
}

// A spine away from the SM's pod loses its cables one by one, leaves first: its own trap for
// the first still reaches the SM (up through a core), so the repair is asked to re-read the
// spine too, over a path through a core that answers that cable DOWN. That read is not
// waited for (it cannot be answered: with every retry it would hold the repair for over a
// second and then make it a heavy sweep); the spine's cables are checked from their far
// ends, it leaves the model, and the repair programs the rest. Nothing is counted as a
// failed SMP, and what the switches hold delivers everywhere without the spine.
TEST(RepairSweepTest, ASwitchThatTrapsAndThenDiesIsTakenOutWithoutWaitingForItsReads) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId spine = FirstNamed(*f, "pod02-spine-");
  ASSERT_NE(spine, kNoNode);
  size_t spine_links = 0;
  CutRun run = FaultAndCompare(
      sim, *f, [&] { spine_links = AllCablesDown(sim, *f, spine); }, Quiet());
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  EXPECT_GE(run.counters.repair_reads_abandoned, 1u) << "the spine's own trap was not seen";
  const auto [nodes_lost, links_lost] = ExpectOnlyCleanRepairs(run);
  EXPECT_EQ(links_lost, spine_links);
  EXPECT_EQ(nodes_lost, 1u);
  const SweepStats& full = run.sweeps.back();
  EXPECT_FALSE(full.repair);
  EXPECT_EQ(full.nodes, run.sweeps.front().nodes - 1);
  EXPECT_EQ(full.lid_changes, 0u);
  const Fabric without = ExpectTablesDeliverWithout(*f, spine, sim, run);
  ExpectFabricUp(without, sim, {spine});
}

// A leaf away from the SM's pod loses every cable, its hosts' first: its own traps for those
// reach the SM up through its spines until the uplinks go. The repair takes the leaf out with
// its hosts (cut off behind it), without a heavy sweep and without a failed SMP, and every
// other host still reaches every other.
TEST(RepairSweepTest, ALeafThatDiesLeavesWithItsHostsInARepair) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId leaf = FirstNamed(*f, "pod02-leaf-");
  ASSERT_NE(leaf, kNoNode);
  std::set<NodeId> gone{leaf};
  for (uint32_t p = 1; p <= f->node(leaf).num_ports; ++p) {
    const Port& port = f->port(f->port_id(leaf, PortNum{static_cast<uint8_t>(p)}));
    if (port.connected() && !f->node(f->port(port.peer).node).is_switch())
      gone.insert(f->port(port.peer).node);
  }
  ASSERT_GT(gone.size(), 1u);
  CutRun run = FaultAndCompare(sim, *f, [&] { AllCablesDown(sim, *f, leaf); }, Quiet());
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  EXPECT_EQ(ExpectOnlyCleanRepairs(run).first, gone.size());
  EXPECT_EQ(run.sweeps.back().nodes, run.sweeps.front().nodes - gone.size());
  EXPECT_EQ(run.sweeps.back().lid_changes, 0u);
  Fabric without = *f;
  for (NodeId n : gone) {
    for (uint32_t p = 1; p <= f->node(n).num_ports; ++p) {
      const PortId id = f->port_id(n, PortNum{static_cast<uint8_t>(p)});
      if (without.port(id).connected()) without.Disconnect(id);
    }
  }
  ExpectFabricUp(without, sim, gone);
}

// The same switch's trap alone, as ibsim delivers it at 3-tier k=32: the repair re-reads only
// the spine, which no longer answers anything (it is dying), and its cables go down while
// those reads are out. Its neighbours' traps come then: they join the round being read, and
// once they answer those cables DOWN the spine's reads are no longer waited for (they would
// time out with every retry; without the neighbours in the round they did, and were then
// unanswered, not abandoned). The spine's cables are checked from their far ends, and it
// leaves the model in that first repair, not a heavy sweep. (The strict profile's switches
// send each trap twice: the second copies make a repair that finds nothing new.)
TEST(RepairSweepTest, AReportingSwitchThatDoesNotAnswerIsNotWaitedForOnceItsNeighboursReport) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId spine = FirstNamed(*f, "pod02-spine-");
  ASSERT_NE(spine, kNoNode);
  CutRun run = FaultAndCompare(
      sim, *f, [&] { TrapThenSilence(sim, *f, spine); }, Quiet(), kNoPort,
      [&] { EXPECT_TRUE(sim.RemoveNode(spine).ok()); });
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(ExpectOnlyCleanRepairs(run).first, 1u);
  EXPECT_EQ(run.sweeps[1].repair_nodes_lost, 1u) << "the first repair did not take it out";
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  EXPECT_GE(run.counters.repair_reads_abandoned, 1u);
  EXPECT_EQ(run.sweeps.back().nodes, run.sweeps.front().nodes - 1);
  const Fabric without = ExpectTablesDeliverWithout(*f, spine, sim, run);
  ExpectFabricUp(without, sim, {spine});
}

// As above, but the neighbours' traps are lost: the spine's reads go unanswered to the end of
// their retries, and no other switch reports. Its cables are checked from their far ends all
// the same, found down, and it leaves the model in that repair (a heavy sweep until 35793d5).
TEST(RepairSweepTest, AReportingSwitchThatDiesUnseenIsFoundDeadFromItsNeighbours) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId spine = FirstNamed(*f, "pod02-spine-");
  ASSERT_NE(spine, kNoNode);
  CutRun run = FaultAndCompare(
      sim, *f, [&] { TrapThenSilence(sim, *f, spine); }, Quiet(), kNoPort, [&] {
        for (uint32_t p = 1; p <= f->node(spine).num_ports; ++p) {
          const Port& port = f->port(f->port_id(spine, PortNum{static_cast<uint8_t>(p)}));
          if (!port.connected()) continue;
          EXPECT_TRUE(sim.SetNodeTrapsLost(f->port(port.peer).node, true).ok());
        }
        EXPECT_TRUE(sim.RemoveNode(spine).ok());
      });
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  EXPECT_EQ(run.counters.repair_reads_abandoned, 0u) << "no neighbour's report came";
  EXPECT_TRUE(run.sweeps[1].repair);
  EXPECT_EQ(run.sweeps[1].repair_nodes_lost, 1u);
  EXPECT_EQ(run.sweeps.back().nodes, run.sweeps.front().nodes - 1);
  const Fabric without = ExpectTablesDeliverWithout(*f, spine, sim, run);
  ExpectFabricUp(without, sim, {spine});
}

// A reporting switch that answers nothing but whose cables all stay up (hung, not dead): the
// checks from its neighbours find it still cabled, so the model cannot be patched (its own
// ports are not known) and a heavy sweep runs; the switch stays in the model.
TEST(RepairSweepTest, AReportingSwitchThatDoesNotAnswerButIsStillCabledMakesAHeavySweep) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId spine = FirstNamed(*f, "pod02-spine-");
  ASSERT_NE(spine, kNoNode);
  CutRun run = FaultAndCompare(sim, *f, [&] { TrapThenSilence(sim, *f, spine); }, Quiet());
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repair_fallbacks, 1u);
  EXPECT_EQ(run.counters.repair_reads_abandoned, 0u);
  // The repair gave way before it ended (it reports no sweep of its own): the next sweep is
  // the heavy sweep it asked for, and no sweep took a node out.
  EXPECT_FALSE(run.sweeps[1].repair);
  for (const SweepStats& s : run.sweeps) EXPECT_EQ(s.repair_nodes_lost, 0u);
}

// With partitions naming every switch (so the dead spine's port 0 holds a table in the plan)
// and enforcement on, a dead spine's repair neither reads nor writes a P_Key table, and the
// SA answers from the plan a heavy sweep of the changed fabric makes: the plan of the sweep
// before, without the spine.
TEST(RepairSweepTest, ADeadSpineLeavesThePartitionPlanAsAHeavySweepMakesIt) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  NodeId spine = kNoNode;
  std::vector<Guid> hosts;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    if (spine == kNoNode && f->node(n).name.find("-spine-") != std::string::npos) spine = n;
    if (!f->node(n).is_switch()) hosts.push_back(f->port(f->port_id(n, PortNum{1})).guid);
  }
  ASSERT_NE(spine, kNoNode);
  ASSERT_GE(hosts.size(), 3u);
  SubnetManagerOptions o = Quiet();
  o.partitions.enforce = PartEnforce::kBoth;
  o.partitions.config = testutil::ParsePartitionsText(
      "Default=0x7fff, ipoib : ALL=full ;\n"
      "fabric=0x0010 : ALL_SWITCHES=full, " + ToString(hosts[1]) + "=full ;\n"
      "red=0x0001 : " + ToString(hosts[1]) + "=full, " + ToString(hosts[2]) + "=limited ;\n");
  CutRun run = FaultAndCompare(
      sim, *f, [&] { EXPECT_TRUE(sim.RemoveNode(spine).ok()); }, std::move(o));
  ASSERT_GE(run.sweeps.size(), 3u);
  const PortId spine_port0 = f->port_id(spine, PortNum{0});
  ASSERT_TRUE(run.pkey_plans.front());
  ASSERT_TRUE(run.pkey_plans.front()->tables.count(spine_port0));
  EXPECT_FALSE(run.pkey_plans.front()->enforcement.empty());
  size_t repairs = 0;
  for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) {
    const SweepStats& s = run.sweeps[i];
    ASSERT_TRUE(s.repair) << "sweep " << s.number << " was a heavy sweep";
    ++repairs;
    EXPECT_EQ(s.pkey_blocks_read, 0u) << "sweep " << s.number;
    EXPECT_EQ(s.pkey_blocks_sent, 0u) << "sweep " << s.number;
    EXPECT_EQ(s.enforcement_sets, 0u) << "sweep " << s.number;
  }
  EXPECT_GE(repairs, 1u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  // The heavy sweep numbers the nodes as the repair left them (GUID order, the spine gone).
  const PKeyPlan& repaired = *run.pkey_plans[run.pkey_plans.size() - 2];
  const PKeyPlan& heavy = *run.pkey_plans.back();
  EXPECT_FALSE(run.sweeps.back().repair);
  EXPECT_EQ(run.sweeps.back().nodes, run.sweeps.front().nodes - 1);
  EXPECT_EQ(repaired.tables, heavy.tables);
  EXPECT_EQ(repaired.members, heavy.members);
  EXPECT_EQ(repaired.sl_by_pkey, heavy.sl_by_pkey);
  ASSERT_EQ(repaired.enforcement.size(), heavy.enforcement.size());
  for (const auto& [p, e] : heavy.enforcement) {
    auto it = repaired.enforcement.find(p);
    ASSERT_NE(it, repaired.enforcement.end()) << "port " << p;
    EXPECT_EQ(it->second.inbound, e.inbound);
    EXPECT_EQ(it->second.outbound, e.outbound);
  }
  EXPECT_EQ(heavy.tables.size() + 1, run.pkey_plans.front()->tables.size());
}

// A spine-core cable flapping at 10 Hz for 2 s (link_flap_threshold 3 within 10 s, hold
// 1 s): after three downs it is damped, so the flapping costs a few sweeps, not one per
// flap; once it is quiet for the hold time a heavy sweep brings it back, and the fabric ends
// whole with every host reaching every host.
// Every cable up from two aggregation switches of one pod cut in a burst (bench_repair's
// cables16), the second switch's once the first repair has read the first and checks the
// far ends from their other neighbours: some of those checks take paths over cables the
// later traps report, and are not answered. The repair starts again with every switch that
// reported meanwhile, not a heavy sweep, and what it leaves is verified and free of credit
// loops. (The second cut is made as the simulator takes in the first check, not a moment
// later: a loaded machine let the second switch's traps in while the first round still read,
// which joins them to that round instead.)
TEST(RepairSweepTest, ABurstOfCutsIsRepairedTogetherWithoutAHeavySweep) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  std::vector<PortId> cut;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const std::string& name = f->node(n).name;
    if (name != "pod01-spine-01" && name != "pod01-spine-02") continue;
    for (uint32_t p = 1; p <= f->node(n).num_ports; ++p) {
      const PortId id = f->port_id(n, PortNum{static_cast<uint8_t>(p)});
      if (f->port(id).connected() && f->node(f->port(f->port(id).peer).node).name.starts_with("core"))
        cut.push_back(id);
    }
  }
  ASSERT_EQ(cut.size(), 8u);
  const std::vector<PortId> first(cut.begin(), cut.begin() + 4), second(cut.begin() + 4, cut.end());
  const NodeId reporter = f->port(first.front()).node;
  CutRun run = FaultAndCompare(
      sim, *f, [&] { for (PortId id : first) EXPECT_TRUE(sim.LinkDown(id).ok()); }, Quiet(),
      kNoPort, [&] { for (PortId id : second) EXPECT_TRUE(sim.LinkDown(id).ok()); }, {},
      [&](NodeId node, uint8_t method, uint16_t attr) {
        // The first PortInfo read of another switch: a check from a far end's neighbour.
        return method == mad::method::kGet && attr == mad::attr::kPortInfo && node != reporter;
      });
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  EXPECT_GE(run.counters.repair_restarts, 1u);
  size_t lost = 0;
  for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) {
    EXPECT_TRUE(run.sweeps[i].repair) << "sweep " << run.sweeps[i].number << " was a heavy sweep";
    EXPECT_EQ(run.sweeps[i].lid_changes, 0u);
    lost += run.sweeps[i].repair_links_lost;
  }
  EXPECT_EQ(lost, cut.size());
  Fabric cut_fabric = *f;
  for (PortId id : cut) cut_fabric.Disconnect(id);
  ExpectFabricUp(cut_fabric, sim);
  ExpectHeldTablesVerify(cut_fabric, sim, run);
}

TEST(RepairSweepTest, AFlappingCableIsDampedAndComesBackOnceQuiet) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const PortId cable = SpineUplink(*f);
  ASSERT_NE(cable, kNoPort);
  SubnetManagerOptions o = Quiet();
  o.link_damping = {.threshold = 3, .window = 10s, .hold = 1s};
  Harness h(sim, *f, o);
  boost::asio::steady_timer flap(h.io), deadline(h.io);
  std::vector<SweepStats> sweeps;
  int toggles = 0;
  bool flapping_done = false, back = false;
  std::function<void()> toggle = [&] {
    if (toggles == 40) {  // 20 downs and 20 ups; the cable ends up
      flapping_done = true;
      return;
    }
    EXPECT_TRUE((toggles++ % 2 == 0 ? sim.LinkDown(cable) : sim.LinkUp(cable)).ok());
    flap.expires_after(50ms);
    flap.async_wait([&](boost::system::error_code ec) {
      if (!ec) toggle();
    });
  };
  deadline.expires_after(20s);
  deadline.async_wait([&](boost::system::error_code ec) {
    if (!ec) h.Stop();
  });
  h.Run([&](const SweepStats& s) {
    sweeps.push_back(s);
    if (sweeps.size() == 1) {
      EXPECT_TRUE(s.subnet_up);
      toggle();
      return;
    }
    // Done when, after the flapping, a sweep has the cable back in the model.
    if (flapping_done && s.links == sweeps.front().links && s.subnet_up) {
      back = true;
      h.Stop();
    }
  });
  ASSERT_TRUE(back) << "the cable never came back into the model";
  const SmCounters c = h.sm.counters();
  EXPECT_EQ(c.links_damped, 1u);
  EXPECT_EQ(c.issues_by_id.count("SM-LINK-010"), 1u);
  std::printf("[ figure ] a cable flapping 20 times at 10 Hz: %zu sweeps after the cold one "
              "(%lu heavy, %lu repair)\n",
              sweeps.size() - 1, static_cast<unsigned long>(c.heavy_sweeps - 1),
              static_cast<unsigned long>(c.repair_sweeps));
  // Without damping every down is a repair and every up a heavy sweep: 40 sweeps. Damped
  // after the third down, the rest cost at most cheap repairs that change nothing.
  EXPECT_LE(c.heavy_sweeps, 1u + 3u + 1u) << "cold, the ups before damping, the release";
  ExpectFabricUp(*f, sim);
}

// A cable cut while a heavy sweep is under way, after its discovery: the trap names a switch
// of the model, so the sweep neither routes nor pushes tables for the fabric before the cut
// (a trap that comes while it routes drops what the routing returns: the same hand-over); a
// repair sweep takes over at once and leaves the fabric routed around the cut. The heavy
// sweep is made to wait for an SMInfo answer from a port claiming IsSM; the cable is cut when
// that Get arrives, so the trap lands between discovery and routing.
// A first sweep, then a heavy sweep asked for: `during` sees each SMP the simulator takes
// in from then on (node, method, attribute, sweeps ended so far) and cuts the cable when it
// chooses. Ends after `sweeps` sweeps in all.
std::vector<SweepStats> CutDuringAHeavySweep(
    Harness& h, sim::Simulator& sim, size_t sweeps,
    const std::function<void(NodeId, uint8_t, uint16_t, size_t)>& during) {
  std::vector<SweepStats> out;
  bool second = false;
  sim.SetSmpObserver([&](NodeId node, uint8_t method, uint16_t attr, uint32_t) {
    if (second) during(node, method, attr, out.size());
  });
  h.Run([&](const SweepStats& s) {
    out.push_back(s);
    if (out.size() == 1) {
      EXPECT_TRUE(s.subnet_up);
      second = true;
      h.sm.RequestHeavySweep("test: a heavy sweep the cut lands in");
      return;
    }
    if (out.size() == sweeps) h.Stop();
  });
  sim.SetSmpObserver({});
  return out;
}

// The sweep after the cut repaired it: one cable out, SUBNET UP, the heavy sweep cut short.
void ExpectTheCutRepaired(const SweepStats& repair, const SweepStats& first,
                          const SmCounters& counters) {
  EXPECT_TRUE(repair.repair) << "the sweep that reported after the cut was not the repair";
  EXPECT_TRUE(repair.subnet_up);
  EXPECT_EQ(repair.repair_links_lost, 1u);
  EXPECT_EQ(repair.links, first.links - 1);
  EXPECT_EQ(counters.heavy_sweeps_cut_short, 1u);
}

TEST(RepairSweepTest, ATrapWhileAHeavySweepRunsHandsOverToARepairWithoutPushingStaleTables) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const PortId cable = SpineUplink(*f);
  ASSERT_NE(cable, kNoPort);
  PortId decoy = kNoPort;
  for (NodeId n = f->node_count(); n-- > 0 && decoy == kNoPort;)
    if (!f->node(n).is_switch()) decoy = f->port_id(n, PortNum{1});
  ASSERT_NE(decoy, FirstCaPort(*f));
  ASSERT_TRUE(sim.SetIsSm(decoy, true).ok());
  Harness h(sim, *f, Quiet());
  bool cut = false;
  size_t lft_sets_after_cut = 0;
  auto sweeps = CutDuringAHeavySweep(h, sim, 2, [&](NodeId node, uint8_t method, uint16_t attr,
                                                    size_t) {
    if (!cut && method == mad::method::kGet && attr == mad::attr::kSmInfo &&
        node == f->port(decoy).node) {
      cut = true;
      EXPECT_TRUE(sim.LinkDown(cable).ok());
    }
    if (cut && method == mad::method::kSet && attr == mad::attr::kLinearForwardingTable)
      ++lft_sets_after_cut;
  });
  ASSERT_TRUE(cut) << "the heavy sweep sent no SMInfo Get to the port claiming IsSM";
  ASSERT_EQ(sweeps.size(), 2u);
  const SweepStats& s = sweeps.back();
  ExpectTheCutRepaired(s, sweeps.front(), h.sm.counters());
  EXPECT_TRUE(s.in_place_of_heavy);  // no heavy sweep follows it
  EXPECT_FALSE(sweeps.front().in_place_of_heavy);
  // Only the repair's blocks went out after the cut: the heavy sweep pushed none of its own.
  EXPECT_EQ(lft_sets_after_cut, s.lft_blocks_sent);
  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(cable);
  ExpectFabricUp(cut_fabric, sim);
}

// A cut while a heavy sweep walks the fabric: the walk stops (what it had not sent is taken
// back), the repair runs at once on the last model, and the heavy sweep runs again after it.
TEST(RepairSweepTest, ATrapDuringAHeavySweepsDiscoveryStopsTheWalkForARepair) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const PortId cable = SpineUplink(*f);
  ASSERT_NE(cable, kNoPort);
  Harness h(sim, *f, Quiet());
  bool cut = false;
  size_t node_infos = 0, node_infos_after_cut = 0;
  auto sweeps = CutDuringAHeavySweep(h, sim, 3, [&](NodeId, uint8_t method, uint16_t attr,
                                                    size_t ended) {
    if (method != mad::method::kGet || attr != mad::attr::kNodeInfo) return;
    // After the cut and before the repair ended: the stopped walk's (the repair reads no
    // NodeInfo: nothing came up).
    if (cut && ended == 1) ++node_infos_after_cut;
    // A few nodes into the walk: most of the fabric is still to be read.
    if (!cut && ++node_infos == 12) {
      cut = true;
      EXPECT_TRUE(sim.LinkDown(cable).ok());
    }
  });
  ASSERT_TRUE(cut);
  ASSERT_EQ(sweeps.size(), 3u);
  ExpectTheCutRepaired(sweeps[1], sweeps.front(), h.sm.counters());
  // The heavy sweep the operator asked for ran after the repair, on the cut fabric.
  const SweepStats& heavy = sweeps[2];
  EXPECT_FALSE(heavy.repair);
  EXPECT_TRUE(heavy.subnet_up);
  EXPECT_EQ(heavy.nodes, sweeps.front().nodes);
  EXPECT_EQ(heavy.links, sweeps.front().links - 1);
  EXPECT_EQ(heavy.lid_changes, 0u);
  // The stopped walk went no further than what was in flight: the repair did not wait for it.
  EXPECT_LT(node_infos_after_cut, f->node_count() / 2)
      << "the heavy sweep's discovery went on after the cut";
  Fabric cut_fabric = *f;
  cut_fabric.Disconnect(cable);
  ExpectFabricUp(cut_fabric, sim);
}

// The figures and checks the tests below share: every sweep after the first and before the
// comparing heavy sweep was a repair (the LIDs each test checks itself: a node that comes back
// is given its LID again, which the sweep counts as a change), the comparing heavy sweep found the
// whole fabric and wrote nothing (the repairs left exactly what it computes), and every host
// reaches every host by what the switches hold.
void ExpectRepairedWhole(const Fabric& f, const sim::Simulator& sim, const CutRun& run,
                         const char* what) {
  ASSERT_GE(run.sweeps.size(), 3u);
  EXPECT_EQ(run.counters.repair_fallbacks, 0u);
  uint64_t smps = 0;
  size_t joined = 0, came_up = 0;
  for (size_t i = 1; i + 1 < run.sweeps.size(); ++i) {
    const SweepStats& s = run.sweeps[i];
    EXPECT_TRUE(s.repair) << "sweep " << s.number << " was a heavy sweep";
    EXPECT_TRUE(s.subnet_up) << "sweep " << s.number;
    smps += s.smps;
    joined += s.repair_nodes_joined;
    came_up += s.repair_links_up;
  }
  const SweepStats& cold = run.sweeps.front();
  const SweepStats& full = run.sweeps.back();
  std::printf("[ figure ] 3-tier k=8, %s: cold heavy sweep %lu SMPs, %zu repair sweeps %lu "
              "SMPs in all (%zu cables came up, %zu nodes joined)\n",
              what, static_cast<unsigned long>(cold.smps), run.sweeps.size() - 2,
              static_cast<unsigned long>(smps), came_up, joined);
  EXPECT_LT(smps * 3, cold.smps) << "the repairs re-read much of the fabric";
  EXPECT_FALSE(full.repair);
  EXPECT_TRUE(full.subnet_up);
  EXPECT_EQ(full.nodes, cold.nodes);
  EXPECT_EQ(full.links, cold.links);
  EXPECT_EQ(full.lid_changes, 0u);
  EXPECT_EQ(full.lft_blocks_sent, 0u) << "the repairs left tables a heavy sweep changes";
  EXPECT_EQ(full.portinfo_sets, 0u) << "the repairs left ports a heavy sweep sets";
  EXPECT_EQ(full.ports_armed, 0u) << "the repairs left links a heavy sweep activates";
  EXPECT_EQ(full.pkey_blocks_sent, 0u);
  ExpectFabricUp(f, sim);
}

// A cut cable that comes back: its switches report the port up, the repair asks who is
// behind it (a switch the model holds) and puts the cable back, without a rediscovery; the
// routes are spread over it again as a heavy sweep spreads them.
TEST(RepairSweepTest, ACableThatComesBackIsPutBackWithoutAHeavySweep) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const PortId cable = SpineUplink(*f);
  ASSERT_NE(cable, kNoPort);
  CutRun run = FaultAndCompare(
      sim, *f, [&] { EXPECT_TRUE(sim.LinkDown(cable).ok()); }, Quiet(), kNoPort, {},
      [&] { EXPECT_TRUE(sim.LinkUp(cable).ok()); });
  ExpectRepairedWhole(*f, sim, run, "a cut cable comes back");
  size_t up = 0;
  for (const SweepStats& s : run.sweeps) up += s.repair ? s.repair_links_up : 0;
  EXPECT_EQ(up, 1u);
  EXPECT_GE(run.counters.repair_sweeps_grown, 1u);
  // What came back is a cable between two switches the model holds: the come-back's port
  // stages looked at its two ends alone, as the cut's did (the heavy sweep after them found
  // nothing left to set, above).
  size_t repairs = 0;
  for (const SweepStats& s : run.sweeps) repairs += s.repair ? 1 : 0;
  EXPECT_EQ(run.counters.repair_sweeps_local, repairs);
  // The model is the first sweep's again: its tables are taken, not routed anew, and the
  // come-back writes back exactly the blocks the cut's repair changed.
  EXPECT_EQ(run.counters.engine_tables_reused, 1u);
  ASSERT_GE(run.sweeps.size(), 4u);
  EXPECT_EQ(run.sweeps[2].lft_blocks_sent, run.sweeps[1].lft_blocks_sent);
}

// `name` leaves the fabric (RemoveNode) and comes back fresh with its cables (AddNode) once
// the repair of its loss is over; `before` gets every port's LID before it left.
CutRun LeaveAndComeBack(sim::Simulator& sim, const Fabric& f, const std::string& name,
                        std::vector<std::pair<uint64_t, uint16_t>>* before) {
  const NodeId n = *f.FindNodeByName(name);
  return FaultAndCompare(
      sim, f,
      [&sim, &f, n, before] {
        *before = simcheck::PortLids(f, sim);
        EXPECT_TRUE(sim.RemoveNode(n).ok());
      },
      Quiet(), kNoPort, {}, [&sim, n] { EXPECT_TRUE(sim.AddNode(n).ok()); });
}

size_t NodesJoined(const CutRun& run) {
  size_t joined = 0;
  for (const SweepStats& s : run.sweeps) joined += s.repair ? s.repair_nodes_joined : 0;
  return joined;
}

// A spine switch that dies and comes back minutes later (its neighbours report their ports
// down, then up): the repair takes it out, then finds it behind the ports that came up,
// reads it alone, gives it its old LID, programs it and routes over it again.
TEST(RepairSweepTest, ASwitchThatDiesAndComesBackIsReadAloneAndProgrammed) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  std::vector<std::pair<uint64_t, uint16_t>> before;
  CutRun run = LeaveAndComeBack(sim, *f, "pod03-spine-02", &before);
  ExpectRepairedWhole(*f, sim, run, "a spine switch dies and comes back");
  EXPECT_EQ(NodesJoined(run), 1u);
  EXPECT_GE(run.counters.engine_tables_reused, 1u) << "it came back as it was";
  EXPECT_EQ(simcheck::PortLids(*f, sim), before) << "the switch came back with another LID";
  EXPECT_NE(sim.switch_info(*f->FindNodeByName("pod03-spine-02")).linear_fdb_top, 0u)
      << "the switch was not programmed";
}

// A leaf switch that dies takes its hosts with it; when it comes back they come back behind
// it, each with the LID it had, read alone from the leaf's ports.
TEST(RepairSweepTest, ALeafThatComesBackBringsItsHostsBackWithTheirLids) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId leaf = *f->FindNodeByName("pod04-leaf-03");
  std::vector<std::pair<uint64_t, uint16_t>> before;
  CutRun run = LeaveAndComeBack(sim, *f, "pod04-leaf-03", &before);
  ExpectRepairedWhole(*f, sim, run, "a leaf switch and its hosts leave and come back");
  size_t hosts = 0;
  for (uint32_t p = 1; p <= f->node(leaf).num_ports; ++p) {
    const Port& port = f->port(f->port_id(leaf, PortNum{static_cast<uint8_t>(p)}));
    hosts += port.connected() && !f->node(f->port(port.peer).node).is_switch();
  }
  EXPECT_EQ(NodesJoined(run), 1u + hosts);
  EXPECT_EQ(simcheck::PortLids(*f, sim), before) << "a node came back with another LID";
}

// A switch that reboots at once (power cycle: its tables cleared, its ports back to INIT with
// LID 0; its neighbours see their links bounce and report): the repair finds the bounced
// links, re-reads the switch behind them, sees a switch that forgot its tables, and programs
// it whole; nothing else is re-read.
TEST(RepairSweepTest, ASwitchThatRebootsIsFoundByItsBouncedLinksAndProgrammedWhole) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId spine = *f->FindNodeByName("pod02-spine-01");
  std::vector<std::pair<uint64_t, uint16_t>> before;
  CutRun run = FaultAndCompare(sim, *f, [&] {
    before = simcheck::PortLids(*f, sim);
    EXPECT_TRUE(sim.RebootSwitch(spine).ok());
  }, Quiet());
  ExpectRepairedWhole(*f, sim, run, "a spine switch reboots");
  // A switch that forgot its tables forgot its P_Key tables too: its repair's port stages
  // looked at the whole fabric, as a heavy sweep's do.
  EXPECT_EQ(run.counters.repair_sweeps_local, 0u);
  EXPECT_EQ(simcheck::PortLids(*f, sim), before);
  EXPECT_NE(sim.switch_info(spine).linear_fdb_top, 0u) << "the switch was not programmed";
}

// Two uplinks of a leaf swapped between its spines (a mis-cabling put right): both cables
// retrain, the repair asks who is behind each port, moves the cables in the model and routes
// by the new port numbers, exactly as a heavy sweep of the re-cabled fabric does.
TEST(RepairSweepTest, SwappedCablesAreFoundBehindTheirPortsAndMovedInTheModel) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId leaf = *f->FindNodeByName("pod06-leaf-02");
  std::vector<PortId> up;
  for (uint32_t p = 1; p <= f->node(leaf).num_ports; ++p) {
    const PortId id = f->port_id(leaf, PortNum{static_cast<uint8_t>(p)});
    if (f->port(id).connected() && f->node(f->port(f->port(id).peer).node).is_switch())
      up.push_back(id);
  }
  ASSERT_GE(up.size(), 2u);
  Fabric swapped = *f;
  const PortId a = swapped.port(up[0]).peer, b = swapped.port(up[1]).peer;
  const Port pa = swapped.port(a), pb = swapped.port(b);
  swapped.Disconnect(up[0]);
  swapped.Disconnect(up[1]);
  ASSERT_TRUE(swapped.Connect(leaf, f->port(up[0]).num, pb.node, pb.num).ok());
  ASSERT_TRUE(swapped.Connect(leaf, f->port(up[1]).num, pa.node, pa.num).ok());
  CutRun run = FaultAndCompare(sim, *f, [&] {
    EXPECT_TRUE(sim.SwapCables(up[0], up[1]).ok());
  }, Quiet());
  ExpectRepairedWhole(swapped, sim, run, "two uplinks of a leaf swapped");
  size_t moved = 0;
  for (const SweepStats& s : run.sweeps) moved += s.repair ? s.repair_links_up : 0;
  EXPECT_GE(moved, 2u) << "the cables were not put in at their new ports";
}

// The same power cycle with traps ignored (sweep_on_trap FALSE): the light sweep finds the
// switch's LinearFDBTop is not the one the SM set and repairs it, without a heavy sweep.
TEST(RepairSweepTest, ASwitchThatRebootsIsFoundByTheLightSweepWhenTrapsAreIgnored) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId spine = *f->FindNodeByName("pod05-spine-03");
  SubnetManagerOptions o = Quiet();
  o.sweep_on_trap = false;
  o.sweep_interval = std::chrono::seconds(1);
  std::vector<std::pair<uint64_t, uint16_t>> before;
  CutRun run = FaultAndCompare(sim, *f, [&] {
    before = simcheck::PortLids(*f, sim);
    EXPECT_TRUE(sim.RebootSwitch(spine).ok());
  }, o);
  ExpectRepairedWhole(*f, sim, run, "a spine switch reboots, found by the light sweep");
  EXPECT_EQ(simcheck::PortLids(*f, sim), before);
  EXPECT_GE(run.counters.light_sweeps, 1u);
  EXPECT_NE(sim.switch_info(spine).linear_fdb_top, 0u) << "the switch was not programmed";
}

}  // namespace
}  // namespace ibsm::sm
