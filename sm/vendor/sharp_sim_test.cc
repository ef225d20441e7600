// The SM's SHARP stage on the in-process simulator: the trees read back
// from the simulated aggregation nodes are what the SM intended, and on their own (from the
// ANs' tables alone) every tree is acyclic, spans every host, has depth = switch tiers and
// respects the radix; after a spine link or a switch fails the trees are rebuilt.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <boost/asio/io_context.hpp>

#include "fabric/aggregation_node.h"
#include "fabric/generators.h"
#include "sim/sharp_an.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

struct Bed {
  Fabric fabric;
  boost::asio::io_context io;
  std::unique_ptr<sim::SharpSim> sharp;
  std::unique_ptr<sim::Simulator> sim;
  PortId sm_port = kNoPort;

  Bed(Result<Fabric> base, std::function<bool(const Node&)> capable, sim::SimAnOptions an = {}) {
    EXPECT_TRUE(base.ok());
    auto f = WithAggregationNodes(*base, capable);
    EXPECT_TRUE(f.ok());
    fabric = std::move(*f);
    sim::SimOptions so;
    so.io = &io;
    sharp = std::make_unique<sim::SharpSim>(fabric, an);
    sim = std::make_unique<sim::Simulator>(fabric, so);
    sim->AddExtension(sharp.get());
    for (PortId p = 0; p < fabric.port_count() && sm_port == kNoPort; ++p)
      if (IsHostPort(fabric, p)) sm_port = p;
  }

  std::set<Guid> HostGuids() const {
    std::set<Guid> s;
    for (PortId p = 0; p < fabric.port_count(); ++p)
      if (IsHostPort(fabric, p) && sim->port_info(p).port_state >= 2) s.insert(fabric.port(p).guid);
    return s;
  }
  Guid AnPortGuid(NodeId an) const { return fabric.port(fabric.port_id(an, PortNum{1})).guid; }
};

SubnetManagerOptions SharpOn() {
  SubnetManagerOptions o;
  o.send.timeout = std::chrono::milliseconds(20);
  o.send.retries = 4;
  o.sweep_interval = std::chrono::seconds(0);
  o.routing_engine = "ftree,updn";
  o.sharp_enable = true;
  return o;
}

struct Seen {
  SweepStats stats;
  SharpSummary summary;
  std::map<uint16_t, std::map<Guid, SharpAnTree>> programmed;
  std::string engine;
};

// Runs the SM; `after` runs after each heavy sweep (1-based) and returns true to stop.
std::vector<Seen> RunSharpSm(Bed& bed, SubnetManagerOptions o,
                      std::function<bool(int, SubnetManager&)> after = {}) {
  sim::SimTransport t(bed.io, *bed.sim, bed.sm_port);
  EXPECT_TRUE(t.bind_status().ok());
  SystemClock clock;
  SubnetManager sm(bed.io, t, clock, nullptr, o);
  std::vector<Seen> seen;
  sm.Start([&](const SweepStats& s) {
    seen.push_back({s, sm.sharp().summary(), sm.sharp().programmed(), s.engine});
    if (!after || after(static_cast<int>(seen.size()), sm)) {
      sm.Stop();
      t.Close();
      bed.io.stop();
    }
  });
  bed.io.restart();
  bed.io.run();
  return seen;
}

// One tree as the ANs hold it, rebuilt from their tables alone.
struct AnView {
  size_t ans = 0;
  uint32_t depth = 0;
  size_t max_children = 0;
  std::set<Guid> hosts;
  std::vector<std::string> problems;
  std::map<Guid, SharpAnTree> by_an;  // parent/children GUIDs as the QP contexts name them
};

