#include "routing/ftree_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "fabric/aggregation_node.h"
#include "fabric/generators.h"
#include "routing/minhop_engine.h"
#include "routing/quality.h"
#include "routing/routing_test_util.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;

Result<RoutingTables> RouteFTree(const Fabric& fabric, const LidMap& lids,
                                 RoutingOptions options = {}) {
  return FTreeEngine().Route(fabric, lids, options);
}

// CA ports with a LID, ordered by leaf switch (NodeId order), then leaf port: the order in
// which shift permutations are defined.
std::vector<PortId> HostsInFabricOrder(const Fabric& fabric) {
  std::vector<PortId> hosts;
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    const Node& node = fabric.node(n);
    if (!node.is_switch()) continue;
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = fabric.port(node.first_port + p);
      if (!port.connected()) continue;
      const Port& peer = fabric.port(port.peer);
      if (!fabric.node(peer.node).is_switch() && IsUnicast(peer.lid)) hosts.push_back(port.peer);
    }
  }
  return hosts;
}

// Appends the directed channels (egress PortIds, the source CA port included) a packet from
// `src` to `lid` crosses; false if the tables do not deliver it.
bool Walk(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables, PortId src,
          Lid lid, std::vector<PortId>& channels) {
  const PortId owner = lids.owner(lid);
  channels.push_back(src);
  NodeId cur = fabric.port(fabric.port(src).peer).node;
  for (int hop = 0; hop < 64; ++hop) {
    const SwitchTable* t = tables.table(cur);
    if (!t || lid.value() >= t->lft.size()) return false;
    const uint8_t port = t->lft[lid.value()];
    if (port == 0 || port > fabric.node(cur).num_ports) return false;
    const PortId out = fabric.port_id(cur, PortNum(port));
    channels.push_back(out);
    const Port& p = fabric.port(out);
    if (!p.connected()) return false;
    if (p.peer == owner) return true;
    cur = fabric.port(p.peer).node;
    if (!fabric.node(cur).is_switch()) return false;
  }
  return false;
}

// Worst number of flows on one directed channel over every shift permutation of `hosts`
// (host i sends to host (i + s) mod N, base LIDs). Undelivered flows fail the test.
uint32_t ShiftMaxSharing(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
                         const std::vector<PortId>& hosts) {
  std::vector<uint32_t> load(fabric.port_count(), 0);
  std::vector<PortId> channels;
  uint32_t worst = 0;
  const size_t n = hosts.size();
  for (size_t s = 1; s < n; ++s) {
    channels.clear();
    for (size_t i = 0; i < n; ++i) {
      const size_t before = channels.size();
      const bool ok =
          Walk(fabric, lids, tables, hosts[i], fabric.port(hosts[(i + s) % n]).lid, channels);
      EXPECT_TRUE(ok) << "shift " << s << " host " << i << " not delivered";
      if (!ok) channels.resize(before);
    }
    for (PortId c : channels) worst = std::max(worst, ++load[c]);
    for (PortId c : channels) load[c] = 0;
  }
  return worst;
}

