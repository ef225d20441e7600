// Adaptive routing end to end on the in-process simulator: the SM discovers AR-capable
// switches, programs groups, AR LFTs and ARInfo, and what the simulator holds afterwards is
// exactly what the SM intended.
#include "sm/vendor/ar_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "ha/state_store.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using testutil::FirstCaPort;

void AllCapable(const Fabric& f, sim::Simulator& sim) {
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (f.node(n).is_switch()) {
      ASSERT_TRUE(sim.SetArCapable(n, true).ok());
    }
  }
}

SubnetManagerOptions ArOptions(std::string engine = "ar_ftree") {
  SubnetManagerOptions o;
  o.once = true;
  o.send.timeout = std::chrono::milliseconds(20);
  o.send.retries = 2;
  o.routing_engine = std::move(engine);
  o.ar.mode = 1;
  return o;
}

struct ArRun {
  SweepStats sweep;
  std::shared_ptr<const ArSnapshot> snap;
  ArCounters counters;
  const Fabric* sa_fabric = nullptr;  // the fabric the SA answered from at the end
};

// One heavy sweep of a fresh SubnetManager on `sim`; keeps what the AR manager published.
ArRun RunArSm(sim::Simulator& sim, PortId at, SubnetManagerOptions o,
            ha::StateStore* store = nullptr) {
  boost::asio::io_context io;
  sim::SimTransport t(io, sim, at);
  EXPECT_TRUE(t.bind_status().ok());
  SystemClock clock;
  SubnetManager sm(io, t, clock, store, o);
  ArRun out;
  sm.Start([&](const SweepStats& s) {
    out.sweep = s;
    out.snap = sm.ar().snapshot();
    out.counters = sm.ar().counters();
    out.sa_fabric = &sm.sa().snapshot()->fabric();
    sm.Stop();
    t.Close();
    io.stop();
  });
  io.run();
  return out;
}

// Every capable switch holds the SM's groups (all IDs up to its top) and AR LFT entries (every
// LID of the table), and has AR enabled; every legacy switch has no AR agent at all.
void ExpectSimHoldsWhatTheSmIntended(const Fabric& f, const sim::Simulator& sim,
                                     const ArSnapshot& snap) {
  ASSERT_NE(snap.ar, nullptr);
  size_t checked_groups = 0;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    const sim::ArSwitch* agent = sim.ar_switch(n);
    if (!agent) continue;
    // The SM numbers nodes in discovery order: match by GUID.
    auto sn = snap.fabric->FindNode(f.node(n).guid);
    ASSERT_TRUE(sn.has_value());
    const routing::ArSwitchTable* t = snap.ar->table(*sn);
    ASSERT_NE(t, nullptr) << f.node(n).name;
    EXPECT_EQ(agent->info().e, 1) << f.node(n).name;
    // The ARInfo Sets were read-modify-writes: bytes 20 on are what the switch had.
    EXPECT_EQ(agent->info().unmanaged, sim::kSimArInfoUnmanaged) << f.node(n).name;
    EXPECT_EQ(agent->info().group_top, t->group_top);
    for (uint16_t g = 0; g <= t->group_top + 1u; ++g) {
      const std::vector<uint8_t> want = g < t->groups.size() ? t->groups[g] : std::vector<uint8_t>{};
      EXPECT_EQ(agent->group(g).Ports(), want) << f.node(n).name << " group " << g;
      checked_groups += !want.empty();
    }
    for (uint16_t lid = 1; lid < t->lft.size(); ++lid) {
      const routing::ArEntry& e = t->lft[lid];
      const mad::ArLftEntry got = agent->lft_entry(Lid{lid});
      EXPECT_EQ(got.lid_state, static_cast<uint8_t>(e.mode)) << f.node(n).name << " LID " << lid;
      EXPECT_EQ(got.default_port, e.default_port) << f.node(n).name << " LID " << lid;
      EXPECT_EQ(got.group_number, e.group) << f.node(n).name << " LID " << lid;
      // The default port is the plain LFT the switch forwards by when AR is off.
      EXPECT_EQ(got.default_port, sim.lft_entry(n, Lid{lid})) << f.node(n).name << " LID " << lid;
    }
  }
  EXPECT_GT(checked_groups, 0u);
}

