#include "routing/reroute.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "fabric/generators.h"
#include "routing/ar_groups.h"
#include "routing/ftree_engine.h"
#include "routing/hop_table.h"
#include "routing/minhop_engine.h"
#include "routing/quality.h"
#include "routing/routing_test_util.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;
using testing::Differences;

// Entries that send a LID out of a port without a cable (kDropPort aside).
size_t EntriesToDeadPorts(const Fabric& f, const RoutingTables& t) {
  size_t dead = 0;
  for (const SwitchTable& st : t.switches)
    for (size_t lid = 1; lid < st.lft.size(); ++lid) {
      const uint8_t e = st.lft[lid];
      if (e == 0 || e == kDropPort) continue;
      if (e > f.node(st.node).num_ports || !f.port(st.node, PortNum(e)).connected()) ++dead;
    }
  return dead;
}

// Whether the walk of `t` from switch `from` towards `lid` crosses the cable at port
// (`node`, `port`), on fabric `f`.
bool Crosses(const Fabric& f, const RoutingTables& t, NodeId from, uint16_t lid, NodeId node,
             uint8_t port) {
  NodeId cur = from;
  for (int hops = 0; hops < 64; ++hops) {
    const uint8_t e = t.table(cur)->lft[lid];
    if (e == 0 || e == kDropPort) return false;
    const Port& out = f.port(cur, PortNum(e));
    if (!out.connected()) return false;
    const Port& peer = f.port(out.peer);
    if ((cur == node && e == port) || (peer.node == node && peer.num.value() == port))
      return true;
    if (!f.node(peer.node).is_switch()) return false;
    cur = peer.node;
  }
  return false;
}

struct Cut {
  NodeId node;
  uint8_t port;
};

// The first cable from a switch of tier `tier` to one above it.
Cut FirstUplink(const Fabric& f, uint32_t tier) {
  const PortId id = testing::Uplink(f, tier);
  if (id == kNoPort) return {kNoNode, 0};
  return {f.port(id).node, f.port(id).num.value()};
}

class RerouteTest : public testing::FtreeFatTreeTest {
 protected:
  void Build(int k, uint8_t lmc = 0) {
    FtreeFatTreeTest::Build(k, lmc);
    after_ = before_;
  }

  // The re-route on after_, checked as a user would: verified, free of credit loops, no
  // entry to a dead port.
  Rerouted RerouteChecked(unsigned threads = 1) {
    const LidMap lids(after_);
    RoutingOptions o;
    o.threads = threads;
    auto r = RerouteAround(after_, lids, before_, old_, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    const VerifyReport v = VerifyTables(after_, lids, r->tables);
    EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems.front());
    const CreditLoopReport loops = CheckCreditLoops(after_, lids, r->tables);
    EXPECT_TRUE(loops.acyclic);
    EXPECT_EQ(EntriesToDeadPorts(after_, r->tables), 0u);
    return std::move(*r);
  }

  Fabric after_;
};

TEST_F(RerouteTest, ACutCoreCableChangesOnlyTheRoutesThatCrossedIt) {
  Build(16);
  const Cut cut = FirstUplink(before_, 1);  // aggregation -> core
  ASSERT_NE(cut.node, kNoNode);
  after_.Disconnect(after_.port_id(cut.node, PortNum(cut.port)));
  const Rerouted r = RerouteChecked();

  // Every route that did not cross the cable is the old one; at least one did, and changed.
  // Towards a switch's own LID, only the routes that count (from a switch with a host): one of
  // those that lost its way may now cross a switch without hosts, which then takes its way.
  auto has_host = [&](NodeId n) {
    const Node& node = before_.node(n);
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = before_.port(node.first_port + p);
      if (port.connected() && !before_.node(before_.port(port.peer).node).is_switch()) return true;
    }
    return false;
  };
  size_t crossed = 0;
  for (const SwitchTable& st : old_.switches) {
    const bool host = has_host(st.node);
    for (uint16_t lid = 1; lid <= lids_->max_lid(); ++lid) {
      const PortId owner = lids_->owner(Lid(lid));
      if (owner == kNoPort) continue;
      if (!host && before_.node(before_.port(owner).node).is_switch()) continue;
      if (Crosses(before_, old_, st.node, lid, cut.node, cut.port)) {
        ++crossed;
        continue;
      }
      EXPECT_EQ(r.tables.table(st.node)->lft[lid], st.lft[lid])
          << before_.node(st.node).description << " LID " << lid;
    }
  }
  EXPECT_GT(crossed, 0u);
  EXPECT_GT(r.stats.entries_changed, 0u);
  EXPECT_LE(r.stats.entries_changed, crossed);

  // A full ftree run on the cut fabric rewrites far more LFT blocks.
  const LidMap lids(after_);
  auto full = FTreeEngine().Route(after_, lids, {});
  ASSERT_TRUE(full.ok());
  const size_t blocks = BlocksDiffering(r.tables, old_);
  EXPECT_GT(blocks, 0u);
  EXPECT_LT(blocks, BlocksDiffering(*full, old_));
}