// The channel dependency graph of the routes that carry credit-controlled traffic (the rule
// routing/quality.h states, written out again here): towards a host's LID every switch's
// entry; towards a switch's own LID or an aggregation node's, the entries on the routes from
// the switches with a host cabled. True if it has no cycle, i.e. those routes cannot deadlock
// on one VL.
bool ChannelDependenciesAcyclic(const Fabric& fabric, const LidMap& lids,
                                const RoutingTables& tables) {
  // The first switch-to-switch channel of switch `n`'s route towards `lid`, or kNoPort.
  auto first_channel = [&](NodeId n, uint16_t lid) -> PortId {
    const SwitchTable* t = tables.table(n);
    if (!t || lid >= t->lft.size()) return kNoPort;
    const uint8_t port = t->lft[lid];
    if (port == 0 || port == kDropPort || port > fabric.node(n).num_ports) return kNoPort;
    const PortId out = fabric.port_id(n, PortNum(port));
    const Port& p = fabric.port(out);
    if (!p.connected() || !fabric.node(fabric.port(p.peer).node).is_switch()) return kNoPort;
    return out;
  };
  // Next switch-to-switch channel after leaving over `out` towards `lid`, or kNoPort.
  auto next_channel = [&](PortId out, uint16_t lid) -> PortId {
    const Port& p = fabric.port(out);
    if (!p.connected()) return kNoPort;
    const NodeId b = fabric.port(p.peer).node;
    return fabric.node(b).is_switch() ? first_channel(b, lid) : kNoPort;
  };
  std::vector<std::vector<PortId>> edges(fabric.port_count());
  // The switches with a host cabled.
  std::vector<NodeId> sources;
  for (const SwitchTable& t : tables.switches) {
    const Node& node = fabric.node(t.node);
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = fabric.port(node.first_port + p);
      if (!port.connected()) continue;
      const Node& remote = fabric.node(fabric.port(port.peer).node);
      if (!remote.is_switch() && !IsAggregationNode(remote)) {
        sources.push_back(t.node);
        break;
      }
    }
  }
  for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid) {
    const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
    if (owner == kNoPort) continue;
    const Node& on = fabric.node(fabric.port(owner).node);
    const uint16_t l = static_cast<uint16_t>(lid);
    if (!on.is_switch() && !IsAggregationNode(on)) {
      for (const SwitchTable& t : tables.switches) {
        const PortId out = first_channel(t.node, l);
        if (out == kNoPort) continue;
        const PortId next = next_channel(out, l);
        if (next != kNoPort) edges[out].push_back(next);
      }
      continue;
    }
    std::unordered_set<PortId> seen;  // channels whose dependency for this LID is in
    for (NodeId src : sources)
      for (PortId out = first_channel(src, l); out != kNoPort && seen.insert(out).second;) {
        const PortId next = next_channel(out, l);
        if (next != kNoPort) edges[out].push_back(next);
        out = next;
      }
  }
  std::vector<uint32_t> indegree(fabric.port_count(), 0);
  for (auto& e : edges) {
    std::sort(e.begin(), e.end());
    e.erase(std::unique(e.begin(), e.end()), e.end());
    for (PortId x : e) ++indegree[x];
  }
  std::vector<PortId> ready;
  for (PortId c = 0; c < fabric.port_count(); ++c)
    if (indegree[c] == 0) ready.push_back(c);
  size_t done = 0;
  while (!ready.empty()) {
    const PortId c = ready.back();
    ready.pop_back();
    ++done;
    for (PortId x : edges[c])
      if (--indegree[x] == 0) ready.push_back(x);
  }
  return done == fabric.port_count();
}

// Switch tiers: hops from the nearest switch with a CA cabled (leaves are tier 0).
std::vector<uint32_t> Tiers(const Fabric& fabric) {
  std::vector<uint32_t> tier(fabric.node_count(), UINT32_MAX);
  std::vector<NodeId> queue;
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    const Node& node = fabric.node(n);
    if (!node.is_switch()) continue;
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = fabric.port(node.first_port + p);
      if (port.connected() && !fabric.node(fabric.port(port.peer).node).is_switch()) {
        tier[n] = 0;
        queue.push_back(n);
        break;
      }
    }
  }
  for (size_t head = 0; head < queue.size(); ++head) {
    const Node& node = fabric.node(queue[head]);
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = fabric.port(node.first_port + p);
      if (!port.connected()) continue;
      const NodeId r = fabric.port(port.peer).node;
      if (fabric.node(r).is_switch() && tier[r] == UINT32_MAX) {
        tier[r] = tier[queue[head]] + 1;
        queue.push_back(r);
      }
    }
  }
  return tier;
}

// Host-to-host routes (every host to every host LID) that go down a tier and then up again.
size_t HostRoutesTurningDownThenUp(const Fabric& fabric, const LidMap& lids,
                                   const RoutingTables& tables) {
  const std::vector<uint32_t> tier = Tiers(fabric);
  const std::vector<PortId> hosts = HostsInFabricOrder(fabric);
  size_t bad = 0;
  std::vector<PortId> path;
  for (PortId src : hosts)
    for (PortId dst : hosts) {
      if (src == dst) continue;
      path.clear();
      if (!Walk(fabric, lids, tables, src, fabric.port(dst).lid, path)) continue;
      bool went_down = false;
      for (size_t i = 2; i < path.size(); ++i) {
        const uint32_t from = tier[fabric.port(path[i - 1]).node];
        const uint32_t to = tier[fabric.port(path[i]).node];
        if (to < from) went_down = true;
        if (to > from && went_down) {
          ++bad;
          break;
        }
      }
    }
  return bad;
}