TEST(ArManagerTest, TwoTierK16AndThreeTierK8ReadBackEqualsWhatTheSmIntended) {
  for (auto fabric: {FatTree2(16), FatTree3(8)}) {
    ASSERT_TRUE(fabric.ok());
    sim::Simulator sim(*fabric);
    AllCapable(*fabric, sim);
    ArRun r = RunArSm(sim, FirstCaPort(*fabric), ArOptions());
    EXPECT_TRUE(r.sweep.subnet_up);
    EXPECT_EQ(r.sweep.engine, "ar_ftree");
    ASSERT_NE(r.snap, nullptr);
    ExpectSimHoldsWhatTheSmIntended(*fabric, sim, *r.snap);
    const size_t switches = fabric->switch_count();
    EXPECT_NE(r.snap->summary.find(fmt::format("AR enabled on {} of {} switches, SLs 0xffff, "
                                               "mode free",
                                               switches, switches)),
              std::string::npos)
        << r.snap->summary;
    for (const ArSwitchStatus& s: r.snap->switches) {
      EXPECT_TRUE(s.capable && s.enabled) << s.name << ": " << s.why_not;
      EXPECT_EQ(s.sl_mask, 0xFFFF);
    }
    EXPECT_EQ(r.counters.set_failures, 0u);
  }
}

// The AR view (ibsmctl ar, traffic model) holds the fabric the SA answers from, not a copy
// of its own: one fabric model per sweep.
TEST(ArManagerTest, TheArViewSharesTheSweepsFabricWithTheSa) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  AllCapable(*f, sim);
  ArRun r = RunArSm(sim, FirstCaPort(*f), ArOptions());
  ASSERT_TRUE(r.sweep.subnet_up);
  ASSERT_NE(r.snap, nullptr);
  ASSERT_NE(r.snap->ar, nullptr);
  EXPECT_EQ(r.snap->fabric.get(), r.sa_fabric);
  ExpectSimHoldsWhatTheSmIntended(*f, sim, *r.snap);
}

TEST(ArManagerTest, LegacySwitchesInAMixedFabricKeepPlainLftsAndAreNamedInTheSummary) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  size_t capable = 0, legacy = 0;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    if (!f->node(n).is_switch()) continue;
    if (n % 2 == 0) {
      ASSERT_TRUE(sim.SetArCapable(n, true).ok());
      ++capable;
    } else {
      ++legacy;
    }
  }
  ASSERT_GT(legacy, 0u);
  SubnetManagerOptions o = ArOptions("ar_updn");
  o.ar.sl_mask = 0x0003;
  o.ar.lid_mode = routing::ArLidMode::kBounded;  // the default is free; bounded as set
  ArRun r = RunArSm(sim, FirstCaPort(*f), o);
  EXPECT_TRUE(r.sweep.subnet_up);  // AR problems never hold the subnet back
  ASSERT_NE(r.snap, nullptr);
  ExpectSimHoldsWhatTheSmIntended(*f, sim, *r.snap);
  for (const ArSwitchStatus& s: r.snap->switches) {
    const NodeId n = *f->FindNode(s.guid);
    EXPECT_EQ(s.capable, sim.ar_switch(n) != nullptr) << s.name;
    EXPECT_EQ(s.enabled, s.capable) << s.name;
    if (s.capable) {
      EXPECT_EQ(s.sl_mask, 0x0003);
      EXPECT_EQ(s.mode, "bounded");
      EXPECT_EQ(sim.ar_switch(n)->info().by_sl_enabled, 1);
      EXPECT_EQ(sim.ar_switch(n)->info().enable_by_sl_mask, 0x0003);
      EXPECT_EQ(sim.ar_switch(n)->info().by_transport_disable, 0x5);  // UD, UC off
    } else {
      EXPECT_EQ(s.why_not, "no answer to GeneralInfo (no vendor attributes)");
    }
  }
  EXPECT_NE(r.snap->summary.find(fmt::format("AR enabled on {} of {} switches, SLs 0x0003, mode "
                                             "bounded, engine ar_updn; {} switches not capable",
                                             capable, capable + legacy, legacy)),
            std::string::npos)
      << r.snap->summary;
  EXPECT_GT(sim.counters().drops(sim::DropReason::kVendorAttr), 0u);
}

