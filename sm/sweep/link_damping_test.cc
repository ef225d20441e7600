#include "sm/sweep/link_damping.h"

#include <gtest/gtest.h>

namespace ibsm::sm {
namespace {

using namespace std::chrono_literals;
using TP = LinkDamper::TimePoint;

constexpr LinkDamper::End kA{Guid{0x10}, 3}, kB{Guid{0x20}, 7}, kC{Guid{0x30}, 1};

TEST(LinkDamperTest, ThresholdDownsWithinTheWindowDampBothEnds) {
  LinkDamper d({.threshold = 3, .window = 10s, .hold = 60s});
  const TP t0{};
  EXPECT_FALSE(d.NoteDown(kA, kB, t0));
  EXPECT_FALSE(d.NoteDown(kA, kB, t0 + 1s));
  EXPECT_FALSE(d.Damped(kA, kB));
  EXPECT_TRUE(d.NoteDown(kA, kB, t0 + 2s));
  EXPECT_TRUE(d.Damped(kA));
  EXPECT_TRUE(d.Damped(kB));
  EXPECT_TRUE(d.Damped(kB, kC)) << "a cable is damped when either end is";
  EXPECT_FALSE(d.Damped(kC));
  EXPECT_FALSE(d.NoteDown(kA, kB, t0 + 3s)) << "already damped: not damped again";
  EXPECT_EQ(d.damped_total(), 1u);
}

TEST(LinkDamperTest, DownsSpreadWiderThanTheWindowNeverDamp) {
  LinkDamper d({.threshold = 3, .window = 10s, .hold = 60s});
  const TP t0{};
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(d.NoteDown(kA, kB, t0 + i * 6s));
  EXPECT_EQ(d.damped(), 0u);
}

TEST(LinkDamperTest, TheHoldRestartsWithEveryDownAndReleasesAfterQuiet) {
  LinkDamper d({.threshold = 2, .window = 10s, .hold = 30s});
  const TP t0{};
  d.NoteDown(kA, kB, t0);
  ASSERT_TRUE(d.NoteDown(kA, kB, t0 + 1s));
  EXPECT_EQ(d.NextRelease(), t0 + 31s);
  d.NoteDown(kA, kB, t0 + 20s);  // still flapping while damped
  EXPECT_EQ(d.NextRelease(), t0 + 50s);
  EXPECT_TRUE(d.Release(t0 + 49s).empty());
  auto out = d.Release(t0 + 50s);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_FALSE(d.Damped(kA, kB));
  EXPECT_FALSE(d.NextRelease());
  // Counting starts afresh after a release: one more down does not damp again.
  EXPECT_FALSE(d.NoteDown(kA, kB, t0 + 51s));
}

TEST(LinkDamperTest, AStateChangeOfADampedEndRestartsItsHoldAndASteadyStateDoesNot) {
  LinkDamper d({.threshold = 1, .window = 10s, .hold = 30s});
  const TP t0{};
  ASSERT_TRUE(d.NoteDown(kA, kB, t0));
  d.NoteState(kA, /*up=*/true, t0 + 10s);  // came up: still flapping
  EXPECT_EQ(d.NextRelease(), t0 + 40s);
  d.NoteState(kA, /*up=*/true, t0 + 20s);  // read up again: no change
  EXPECT_EQ(d.NextRelease(), t0 + 40s);
  d.NoteState(kC, /*up=*/false, t0 + 20s);  // not damped: nothing
  EXPECT_FALSE(d.Damped(kC));
}

TEST(LinkDamperTest, ATouchOfItsNodeRestartsTheHoldOfItsDampedCables) {
  LinkDamper d({.threshold = 1, .window = 10s, .hold = 30s});
  const TP t0{};
  ASSERT_TRUE(d.NoteDown(kA, kB, t0));
  d.Touch(kA.first, t0 + 5s);
  d.Touch(kC.first, t0 + 25s);  // another node: nothing
  EXPECT_TRUE(d.Release(t0 + 31s).empty()) << "both ends of the cable are held as long";
  EXPECT_TRUE(d.Damped(kA));
  EXPECT_TRUE(d.Damped(kB));
  EXPECT_EQ(d.Release(t0 + 35s).size(), 2u);
}

TEST(LinkDamperTest, ThresholdZeroIsOff) {
  LinkDamper d({.threshold = 0, .window = 10s, .hold = 30s});
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(d.NoteDown(kA, kB, TP{} + i * 1ms));
  EXPECT_EQ(d.damped(), 0u);
}

}  // namespace
}  // namespace ibsm::sm