AnView ReadTree(const Bed& bed, uint16_t id) {
  AnView v;
  std::map<Guid, const sim::SharpSim::An*> holders;
  for (const auto& an: bed.sharp->ans())
    if (an.trees.count(id)) holders[bed.AnPortGuid(an.an)] = &an;
  auto remote = [](const sim::SharpSim::An& an, uint32_t qpn) {
    auto q = an.qps.find(qpn);
    return q == an.qps.end() ? Guid{0} : Guid{q->second.qpc.remote_guid};
  };
  Guid root{0};
  for (const auto& [g, an] : holders) {
    const auto& t = an->trees.at(id);
    SharpAnTree& at = v.by_an[g];
    at.parent = t.parent_qpn ? remote(*an, t.parent_qpn): Guid{0};
    for (uint32_t q: t.child_qpn) at.children.push_back(remote(*an, q));
    v.max_children = std::max(v.max_children, t.child_qpn.size());
    if (t.state != mad::tree_state::kEnabled) v.problems.push_back("tree not enabled on an AN");
    if (!t.parent_qpn) {
      if (root.value()) v.problems.push_back("two roots");
      root = g;
    }
  }
  if (!root.value()) {
    v.problems.push_back("no root");
    return v;
  }
  std::set<Guid> visited;
  std::vector<std::pair<Guid, uint32_t>> stack = {{root, 1}};
  while (!stack.empty()) {
    auto [g, level] = stack.back();
    stack.pop_back();
    if (!visited.insert(g).second) {
      v.problems.push_back("an AN reached twice: not a tree");
      continue;
    }
    v.depth = std::max(v.depth, level);
    for (Guid c: v.by_an[g].children) {
      if (holders.count(c)) {
        if (v.by_an[c].parent != g) v.problems.push_back("child does not name its parent");
        stack.push_back({c, level + 1});
      } else if (c.value()) {
        if (!v.hosts.insert(c).second) v.problems.push_back("a host twice");
      } else {
        v.problems.push_back("a child QP with no context");
      }
    }
  }
  if (visited.size() != holders.size()) v.problems.push_back("ANs hold the tree but are not in it");
  v.ans = holders.size();
  return v;
}

// Every tree the SM reports: what the ANs hold equals what the SM wrote, and the tree checks
// hold on the ANs' own tables.
void ExpectTreesHold(const Bed& bed, const Seen& s, uint32_t tiers, bool full_span) {
  const std::set<Guid> hosts = bed.HostGuids();
  ASSERT_FALSE(s.summary.trees.empty());
  for (const SharpTreeSummary& t: s.summary.trees) {
    SCOPED_TRACE(::testing::Message() << "tree " << t.id);
    EXPECT_TRUE(t.programmed);
    const AnView v = ReadTree(bed, t.id);
    EXPECT_TRUE(v.problems.empty()) << v.problems.front();
    EXPECT_EQ(v.depth, tiers);
    EXPECT_EQ(t.depth, tiers);
    EXPECT_LE(v.max_children, 48u);  // the simulated ANs' radix
    EXPECT_EQ(v.hosts.size(), t.hosts);
    EXPECT_EQ(v.ans, t.switches);
    ASSERT_TRUE(s.programmed.count(t.id));
    EXPECT_EQ(v.by_an, s.programmed.at(t.id));
    // Spans every host, or exactly those the SM reports missing.
    std::set<Guid> expect = hosts;
    for (Guid m: t.missing_hosts) expect.erase(m);
    EXPECT_EQ(v.hosts, expect);
    if (full_span) {
      EXPECT_TRUE(t.missing_hosts.empty());
    }
  }
}

auto All() {
  return [](const Node&) { return true; };
}

TEST(SharpSmTest, TwoTierK16TreesReadBackAsIntendedAndSpanEveryHost) {
  Bed bed(FatTree2(16), All());
  auto seen = RunSharpSm(bed, SharpOn());
  ASSERT_EQ(seen.size(), 1u);
  const Seen& s = seen[0];
  EXPECT_TRUE(s.stats.subnet_up);
  EXPECT_EQ(s.engine, "ftree");
  EXPECT_EQ(s.summary.ans, 24u);  // 16 leaves + 8 spines
  EXPECT_EQ(s.summary.ans_usable, 24u);
  EXPECT_EQ(s.summary.switch_tiers, 2u);
  EXPECT_EQ(s.summary.hosts, 128u);
  EXPECT_EQ(s.summary.trees.size(), 8u);
  EXPECT_TRUE(s.summary.uncovered.empty());
  ExpectTreesHold(bed, s, 2, true);
  for (const auto& an: bed.sharp->ans()) EXPECT_TRUE(an.enabled);
}

// The production setting (ar_enable and sharp_enable on switches that have both): the
// simulator answers GeneralInfo with both capability bits, AR is enabled on every switch and
// the SHARP trees still span every host.
TEST(SharpSmTest, AdaptiveRoutingAndSharpOnTheSameSwitches) {
  Bed bed(FatTree2(8), All());
  size_t switches = 0;
  for (NodeId n = 0; n < bed.fabric.node_count(); ++n)
    if (bed.fabric.node(n).is_switch()) {
      ASSERT_TRUE(bed.sim->SetArCapable(n, true).ok());
      ++switches;
    }
  SubnetManagerOptions o = SharpOn();
  o.routing_engine = "ar_ftree";
  o.ar.mode = 1;
  ArCounters ar;
  auto seen = RunSharpSm(bed, o, [&](int, SubnetManager& sm) {
    ar = sm.ar().counters();
    return true;
  });
  ASSERT_EQ(seen.size(), 1u);
  const Seen& s = seen[0];
  EXPECT_TRUE(s.stats.subnet_up);
  EXPECT_EQ(s.summary.sharp_switches, switches);
  EXPECT_EQ(s.summary.ans_usable, switches);
  EXPECT_EQ(ar.not_capable, 0u);
  EXPECT_EQ(ar.set_failures, 0u);
  for (NodeId n = 0; n < bed.fabric.node_count(); ++n) {
    if (!bed.fabric.node(n).is_switch()) continue;
    ASSERT_NE(bed.sim->ar_switch(n), nullptr);
    EXPECT_EQ(bed.sim->ar_switch(n)->info().e, 1) << bed.fabric.node(n).name;
  }
  ExpectTreesHold(bed, s, 2, true);
}