// A capable switch that answers nothing during a sweep's AR stage (a cut on its path, its
// answers lost) is not written off as legacy: NodeInfo, sent beside GeneralInfo, went
// unanswered too, so the next sweep asks again and enables AR there. Before, the timeout
// marked it "no vendor attributes" until the SM restarted.
TEST(ArManagerTest, ASwitchSilentDuringOneSweepIsAskedAgainNotTakenForLegacy) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  AllCapable(*f, sim);
  NodeId silent = kNoNode;
  for (NodeId n = 0; n < f->node_count() && silent == kNoNode; ++n)
    if (f->node(n).name == "leaf-004") silent = n;
  ASSERT_NE(silent, kNoNode);
  // Silent from the first LFT Set of the first sweep until that sweep ends.
  bool muted = false;
  sim.SetSmpObserver([&](NodeId, uint8_t method, uint16_t attr, uint32_t) {
    if (muted || method != mad::method::kSet || attr != mad::attr::kLinearForwardingTable)
      return;
    muted = true;
    EXPECT_TRUE(sim.SetNodeDropRate(silent, 1.0).ok());
  });
  SubnetManagerOptions o = ArOptions();
  o.once = false;
  boost::asio::io_context io;
  sim::SimTransport t(io, sim, FirstCaPort(*f));
  ASSERT_TRUE(t.bind_status().ok());
  SystemClock clock;
  SubnetManager sm(io, t, clock, nullptr, o);
  std::vector<std::string> why_not_first;
  int sweeps = 0;
  sm.Start([&](const SweepStats& s) {
    ++sweeps;
    if (sweeps == 1) {
      EXPECT_FALSE(s.subnet_up);  // its LFT blocks and links on the silent switch failed
      for (const ArSwitchStatus& st : sm.ar().snapshot()->switches)
        if (st.guid == f->node(silent).guid) why_not_first.push_back(st.why_not);
      EXPECT_TRUE(sim.SetNodeDropRate(silent, 0.0).ok());
      sim.SetSmpObserver({});
      return;  // the SM sweeps again after a pause
    }
    if (!s.subnet_up && sweeps < 5) return;
    sm.Stop();
    t.Close();
    io.stop();
  });
  io.run();
  ASSERT_TRUE(muted);
  ASSERT_EQ(why_not_first.size(), 1u);
  EXPECT_EQ(why_not_first[0],
            "no answer to GeneralInfo nor to NodeInfo this sweep (asked again next)");
  const auto snap = sm.ar().snapshot();
  ASSERT_NE(snap, nullptr);
  for (const ArSwitchStatus& st : snap->switches)
    EXPECT_TRUE(st.capable && st.enabled) << st.name << ": " << st.why_not;
  EXPECT_EQ(sm.ar().counters().not_capable, 0u);
  ExpectSimHoldsWhatTheSmIntended(*f, sim, *snap);
}