TEST_F(RerouteTest, ADeadCoreSwitchIsRoutedAround) {
  Build(8);
  const auto rank = LeafDistanceRanks(before_);
  NodeId core = kNoNode;
  for (NodeId n = 0; n < before_.node_count() && core == kNoNode; ++n)
    if (rank[n] == 2) core = n;
  ASSERT_NE(core, kNoNode);
  for (uint32_t p = 1; p <= after_.node(core).num_ports; ++p)
    after_.Disconnect(after_.port_id(core, PortNum(static_cast<uint8_t>(p))));
  const Rerouted r = RerouteChecked();
  // The dead switch's own LID is routed nowhere; it routes nothing.
  const uint16_t core_lid = before_.port(core, PortNum(0)).lid.value();
  // (The dead switch itself, alone in the model, routes only to itself.)
  for (const SwitchTable& st : r.tables.switches) {
    if (st.node == core) continue;
    EXPECT_EQ(st.lft[core_lid], kDropPort) << after_.node(st.node).description;
  }
}

// 1 to 8 random cuts at once. Examining every LID, a result that says it is proven is free
// of credit loops; examining only what the cuts touched gives the same kept routes and is
// verified, the same for any thread count (the SM checks it for credit loops before it uses
// it, and routes with the engine when it has one).
TEST_F(RerouteTest, ManyCutsWithLmc) {
  Build(8, /*lmc=*/1);
  size_t acyclic = 0, proven = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    after_ = before_;
    Degrade(after_, static_cast<int>(seed), seed);
    const LidMap lids(after_);
    RoutingOptions o;
    auto every = RerouteAround(after_, lids, before_, old_, o, /*examine_all=*/true);
    ASSERT_TRUE(every.ok()) << every.status().ToString();
    EXPECT_TRUE(VerifyTables(after_, lids, every->tables).ok) << "seed " << seed;
    if (every->stats.proven) {
      ++proven;
      EXPECT_TRUE(CheckCreditLoops(after_, lids, every->tables).acyclic) << "seed " << seed;
    }
    auto one = RerouteAround(after_, lids, before_, old_, o);
    o.threads = 2;
    auto two = RerouteAround(after_, lids, before_, old_, o);
    ASSERT_TRUE(one.ok() && two.ok()) << "seed " << seed;
    EXPECT_TRUE(VerifyTables(after_, lids, one->tables).ok) << "seed " << seed;
    EXPECT_EQ(EntriesToDeadPorts(after_, one->tables), 0u);
    EXPECT_EQ(Differences(one->tables, two->tables), 0u) << "seed " << seed;
    EXPECT_GT(one->stats.lids_rerouted, 0u);
    EXPECT_LT(one->stats.lids_examined, lids.max_lid());
    acyclic += CheckCreditLoops(after_, lids, one->tables).acyclic;
  }
  EXPECT_GT(acyclic, 0u);
  std::printf("of 8 fault sets: %zu re-routes free of credit loops, %zu proven so\n", acyclic,
              proven);
}

