#include "sm/sweep/trap_tracker.h"

#include <gtest/gtest.h>

#include <array>

namespace ibsm::sm {
namespace {

using namespace std::chrono_literals;
using TrackerClock = std::chrono::steady_clock;  // not "Clock": unity builds share the namespace

TEST(TrapTrackerTest, TheEleventhRepeatWithinTheWindowIsSuppressedUntilATrapPauses) {
  TrapTracker t;
  const TrapKey k{7, 0, 128, 1};
  TrackerClock::time_point now{};
  for (int i = 1; i <= 10; ++i) {
    TrapVerdict v = t.Record(k, false, now += 100ms);
    EXPECT_FALSE(v.suppressed) << i;
    EXPECT_EQ(v.consecutive, static_cast<uint32_t>(i));
  }
  TrapVerdict v = t.Record(k, false, now += 100ms);
  EXPECT_TRUE(v.suppressed);
  EXPECT_TRUE(v.first_suppressed);
  EXPECT_FALSE(t.Record(k, false, now += 4s).first_suppressed);  // still the same run
  EXPECT_TRUE(t.Record(k, false, now += 4s).suppressed);
  // Another switch's trap is not held back by this one.
  EXPECT_FALSE(t.Record({8, 0, 128, 1}, false, now).suppressed);
  // Five seconds of silence: a new run.
  v = t.Record(k, false, now += 5s);
  EXPECT_FALSE(v.suppressed);
  EXPECT_EQ(v.consecutive, 1u);
}

TEST(TrapTrackerTest, APortHealthTrapDisablesItsPortAtTheThresholdAndWaitsAMinute) {
  TrapTracker t;
  std::array<uint8_t, 54> details{};
  details[2] = 0x00;
  details[3] = 0x2a;  // LID 42
  details[5] = 7;     // port 7
  const TrapKey k = TrapTracker::KeyOf(42, 129, details);
  EXPECT_EQ(k.lid, 42);
  EXPECT_EQ(k.port, 7);
  TrackerClock::time_point now{};
  int disables = 0;
  for (int i = 1; i <= 300; ++i) disables += t.Record(k, true, now += 10ms).disable_port;
  EXPECT_EQ(disables, 1);
  // Suppressed port-health runs wait 60 s, not 5 s.
  EXPECT_TRUE(t.Record(k, true, now += 30s).suppressed);
  EXPECT_FALSE(t.Record(k, true, now += 61s).suppressed);
}

// The payload is the sender's to choose: a sender that makes every trap different still
// counts as one source, and is silenced once it passes the per-source threshold.
TEST(TrapTrackerTest, ASenderVaryingItsDetailsIsStillSilencedAsOneSource) {
  TrapTracker t;
  TrackerClock::time_point now{};
  std::array<uint8_t, 54> details{};
  size_t suppressed = 0;
  for (int i = 0; i < 100; ++i) {
    details[10] = static_cast<uint8_t>(i);  // a different trap each time
    const TrapKey k = TrapTracker::KeyOf(77, 128, details);
    EXPECT_EQ(k.lid, 77) << "keyed by the source LID";
    suppressed += t.Record(k, false, now += 10ms).suppressed;
  }
  EXPECT_EQ(suppressed, 100u - TrapTrackerOptions{}.source_suppress_after);
  // Another source, or another trap of this one, is not silenced by it.
  EXPECT_FALSE(t.Record(TrapTracker::KeyOf(78, 128, details), false, now += 10ms).suppressed);
  EXPECT_FALSE(t.Record(TrapTracker::KeyOf(77, 144, details), false, now += 10ms).suppressed);
}

TEST(TrapTrackerTest, MemoryStaysBoundedUnderTrapsFromManyIssuers) {
  TrapTrackerOptions o;
  o.max_keys = 64;
  TrapTracker t(o);
  TrackerClock::time_point now{};
  for (uint16_t lid = 1; lid < 5000; ++lid) t.Record({lid, 0, 128, 0}, false, now += 1ms);
  EXPECT_LE(t.size(), 64u);
  EXPECT_GE(t.evicted(), 5000u - 1 - 64);
}

}  // namespace
}  // namespace ibsm::sm
