#include "routing/updown_proof.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
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

void ExpectSameReport(const VerifyReport& a, const VerifyReport& b) {
  EXPECT_EQ(a.ok, b.ok);
  EXPECT_EQ(a.missing_entries, b.missing_entries);
  EXPECT_EQ(a.loops, b.loops);
  EXPECT_EQ(a.misrouted_entries, b.misrouted_entries);
  EXPECT_EQ(a.unreachable_pairs, b.unreachable_pairs);
  EXPECT_EQ(a.problems, b.problems);
}

// What r.changes lists, LID by LID, is exactly what differs from `old`: the switches whose
// entry changed, or whose old entry goes into a port that now leads elsewhere (or nowhere);
// and where it is known, the LID's owner is cabled as before.
void ExpectChangesListed(const Fabric& after, const Fabric& before, const RoutingTables& old,
                         const Rerouted& r) {
  const LidMap lids(after), was(before);
  auto far = [](const Fabric& f, NodeId n, uint32_t p) -> std::pair<Guid, uint32_t> {
    if (p == 0 || p > f.node(n).num_ports) return {Guid{0}, p};
    const Port& port = f.port(f.port_id(n, PortNum(static_cast<uint8_t>(p))));
    if (!port.connected()) return {Guid{0}, 0};
    const Port& peer = f.port(port.peer);
    return {f.node(peer.node).guid, peer.num.value()};
  };
  for (size_t i = 0; i < r.examined.size(); ++i) {
    if (!r.changes.known[i]) continue;
    const uint32_t lid = r.examined[i];
    const PortId o = lids.owner(Lid(static_cast<uint16_t>(lid)));
    const PortId w = was.owner(Lid(static_cast<uint16_t>(lid)));
    ASSERT_NE(o, kNoPort);
    ASSERT_NE(w, kNoPort);
    EXPECT_EQ(after.node(after.port(o).node).guid, before.node(before.port(w).node).guid);
    std::vector<NodeId> expect;
    for (const SwitchTable& st : r.tables.switches) {
      const NodeId then = *before.FindNode(after.node(st.node).guid);
      const uint8_t e = old.table(then)->lft[lid];
      if (st.lft[lid] != e || far(after, st.node, e) != far(before, then, e))
        expect.push_back(st.node);
    }
    std::sort(expect.begin(), expect.end());
    const std::vector<NodeId> got(r.changes.nodes.begin() + r.changes.begin[i],
                                  r.changes.nodes.begin() + r.changes.begin[i + 1]);
    EXPECT_EQ(got, expect) << "LID " << lid;
  }
}

// `tables` (a re-route of `r`'s on `after` from tables on `before` that `prior` proves)
// verified and proven reading only the switches r.changes lists, beside reading every switch
// of the examined LIDs: the same report, the same verdict and the same turns.
void ExpectChangesReadAsWhole(const Fabric& after, const Fabric& before, const UpDownProof& prior,
                              const Rerouted& r, const RoutingTables& tables, unsigned threads) {
  const LidMap lids(after);
  ASSERT_EQ(r.changes.known.size(), r.examined.size());
  ASSERT_EQ(r.changes.begin.size(), r.examined.size() + 1);
  EXPECT_GT(std::count(r.changes.known.begin(), r.changes.known.end(), 1), 0);
  ExpectSameReport(VerifyTables(after, lids, tables, 100, threads, &r.examined, &r.changes),
                   VerifyTables(after, lids, tables, 100, threads, &r.examined));
  auto near = ReproveUpDown(after, lids, tables, before, prior, r.examined, threads, &r.changes);
  auto full = ReproveUpDown(after, lids, tables, before, prior, r.examined, threads);
  ASSERT_EQ(near.ok(), full.ok()) << (near.ok() ? full : near).status().ToString();
  if (near.ok()) {
    EXPECT_EQ(TurnSet(after, *near), TurnSet(after, *full));
  } else {
    EXPECT_EQ(near.status().message(), full.status().message());
  }
}