TEST(SharpSmTest, ThreeTierK8TreesReadBackAsIntendedAndSpanEveryHost) {
  Bed bed(FatTree3(8), All());
  auto seen = RunSharpSm(bed, SharpOn());
  ASSERT_EQ(seen.size(), 1u);
  const Seen& s = seen[0];
  EXPECT_TRUE(s.stats.subnet_up);
  EXPECT_EQ(s.summary.switch_tiers, 3u);
  EXPECT_EQ(s.summary.trees.size(), 16u);
  ExpectTreesHold(bed, s, 3, true);
}

TEST(SharpSmTest, SpineLinkDownRebuildsThatTreeAndReportsTheHostsItLost) {
  Bed bed(FatTree2(16), All());
  // Not on the SM's own DR paths (it sits on leaf-001, reached through spine-01 first): the
  // post-SUBNET-UP QoS reads would otherwise time out on the dead link for seconds.
  const NodeId leaf = *bed.fabric.FindNodeByName("leaf-002");
  const NodeId spine = *bed.fabric.FindNodeByName("spine-02");
  PortId uplink = kNoPort;
  for (uint32_t p = 1; p <= bed.fabric.node(leaf).num_ports; ++p) {
    PortId id = bed.fabric.port_id(leaf, PortNum{static_cast<uint8_t>(p)});
    if (bed.fabric.port(id).connected() && bed.fabric.port(bed.fabric.port(id).peer).node == spine)
      uplink = id;
  }
  ASSERT_NE(uplink, kNoPort);
  auto seen = RunSharpSm(bed, SharpOn(), [&](int n, SubnetManager& sm) {
    if (n == 1) {
      EXPECT_TRUE(bed.sim->LinkDown(uplink).ok());
      sm.RequestHeavySweep("test: spine link down");
      return false;
    }
    return true;
  });
  ASSERT_EQ(seen.size(), 2u);
  const Seen& after = seen[1];
  EXPECT_TRUE(after.stats.subnet_up);
  ASSERT_EQ(after.summary.trees.size(), 8u);
  std::set<Guid> leaf_hosts;
  for (uint32_t p = 1; p <= bed.fabric.node(leaf).num_ports; ++p) {
    PortId id = bed.fabric.port_id(leaf, PortNum{static_cast<uint8_t>(p)});
    if (bed.fabric.port(id).connected() && IsHostPort(bed.fabric, bed.fabric.port(id).peer))
      leaf_hosts.insert(bed.fabric.port(bed.fabric.port(id).peer).guid);
  }
  ASSERT_EQ(leaf_hosts.size(), 8u);
  for (const auto& t: after.summary.trees) {
    if (t.root_switch == bed.fabric.node(spine).guid) {
      EXPECT_EQ(t.hosts, 120u);
      EXPECT_EQ(std::set<Guid>(t.missing_hosts.begin(), t.missing_hosts.end()), leaf_hosts);
    } else {
      EXPECT_EQ(t.hosts, 128u);
    }
  }
  EXPECT_EQ(std::set<Guid>(after.summary.uncovered.begin(), after.summary.uncovered.end()), leaf_hosts);
  EXPECT_TRUE(after.summary.never_covered.empty());
  ExpectTreesHold(bed, after, 2, false);
  // Tree IDs stay with their roots.
  std::map<Guid, uint16_t> before_ids, after_ids;
  for (const auto& t: seen[0].summary.trees) before_ids[t.root_switch] = t.id;
  for (const auto& t: after.summary.trees) after_ids[t.root_switch] = t.id;
  EXPECT_EQ(before_ids, after_ids);
}