TEST_F(RerouteTest, AHostThatLeftHasItsLidsDroppedEverywhere) {
  Build(4);
  NodeId host = kNoNode;
  for (NodeId n = 0; n < after_.node_count() && host == kNoNode; ++n)
    if (!after_.node(n).is_switch()) host = n;
  const uint16_t lid = after_.port(host, PortNum(1)).lid.value();
  after_.Disconnect(after_.port_id(host, PortNum(1)));
  const Rerouted r = RerouteChecked();
  for (const SwitchTable& st : r.tables.switches) EXPECT_EQ(st.lft[lid], kDropPort);
  EXPECT_EQ(r.stats.lids_rerouted, 1u);
}

TEST_F(RerouteTest, NothingChangedChangesNothing) {
  Build(8);
  const Rerouted r = RerouteChecked();
  EXPECT_EQ(r.stats.entries_changed, 0u);
  EXPECT_EQ(Differences(r.tables, old_), 0u);
}

// minhop's routes on a random graph are not up*/down*. Examining every LID, the re-route
// keeps only routes that are; where it says its result is proven, the result is free of
// credit loops, even though the old tables were not.
TEST(RerouteFromMinHop, RoutesThatAreNotUpDownAreBuiltAgain) {
  size_t proven = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    auto f = RandomGraph(24, 8, 2, seed);
    ASSERT_TRUE(f.ok());
    AssignLids(*f);
    const LidMap lids(*f);
    const HopTable hops = HopTable::Build(*f, 1);
    const RoutingTables minhop = RouteMinHop(*f, lids, hops, 1);
    auto r = RerouteAround(*f, lids, *f, minhop, {}, /*examine_all=*/true);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(VerifyTables(*f, lids, r->tables).ok) << "seed " << seed;
    EXPECT_GT(r->stats.entries_changed, 0u);
    if (!r->stats.proven) continue;
    ++proven;
    EXPECT_TRUE(CheckCreditLoops(*f, lids, r->tables).acyclic) << "seed " << seed;
  }
  EXPECT_GT(proven, 0u);
}

// A leaf cut off from the rest (its uplinks gone), re-routed; then one uplink back. The tables
// it starts from had no route to keep from the leaf, nor towards its hosts: the re-route
// examines every LID and the fabric is whole again.
TEST_F(RerouteTest, ACableJoiningTwoPiecesRoutesEveryLidAgain) {
  Build(4);
  NodeId leaf = kNoNode;
  const auto tier = LeafDistanceRanks(before_);
  for (NodeId n = 0; n < before_.node_count() && leaf == kNoNode; ++n)
    if (tier[n] == 0) leaf = n;
  Fabric split = before_;
  PortId back = kNoPort;
  for (uint32_t p = 1; p <= split.node(leaf).num_ports; ++p) {
    const PortId id = split.port_id(leaf, PortNum(static_cast<uint8_t>(p)));
    if (!split.port(id).connected() || !split.node(split.port(split.port(id).peer).node).is_switch())
      continue;
    if (back == kNoPort) back = id;
    split.Disconnect(id);
  }
  ASSERT_NE(back, kNoPort);
  const LidMap lids(split);
  auto cut_off = RerouteAround(split, lids, before_, old_, {}, /*examine_all=*/true);
  ASSERT_TRUE(cut_off.ok()) << cut_off.status().ToString();
  const Port& was = before_.port(back);
  after_ = split;
  ASSERT_TRUE(after_.Connect(leaf, was.num, before_.port(was.peer).node,
                             before_.port(was.peer).num).ok());
  auto r = RerouteAround(after_, lids, split, cut_off->tables);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.lids_examined, lids.max_lid());
  const VerifyReport v = VerifyTables(after_, lids, r->tables);
  EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems.front());
}

