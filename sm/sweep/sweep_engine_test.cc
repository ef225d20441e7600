#include "sm/sweep/sweep_engine.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ibsm::sm {
namespace {

using std::chrono::milliseconds;

// Four rows as the SM's table has them: row 0 run by whoever begins the sweep, two stages,
// and the finish. Each stage before the finish takes 2 ms of the manual clock; each records
// that it ran.
class SweepEngineTest : public ::testing::Test {
 protected:
  SweepEngineTest()
      : engine_(clock_, {{"discovery", nullptr},
                         {"routing", [this] { Ran("routing"); }},
                         {"lft blocks", [this] { Ran("lft blocks"); }},
                         {"", [this] { Ran("finish"); }}}) {}
  void Ran(const std::string& name) {
    ran_.push_back(name);
    if (name != "finish") clock_.Advance(took_);
    if (name == "routing" && skip_lfts_) {
      engine_.JumpTo(3);
    } else if (name != "finish") {
      engine_.Next();
    }
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const auto& [name, took] : engine_.context().stats.stages) out.push_back(name);
    return out;
  }

  ManualClock clock_;
  SweepEngine engine_;
  std::vector<std::string> ran_;
  const milliseconds took_{2};
  bool skip_lfts_ = false;
};

TEST_F(SweepEngineTest, RunsTheRowsInOrderAndTimesEachStage) {
  SweepContext& c = engine_.Begin(7, /*repair=*/false);
  EXPECT_EQ(c.stats.number, 7u);
  EXPECT_FALSE(c.stats.repair);
  clock_.Advance(milliseconds(5));  // discovery
  engine_.Next();
  EXPECT_EQ(ran_, (std::vector<std::string>{"routing", "lft blocks", "finish"}));
  EXPECT_EQ(engine_.row(), engine_.finish_row());
  // The part before the finish stays open until the finish closes it, and its own parts.
  EXPECT_EQ(Names(), (std::vector<std::string>{"discovery", "routing"}));
  engine_.CloseOpenStage();
  engine_.OpenStage("QoS Sets");
  clock_.Advance(milliseconds(3));
  engine_.CloseOpenStage();
  clock_.Advance(milliseconds(1));
  engine_.EndStage("publish");
  EXPECT_EQ(Names(), (std::vector<std::string>{"discovery", "routing", "lft blocks",
                                               "QoS Sets", "publish"}));
  EXPECT_EQ(engine_.Summary(),
            "discovery 5.0 ms, routing 2.0 ms, lft blocks 2.0 ms, QoS Sets 3.0 ms, "
            "publish 1.0 ms");
}

TEST_F(SweepEngineTest, AJumpSkipsRowsAndARepairNamesRowZeroItsReReads) {
  skip_lfts_ = true;
  engine_.Begin(8, /*repair=*/true, "re-reads");
  engine_.context().touched.insert(Guid{0x42});
  engine_.Next();
  EXPECT_EQ(ran_, (std::vector<std::string>{"routing", "finish"}));
  engine_.CloseOpenStage();
  EXPECT_EQ(Names(), (std::vector<std::string>{"re-reads", "routing"}));
  EXPECT_TRUE(engine_.context().stats.repair);
  EXPECT_EQ(engine_.context().touched.size(), 1u);
}

TEST_F(SweepEngineTest, EachSweepBeginsWithAFreshContext) {
  engine_.Begin(1, /*repair=*/true, "re-reads");
  engine_.context().touched.insert(Guid{0x42});
  engine_.context().renumbered.ports = {0, 1};
  engine_.context().issues = 3;
  engine_.context().stats.lft_blocks_sent = 9;
  engine_.Next();
  engine_.CloseOpenStage();
  SweepContext& c = engine_.Begin(2, /*repair=*/false);
  EXPECT_EQ(&c, &engine_.context());  // the same object: references to it stay good
  EXPECT_EQ(c.stats.number, 2u);
  EXPECT_TRUE(c.touched.empty());
  EXPECT_TRUE(c.renumbered.ports.empty());
  EXPECT_EQ(c.issues, 0u);
  EXPECT_EQ(c.stats.lft_blocks_sent, 0u);
  EXPECT_TRUE(c.stats.stages.empty());
  EXPECT_EQ(engine_.row(), 0u);
  engine_.Next();
  engine_.CloseOpenStage();
  EXPECT_EQ(Names(), (std::vector<std::string>{"discovery", "routing", "lft blocks"}));
}

// A repair that handed over: its counts add to the next one's, which keeps its own number,
// model figures and verdict, starts when the first began, and lists the first's stages first.
TEST(AddHandedOverTest, SumsTheCountsAndKeepsTheLaterSweepsOwnFigures) {
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::seconds(5);
  SweepStats first;
  first.number = 2;
  first.repair = true;
  first.in_place_of_heavy = true;
  first.started = t0;
  first.repair_links_lost = 1;
  first.lft_blocks_sent = 40;
  first.smps = 60;
  first.ports_activated = 1;
  first.links = 99;
  first.stages = {{"re-reads", milliseconds(2)}, {"lft blocks", milliseconds(3)}};
  SweepStats next;
  next.number = 3;
  next.repair = true;
  next.started = t0 + milliseconds(10);
  next.repair_links_lost = 1;
  next.repair_links_up = 1;
  next.lft_blocks_sent = 7;
  next.smps = 20;
  next.links = 98;
  next.subnet_up = true;
  next.stages = {{"re-reads", milliseconds(1)}};
  AddHandedOver(next, first);
  EXPECT_EQ(next.number, 3u);
  EXPECT_TRUE(next.in_place_of_heavy);
  EXPECT_EQ(next.started, t0);
  EXPECT_EQ(next.repair_links_lost, 2u);
  EXPECT_EQ(next.repair_links_up, 1u);
  EXPECT_EQ(next.lft_blocks_sent, 47u);
  EXPECT_EQ(next.smps, 80u);
  EXPECT_EQ(next.ports_activated, 1u);
  EXPECT_EQ(next.links, 98u);
  EXPECT_TRUE(next.subnet_up);
  ASSERT_EQ(next.stages.size(), 3u);
  EXPECT_EQ(next.stages[0].first, "sweep 2 re-reads");
  EXPECT_EQ(next.stages[1].first, "sweep 2 lft blocks");
  EXPECT_EQ(next.stages[2].first, "re-reads");
}

}  // namespace
}  // namespace ibsm::sm
