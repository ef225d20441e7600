#include "routing/updown_proof.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "fabric/generators.h"
#include "routing/ftree_engine.h"
#include "routing/hop_table.h"
#include "routing/minhop_engine.h"
#include "routing/quality.h"
#include "routing/reroute.h"
#include "routing/routing_test_util.h"
#include "routing/updn_engine.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

using testing::AssignLids;
using testing::Differences;
using testing::Uplink;

// The turns of a proof as (LID, from, via, to) by GUID, sorted: comparable across fabrics.
std::vector<std::tuple<uint16_t, Guid, Guid, Guid>> TurnSet(const Fabric& f,
                                                            const UpDownProof& p) {
  std::vector<std::tuple<uint16_t, Guid, Guid, Guid>> out;
  for (const RouteTurn& t : p.turns)
    out.emplace_back(t.lid, f.node(t.from).guid, f.node(t.via).guid, f.node(t.to).guid);
  std::sort(out.begin(), out.end());
  return out;
}

struct Repaired {
  Rerouted rerouted;
  Result<UpDownProof> proof = Status(StatusCode::kInternal, "not run");
};

// ftree tables on `before`, proven; then `after` re-routed from them under the proof's
// ranking and the proof renewed from the examined LIDs.
Repaired RepairFrom(const Fabric& before, const RoutingTables& old, const UpDownProof& prior,
                    const Fabric& after, unsigned threads = 1) {
  const LidMap lids(after);
  RoutingOptions o;
  o.threads = threads;
  Repaired out;
  auto r = RerouteAround(after, lids, before, old, o, false, &prior);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return out;
  out.rerouted = std::move(*r);
  out.proof =
      ReproveUpDown(after, lids, out.rerouted.tables, before, prior, out.rerouted.examined, threads);
  return out;
}

class UpDownProofTest : public testing::FtreeFatTreeTest {
 protected:
  void Build(int k, uint8_t lmc = 0) {
    FtreeFatTreeTest::Build(k, lmc);
    auto p = ProveUpDown(before_, *lids_, old_, UpDownRanks(before_, {}), 2);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    prior_ = std::move(*p);
  }
  UpDownProof prior_;
};

// ftree's and updn's routes on a fat tree go up, then down: nothing to relate.
TEST_F(UpDownProofTest, FtreeAndUpdnOnAFatTreeHaveNoTurn) {
  Build(8);
  EXPECT_TRUE(prior_.turns.empty());
  EXPECT_EQ(prior_.rank.size(), before_.node_count());
  auto updn = UpDnEngine(false).Route(before_, *lids_, {});
  ASSERT_TRUE(updn.ok()) << updn.status().ToString();
  auto p = ProveUpDown(before_, *lids_, *updn, UpDownRanks(before_, {}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->turns.empty());
}

// A cut spine-core cable leaves that core no up*/down* way into the pod: its routes there go
// down to another pod and up again. The renewed proof relates exactly those turns, finds they
// close no loop, and is the proof a whole-fabric reading of the repaired tables gives; the
// dependency graph agrees; and only the examined LIDs needed verifying.
TEST_F(UpDownProofTest, ACutCableIsProvenFromTheChangedLidsAlone) {
  for (int k : {8, 16}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    Build(k);
    Fabric after = before_;
    const PortId cut = Uplink(after, 1);
    ASSERT_NE(cut, kNoPort);
    after.Disconnect(cut);
    const LidMap lids(after);
    for (unsigned threads : {1u, 2u}) {
      Repaired r = RepairFrom(before_, old_, prior_, after, threads);
      ASSERT_TRUE(r.proof.ok()) << r.proof.status().ToString();
      EXPECT_FALSE(r.proof->turns.empty());
      EXPECT_LT(r.rerouted.examined.size(), lids.max_lid() / 2u);
      auto whole = ProveUpDown(after, lids, r.rerouted.tables, r.proof->rank, threads);
      ASSERT_TRUE(whole.ok()) << whole.status().ToString();
      EXPECT_EQ(TurnSet(after, *r.proof), TurnSet(after, *whole));
      EXPECT_TRUE(CheckCreditLoops(after, lids, r.rerouted.tables).acyclic);
      const VerifyReport part =
          VerifyTables(after, lids, r.rerouted.tables, 20, threads, &r.rerouted.examined);
      EXPECT_TRUE(part.ok);
      EXPECT_TRUE(VerifyTables(after, lids, r.rerouted.tables).ok);
    }
  }
}

// 1 to 8 random cuts at once, LMC 1: whatever is proven is free of credit loops, its partial
// verification agrees with the whole one, and the renewed proof is the whole-fabric proof.
TEST_F(UpDownProofTest, ManyCutsProvenOnlyWhenFreeOfCreditLoops) {
  Build(8, /*lmc=*/1);
  size_t proven = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Fabric after = before_;
    Degrade(after, static_cast<int>(seed), seed);
    const LidMap lids(after);
    Repaired r = RepairFrom(before_, old_, prior_, after);
    const bool whole_ok = VerifyTables(after, lids, r.rerouted.tables).ok;
    EXPECT_EQ(VerifyTables(after, lids, r.rerouted.tables, 20, 1, &r.rerouted.examined).ok,
              whole_ok)
        << "seed " << seed;
    auto whole = ProveUpDown(after, lids, r.rerouted.tables, prior_.rank);
    EXPECT_EQ(r.proof.ok(), whole.ok()) << "seed " << seed;
    if (!r.proof.ok()) continue;
    ++proven;
    EXPECT_TRUE(whole_ok) << "seed " << seed;
    EXPECT_TRUE(CheckCreditLoops(after, lids, r.rerouted.tables).acyclic) << "seed " << seed;
    if (whole.ok()) {
      EXPECT_EQ(TurnSet(after, *r.proof), TurnSet(after, *whole));
    }
  }
  std::printf("[ figure ] of 8 random fault sets at k=8, %zu re-routes proven from their "
              "changed LIDs\n",
              proven);
  EXPECT_GT(proven, 0u);
}