// A cable cut while the first sweep configures SHARP: the SHARP stage stops and a repair
// takes the sweep over at once (before, the trap waited for the stage's end, and for every
// timeout of its MADs over the cut), and the repair's own SHARP stage builds the trees of
// the cut fabric.
TEST(SharpSmTest, ACutDuringTheSharpStageHandsTheSweepToARepair) {
  Bed bed(FatTree2(16), All());
  const NodeId leaf = *bed.fabric.FindNodeByName("leaf-002");
  const NodeId spine = *bed.fabric.FindNodeByName("spine-02");
  PortId uplink = kNoPort;
  for (uint32_t p = 1; p <= bed.fabric.node(leaf).num_ports; ++p) {
    PortId id = bed.fabric.port_id(leaf, PortNum{static_cast<uint8_t>(p)});
    if (bed.fabric.port(id).connected() && bed.fabric.port(bed.fabric.port(id).peer).node == spine)
      uplink = id;
  }
  ASSERT_NE(uplink, kNoPort);
  bool cut = false;
  // The SHARP stage's first SMP (AR is off: GeneralInfo is SHARP's capability read).
  bed.sim->SetSmpObserver([&](NodeId, uint8_t method, uint16_t attr, uint32_t) {
    if (cut || method != mad::method::kGet || attr != mad::attr::kGeneralInfo) return;
    cut = true;
    EXPECT_TRUE(bed.sim->LinkDown(uplink).ok());
  });
  uint64_t cut_short = 0;
  auto seen = RunSharpSm(bed, SharpOn(), [&](int, SubnetManager& sm) {
    cut_short = sm.counters().heavy_sweeps_cut_short;
    return true;
  });
  bed.sim->SetSmpObserver({});
  ASSERT_TRUE(cut);
  ASSERT_EQ(seen.size(), 1u);
  const Seen& repair = seen[0];
  EXPECT_TRUE(repair.stats.repair);  // the heavy sweep did not end: the repair did
  EXPECT_TRUE(repair.stats.subnet_up);
  EXPECT_EQ(repair.stats.repair_links_lost, 1u);
  EXPECT_EQ(cut_short, 1u);
  ASSERT_EQ(repair.summary.trees.size(), 8u);
  for (const auto& t : repair.summary.trees)
    EXPECT_EQ(t.hosts, t.root_switch == bed.fabric.node(spine).guid ? 120u : 128u);
  ExpectTreesHold(bed, repair, 2, false);
}

TEST(SharpSmTest, RemovedCoreSwitchTakesItsTreeAwayAndTheRestStillSpanEveryHost) {
  Bed bed(FatTree3(8), All());
  NodeId core = kNoNode;  // the last core: the SM's DR paths run through the first ones
  for (NodeId n = 0; n < bed.fabric.node_count(); ++n)
    if (bed.fabric.node(n).is_switch() && bed.fabric.node(n).name.rfind("core", 0) == 0) core = n;
  ASSERT_NE(core, kNoNode);
  uint16_t gone_id = 0;
  auto seen = RunSharpSm(bed, SharpOn(), [&](int n, SubnetManager& sm) {
    if (n == 1) {
      for (const auto& t: sm.sharp().summary().trees)
        if (t.root_switch == bed.fabric.node(core).guid) gone_id = t.id;
      EXPECT_TRUE(bed.sim->RemoveNode(core).ok());
      sm.RequestHeavySweep("test: core switch removed");
      return false;
    }
    return true;
  });
  ASSERT_EQ(seen.size(), 2u);
  ASSERT_NE(gone_id, 0);
  const Seen& after = seen[1];
  EXPECT_TRUE(after.stats.subnet_up);
  EXPECT_EQ(after.summary.trees.size(), 15u);
  for (const auto& t: after.summary.trees) EXPECT_NE(t.id, gone_id);
  ExpectTreesHold(bed, after, 3, true);
  // The vanished tree was cleaned up on every AN still on the fabric.
  for (const auto& an: bed.sharp->ans())
    if (an.sw != core) {
      EXPECT_EQ(an.trees.count(gone_id), 0u) << an.an;
    }
}

TEST(SharpSmTest, MixedFabricUsesCapableSwitchesAndReportsHostsOfLegacyLeaves) {
  Bed bed(FatTree2(16), [](const Node& n) { return n.name != "leaf-003"; });
  auto seen = RunSharpSm(bed, SharpOn());
  ASSERT_EQ(seen.size(), 1u);
  const Seen& s = seen[0];
  EXPECT_TRUE(s.stats.subnet_up);
  EXPECT_EQ(s.summary.ans, 23u);
  EXPECT_EQ(s.summary.trees.size(), 8u);
  EXPECT_EQ(s.summary.never_covered.size(), 8u);
  for (const auto& t: s.summary.trees) EXPECT_EQ(t.hosts, 120u);
  ExpectTreesHold(bed, s, 2, false);
}

