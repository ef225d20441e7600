#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "routing/routing_engine.h"
#include "routing/routing_test_util.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

class RouteChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = FatTree2(4);
    ASSERT_TRUE(f.ok());
    fabric_ = std::move(f).value();
    testing::AssignLids(fabric_);
  }
  Fabric fabric_;
};

TEST(EngineRegistryTest, MakesMinhopByNameAndNothingForAnUnknownName) {
  auto e = MakeEngine("minhop");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->name(), "minhop");
  EXPECT_EQ(MakeEngine("bogus"), nullptr);
  EXPECT_FALSE(EngineRegistry().empty());
}

TEST_F(RouteChainTest, AnUnknownEngineIsRejectedByNameWithTheKnownEngines) {
  const LidMap lids(fabric_);
  auto r = RouteChain("bogus", fabric_, lids, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "unknown routing engine 'bogus' (known: minhop, ftree, updn, dnup, ar_updn, ar_ftree; and no_fallback)");
  EXPECT_FALSE(RouteChain("minhop, updn-ish", fabric_, lids, {}).ok());
}

TEST_F(RouteChainTest, MinhopWithNoFallbackRoutesWithMinhop) {
  const LidMap lids(fabric_);
  auto r = RouteChain("minhop,no_fallback", fabric_, lids, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tables.engine, "minhop");
  EXPECT_TRUE(r->declined.empty());
  EXPECT_TRUE(VerifyTables(fabric_, lids, r->tables).ok);
}

TEST_F(RouteChainTest, ToleratesWhitespaceAndEmptyItems) {
  const LidMap lids(fabric_);
  auto r = RouteChain(" minhop ,, no_fallback\t", fabric_, lids, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tables.engine, "minhop");
}

TEST_F(RouteChainTest, AnEmptyChainMeansMinhop) {
  const LidMap lids(fabric_);
  auto r = RouteChain("", fabric_, lids, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tables.engine, "minhop");
  EXPECT_EQ(r->tables.switches.size(), fabric_.switch_count());
}

// "bogus,no_fallback" reaches RouteChain as "no_fallback" once ibsmd dropped the name it does
// not know: the operator forbade the fallback, so nothing routes (not minhop behind their back).
TEST_F(RouteChainTest, NoFallbackWithoutAnEngineRefusesToRoute) {
  const LidMap lids(fabric_);
  auto r = RouteChain("no_fallback", fabric_, lids, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "routing_engine names no engine ibsm knows and no_fallback forbids the minhop "
            "fallback: nothing routed");
}

}  // namespace
}  // namespace ibsm::routing