// Routes with ftree and checks what every fabric must give: the engine's name, verified
// tables, and deadlock freedom.
RoutingTables RouteAndCheck(const Fabric& fabric, const LidMap& lids, RoutingOptions options = {}) {
  auto r = RouteFTree(fabric, lids, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  RoutingTables tables = std::move(r).value();
  EXPECT_EQ(tables.engine, "ftree");
  EXPECT_EQ(tables.switches.size(), fabric.switch_count());
  const VerifyReport report = VerifyTables(fabric, lids, tables);
  EXPECT_TRUE(report.ok) << (report.problems.empty() ? "" : report.problems.front());
  EXPECT_EQ(
      report.missing_entries + report.loops + report.misrouted_entries + report.unreachable_pairs,
      0u);
  EXPECT_TRUE(ChannelDependenciesAcyclic(fabric, lids, tables));
  const CreditLoopReport loops = CheckCreditLoops(fabric, lids, tables);
  EXPECT_TRUE(loops.acyclic) << (loops.cycle.empty() ? "" : loops.cycle.front());
  return tables;
}

Fabric Make(Result<Fabric> f, uint8_t lmc = 0) {
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  Fabric fabric = std::move(f).value();
  AssignLids(fabric, lmc);
  return fabric;
}

void DisconnectSwitch(Fabric& fabric, std::string_view name) {
  const auto n = fabric.FindNodeByName(name);
  ASSERT_TRUE(n.has_value()) << name;
  const Node& node = fabric.node(*n);
  for (uint32_t p = 1; p <= node.num_ports; ++p)
    if (fabric.port(node.first_port + p).connected()) fabric.Disconnect(node.first_port + p);
}

TEST(FTreeEngineTest, TwoTierFatTreeVerifiesAndShiftPermutationsShareNoChannel) {
  for (int k : {4, 8}) {
    Fabric f = Make(FatTree2(k));
    const LidMap lids(f);
    const RoutingTables tables = RouteAndCheck(f, lids);
    EXPECT_EQ(ShiftMaxSharing(f, lids, tables, HostsInFabricOrder(f)), 1u) << "k=" << k;
  }
}

TEST(FTreeEngineTest, ThreeTierFatTreeVerifiesAndShiftPermutationsShareNoChannel) {
  for (int k : {4, 6, 8}) {
    Fabric f = Make(FatTree3(k));
    const LidMap lids(f);
    const RoutingTables tables = RouteAndCheck(f, lids);
    EXPECT_EQ(ShiftMaxSharing(f, lids, tables, HostsInFabricOrder(f)), 1u) << "k=" << k;
    QualityOptions q;
    q.random_permutations = 0;
    const QualityReport report = MeasureQuality(f, lids, tables, q);
    EXPECT_EQ(report.shift_max_sharing, 1u) << "k=" << k;
    EXPECT_EQ(report.unrouted_flows, 0u);
    EXPECT_EQ(HostRoutesTurningDownThenUp(f, lids, tables), 0u);
  }
}

// The deadlock check above has teeth: minhop's routes on an irregular graph close a loop.
TEST(FTreeEngineTest, ChannelDependencyCheckFindsMinhopLoopsOnARandomGraph) {
  Fabric f = Make(RandomGraph(16, 8, 2, 3));
  const LidMap lids(f);
  auto minhop = MinHopEngine().Route(f, lids, RoutingOptions{});
  ASSERT_TRUE(minhop.ok());
  EXPECT_FALSE(ChannelDependenciesAcyclic(f, lids, *minhop));
}

TEST(FTreeEngineTest, EverySwitchRoutesEverySwitchLid) {
  Fabric f = Make(FatTree3(8));
  const LidMap lids(f);
  const RoutingTables tables = RouteAndCheck(f, lids);
  for (const SwitchTable& t : tables.switches)
    for (NodeId n = 0; n < f.node_count(); ++n) {
      if (!f.node(n).is_switch()) continue;
      const Lid lid = f.port(n, PortNum(0)).lid;
      EXPECT_GT(testing::SwitchesOnPath(f, lids, tables, t.node, lid), 0)
          << f.node(t.node).name << " -> " << f.node(n).name;
    }
}

TEST(FTreeEngineTest, LmcTwoSendsTheFourLidsOfAHostThroughFourSpinesAndFourCores) {
  Fabric f = Make(FatTree3(8), /*lmc=*/2);
  const LidMap lids(f);
  const RoutingTables tables = RouteAndCheck(f, lids);
  const std::vector<PortId> hosts = HostsInFabricOrder(f);
  ASSERT_EQ(hosts.size(), 128u);
  auto pod = [&](PortId host) {
    return f.node(f.port(f.port(host).peer).node).name.substr(0, 5);  // "pod03"
  };
  std::vector<PortId> path;
  for (PortId dst : hosts) {
    for (PortId src : {hosts[0], hosts[77], hosts[127]}) {
      if (pod(src) == pod(dst)) continue;
      std::set<std::string> cores, spines;
      for (uint16_t o = 0; o < 4; ++o) {
        path.clear();
        ASSERT_TRUE(Walk(f, lids, tables, src, Lid(f.port(dst).lid.value() + o), path));
        for (PortId c : path) {
          const std::string& name = f.node(f.port(c).node).name;
          if (name.starts_with("core-")) cores.insert(name);
          if (name.find("spine") != std::string::npos && name.starts_with(pod(src)))
            spines.insert(name);
        }
      }
      EXPECT_EQ(cores.size(), 4u) << f.node(f.port(dst).node).name;
      EXPECT_EQ(spines.size(), 4u) << f.node(f.port(dst).node).name;
    }
  }
}

TEST(FTreeEngineTest, LmcOneStillVerifiesOnATwoTierTree) {
  Fabric f = Make(FatTree2(8), /*lmc=*/1);
  const LidMap lids(f);
  RouteAndCheck(f, lids);
}

TEST(FTreeEngineTest, DegradedThreeTierTreesStillRouteAsFatTrees) {
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    auto g = FatTree3(8);
    ASSERT_TRUE(g.ok());
    Fabric f = std::move(g).value();
    const auto dropped = Degrade(f, 8, seed);
    ASSERT_EQ(dropped.size(), 8u);
    AssignLids(f);
    const LidMap lids(f);
    SCOPED_TRACE("seed " + std::to_string(seed));
    const RoutingTables tables = RouteAndCheck(f, lids);
    EXPECT_EQ(HostRoutesTurningDownThenUp(f, lids, tables), 0u);
    // Every host still reaches every other.
    const std::vector<PortId> hosts = HostsInFabricOrder(f);
    EXPECT_GE(ShiftMaxSharing(f, lids, tables, hosts), 1u);
  }
}