// A dead aggregation switch: the cores above it lose their only cable into its pod, so some
// routes that CA traffic takes (those cores towards the pod, and the pod towards those cores'
// own LIDs) have no up*/down* way and must turn down then up somewhere. Built where they
// happen to cross, such turns close credit loops through the legal routes between them; the
// re-route must keep them where they cannot, with and without a proof of the old tables.
TEST_F(RerouteTest, ADeadAggregationSwitchIsRoutedAroundWithoutACreditLoop) {
  for (int k : {8, 16}) {
    SCOPED_TRACE(k);
    Build(k);
    const PortId up = testing::Uplink(before_, 1);
    ASSERT_NE(up, kNoPort);
    after_ = WithoutNode(before_, before_.port(up).node);
    const LidMap lids(after_);
    auto prior = ProveUpDown(before_, *lids_, old_, UpDownRanks(before_, {}));
    ASSERT_TRUE(prior.ok()) << prior.status().ToString();
    for (const UpDownProof* proof : {static_cast<const UpDownProof*>(nullptr), static_cast<const UpDownProof*>(&*prior)}) {
      SCOPED_TRACE(proof ? "with a proof" : "without a proof");
      auto r = RerouteAround(after_, lids, before_, old_, {}, /*examine_all=*/false, proof);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const VerifyReport v = VerifyTables(after_, lids, r->tables);
      EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems.front());
      const CreditLoopReport loops = CheckCreditLoops(after_, lids, r->tables);
      std::string cycle;
      for (size_t i = 0; i < loops.cycle.size(); ++i)
        cycle += loops.cycle[i] + " (LID " + std::to_string(loops.cycle_lids[i]) + ")\n";
      EXPECT_TRUE(loops.acyclic) << cycle;
      EXPECT_EQ(EntriesToDeadPorts(after_, r->tables), 0u);
      // The detours all turn at one leaf, so the up*/down* proof covers them: renewed from
      // the examined LIDs as the SM renews it, and made afresh from the whole tables.
      EXPECT_TRUE(r->stats.unproven);
      if (proof) {
        auto renewed = ReproveUpDown(after_, lids, r->tables, before_, *proof, r->examined, 1,
                                     &r->changes);
        EXPECT_TRUE(renewed.ok()) << renewed.status().ToString();
      }
      auto whole = ProveUpDown(after_, lids, r->tables, UpDownRanks(after_, {}));
      EXPECT_TRUE(whole.ok()) << whole.status().ToString();
    }
  }
}

// The SM's re-route builds in a copy of the old tables made ahead of time (CopyTables): the
// same tables as building from the old ones, and the copy's rows are taken over.
TEST_F(RerouteTest, StartingFromACopyOfTheOldTablesGivesTheSameTables) {
  Build(8);
  const PortId up = testing::Uplink(before_, 1);
  ASSERT_NE(up, kNoPort);
  after_.Disconnect(after_.port_id(before_.port(up).node, before_.port(up).num));
  const LidMap lids(after_);
  RoutingOptions o;
  o.threads = 2;
  auto plain = RerouteAround(after_, lids, before_, old_, o);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  RoutingTables start = CopyTables(old_, 2);
  ASSERT_EQ(Differences(start, old_), 0u);
  auto copied = RerouteAround(after_, lids, before_, old_, o, false, nullptr, &start);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_GT(plain->stats.entries_changed, 0u);
  EXPECT_EQ(Differences(copied->tables, plain->tables), 0u);
  EXPECT_EQ(Differences(plain->tables, copied->tables), 0u);
  for (const SwitchTable& st : start.switches) EXPECT_TRUE(st.lft.empty());
}