// minhop on random graphs: tables with a credit loop are never proven (the proof can fail).
// (On random graphs updn's own off-rule routes have so many turns that the proof's coarse
// relation refuses them too: a repair there is checked on the whole fabric.)
TEST(UpDownProof, RandomGraphsWithACreditLoopAreNeverProven) {
  size_t loops = 0, proven = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    auto f = RandomGraph(24, 8, 2, seed);
    ASSERT_TRUE(f.ok());
    AssignLids(*f);
    const LidMap lids(*f);
    const HopTable hops = HopTable::Build(*f, 1);
    const RoutingTables minhop = RouteMinHop(*f, lids, hops, 1);
    const bool acyclic = CheckCreditLoops(*f, lids, minhop).acyclic;
    loops += !acyclic;
    auto p = ProveUpDown(*f, lids, minhop, UpDownRanks(*f, {}));
    if (p.ok()) {
      ++proven;
      EXPECT_TRUE(acyclic) << "seed " << seed;
    }
  }
  std::printf("[ figure ] 12 random graphs under minhop: %zu with a credit loop, %zu proven\n",
              loops, proven);
  EXPECT_GT(loops, 0u);
}

// `f` without its first switch of tier `tier`: the switch dead, taken out as the SM's model
// takes it out.
Fabric WithoutFirst(const Fabric& f, uint32_t tier) {
  const auto rank = LeafDistanceRanks(f);
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (rank[n] == tier) return WithoutNode(f, n);
  return f;
}

// The re-route of `after` from `old` (on `before`, proven by `prior`) as it runs, following a
// LID's old routes only from the switches the fault can have changed, beside the same re-route
// following every switch's (as it does for a LID the proof lists a turn for): the same tables.
void ExpectPartlyAsWhole(const Fabric& after, const Fabric& before, const RoutingTables& old,
                         const UpDownProof& prior, const std::string& what) {
  SCOPED_TRACE(what);
  const LidMap lids(after);
  UpDownProof every = prior;  // a turn listed for every LID: each followed from every switch
  for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid)
    every.turns.push_back({static_cast<uint16_t>(lid), 0, 0, 0});
  for (unsigned threads : {1u, 2u}) {
    RoutingOptions o;
    o.threads = threads;
    auto part = RerouteAround(after, lids, before, old, o, false, &prior);
    auto whole = RerouteAround(after, lids, before, old, o, false, &every);
    ASSERT_EQ(part.ok(), whole.ok());
    if (!part.ok()) continue;
    EXPECT_GT(part->stats.lids_followed_partly, 0u);
    EXPECT_EQ(whole->stats.lids_followed_partly, 0u);
    EXPECT_EQ(part->examined, whole->examined);
    EXPECT_EQ(Differences(part->tables, whole->tables), 0u);
    EXPECT_EQ(part->stats.entries_changed, whole->stats.entries_changed);
    EXPECT_EQ(part->stats.routes_kept, whole->stats.routes_kept);
    EXPECT_EQ(part->stats.lids_rerouted, whole->stats.lids_rerouted);
    EXPECT_EQ(part->stats.unproven, whole->stats.unproven);
    EXPECT_TRUE(VerifyTables(after, lids, part->tables).ok);
  }
}