// What open headers say about the devices (docs/ar-sharp.md): a pre-SwitchX switch reports
// GeneralInfo bit 1 only and is not programmed; by_transport_disable is left as read where
// the switch is not by-transport capable; a switch with sub-groups active is refused with a
// reason, and the AR another SM left on there is turned off; no Set zeroes ARInfo bytes 20 on.
TEST(ArManagerTest, LegacyFormatByTransportAndSubGroupSwitchesGetWhatTheirArInfoAllows) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  const NodeId legacy = *f->FindNodeByName("leaf-002");
  const NodeId no_transport = *f->FindNodeByName("leaf-003");
  const NodeId sub_groups = *f->FindNodeByName("leaf-004");
  for (NodeId n = 0; n < f->node_count(); ++n) {
    if (!f->node(n).is_switch()) continue;
    sim::ArSwitchCaps caps;
    caps.legacy_format = n == legacy;
    caps.by_transport_cap = n == no_transport ? 0 : 1;
    caps.sub_grps_active = n == sub_groups ? 2 : 0;
    caps.enabled_at_start = n == sub_groups;  // with sub-group masks another SM wrote
    ASSERT_TRUE(sim.SetArCapable(n, true, caps).ok());
  }
  ArRun r = RunArSm(sim, FirstCaPort(*f), ArOptions());
  EXPECT_TRUE(r.sweep.subnet_up);
  ASSERT_NE(r.snap, nullptr);
  ASSERT_NE(r.snap->ar, nullptr);
  for (const ArSwitchStatus& s: r.snap->switches) {
    const NodeId n = *f->FindNode(s.guid);
    const sim::ArSwitch* agent = sim.ar_switch(n);
    ASSERT_NE(agent, nullptr);
    EXPECT_EQ(agent->info().unmanaged, sim::kSimArInfoUnmanaged) << s.name;
    if (n == legacy) {
      EXPECT_FALSE(s.capable);
      EXPECT_FALSE(s.enabled);
      EXPECT_EQ(s.why_not, "AR: legacy format not supported");
      EXPECT_EQ(agent->info_sets_seen(), 0u);
    } else if (n == sub_groups) {
      EXPECT_TRUE(s.capable);
      EXPECT_FALSE(s.enabled);
      EXPECT_EQ(s.why_not, "ARInfo sub-groups active is 2: ibsm programs one port mask per "
                           "group, not sub-group masks");
      EXPECT_EQ(agent->info().e, 0) << "AR on groups ibsm did not write stays on";
      EXPECT_EQ(agent->info().sub_grps_active, 2) << "what ibsm does not manage is kept";
    } else {
      EXPECT_TRUE(s.enabled) << s.name << ": " << s.why_not;
      EXPECT_EQ(agent->info().e, 1) << s.name;
      // ar_transport_mask 0xA (RC, DC): UD and UC disabled where the field means something.
      EXPECT_EQ(agent->info().by_transport_disable, n == no_transport ? 0x0 : 0x5) << s.name;
    }
  }
  EXPECT_NE(r.snap->summary.find("AR enabled on 10 of 12 switches"), std::string::npos)
      << r.snap->summary;
  EXPECT_NE(r.snap->summary.find("AR: legacy format not supported"), std::string::npos);
}

// Hops from every switch of `f` to switch `to` over switch-switch links.
std::vector<int> SwitchHops(const Fabric& f, NodeId to) {
  std::vector<int> hops(f.node_count(), -1);
  std::vector<NodeId> queue{to};
  hops[to] = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const Node& node = f.node(queue[i]);
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = f.port(node.first_port + p);
      if (!port.connected()) continue;
      const NodeId peer = f.port(port.peer).node;
      if (!f.node(peer).is_switch() || hops[peer] >= 0) continue;
      hops[peer] = hops[queue[i]] + 1;
      queue.push_back(peer);
    }
  }
  return hops;
}