// `f` with two spine-core cables swapped at their core ends: the first uplink's aggregation
// switch and another one in another pod, on the same port, each now cabled to the other's core.
// Old entries into those ports lead somewhere else, and some still deliver there.
Fabric WithUplinksSwapped(const Fabric& f) {
  Fabric out = f;
  const PortId a = Uplink(f, 1);
  const Port& pa = f.port(a);
  const auto rank = LeafDistanceRanks(f);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (rank[n] != 1 || n == pa.node) continue;
    const PortId b = f.port_id(n, pa.num);
    const Port& pb = f.port(b);
    if (!pb.connected() || f.port(pb.peer).node == f.port(pa.peer).node) continue;
    const Port ca = f.port(pa.peer), cb = f.port(pb.peer);
    out.Disconnect(a);
    out.Disconnect(b);
    EXPECT_TRUE(out.Connect(pa.node, pa.num, cb.node, cb.num).ok());
    EXPECT_TRUE(out.Connect(n, pa.num, ca.node, ca.num).ok());
    return out;
  }
  ADD_FAILURE() << "no second uplink to swap with";
  return out;
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
    // Every examined LID whose owner is cabled as before (its changes are known) and which
    // the proof lists no turn for is followed partly, a switch's own as a host's.
    std::set<uint32_t> turned;
    for (const RouteTurn& t : prior.turns) turned.insert(t.lid);
    uint64_t partly = 0;
    for (size_t i = 0; i < part->examined.size(); ++i)
      partly += part->changes.known[i] && !turned.count(part->examined[i]);
    EXPECT_EQ(part->stats.lids_followed_partly, partly);
    EXPECT_EQ(whole->stats.lids_followed_partly, 0u);
    EXPECT_EQ(part->examined, whole->examined);
    EXPECT_EQ(Differences(part->tables, whole->tables), 0u);
    EXPECT_EQ(part->stats.entries_changed, whole->stats.entries_changed);
    EXPECT_EQ(part->stats.routes_kept, whole->stats.routes_kept);
    EXPECT_EQ(part->stats.lids_rerouted, whole->stats.lids_rerouted);
    EXPECT_EQ(part->stats.unproven, whole->stats.unproven);
    EXPECT_TRUE(VerifyTables(after, lids, part->tables).ok);
    ExpectChangesListed(after, before, old, *part);
    ExpectChangesReadAsWhole(after, before, prior, *part, part->tables, threads);
    ExpectChangesReadAsWhole(after, before, every, *whole, whole->tables, threads);
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
      same(WithUplinksSwapped(before_), before_, old_, prior_, at + " two uplinks swapped");
      {
        // Every uplink of one aggregation switch cut at once: its routes out of the pod, and
        // the cores' into it, have no up*/down* way left and turn at a hub, switch LIDs too.
        Fabric after = before_;
        const NodeId spine = before_.port(Uplink(before_, 1)).node;
        const auto rank = LeafDistanceRanks(before_);
        for (uint32_t p = 1; p <= before_.node(spine).num_ports; ++p) {
          const PortId id = before_.port_id(spine, PortNum(static_cast<uint8_t>(p)));
          const Port& port = before_.port(id);
          if (port.connected() && rank[before_.port(port.peer).node] > rank[spine])
            after.Disconnect(id);
        }
        same(after, before_, old_, prior_, at + " every uplink of a spine cut");
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

// Re-routed tables broken at switches the re-route lists as changed (what a wrong re-route
// would hand over): verification reading only what the changes reach reports each break as
// reading every switch does (holes, a wrong port, port 0, a forwarding loop, a port out of
// range), and the renewed proof finds the same turns (a hop up after a hop down) or refuses
// alike.
TEST_F(UpDownProofTest, BreaksWhereTheChangesAreAreFoundAsByTheWholeWalk) {
  size_t climbed = 0;
  for (int k : {8, 16}) {
    Build(k);
    std::vector<std::pair<std::string, Fabric>> faults;
    for (uint32_t tier : {0u, 1u}) {
      Fabric after = before_;
      after.Disconnect(Uplink(after, tier));
      faults.emplace_back("cut above tier " + std::to_string(tier), std::move(after));
    }
    faults.emplace_back("dead switch of tier 1", WithoutFirst(before_, 1));
    faults.emplace_back("two uplinks swapped", WithUplinksSwapped(before_));
    for (const auto& [what, after] : faults) {
      SCOPED_TRACE("k=" + std::to_string(k) + " " + what);
      const LidMap lids(after);
      auto r = RerouteAround(after, lids, before_, old_, {}, false, &prior_);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ExpectChangesReadAsWhole(after, before_, prior_, *r, r->tables, 1);
      const auto tier = LeafDistanceRanks(after);
      for (int kind = 0; kind < 6; ++kind) {
        SCOPED_TRACE("break " + std::to_string(kind));
        RoutingTables broken = r->tables;
        size_t breaks = 0;
        // Every 7th examined LID with a listed switch, broken at its first listed switch.
        for (size_t i = 0; kind < 5 && i < r->examined.size(); i += 7) {
          const auto& c = r->changes;
          if (!c.known[i] || c.begin[i] == c.begin[i + 1]) continue;
          const NodeId n = c.nodes[c.begin[i]];
          std::vector<uint8_t>& lft = broken.switches[broken.switch_index[n]].lft;
          const uint32_t lid = r->examined[i];
          const Node& node = after.node(n);
          // A cabled switch port other than the current one, for a wrong hop or a loop.
          uint8_t other = 0;
          for (uint32_t p = 1; p <= node.num_ports && !other; ++p) {
            const Port& port = after.port(node.first_port + p);
            if (port.connected() && p != lft[lid] &&
                after.node(after.port(port.peer).node).is_switch())
              other = static_cast<uint8_t>(p);
          }
          if (kind >= 3 && !other) continue;
          if (kind == 0) lft[lid] = kDropPort;
          if (kind == 1) lft[lid] = 0;
          if (kind == 2) lft[lid] = static_cast<uint8_t>(node.num_ports + 1);
          if (kind == 3) lft[lid] = other;
          if (kind == 4) {
            // n and that neighbour forward to each other: a two-switch loop.
            const Port& port = after.port(node.first_port + other);
            const NodeId m = after.port(port.peer).node;
            broken.switches[broken.switch_index[m]].lft[lid] = after.port(port.peer).num.value();
            lft[lid] = other;
          }
          ++breaks;
        }
        // 5: the owner's own switch turned up where a switch above it that the change left
        // alone leads down into it (a turn that only reading above a changed switch finds).
        for (size_t i = 0; kind == 5 && i < r->examined.size(); i += 3) {
          const auto& c = r->changes;
          const uint32_t lid = r->examined[i];
          const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
          if (!c.known[i] || owner == kNoPort) continue;
          const Port& o = after.port(owner);
          if (after.node(o.node).is_switch() || !o.connected()) continue;
          const NodeId y = after.port(o.peer).node;
          auto listed_at = [&](NodeId n) {
            return std::binary_search(c.nodes.begin() + c.begin[i],
                                      c.nodes.begin() + c.begin[i + 1], n);
          };
          if (listed_at(y)) continue;
          const Node& node = after.node(y);
          uint8_t fed = 0, climb = 0;  // a port from a feeding switch, another port up
          for (uint32_t p = 1; p <= node.num_ports; ++p) {
            const Port& port = after.port(node.first_port + p);
            if (!port.connected()) continue;
            const NodeId x = after.port(port.peer).node;
            if (!after.node(x).is_switch() || tier[x] <= tier[y]) continue;
            const auto& xl = broken.switches[broken.switch_index[x]].lft;
            if (!fed && !listed_at(x) && xl[lid] == after.port(port.peer).num.value())
              fed = static_cast<uint8_t>(p);
            else if (!climb) climb = static_cast<uint8_t>(p);
          }
          if (fed && climb) {
            broken.switches[broken.switch_index[y]].lft[lid] = climb;
            ++breaks;
          }
        }
        if (kind == 5) {
          climbed += breaks;
          if (breaks == 0) continue;
        }
        ASSERT_GT(breaks, 0u);
        // What the breaks changed is listed too (a loop's second switch among it), as a
        // re-route lists what it changed.
        Rerouted listed = *r;
        {
          listed.changes.nodes.clear();
          listed.changes.begin.assign(1, 0);
          for (size_t i = 0; i < r->examined.size(); ++i) {
            for (const SwitchTable& st : broken.switches) {
              const SwitchTable* was = r->tables.table(st.node);
              const uint32_t lid = r->examined[i];
              const auto& c = r->changes;
              const bool had = std::binary_search(c.nodes.begin() + c.begin[i],
                                                  c.nodes.begin() + c.begin[i + 1], st.node);
              if (had || st.lft[lid] != was->lft[lid]) listed.changes.nodes.push_back(st.node);
            }
            listed.changes.begin.push_back(static_cast<uint32_t>(listed.changes.nodes.size()));
          }
        }
        const VerifyReport v = VerifyTables(after, lids, broken, 100, 1, &r->examined);
        if (kind != 3) {
          EXPECT_FALSE(v.ok);
        }
        ExpectChangesReadAsWhole(after, before_, prior_, listed, broken, 1);
      }
    }
  }
  EXPECT_GT(climbed, 0u);
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