// pod07-leaf-04 keeps only its cable to pod07-spine-02 and pod01-leaf-03 lost its cable to
// pod01-spine-02, so no route between them climbs and then descends in the tree. OpenSM's
// ftree would refuse the fabric; here they detour through the hub leaf, deadlock-free.
TEST(FTreeEngineTest, HostsWithNoUpDownRouteLeftDetourThroughTheHubWithoutDeadlock) {
  auto g = FatTree3(8);
  ASSERT_TRUE(g.ok());
  Fabric f = std::move(g).value();
  ASSERT_EQ(Degrade(f, 10, 19).size(), 10u);
  AssignLids(f);
  const LidMap lids(f);
  const RoutingTables tables = RouteAndCheck(f, lids);
  EXPECT_GT(HostRoutesTurningDownThenUp(f, lids, tables), 0u);
  std::vector<PortId> path;
  const PortId src = f.port_id(*f.FindNodeByName("node-0009/hca1"), PortNum(1));
  const NodeId dst_leaf = *f.FindNodeByName("pod07-leaf-04");
  ASSERT_TRUE(Walk(f, lids, tables, src, f.port(f.port(dst_leaf, PortNum(1)).peer).lid, path));
}

TEST(FTreeEngineTest, DegradedTwoTierTreesStillRouteAsFatTrees) {
  for (uint64_t seed : {1, 2, 3}) {
    auto g = FatTree2(8);
    ASSERT_TRUE(g.ok());
    Fabric f = std::move(g).value();
    Degrade(f, 5, seed);
    AssignLids(f);
    const LidMap lids(f);
    SCOPED_TRACE("seed " + std::to_string(seed));
    RouteAndCheck(f, lids);
  }
}