// ar_enable with a plain engine (the configuration guides print): AR on top of that engine's
// static routes, logged once as such instead of SM-AR-001. With LMC 2 every LID of a host's
// range has a group wherever the tree rule gives one (two or more minimal-hop ports toward the
// destination leaf) and is static elsewhere, its default port the plain LFT entry.
TEST(ArManagerTest, ArEnableWithFtreeUpdnAndLmcTwoRunsArOnAllEightySwitches) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  AllCapable(*f, sim);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ibsm-ar-plain-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  SubnetManagerOptions o = ArOptions("ftree,updn");
  o.lids.lmc = 2;
  ArRun r;
  size_t on_top_lines = 0, zero_lines = 0;
  {
    testutil::LogCapture log(dir + "/log");
    r = RunArSm(sim, FirstCaPort(*f), o);
    on_top_lines = log.Count("AR enabled on top of ftree");
    zero_lines = log.Count("SM-AR-001");
  }
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(r.sweep.subnet_up);
  EXPECT_EQ(r.sweep.engine, "ftree");
  EXPECT_EQ(on_top_lines, 1u);
  EXPECT_EQ(zero_lines, 0u);
  ASSERT_NE(r.snap, nullptr);
  ASSERT_EQ(f->switch_count(), 80u);
  EXPECT_NE(r.snap->summary.find("AR enabled on 80 of 80 switches"), std::string::npos)
      << r.snap->summary;
  EXPECT_EQ(r.counters.verify_failures, 0u);
  ExpectSimHoldsWhatTheSmIntended(*f, sim, *r.snap);

  const Fabric& sf = *r.snap->fabric;
  const routing::LidMap& lids = *r.snap->lids;
  size_t grouped = 0, ranged = 0;
  std::map<NodeId, std::vector<int>> hops_to;
  for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid) {
    const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
    if (owner == kNoPort || sf.node(sf.port(owner).node).is_switch()) continue;
    ASSERT_EQ(sf.port(owner).lmc, 2);
    ranged += lid != sf.port(owner).lid.value();
    const NodeId leaf = sf.port(sf.port(owner).peer).node;
    if (!hops_to.count(leaf)) hops_to[leaf] = SwitchHops(sf, leaf);
    const std::vector<int>& hops = hops_to[leaf];
    for (NodeId s = 0; s < sf.node_count(); ++s) {
      const Node& node = sf.node(s);
      if (!node.is_switch()) continue;
      size_t minimal = 0;
      for (uint32_t p = 1; p <= node.num_ports; ++p) {
        const Port& port = sf.port(node.first_port + p);
        if (!port.connected()) continue;
        const NodeId peer = sf.port(port.peer).node;
        minimal += sf.node(peer).is_switch() && hops[peer] == hops[s] - 1;
      }
      const NodeId sim_node = *f->FindNode(node.guid);
      const mad::ArLftEntry e = sim.ar_switch(sim_node)->lft_entry(Lid{static_cast<uint16_t>(lid)});
      EXPECT_EQ(e.default_port, sim.lft_entry(sim_node, Lid{static_cast<uint16_t>(lid)}));
      if (s != leaf && minimal >= 2) {
        ++grouped;
        EXPECT_EQ(e.lid_state, static_cast<uint8_t>(mad::ArLidState::kFree))  // the default
            << node.name << " LID " << lid;
        EXPECT_EQ(sim.ar_switch(sim_node)->group(e.group_number).Ports().size(), minimal)
            << node.name << " LID " << lid;
      } else {
        EXPECT_EQ(e.lid_state, static_cast<uint8_t>(mad::ArLidState::kStatic))
            << node.name << " LID " << lid;
      }
    }
  }
  EXPECT_EQ(ranged, 128u * 3);  // 128 hosts, three LIDs past each base
  EXPECT_GT(grouped, 0u);
}

TEST(ArManagerTest, ASecondSmOnTheProgrammedFabricReadsTheTablesAndWritesNothing) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  AllCapable(*f, sim);
  ArRun first = RunArSm(sim, FirstCaPort(*f), ArOptions());
  ASSERT_TRUE(first.sweep.subnet_up);
  EXPECT_GT(first.counters.lft_blocks_sent, 0u);
  ArRun second = RunArSm(sim, FirstCaPort(*f), ArOptions());
  EXPECT_TRUE(second.sweep.subnet_up);
  EXPECT_GT(second.counters.lft_blocks_read, 0u);
  EXPECT_EQ(second.counters.group_blocks_sent, 0u);
  EXPECT_EQ(second.counters.lft_blocks_sent, 0u);
  EXPECT_EQ(second.counters.info_sets, 0u);
  ExpectSimHoldsWhatTheSmIntended(*f, sim, *second.snap);
}