// Every cable up from one aggregation switch cut at once (OpenSM's bench "cables16" at
// k=32): the switch stays, reached only from its pod's leaves, and the cores above it lose
// their way into the pod. No one hub is reached up* then down* by both; the routes that
// count turn at a leaf of the next pod (towards the pod, from those cores) or at a leaf of
// its own (towards and from the switch), and that too is proven.
TEST_F(RerouteTest, EveryUplinkOfAnAggregationSwitchCutIsRoutedAroundWithoutACreditLoop) {
  for (int k : {8, 16}) {
    SCOPED_TRACE(k);
    Build(k);
    const PortId first = testing::Uplink(before_, 1);
    ASSERT_NE(first, kNoPort);
    const NodeId spine = before_.port(first).node;
    const auto tier = LeafDistanceRanks(before_);
    size_t cut = 0;
    for (uint32_t p = 1; p <= after_.node(spine).num_ports; ++p) {
      const PortId id = after_.port_id(spine, PortNum(static_cast<uint8_t>(p)));
      if (after_.port(id).connected() && tier[after_.port(after_.port(id).peer).node] == 2) {
        after_.Disconnect(id);
        ++cut;
      }
    }
    ASSERT_EQ(cut, static_cast<size_t>(k / 2));
    const LidMap lids(after_);
    auto prior = ProveUpDown(before_, *lids_, old_, UpDownRanks(before_, {}));
    ASSERT_TRUE(prior.ok()) << prior.status().ToString();
    auto r = RerouteAround(after_, lids, before_, old_, {}, /*examine_all=*/false, &*prior);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const VerifyReport v = VerifyTables(after_, lids, r->tables);
    EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems.front());
    const CreditLoopReport loops = CheckCreditLoops(after_, lids, r->tables);
    EXPECT_TRUE(loops.acyclic);
    EXPECT_EQ(EntriesToDeadPorts(after_, r->tables), 0u);
    auto renewed = ReproveUpDown(after_, lids, r->tables, before_, *prior, r->examined, 1,
                                 &r->changes);
    EXPECT_TRUE(renewed.ok()) << renewed.status().ToString();
  }
}

// Adaptive routing on top of a re-route around a cut core cable, a dead aggregation switch
// and an aggregation switch whose uplinks were all cut: the re-route's detours turn from down
// to up, and AR groups spread over every minimal port there closed credit loops (the SM then
// turned AR off on every switch). The groups keep away from those turns: the AR tables verify
// and most AR entries stay.
TEST_F(RerouteTest, AdaptiveRoutingOnTheReroutedTablesStaysOnAndFreeOfCreditLoops) {
  for (int k : {8, 16})
  for (int fault = 0; fault < 3; ++fault) {
    SCOPED_TRACE(fault);
    SCOPED_TRACE(k);
    Build(k);
    const PortId up = testing::Uplink(before_, 1);
    ASSERT_NE(up, kNoPort);
    const NodeId spine = before_.port(up).node;
    if (fault == 0) {
      after_.Disconnect(up);
    } else if (fault == 1) {
      after_ = WithoutNode(before_, spine);
    } else {
      const auto tier = LeafDistanceRanks(before_);
      for (uint32_t p = 1; p <= after_.node(spine).num_ports; ++p) {
        const PortId id = after_.port_id(spine, PortNum(static_cast<uint8_t>(p)));
        if (after_.port(id).connected() && tier[after_.port(after_.port(id).peer).node] == 2)
          after_.Disconnect(id);
      }
    }
    const LidMap lids(after_);
    auto r = RerouteAround(after_, lids, before_, old_, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(CheckCreditLoops(after_, lids, r->tables).acyclic);
    auto intact = BuildArTables(before_, *lids_, old_, {});
    auto ar = BuildArTables(after_, lids, r->tables, {});
    ASSERT_TRUE(intact.ok() && ar.ok());
    const ArVerifyReport v = VerifyArTables(after_, lids, r->tables, *ar);
    EXPECT_TRUE(v.ok) << (v.problems.empty() ? "" : v.problems.back());
    uint64_t entries = 0, intact_entries = 0;
    for (const ArSwitchTable& t : ar->switches) entries += t.ar_entries;
    for (const ArSwitchTable& t : intact->switches) intact_entries += t.ar_entries;
    std::printf("[ figure ] 3-tier k=%d, fault %d: %lu AR entries of %lu on the intact tree\n",
                k, fault, static_cast<unsigned long>(entries),
                static_cast<unsigned long>(intact_entries));
    EXPECT_GT(entries * 10, intact_entries * 8);
  }
}

TEST(RerouteFromNothing, ASwitchWithoutOldTablesIsRefused) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  AssignLids(*f);
  const LidMap lids(*f);
  RoutingTables none;
  none.switch_index.assign(f->node_count(), SIZE_MAX);
  auto r = RerouteAround(*f, lids, *f, none);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ibsm::routing
