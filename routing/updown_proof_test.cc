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

// The turns of a proof as (LID, from, via, to) by GUID, sorted: comparable across fabrics.
std::vector<std::tuple<uint16_t, Guid, Guid, Guid>> TurnSet(const Fabric& f,
                                                            const UpDownProof& p) {
  std::vector<std::tuple<uint16_t, Guid, Guid, Guid>> out;
  for (const RouteTurn& t : p.turns)
    out.emplace_back(t.lid, f.node(t.from).guid, f.node(t.via).guid, f.node(t.to).guid);
  std::sort(out.begin(), out.end());
  return out;
}

// The first cable from a spine (tier 1) up to a core.
PortId SpineUplink(const Fabric& f) {
  const auto tier = LeafDistanceRanks(f);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (tier[n] != 1) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      const PortId id = f.port_id(n, PortNum(static_cast<uint8_t>(p)));
      if (f.port(id).connected() && tier[f.port(f.port(id).peer).node] == 2) return id;
    }
  }
  return kNoPort;
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
  auto r = RerouteAround(after, lids, before, old, o, false, &prior.rank);
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
    const PortId cut = SpineUplink(after);
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
