#include "ha/sm_state_machine.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

namespace ibsm::ha {
namespace {

using namespace sm_action;
using S = SmState;
using E = SmEvent;

constexpr S kAllStates[] = {S::kNotActive, S::kDiscovering, S::kStandby, S::kMaster};

// Every legal transition, written out from IBA 14.4 / OpenSM's osm_sm_state_mgr.c; any pair
// not listed here must be refused.
const std::map<std::pair<S, E>, std::pair<S, uint32_t>>& Legal() {
  static const std::map<std::pair<S, E>, std::pair<S, uint32_t>> m = {
      {{S::kNotActive, E::kEnable}, {S::kDiscovering, kHeavySweep}},
      {{S::kNotActive, E::kStandby}, {S::kStandby, kStartPolling}},
      {{S::kDiscovering, E::kDiscoveryNoMaster}, {S::kMaster, kFirstMasterSweep}},
      {{S::kDiscovering, E::kDiscoveryFoundMaster}, {S::kStandby, kStartPolling | kFence}},
      {{S::kDiscovering, E::kHandover}, {S::kDiscovering, kHeavySweep}},
      {{S::kStandby, E::kHandover},
       {S::kMaster, kStopPolling | kSendAcknowledge | kFirstMasterSweep | kHeavySweep}},
      {{S::kStandby, E::kAcknowledge}, {S::kStandby, kNone}},
      {{S::kStandby, E::kDisable}, {S::kNotActive, kStopPolling | kFence}},
      {{S::kStandby, E::kDiscover}, {S::kDiscovering, kStopPolling | kHeavySweep}},
      {{S::kStandby, E::kPollingTimeout}, {S::kDiscovering, kStopPolling | kHeavySweep}},
      {{S::kMaster, E::kHandover}, {S::kMaster, kStopPolling | kFirstMasterSweep | kHeavySweep}},
      {{S::kMaster, E::kPollingTimeout}, {S::kMaster, kStopPolling | kHeavySweep}},
      {{S::kMaster, E::kHandoverSent}, {S::kStandby, kStartPolling | kFence}},
  };
  return m;
}

// Drives a fresh machine into `s` through legal events only.
SmStateMachine In(S s) {
  SmStateMachine m;
  if (s == S::kNotActive) return m;
  EXPECT_TRUE(m.Handle(E::kEnable).legal);
  if (s == S::kDiscovering) return m;
  if (s == S::kMaster) {
    EXPECT_TRUE(m.Handle(E::kDiscoveryNoMaster).legal);
  } else {
    EXPECT_TRUE(m.Handle(E::kDiscoveryFoundMaster).legal);
  }
  EXPECT_EQ(m.state(), s);
  return m;
}

TEST(SmStateMachineTest, StartsNotActive) { EXPECT_EQ(SmStateMachine().state(), S::kNotActive); }

TEST(SmStateMachineTest, EveryStateAndEventPairIsEitherTheListedTransitionOrRefused) {
  size_t legal = 0;
  for (S s : kAllStates) {
    for (size_t e = 0; e < static_cast<size_t>(E::kCount); ++e) {
      E ev = static_cast<E>(e);
      SmStateMachine m = In(s);
      SmTransition t = m.Handle(ev);
      auto it = Legal().find({s, ev});
      SCOPED_TRACE(std::string(SmStateName(s)) + " + " + std::string(SmEventName(ev)));
      if (it == Legal().end()) {
        EXPECT_FALSE(t.legal);
        EXPECT_EQ(t.actions, kNone);
        EXPECT_EQ(m.state(), s) << "a refused event changed the state";
      } else {
        ++legal;
        EXPECT_TRUE(t.legal);
        EXPECT_EQ(t.next, it->second.first);
        EXPECT_EQ(m.state(), it->second.first);
        EXPECT_EQ(t.actions, it->second.second);
      }
    }
  }
  EXPECT_EQ(legal, Legal().size());
}

TEST(SmStateMachineTest, SetRequestsAllowedInAStateAreAnsweredWithStatusZero) {
  struct Case {
    S state;
    uint32_t mod;
    S sender;
    S after;
  };
  const Case cases[] = {
      {S::kNotActive, mad::sminfo_mod::kStandby, S::kMaster, S::kStandby},
      {S::kDiscovering, mad::sminfo_mod::kHandover, S::kMaster, S::kDiscovering},
      {S::kStandby, mad::sminfo_mod::kHandover, S::kMaster, S::kMaster},
      {S::kStandby, mad::sminfo_mod::kAcknowledge, S::kStandby, S::kStandby},
      {S::kStandby, mad::sminfo_mod::kDisable, S::kMaster, S::kNotActive},
      {S::kStandby, mad::sminfo_mod::kDiscover, S::kMaster, S::kDiscovering},
      {S::kMaster, mad::sminfo_mod::kHandover, S::kMaster, S::kMaster},
  };
  for (const Case& c : cases) {
    SmStateMachine m = In(c.state);
    SmTransition t;
    EXPECT_EQ(m.HandleSet(c.mod, c.sender, &t), 0) << SmStateName(c.state) << " mod " << c.mod;
    EXPECT_TRUE(t.legal);
    EXPECT_EQ(m.state(), c.after);
  }
}

TEST(SmStateMachineTest, EverySetRequestTheTableRefusesGetsStatus7AndChangesNothing) {
  size_t refused = 0;
  for (S s : kAllStates) {
    for (uint32_t mod = 0; mod <= 7; ++mod) {
      for (S sender : kAllStates) {
        auto ev = EventForSetModifier(mod);
        bool allowed = ev && SetSenderStateFits(mod, sender) && Legal().count({s, *ev});
        if (allowed) continue;
        SmStateMachine m = In(s);
        SmTransition t;
        EXPECT_EQ(m.HandleSet(mod, sender, &t), kSmInfoStatusInvalidField)
            << SmStateName(s) << " mod " << mod << " from " << SmStateName(sender);
        EXPECT_FALSE(t.legal);
        EXPECT_EQ(m.state(), s);
        ++refused;
      }
    }
  }
  // 4 states x 8 modifiers x 4 sender states, minus the 7 allowed combinations.
  EXPECT_EQ(refused, 4u * 8u * 4u - 7u);
}

TEST(SmStateMachineTest, HandoverFromASenderThatIsNotMasterIsRefused) {
  SmStateMachine m = In(S::kStandby);
  EXPECT_EQ(m.HandleSet(mad::sminfo_mod::kHandover, S::kStandby), kSmInfoStatusInvalidField);
  EXPECT_EQ(m.state(), S::kStandby);
  // ACKNOWLEDGE comes from the SM that was STANDBY when it took over, never from a master.
  EXPECT_EQ(m.HandleSet(mad::sminfo_mod::kAcknowledge, S::kMaster), kSmInfoStatusInvalidField);
}

TEST(SmStateMachineTest, StandbyTakesOverWhenItsMasterStopsAnsweringAndFindsNoOther) {
  SmStateMachine m = In(S::kStandby);
  EXPECT_EQ(m.Handle(E::kPollingTimeout).next, S::kDiscovering);
  SmTransition t = m.Handle(E::kDiscoveryNoMaster);
  EXPECT_EQ(m.state(), S::kMaster);
  EXPECT_TRUE(t.actions & kFirstMasterSweep);
}

TEST(SmStateMachineTest, MasterThatHandsOverIsFencedAndPollsTheNewMaster) {
  SmStateMachine m = In(S::kMaster);
  SmTransition t = m.Handle(E::kHandoverSent);
  EXPECT_EQ(m.state(), S::kStandby);
  EXPECT_TRUE(t.actions & kFence);
  EXPECT_TRUE(t.actions & kStartPolling);
}

TEST(SmStateMachineTest, ElectionPrefersHigherPriorityThenLowerGuid) {
  EXPECT_TRUE(IsBetterSm(5, 0x200, 4, 0x100));
  EXPECT_FALSE(IsBetterSm(4, 0x100, 5, 0x200));
  EXPECT_TRUE(IsBetterSm(3, 0x100, 3, 0x200));
  EXPECT_FALSE(IsBetterSm(3, 0x200, 3, 0x100));
  EXPECT_FALSE(IsBetterSm(3, 0x100, 3, 0x100));  // oneself is not better than oneself
}

TEST(SmStateMachineTest, UnknownModifiersMapToNoEvent) {
  EXPECT_FALSE(EventForSetModifier(0).has_value());
  EXPECT_FALSE(EventForSetModifier(6).has_value());
  EXPECT_EQ(EventForSetModifier(mad::sminfo_mod::kDiscover), E::kDiscover);
}

}  // namespace
}  // namespace ibsm::ha