TEST(ArManagerTest, RestartKeepsGroupIdsFromTheStateFile) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok());
  auto dir = std::filesystem::temp_directory_path() / ("ibsm-ar-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  SystemClock clock;
  const PortId at = FirstCaPort(*f);
  // leaf-008 is powered off during the first run: the other leaves take the low IDs.
  const NodeId late_leaf = *f->FindNodeByName("leaf-008");
  ASSERT_NE(f->port(at).peer, kNoPort);
  ASSERT_NE(f->port(f->port(at).peer).node, late_leaf);
  std::map<Guid, uint16_t> first_ids;
  {
    auto store = ha::StateStore::Open((dir / "state.db").string(), clock);
    ASSERT_TRUE(store.ok());
    sim::Simulator sim(*f);
    AllCapable(*f, sim);
    ASSERT_TRUE(sim.RemoveNode(late_leaf).ok());
    ArRun r = RunArSm(sim, at, ArOptions(), store->get());
    ASSERT_NE(r.snap->ar, nullptr);
    first_ids = r.snap->ar->group_ids;
    EXPECT_EQ(first_ids.size(), 7u);
    EXPECT_EQ(first_ids.count(f->node(late_leaf).guid), 0u);
  }
  // Power-cycled fabric with every leaf: the seven keep their IDs, the late one gets a new one.
  auto store = ha::StateStore::Open((dir / "state.db").string(), clock);
  ASSERT_TRUE(store.ok());
  sim::Simulator sim(*f);
  AllCapable(*f, sim);
  ArRun r = RunArSm(sim, at, ArOptions(), store->get());
  ASSERT_NE(r.snap->ar, nullptr);
  const auto& ids = r.snap->ar->group_ids;
  for (const auto& [leaf, id] : first_ids) EXPECT_EQ(ids.at(leaf), id);
  EXPECT_EQ(ids.at(f->node(late_leaf).guid), 7);
  ExpectSimHoldsWhatTheSmIntended(*f, sim, *r.snap);
  EXPECT_EQ(*(*store)->LoadArGroupIds(), ids);
  std::filesystem::remove_all(dir);
}

TEST(ArManagerTest, WithOneSpineLinkDownGroupsShrinkToTheSurvivingPortsAndVerificationPasses) {
  auto f = FatTree2(16);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  AllCapable(*f, sim);
  const NodeId leaf = *f->FindNodeByName("leaf-003");
  const PortNum up{9};  // first up-port of a k=16 leaf
  ASSERT_TRUE(f->node(f->port(f->port(leaf, up).peer).node).is_switch());
  ASSERT_TRUE(sim.LinkDown(f->port_id(leaf, up)).ok());
  ArRun r = RunArSm(sim, FirstCaPort(*f), ArOptions());
  EXPECT_TRUE(r.sweep.subnet_up);
  ASSERT_NE(r.snap->ar, nullptr);
  EXPECT_EQ(r.counters.verify_failures, 0u);
  const NodeId leaf_in_snap = *r.snap->fabric->FindNode(f->node(leaf).guid);
  const routing::ArSwitchTable* t = r.snap->ar->table(leaf_in_snap);
  ASSERT_NE(t, nullptr);
  size_t groups = 0;
  for (const auto& g: t->groups) {
    if (g.empty()) continue;
    ++groups;
    EXPECT_EQ(g.size(), 7u);
    EXPECT_EQ(std::count(g.begin(), g.end(), up.value()), 0);
  }
  EXPECT_EQ(groups, 15u);
  // The spine that lost the link reaches leaf-003 through no group (one hop is static).
  EXPECT_EQ(sim.ar_switch(leaf)->group(r.snap->ar->group_ids.begin()->second).Ports().size() % 7, 0u);
  EXPECT_EQ(sim.ar_switch(leaf)->info().e, 1);
}

}  // namespace
}  // namespace ibsm::sm