// With a proof, a re-route follows the old routes of a LID the proof lists no turn for only
// from the switches whose route the fault can have changed, and from those above the owner's.
// Its tables are the ones following every switch's route gives (which it does for a LID the
// proof lists a turn for): cut cables on every tier, dead switches, random fault sets, and a
// second cut repaired from the first repair's tables and renewed proof, whose turns make
// some LIDs followed whole.
TEST_F(UpDownProofTest, FollowingOnlyWhatTheFaultChangedKeepsWhatTheWholeWalkKeeps) {
  const auto same = ExpectPartlyAsWhole;
  for (int k : {8, 16}) {
    for (uint8_t lmc : {uint8_t{0}, uint8_t{1}}) {
      if (k == 16 && lmc == 1) continue;
      Build(k, lmc);
      const std::string at = "k=" + std::to_string(k) + " lmc=" + std::to_string(lmc);
      for (uint32_t tier : {0u, 1u}) {
        Fabric after = before_;
        after.Disconnect(Uplink(after, tier));
        same(after, before_, old_, prior_, at + " cut above tier " + std::to_string(tier));
      }
      for (uint32_t tier : {0u, 1u, 2u}) {
        const Fabric after = WithoutFirst(before_, tier);
        same(after, before_, old_, prior_, at + " dead switch of tier " + std::to_string(tier));
      }
      for (uint64_t seed = 1; seed <= (k == 8 ? 8u : 3u); ++seed) {
        Fabric after = before_;
        Degrade(after, static_cast<int>(seed), seed);
        same(after, before_, old_, prior_, at + " fault set " + std::to_string(seed));
      }
      // A spine cable cut and repaired (its proof now lists turns), then a leaf cable.
      Fabric first = before_;
      first.Disconnect(Uplink(first, 1));
      Repaired r = RepairFrom(before_, old_, prior_, first);
      ASSERT_TRUE(r.proof.ok()) << r.proof.status().ToString();
      ASSERT_FALSE(r.proof->turns.empty());
      Fabric second = first;
      second.Disconnect(Uplink(second, 0));
      same(second, first, r.rerouted.tables, *r.proof, at + " second cut");
    }
  }
  // Random graphs under updn, with the CAs taken off every other switch: routes from above
  // the owner's switch that climb first, and off-rule routes towards a switch LID from
  // switches no CA traffic enters, are among the old tables there.
  size_t compared = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    auto f = RandomGraph(20, 8, 2, seed);
    ASSERT_TRUE(f.ok());
    for (NodeId n = 0, i = 0; n < f->node_count(); ++n) {
      if (!f->node(n).is_switch() || i++ % 2) continue;
      for (uint32_t p = 1; p <= f->node(n).num_ports; ++p) {
        const PortId id = f->port_id(n, PortNum(static_cast<uint8_t>(p)));
        if (f->port(id).connected() && !f->node(f->port(f->port(id).peer).node).is_switch())
          f->Disconnect(id);
      }
    }
    AssignLids(*f);
    const LidMap lids(*f);
    auto updn = UpDnEngine(false).Route(*f, lids, {});
    if (!updn.ok() || !VerifyTables(*f, lids, *updn).ok) continue;
    auto p = ProveUpDown(*f, lids, *updn, UpDownRanks(*f, {}));
    if (!p.ok()) continue;
    Fabric after = *f;
    Degrade(after, 2, seed);
    same(after, *f, *updn, *p, "random graph " + std::to_string(seed));
    ++compared;
  }
  std::printf("[ figure ] %zu random graphs compared\n", compared);
  EXPECT_GT(compared, 0u);
}