TEST(SharpSmTest, LegacyFabricWithSharpEnabledComesUpWithNoTrees) {
  Bed bed(FatTree2(8), [](const Node&) { return false; });
  auto seen = RunSharpSm(bed, SharpOn());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].stats.subnet_up);
  EXPECT_EQ(seen[0].summary.ans, 0u);
  EXPECT_TRUE(seen[0].summary.trees.empty());
}

TEST(SharpSmTest, SwitchRebootLosesTheTreesAndTheNextSweepWritesThemBack) {
  Bed bed(FatTree2(8), All());
  const NodeId spine = *bed.fabric.FindNodeByName("spine-02");
  auto seen = RunSharpSm(bed, SharpOn(), [&](int n, SubnetManager& sm) {
    if (n == 1) {
      EXPECT_TRUE(bed.sim->RebootSwitch(spine).ok());
      sm.RequestHeavySweep("test: spine rebooted");
      return false;
    }
    return true;
  });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[1].stats.subnet_up);
  EXPECT_EQ(seen[1].summary.trees.size(), 4u);
  ExpectTreesHold(bed, seen[1], 2, true);
}

// Every QP an AN holds, with the AN's port GUID and the tree the QP serves.
struct SharpQpView {
  Guid an_port{0};
  const sim::SharpSim::Qp* qp = nullptr;
};
std::map<std::pair<Guid, uint32_t>, SharpQpView> AllTreeQps(const Bed& bed) {
  std::map<std::pair<Guid, uint32_t>, SharpQpView> out;
  for (const auto& an : bed.sharp->ans())
    for (const auto& [qpn, qp] : an.qps) out[{bed.AnPortGuid(an.an), qpn}] = {bed.AnPortGuid(an.an), &qp};
  return out;
}

// The SM writes a whole reliable-connected context into every tree QP, from the fabric and
// SharpOptions (sm/vendor/sharp_manager.h), and both ends of an AN-to-AN edge agree on it.
TEST(SharpSmTest, EveryTreeQpHasAWholeRcContextFromTheFabric) {
  Bed bed(FatTree2(8), All());
  auto seen = RunSharpSm(bed, SharpOn());
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_EQ(seen[0].summary.trees.size(), 4u);
  for (const auto& t : seen[0].summary.trees) EXPECT_TRUE(t.programmed);
  const SharpOptions defaults;
  const auto qps = AllTreeQps(bed);
  size_t edges = 0;
  for (const auto& [tree, per_an] : seen[0].programmed)
    for (const auto& [g, at] : per_an) edges += (at.parent.value() ? 1 : 0) + at.children.size();
  EXPECT_EQ(qps.size(), edges);  // every QP serves an edge: none left over
  size_t an_edges = 0;
  for (const auto& [key, v] : qps) {
    const mad::QpcConfig& c = v.qp->qpc;
    SCOPED_TRACE(::testing::Message() << "AN " << ToString(v.an_port) << " QP " << c.qpn);
    EXPECT_EQ(sim::SharpSim::IncompleteRcField(c), nullptr);
    EXPECT_EQ(c.state, mad::qp_state::kReady);
    EXPECT_EQ(c.transport, mad::qp_transport::kRc);
    EXPECT_EQ(c.tree_id, v.qp->tree_id);
    EXPECT_EQ(v.qp->job_id, defaults.job_id);
    EXPECT_EQ(c.mtu, mad::mtu::k4096);  // every simulated port: MTUCap 4096
    EXPECT_EQ(c.pkey, 0xFFFF);
    EXPECT_EQ(c.qkey, defaults.qkey);
    EXPECT_EQ(c.sl, 0);
    EXPECT_EQ(c.retry_count, 7);
    EXPECT_EQ(c.rnr_retry, 7);
    EXPECT_EQ(c.local_ack_timeout, defaults.local_ack_timeout);
    EXPECT_EQ(c.send_psn, SharpPsn(v.an_port, c.qpn, c.tree_id));
    auto remote = bed.fabric.FindPort(Guid{c.remote_guid});
    ASSERT_TRUE(remote.has_value());
    EXPECT_EQ(c.remote_lid, bed.sim->port_info(*remote).lid);
    if (c.remote_qpn == 0) {  // a host's QP, bound by its daemon later
      EXPECT_TRUE(IsHostPort(bed.fabric, *remote));
      EXPECT_EQ(c.recv_psn, SharpPsn(Guid{c.remote_guid}, 0, c.tree_id));
      continue;
    }
    // An AN: its QP names this one back, and each end receives what the other sends.
    auto far = qps.find({Guid{c.remote_guid}, c.remote_qpn});
    ASSERT_NE(far, qps.end());
    const mad::QpcConfig& o = far->second.qp->qpc;
    EXPECT_EQ(o.remote_qpn, c.qpn);
    EXPECT_EQ(o.remote_guid, v.an_port.value());
    EXPECT_EQ(o.tree_id, c.tree_id);
    EXPECT_EQ(o.recv_psn, c.send_psn);
    EXPECT_EQ(o.send_psn, c.recv_psn);
    EXPECT_EQ(o.mtu, c.mtu);
    ++an_edges;
  }
  EXPECT_EQ(an_edges, 2u * 4u * 8u);  // 4 trees x 8 leaf ANs, both ends
}