TEST(FTreeEngineTest, MissingCoreSwitchIsRoutedAround) {
  Fabric f = Make(FatTree3(8));
  DisconnectSwitch(f, "core-001");
  const LidMap lids(f);
  const RoutingTables tables = RouteAndCheck(f, lids);
  EXPECT_EQ(HostRoutesTurningDownThenUp(f, lids, tables), 0u);
  const std::vector<PortId> hosts = HostsInFabricOrder(f);
  EXPECT_GE(ShiftMaxSharing(f, lids, tables, hosts), 1u);
  // The isolated core still delivers its own LID.
  const NodeId core = *f.FindNodeByName("core-001");
  EXPECT_EQ(testing::SwitchesOnPath(f, lids, tables, core, f.port(core, PortNum(0)).lid), 1);
}

TEST(FTreeEngineTest, MissingSpineSwitchIsRoutedAround) {
  Fabric f = Make(FatTree3(8));
  DisconnectSwitch(f, "pod02-spine-03");
  const LidMap lids(f);
  const RoutingTables tables = RouteAndCheck(f, lids);
  EXPECT_EQ(HostRoutesTurningDownThenUp(f, lids, tables), 0u);
  EXPECT_GE(ShiftMaxSharing(f, lids, tables, HostsInFabricOrder(f)), 1u);
}

TEST(FTreeEngineTest, RailPlanesAreRoutedAsSeparateFatTrees) {
  Fabric f = Make(RailOptimized(8, 16, 4, RailMode::kPlanes));
  const LidMap lids(f);
  const RoutingTables tables = RouteAndCheck(f, lids);
  // Shift permutations within each plane share no channel.
  const std::vector<PortId> hosts = HostsInFabricOrder(f);
  for (int rail = 1; rail <= 4; ++rail) {
    std::vector<PortId> plane;
    for (PortId h : hosts)
      if (f.node(f.port(f.port(h).peer).node).name.starts_with(fmt::format("rail{}-", rail)))
        plane.push_back(h);
    ASSERT_EQ(plane.size(), 16u);
    EXPECT_EQ(ShiftMaxSharing(f, lids, tables, plane), 1u) << "rail " << rail;
  }
}

TEST(FTreeEngineTest, RailSuperpodVerifies) {
  Fabric f = Make(RailOptimized(8, 8, 2, RailMode::kSuperpod));
  const LidMap lids(f);
  const RoutingTables tables = RouteAndCheck(f, lids);
  EXPECT_EQ(ShiftMaxSharing(f, lids, tables, HostsInFabricOrder(f)), 1u);
}

TEST(FTreeEngineTest, IrregularRandomGraphDeclinesWithAReason) {
  Fabric f = Make(RandomGraph(12, 8, 2, 7));
  const LidMap lids(f);
  auto r = RouteFTree(f, lids);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a fat tree"), std::string::npos) << r.status().message();
  // The chain says why ftree declined and falls back to minhop.
  auto chain = RouteChain("ftree", f, lids, RoutingOptions{});
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(chain->tables.engine, "minhop");
  ASSERT_EQ(chain->declined.size(), 1u);
  EXPECT_EQ(chain->declined[0].first, "ftree");
}

TEST(FTreeEngineTest, RegistryMakesFtreeAndTheChainUsesItOnAFatTree) {
  ASSERT_NE(MakeEngine("ftree"), nullptr);
  EXPECT_EQ(MakeEngine("ftree")->name(), "ftree");
  Fabric f = Make(FatTree2(8));
  const LidMap lids(f);
  auto chain = RouteChain("ftree", f, lids, RoutingOptions{});
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->tables.engine, "ftree");
  EXPECT_TRUE(chain->declined.empty());
}

