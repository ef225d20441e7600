// The QoS stage alone (sm/sweep/qos_stage.h) on the strict simulator: the finish waits for
// the SL2VL and VLArb reads and is entered again when they are in, with every node's tables
// held; a switch that reports ends the wait at once; with qos FALSE the wait is bounded, and
// the records still arrive after it.
#include "sm/sweep/qos_stage.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sm/testing/port_stage_bed.h"

namespace ibsm::sm {
namespace {

struct QosStageBed : testutil::PortStageBed {
  QosStageBed() {
    model = std::make_shared<const DiscoveryResult>(d);
    sweep.stats.number = 1;
  }
  // Runs the io loop until nothing is left.
  void Drain() {
    io.restart();
    io.run();
  }

  std::shared_ptr<const DiscoveryResult> model;
  SweepContext sweep;
  bool sweeping = true;
  size_t reported = 0;  // switches that reported a change
  int finishes = 0, publishes = 0, republishes = 0;
  std::vector<std::string> stages;
  QosStage qos{io, pipeline, options, counters, sweep,
               {[this] { return model; }, [](Guid) { return std::optional<uint16_t>(); },
                [] { return true; }, [this] { return sweeping; }, [this] { return reported; },
                [] { return true; }, [this] { ++publishes; }, [this] { ++republishes; },
                [this] { ++finishes; },
                [this](std::string_view id, std::string m) { Note(id, m); },
                [this](std::string_view name) { stages.emplace_back(name); },
                [] { return false; }}};
};

TEST(QosStageTest, TheFinishWaitsForTheReadsAndIsEnteredAgainWhenTheyAreIn) {
  QosStageBed b;
  b.qos.StartReads();
  ASSERT_TRUE(b.qos.reads_running());
  EXPECT_TRUE(b.qos.HoldsFinish());
  EXPECT_EQ(b.publishes, 1);  // qos FALSE: the SA serves the sweep's fabric while it waits
  ASSERT_EQ(b.stages.size(), 1u);
  EXPECT_EQ(b.stages[0], "waiting for SL2VL and VLArb reads");
  b.Drain();
  EXPECT_EQ(b.finishes, 1);
  EXPECT_FALSE(b.qos.HoldsFinish());
  EXPECT_EQ(b.qos.tables()->size(), b.d.fabric.node_count());
  EXPECT_EQ(b.counters.qos_waits_timed_out, 0u);
  // Every node is read: the next sweep reads nothing and does not wait.
  b.qos.StartReads();
  EXPECT_FALSE(b.qos.reads_running());
  EXPECT_FALSE(b.qos.HoldsFinish());
}

TEST(QosStageTest, ASwitchThatReportsEndsTheWaitAndTheReadsGoOn) {
  QosStageBed b;
  b.qos.StartReads();
  EXPECT_TRUE(b.qos.HoldsFinish());
  b.reported = 1;
  EXPECT_TRUE(b.qos.StopWaiting());
  EXPECT_FALSE(b.qos.StopWaiting());  // once
  // The finish, entered again by the SM, goes on and counts the wait cut short.
  EXPECT_FALSE(b.qos.HoldsFinish());
  EXPECT_EQ(b.counters.qos_waits_cut_short, 1u);
  EXPECT_TRUE(b.qos.reads_running());
  b.sweeping = false;  // the sweep ended; the records reach the SA when the reads are in
  b.Drain();
  EXPECT_EQ(b.finishes, 0);
  EXPECT_EQ(b.republishes, 1);
  EXPECT_EQ(b.qos.tables()->size(), b.d.fabric.node_count());
}

TEST(QosStageTest, WithQosFalseTheWaitIsBoundedAndTheRecordsFollow) {
  QosStageBed b;
  b.options.optional_reads_wait = std::chrono::milliseconds(0);
  b.qos.StartReads();
  EXPECT_TRUE(b.qos.HoldsFinish());
  b.io.restart();
  while (b.finishes == 0 && b.io.run_one() > 0) {
  }  // the wait's timer ends it, long before the reads' last answer
  EXPECT_EQ(b.finishes, 1);
  EXPECT_EQ(b.counters.qos_waits_timed_out, 1u);
  EXPECT_TRUE(b.qos.reads_running());
  EXPECT_FALSE(b.qos.HoldsFinish());  // the finish goes on without them
  b.sweeping = false;
  b.Drain();
  EXPECT_EQ(b.finishes, 1);  // not entered again by the reads
  EXPECT_EQ(b.republishes, 1);
  EXPECT_EQ(b.qos.tables()->size(), b.d.fabric.node_count());
}

}  // namespace
}  // namespace ibsm::sm