// The context's MTU is the path's: a 2048 host cable and a 1024 spine link lower exactly the
// QPs whose path crosses them.
TEST(SharpSmTest, TheSmallestLinkMtuOnAnEdgeIsItsQpsMtu) {
  Bed bed(FatTree2(8), All());
  const NodeId leaf = *bed.fabric.FindNodeByName("leaf-002");
  const NodeId spine = *bed.fabric.FindNodeByName("spine-03");
  PortId host = kNoPort, uplink = kNoPort;
  for (uint32_t p = 1; p <= bed.fabric.node(leaf).num_ports; ++p) {
    const PortId id = bed.fabric.port_id(leaf, PortNum{static_cast<uint8_t>(p)});
    const Port& port = bed.fabric.port(id);
    if (!port.connected()) continue;
    if (host == kNoPort && IsHostPort(bed.fabric, port.peer)) host = port.peer;
    if (bed.fabric.port(port.peer).node == spine) uplink = id;
  }
  ASSERT_NE(host, kNoPort);
  ASSERT_NE(uplink, kNoPort);
  bed.sim->SetPortCaps(host, mad::mtu::k2048, bed.sim->port_info(host).vl_cap);
  bed.sim->SetPortCaps(uplink, mad::mtu::k1024, bed.sim->port_info(uplink).vl_cap);
  auto seen = RunSharpSm(bed, SharpOn());
  ASSERT_EQ(seen.size(), 1u);
  for (const auto& t : seen[0].summary.trees) EXPECT_TRUE(t.programmed);
  const Guid host_guid = bed.fabric.port(host).guid;
  const Guid leaf_an = bed.AnPortGuid(*bed.fabric.FindNodeByName("leaf-002-an"));
  const Guid spine_an = bed.AnPortGuid(*bed.fabric.FindNodeByName("spine-03-an"));
  size_t to_host = 0, on_uplink = 0;
  for (const auto& [key, v] : AllTreeQps(bed)) {
    const mad::QpcConfig& c = v.qp->qpc;
    const Guid remote{c.remote_guid};
    uint8_t want = mad::mtu::k4096;
    if (remote == host_guid) {
      want = mad::mtu::k2048;
      ++to_host;
    } else if ((v.an_port == leaf_an && remote == spine_an) || (v.an_port == spine_an && remote == leaf_an)) {
      want = mad::mtu::k1024;
      ++on_uplink;
    }
    EXPECT_EQ(c.mtu, want) << ToString(v.an_port) << " -> " << ToString(remote);
  }
  EXPECT_EQ(to_host, 4u);    // one QP per tree on the host's leaf AN
  EXPECT_EQ(on_uplink, 2u);  // spine-03's tree: both ends of that edge
}

// The context settings come from the SM's options: a P_Key and SL given there reach every
// QP; a P_Key of 0 leaves the contexts incomplete, so the ANs refuse them, the trees are
// reported not programmed and the QPs stay in reset.
TEST(SharpSmTest, ContextSettingsComeFromTheOptionsAndAnIncompleteOneIsRefused) {
  {
    Bed bed(FatTree2(4), All());
    SubnetManagerOptions o = SharpOn();
    o.sharp.pkey = 0x8005;
    o.sharp.sl = 3;
    auto seen = RunSharpSm(bed, o);
    ASSERT_EQ(seen.size(), 1u);
    for (const auto& t : seen[0].summary.trees) EXPECT_TRUE(t.programmed);
    const auto qps = AllTreeQps(bed);
    ASSERT_FALSE(qps.empty());
    for (const auto& [key, v] : qps) {
      EXPECT_EQ(v.qp->qpc.pkey, 0x8005);
      EXPECT_EQ(v.qp->qpc.sl, 3);
    }
  }
  Bed bed(FatTree2(4), All());
  SubnetManagerOptions o = SharpOn();
  o.sharp.pkey = 0;
  auto seen = RunSharpSm(bed, o);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].stats.subnet_up);  // SHARP never holds SUBNET UP back
  ASSERT_FALSE(seen[0].summary.trees.empty());
  for (const auto& t : seen[0].summary.trees) EXPECT_FALSE(t.programmed);
  size_t refused = 0;
  for (const std::string& n : seen[0].summary.notes)
    refused += n.find("SM-SHARP-005 QPCConfig") != std::string::npos;
  EXPECT_EQ(refused, seen[0].summary.trees.size());  // one note per tree
  for (const auto& [key, v] : AllTreeQps(bed)) EXPECT_EQ(v.qp->qpc.state, mad::qp_state::kReset);
  EXPECT_GT(bed.sharp->counters().refused, 0u);
}

