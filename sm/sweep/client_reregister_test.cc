// The ClientReregister rules alone (sm/sweep/client_reregister.h): the first sweep of a
// mastership tells every port unless this SM holds all registrations and the port names it
// master; later sweeps tell only ports no earlier sweep found; nobody is told twice before
// the sweep closes.
#include "sm/sweep/client_reregister.h"

#include <gtest/gtest.h>

namespace ibsm::sm {
namespace {

constexpr Guid kPortA{0x10}, kPortB{0x20};
constexpr uint16_t kOurLid = 1;

TEST(ClientReregisterRulesTest, AFreshStartTellsEveryPortOnce) {
  ClientReregister r;
  EXPECT_TRUE(r.ShouldTell(kPortA, /*first_sweep=*/true, /*took_over=*/false, kOurLid, kOurLid));
  r.NoteTold(kPortA);
  // The repair that takes the sweep over (or the heavy sweep after a fallback) does not tell
  // it again.
  EXPECT_FALSE(r.ShouldTell(kPortA, true, false, kOurLid, kOurLid));
  EXPECT_TRUE(r.ShouldTell(kPortB, true, false, kOurLid, kOurLid));
  EXPECT_EQ(r.told(), 1u);
  r.SweepClosed({kPortA, kPortB}, /*found=*/true, /*up_as_master=*/true);
  EXPECT_EQ(r.told(), 0u);
  EXPECT_TRUE(r.state_complete());  // the clients told now register here
  // Later sweeps: only ports no earlier sweep found.
  EXPECT_FALSE(r.ShouldTell(kPortA, false, false, kOurLid, kOurLid));
  EXPECT_TRUE(r.ShouldTell(Guid{0x30}, false, false, kOurLid, kOurLid));
}

TEST(ClientReregisterRulesTest, ARestartWithTheWholeStateTellsOnlyPortsNamingAnotherMaster) {
  ClientReregister r;
  r.set_state_complete(true);
  EXPECT_FALSE(r.ShouldTell(kPortA, true, false, kOurLid, kOurLid));
  EXPECT_TRUE(r.ShouldTell(kPortB, true, false, /*named_master_lid=*/7, kOurLid));
  // A takeover: another master served meanwhile, whatever the port names.
  EXPECT_TRUE(r.ShouldTell(kPortA, true, /*took_over=*/true, kOurLid, kOurLid));
  r.LeftMaster();
  EXPECT_FALSE(r.state_complete());
  EXPECT_TRUE(r.ShouldTell(kPortA, true, false, kOurLid, kOurLid));
}

TEST(ClientReregisterRulesTest, ASweepThatDoesNotEndUpKeepsWhatItFoundButNotTheStateComplete) {
  ClientReregister r;
  r.NoteTold(kPortA);
  r.SweepClosed({kPortA}, true, /*up_as_master=*/false);
  EXPECT_FALSE(r.state_complete());
  // The next first sweep tells again (as OpenSM does after a failed first sweep).
  EXPECT_TRUE(r.ShouldTell(kPortA, true, false, kOurLid, kOurLid));
  // A sweep that found nothing (no SM port) keeps the ports known before.
  r.SweepClosed({}, /*found=*/false, false);
  EXPECT_EQ(r.known().size(), 1u);
  EXPECT_FALSE(r.ShouldTell(kPortA, false, false, kOurLid, kOurLid));
  // A new mastership forgets who was told.
  r.NoteTold(kPortB);
  r.BeginMastership();
  EXPECT_TRUE(r.ShouldTell(kPortB, false, false, kOurLid, kOurLid));
}

}  // namespace
}  // namespace ibsm::sm