// Five switches: top T over M1 and M2, each cabled to leaves L1 (host H1) and L2 (host H2).
// The old tables are verified and proven, with two routes a partial walk must still find:
// M2 climbs to T towards H1 though it is above L1 (it must route down), and M2 reaches T's own
// LID down through L1 (off-rule, but no CA traffic enters M2 on the way to T). Cutting L2-M1
// leaves L2 one way up, into M2: both of M2's routes are built again, as the whole walk does.
TEST(UpDownProofPartly, RoutesARepairClimbsIntoOrMustDescendAreBuiltAgain) {
  Fabric f;
  auto add = [&](NodeKind kind, uint64_t guid, uint8_t ports, const std::string& name) {
    return *f.AddNode(kind, Guid{guid}, ports, name, name);
  };
  const NodeId t = add(NodeKind::kSwitch, 0x101, 2, "T");
  const NodeId m1 = add(NodeKind::kSwitch, 0x102, 3, "M1");
  const NodeId m2 = add(NodeKind::kSwitch, 0x103, 3, "M2");
  const NodeId l1 = add(NodeKind::kSwitch, 0x104, 3, "L1");
  const NodeId l2 = add(NodeKind::kSwitch, 0x105, 3, "L2");
  const NodeId h1 = add(NodeKind::kCa, 0x201, 1, "H1");
  const NodeId h2 = add(NodeKind::kCa, 0x202, 1, "H2");
  auto cable = [&](NodeId a, uint8_t pa, NodeId b, uint8_t pb) {
    ASSERT_TRUE(f.Connect(a, PortNum(pa), b, PortNum(pb)).ok());
  };
  cable(t, 1, m1, 1);
  cable(t, 2, m2, 1);
  cable(m1, 2, l1, 1);
  cable(m1, 3, l2, 1);
  cable(m2, 2, l1, 2);
  cable(m2, 3, l2, 2);
  cable(l1, 3, h1, 1);
  cable(l2, 3, h2, 1);
  AssignLids(f);
  const LidMap lids(f);
  auto old = UpDnEngine(false).Route(f, lids, {});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  auto lft = [&](RoutingTables& tables, NodeId n) -> std::vector<uint8_t>& {
    return tables.switches[tables.switch_index[n]].lft;
  };
  const uint16_t to_h1 = f.port(h1, PortNum(1)).lid.value();
  const uint16_t to_t = f.port(t, PortNum(0)).lid.value();
  lft(*old, t)[to_h1] = 1;   // T -> M1 -> L1
  lft(*old, m1)[to_h1] = 2;
  lft(*old, m2)[to_h1] = 1;  // M2 climbs to T first
  lft(*old, l2)[to_h1] = 1;  // L2 -> M1
  lft(*old, l1)[to_t] = 1;   // L1 -> M1 -> T
  lft(*old, l2)[to_t] = 1;   // L2 -> M1 -> T
  lft(*old, m1)[to_t] = 1;
  lft(*old, m2)[to_t] = 2;   // M2 -> L1 -> M1 -> T: down, then up
  ASSERT_TRUE(VerifyTables(f, lids, *old).ok);
  auto prior = ProveUpDown(f, lids, *old, UpDownRanks(f, {}));
  ASSERT_TRUE(prior.ok()) << prior.status().ToString();
  ASSERT_TRUE(prior->turns.empty());

  Fabric after = f;
  after.Disconnect(after.port_id(l2, PortNum(1)));
  ExpectPartlyAsWhole(after, f, *old, *prior, "L2-M1 cut");
  const LidMap now(after);
  auto r = RerouteAround(after, now, f, *old, {}, false, &*prior);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->stats.lids_followed_partly, 0u);
  EXPECT_EQ(lft(r->tables, m2)[to_h1], 2);  // straight down to L1
  EXPECT_EQ(lft(r->tables, m2)[to_t], 1);   // straight up to T
  EXPECT_EQ(lft(r->tables, l2)[to_t], 2);   // up into M2
  EXPECT_TRUE(CheckCreditLoops(after, now, r->tables).acyclic);
}

// A switch the proof does not rank cannot be carried over.
TEST_F(UpDownProofTest, AnUnrankedSwitchIsRefused) {
  Build(4);
  UpDownProof prior = prior_;
  for (NodeId n = 0; n < before_.node_count(); ++n)
    if (before_.node(n).is_switch()) {
      prior.rank[n] = kNone;
      break;
    }
  auto p = ReproveUpDown(before_, *lids_, old_, before_, prior, {}, 1);
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ibsm::routing