// PSNs and the rest of a context depend only on the fabric and the QPNs: the same fabric
// programmed twice holds the same bytes, so writing a tree again changes nothing.
TEST(SharpSmTest, TheSameFabricIsProgrammedWithTheSameContexts) {
  Bed a(FatTree2(8), All());
  Bed b(FatTree2(8), All());
  // Not SharpOn's 20 ms: an answer slower than the timeout (a sanitizer build under load)
  // makes the SM free that tree's QPs on the AN and allocate them again, and the AN numbers
  // the new ones on from where it was, so the contexts differ from the other bed's.
  SubnetManagerOptions o = SharpOn();
  o.send.timeout = std::chrono::milliseconds(250);
  ASSERT_EQ(RunSharpSm(a, o).size(), 1u);
  ASSERT_EQ(RunSharpSm(b, o).size(), 1u);
  const auto qa = AllTreeQps(a), qb = AllTreeQps(b);
  ASSERT_EQ(qa.size(), qb.size());
  ASSERT_FALSE(qa.empty());
  for (const auto& [key, v] : qa) {
    auto w = qb.find(key);
    ASSERT_NE(w, qb.end());
    EXPECT_EQ(v.qp->qpc, w->second.qp->qpc);
  }
  // SharpPsn: never 0, 24 bits, and neighbouring QPNs start apart.
  std::set<uint32_t> psns;
  for (uint32_t q = 0x100; q < 0x140; ++q) {
    const uint32_t p = SharpPsn(Guid{0x0002c90300000010ull}, q, 1);
    EXPECT_GT(p, 0u);
    EXPECT_LT(p, mad::kPsnLimit);
    EXPECT_EQ(p, SharpPsn(Guid{0x0002c90300000010ull}, q, 1));
    psns.insert(p);
  }
  EXPECT_EQ(psns.size(), 0x40u);
}

// QPAllocation is a Set that is not idempotent: the AN allocates for every one it takes. With
// the answers to three of them lost after the AN allocated, the SM frees what the tree holds
// on those ANs and allocates again, so every tree is programmed and every QP an AN holds
// serves an edge of a tree (sent again as the transport resends, each lost answer would
// leave QPs held for nothing, and the tree, reading back right, would never free them).
TEST(SharpSmTest, AQpAllocationWhoseAnswerIsLostLeavesNoQpHeldForNothing) {
  Bed bed(FatTree2(8), All());
  bed.sharp->LoseAnswers(mad::am_attr::kQpAllocation, 3);
  SubnetManagerOptions o = SharpOn();
  o.send.timeout = std::chrono::milliseconds(100);
  uint64_t repeated = 0;
  auto seen = RunSharpSm(bed, o, [&](int, SubnetManager& sm) {
    repeated = sm.sharp().counters().qp_allocations_repeated;
    return true;
  });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(bed.sharp->counters().answers_lost, 3u);
  EXPECT_EQ(repeated, 3u);
  ASSERT_EQ(seen[0].summary.trees.size(), 4u);
  for (const auto& t : seen[0].summary.trees) EXPECT_TRUE(t.programmed) << "tree " << t.id;
  size_t edges = 0;
  for (const auto& [tree, per_an] : seen[0].programmed)
    for (const auto& [g, at] : per_an) edges += (at.parent.value() ? 1 : 0) + at.children.size();
  EXPECT_EQ(AllTreeQps(bed).size(), edges);
  for (const auto& [tree, per_an] : seen[0].programmed) {
    const AnView v = ReadTree(bed, tree);
    EXPECT_TRUE(v.problems.empty()) << "tree " << tree << ": " << v.problems.front();
  }
}

