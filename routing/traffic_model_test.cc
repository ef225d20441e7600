#include "routing/traffic_model.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "fabric/generators.h"
#include "routing/ar_engine.h"
#include "routing/routing_test_util.h"

namespace ibsm::routing {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr uint32_t kPermutations = 100;  // ASan+UBSan run ~10x slower; release runs 1,000
#else
constexpr uint32_t kPermutations = 1000;
#endif

struct Programmed {
  Fabric fabric;
  std::unique_ptr<LidMap> lids;
  RoutingTables tables;
  ArTables ar;
};

Programmed MakeProgrammed(Fabric f, ArLidMode mode) {
  Programmed s{std::move(f), nullptr, {}, {}};
  testing::AssignLids(s.fabric);
  s.lids = std::make_unique<LidMap>(s.fabric);
  auto t = MakeArFTree()->Route(s.fabric, *s.lids, {});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  s.tables = std::move(*t);
  ArOptions o;
  o.mode = mode;
  auto ar = BuildArTables(s.fabric, *s.lids, s.tables, o);
  EXPECT_TRUE(ar.ok());
  s.ar = std::move(*ar);
  return s;
}

TEST(TrafficModelTest, WithoutArTablesBothFiguresAreTheStaticOnes) {
  Programmed s = MakeProgrammed(*FatTree2(8), ArLidMode::kFree);
  TrafficOptions o;
  o.pattern = TrafficPattern::kShift;
  o.count = 31;
  TrafficReport r = RunTraffic(s.fabric, *s.lids, s.tables, nullptr, o);
  EXPECT_EQ(r.hosts, 32u);
  EXPECT_EQ(r.matrices, 31u);
  EXPECT_EQ(r.static_routes.max_link_load, r.ar.max_link_load);
  EXPECT_EQ(r.static_routes.ebb, r.ar.ebb);
  EXPECT_EQ(r.static_routes.flows, 31u * 32u);
  EXPECT_EQ(r.static_routes.unrouted, 0u);
  // ftree routes every shift of a full fat tree without sharing a link.
  EXPECT_DOUBLE_EQ(r.static_routes.max_link_load, 1.0);
  EXPECT_DOUBLE_EQ(r.static_routes.ebb, 1.0);
}

TEST(TrafficModelTest, ASetCancelFlagStopsBeforeTheNextMatrixAndSaysSo) {
  Programmed s = MakeProgrammed(*FatTree2(8), ArLidMode::kFree);
  std::atomic<bool> cancel{true};
  TrafficOptions o;
  o.pattern = TrafficPattern::kRandom;
  o.count = 100000;
  o.cancel = &cancel;
  TrafficReport r = RunTraffic(s.fabric, *s.lids, s.tables, &s.ar, o);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.static_routes.flows, 0u) << "no matrix was run";
  EXPECT_EQ(r.ar.ebb, 0.0);
  cancel = false;
  o.count = 3;
  r = RunTraffic(s.fabric, *s.lids, s.tables, &s.ar, o);
  EXPECT_FALSE(r.cancelled);
  EXPECT_GT(r.static_routes.flows, 0u);
}

TEST(TrafficModelTest, FreeArSpreadsAllToAllEvenlyOverAFullFatTree) {
  Programmed s = MakeProgrammed(*FatTree2(8), ArLidMode::kFree);
  TrafficOptions o;
  o.pattern = TrafficPattern::kAllToAll;
  TrafficReport r = RunTraffic(s.fabric, *s.lids, s.tables, &s.ar, o);
  EXPECT_EQ(r.matrices, 1u);
  EXPECT_EQ(r.ar.flows, 32u * 31u);
  // Every host sends and receives one unit in total: no link needs more than its capacity.
  EXPECT_LE(r.ar.max_link_load, 1.0 + 1e-9);
  EXPECT_NEAR(r.ar.ebb, 1.0, 1e-9);
}

TEST(TrafficModelTest, UnknownPatternIsRejected) {
  EXPECT_FALSE(ParseTrafficPattern("ring").ok());
  EXPECT_EQ(*ParseTrafficPattern("alltoall"), TrafficPattern::kAllToAll);
}

// The figure: random permutations on a 3-tier k=16 fat tree (1,024 hosts, 320
// switches). Static deterministic routing is known to give far less than full bandwidth on
// random permutations; AR (free) must lower the worst link load and keep EBB >= 0.9.
TEST(TrafficModelTest, ArBeatsStaticFtreeOnRandomPermutationsOfAThreeTierK16FatTree) {
  TrafficOptions o;
  o.pattern = TrafficPattern::kRandom;
  o.count = kPermutations;
  o.seed = 7;
  Programmed free_ar = MakeProgrammed(*FatTree3(16), ArLidMode::kFree);
  TrafficReport r = RunTraffic(free_ar.fabric, *free_ar.lids, free_ar.tables, &free_ar.ar, o);
  ASSERT_EQ(r.hosts, 1024u);
  EXPECT_EQ(r.static_routes.unrouted, 0u);
  EXPECT_EQ(r.ar.unrouted, 0u);
  std::printf("traffic 3-tier k=16, %u random permutations (seed 7): static ftree max link "
              "load %.3f, EBB %.3f; AR free max link load %.3f, EBB %.3f\n",
              r.matrices, r.static_routes.max_link_load, r.static_routes.ebb,
              r.ar.max_link_load, r.ar.ebb);
  EXPECT_LT(r.ar.max_link_load, r.static_routes.max_link_load);
  EXPECT_GE(r.ar.ebb, 0.9);
  EXPECT_GT(r.ar.ebb, r.static_routes.ebb);

  o.count = kPermutations / 10;
  Programmed bounded = MakeProgrammed(*FatTree3(16), ArLidMode::kBounded);
  TrafficReport b = RunTraffic(bounded.fabric, *bounded.lids, bounded.tables, &bounded.ar, o);
  std::printf("traffic 3-tier k=16, %u random permutations (seed 7): AR bounded max link load "
              "%.3f, EBB %.3f (static %.3f, %.3f)\n",
              b.matrices, b.ar.max_link_load, b.ar.ebb, b.static_routes.max_link_load,
              b.static_routes.ebb);
  EXPECT_LE(b.ar.max_link_load, b.static_routes.max_link_load);
}

}  // namespace
}  // namespace ibsm::routing