TEST(FTreeEngineTest, RootGuidsGivingTheCoresMatchDetection) {
  Fabric f = Make(FatTree3(8));
  const LidMap lids(f);
  RoutingOptions with_roots;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).name.starts_with("core-")) with_roots.root_guids.push_back(f.node(n).guid);
  const RoutingTables detected = RouteAndCheck(f, lids);
  const RoutingTables given = RouteAndCheck(f, lids, with_roots);
  ASSERT_EQ(detected.switches.size(), given.switches.size());
  for (size_t i = 0; i < given.switches.size(); ++i)
    EXPECT_EQ(detected.switches[i].lft, given.switches[i].lft);
}

TEST(FTreeEngineTest, RootGuidNamingALeafDeclinesWithTheLeafRanks) {
  Fabric f = Make(FatTree3(4));
  const LidMap lids(f);
  RoutingOptions options;
  options.root_guids.push_back(f.node(*f.FindNodeByName("pod01-leaf-01")).guid);
  auto r = RouteFTree(f, lids, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a fat tree: leaf"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("at rank 0"), std::string::npos) << r.status().message();
}

// A 2-tier tree with 4 leaves and one extra CA on a spine: a storage node, say.
Fabric TreeWithAHostOnASpine(PortId* io_port) {
  FatTree2Options o;
  o.leaves = 4;
  auto g = FatTree2(8, o);
  EXPECT_TRUE(g.ok());
  Fabric f = std::move(g).value();
  const Guid guid{0x0002c90300fff000};
  const NodeId io = *f.AddNode(NodeKind::kCa, guid, 1, "io-0001/hca1", "io-0001 HCA-1");
  EXPECT_TRUE(f.SetPortGuid(f.port_id(io, PortNum(1)), Guid{guid.value() + 1}).ok());
  const NodeId spine = *f.FindNodeByName("spine-01");
  EXPECT_TRUE(f.Connect(spine, PortNum(8), io, PortNum(1)).ok());
  *io_port = f.port_id(io, PortNum(1));
  AssignLids(f);
  return f;
}

TEST(FTreeEngineTest, HostOnASpineDeclinesUnlessCnOrIoGuidsSayWhatItIs) {
  PortId io_port = kNoPort;
  Fabric f = TreeWithAHostOnASpine(&io_port);
  const LidMap lids(f);
  auto plain = RouteFTree(f, lids);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("not a fat tree: leaf"), std::string::npos)
      << plain.status().message();

  RoutingOptions cn;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (!f.node(n).is_switch() && f.port_id(n, PortNum(1)) != io_port)
      cn.cn_guids.push_back(f.port(n, PortNum(1)).guid);
  const RoutingTables by_cn = RouteAndCheck(f, lids, cn);

  RoutingOptions io;
  io.io_guids.push_back(f.port(io_port).guid);
  const RoutingTables by_io = RouteAndCheck(f, lids, io);
  for (size_t i = 0; i < by_cn.switches.size(); ++i)
    EXPECT_EQ(by_cn.switches[i].lft, by_io.switches[i].lft);

  // Compute nodes keep their non-blocking shifts.
  std::vector<PortId> hosts = HostsInFabricOrder(f);
  hosts.erase(std::remove(hosts.begin(), hosts.end(), io_port), hosts.end());
  EXPECT_EQ(ShiftMaxSharing(f, lids, by_cn, hosts), 1u);
}

TEST(FTreeEngineTest, TablesDoNotDependOnTheNumberOfThreads) {
  Fabric f = Make(FatTree3(6));
  Degrade(f, 4, 11);
  const LidMap lids(f);
  RoutingOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const RoutingTables a = RouteAndCheck(f, lids, one);
  const RoutingTables b = RouteAndCheck(f, lids, two);
  ASSERT_EQ(a.switches.size(), b.switches.size());
  for (size_t i = 0; i < a.switches.size(); ++i) EXPECT_EQ(a.switches[i].lft, b.switches[i].lft);
}

}  // namespace
}  // namespace ibsm::routing