// An AN whose answers to QPAllocation never come: after SendOptions::retries allocations
// again the trees fail for that sweep (SM-SHARP-005) and nothing stays allocated for them;
// once the answers come, the next sweep programs every tree.
TEST(SharpSmTest, QpAllocationsNeverAnsweredFailTheTreesAndHoldNoQps) {
  Bed bed(FatTree2(8), All());
  bed.sharp->LoseAnswers(mad::am_attr::kQpAllocation, 1000);
  size_t held_after_first = 0;
  auto seen = RunSharpSm(bed, SharpOn(), [&](int n, SubnetManager& sm) {
    if (n == 1) {
      held_after_first = AllTreeQps(bed).size();
      bed.sharp->LoseAnswers(mad::am_attr::kQpAllocation, 0);
      sm.RequestHeavySweep("test: again");
    }
    return n >= 2;
  });
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& t : seen[0].summary.trees) EXPECT_FALSE(t.programmed) << "tree " << t.id;
  EXPECT_EQ(held_after_first, 0u);
  EXPECT_GT(bed.sharp->counters().answers_lost, 0u);
  ASSERT_EQ(seen[1].summary.trees.size(), 4u);
  for (const auto& t : seen[1].summary.trees) EXPECT_TRUE(t.programmed) << "tree " << t.id;
  size_t edges = 0;
  for (const auto& [tree, per_an] : seen[1].programmed)
    for (const auto& [g, at] : per_an) edges += (at.parent.value() ? 1 : 0) + at.children.size();
  EXPECT_EQ(AllTreeQps(bed).size(), edges);
}

// The layouts are ibsm's own and unverified: said once, however many sweeps run.
TEST(SharpSmTest, UnverifiedLayoutsAreLoggedOnceAtTheFirstSharpStage) {
  Bed bed(FatTree2(4), All());
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ibsm-sharp-log-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  size_t lines = 0;
  size_t sweeps = 0;
  {
    testutil::LogCapture log(dir + "/log");
    auto seen = RunSharpSm(bed, SharpOn(), [&](int n, SubnetManager& sm) {
      if (n < 3) sm.RequestHeavySweep("test: again");
      return n >= 3;
    });
    sweeps = seen.size();
    lines = log.Count("SM-SHARP-009");
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(sweeps, 3u);
  EXPECT_EQ(lines, 1u);
}

// ANs known as NVIDIA's SM knows them (docs/ar-sharp.md "SHARP"): where the switches mark
// special ports, a node that calls itself an aggregation node behind a port its switch does
// not mark as one is not used (SM-SHARP-010) and every other AN is; on older firmware,
// which marks nothing, the description alone decides (SM-SHARP-011, once) and every AN is
// used.
TEST(SharpSmTest, SpecialPortMarkingDecidesWhichDescribedAnsAreUsed) {
  {
    Bed bed(FatTree2(8), All());
    const NodeId decoy = bed.sharp->ans().front().an;
    bed.sharp->SetMarked(decoy, false);
    auto seen = RunSharpSm(bed, SharpOn());
    ASSERT_EQ(seen.size(), 1u);
    const Seen& s = seen[0];
    EXPECT_TRUE(s.stats.subnet_up);
    EXPECT_EQ(s.summary.ans, 12u);  // 8 leaves and 4 spines, each with its AN
    EXPECT_EQ(s.summary.ans_unmarked, 1u);
    EXPECT_EQ(s.summary.ans_enabled, 11u);
    EXPECT_EQ(s.summary.ans_by_description, 0u);
    size_t named = 0;
    for (const std::string& n : s.summary.notes)
      named += n.rfind("SM-SHARP-010 ", 0) == 0 && n.find("marks the port as no special port") !=
                                                      std::string::npos;
    EXPECT_EQ(named, 1u);
    EXPECT_FALSE(bed.sharp->ans().front().enabled);
    for (const auto& an : bed.sharp->ans()) {
      if (an.an == decoy) {
        EXPECT_TRUE(an.trees.empty());
      }
    }
    ExpectTreesHold(bed, s, 2, false);
  }
  {
    sim::SimAnOptions old_firmware;
    old_firmware.special_port_marking = false;
    Bed bed(FatTree2(8), All(), old_firmware);
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("ibsm-sharp-mark-" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(dir);
    size_t lines = 0;
    std::vector<Seen> seen;
    {
      testutil::LogCapture log(dir + "/log");
      seen = RunSharpSm(bed, SharpOn(), [&](int n, SubnetManager& sm) {
        if (n < 2) sm.RequestHeavySweep("test: again");
        return n >= 2;
      });
      lines = log.Count("SM-SHARP-011");
    }
    std::filesystem::remove_all(dir);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(lines, 1u);
    EXPECT_EQ(seen[0].summary.ans_by_description, 12u);
    EXPECT_EQ(seen[0].summary.ans_unmarked, 0u);
    EXPECT_EQ(seen[0].summary.ans_enabled, 12u);
    ExpectTreesHold(bed, seen[1], 2, true);
  }
}

}  // namespace
}  // namespace ibsm::sm
