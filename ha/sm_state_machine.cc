#include "ha/sm_state_machine.h"

#include <array>

namespace ibsm::ha {
namespace {

using namespace sm_action;

constexpr size_t kStates = 4;
constexpr size_t kEvents = static_cast<size_t>(SmEvent::kCount);

constexpr SmTransition Illegal() { return {}; }
constexpr SmTransition To(SmState next, uint32_t actions) { return {true, next, actions}; }

using Row = std::array<SmTransition, kEvents>;

// Rows in SmState order, columns in SmEvent order. OpenSM's osm_sm_state_mgr_process and
// osm_sm_state_mgr_check_legality, plus the two events ibsm raises itself (kEnable and the
// HANDOVER acknowledgement that OpenSM never sends).
constexpr std::array<Row, kStates> kTable = {{
    // NOTACTIVE
    Row{
        To(SmState::kDiscovering, kHeavySweep),  // kEnable
        Illegal(),                               // kDiscoveryNoMaster
        Illegal(),                               // kDiscoveryFoundMaster
        Illegal(),                               // kHandover
        Illegal(),                               // kAcknowledge
        Illegal(),                               // kDisable
        To(SmState::kStandby, kStartPolling),    // kStandby
        Illegal(),                               // kDiscover
        Illegal(),                               // kPollingTimeout
        Illegal(),                               // kHandoverSent
    },
    // DISCOVERING
    Row{
        Illegal(),                                               // kEnable
        To(SmState::kMaster, kFirstMasterSweep),                 // kDiscoveryNoMaster
        To(SmState::kStandby, kStartPolling | kFence),           // kDiscoveryFoundMaster
        To(SmState::kDiscovering, kHeavySweep),                  // kHandover: sweep again
        Illegal(),                                               // kAcknowledge
        Illegal(),                                               // kDisable
        Illegal(),                                               // kStandby
        Illegal(),                                               // kDiscover
        Illegal(),                                               // kPollingTimeout
        Illegal(),                                               // kHandoverSent
    },
    // STANDBY
    Row{
        Illegal(),  // kEnable
        Illegal(),  // kDiscoveryNoMaster
        Illegal(),  // kDiscoveryFoundMaster
        To(SmState::kMaster,
           kStopPolling | kSendAcknowledge | kFirstMasterSweep | kHeavySweep),  // kHandover
        To(SmState::kStandby, kNone),                                          // kAcknowledge
        To(SmState::kNotActive, kStopPolling | kFence),                        // kDisable
        Illegal(),                                                             // kStandby
        To(SmState::kDiscovering, kStopPolling | kHeavySweep),                 // kDiscover
        To(SmState::kDiscovering, kStopPolling | kHeavySweep),  // kPollingTimeout
        Illegal(),                                              // kHandoverSent
    },
    // MASTER
    Row{
        Illegal(),  // kEnable
        Illegal(),  // kDiscoveryNoMaster
        Illegal(),  // kDiscoveryFoundMaster
        // Another master hands over to us: re-sweep as a new master would.
        To(SmState::kMaster, kStopPolling | kFirstMasterSweep | kHeavySweep),  // kHandover
        Illegal(),                                                            // kAcknowledge
        Illegal(),                                                            // kDisable
        Illegal(),                                                            // kStandby
        Illegal(),                                                            // kDiscover
        To(SmState::kMaster, kStopPolling | kHeavySweep),  // kPollingTimeout
        To(SmState::kStandby, kStartPolling | kFence),     // kHandoverSent
    },
}};

}  // namespace

SmTransition LookUpTransition(SmState state, SmEvent event) {
  size_t s = static_cast<size_t>(state);
  size_t e = static_cast<size_t>(event);
  if (s >= kStates || e >= kEvents) return Illegal();
  return kTable[s][e];
}

std::optional<SmEvent> EventForSetModifier(uint32_t modifier) {
  switch (modifier) {
    case mad::sminfo_mod::kHandover: return SmEvent::kHandover;
    case mad::sminfo_mod::kAcknowledge: return SmEvent::kAcknowledge;
    case mad::sminfo_mod::kDisable: return SmEvent::kDisable;
    case mad::sminfo_mod::kStandby: return SmEvent::kStandby;
    case mad::sminfo_mod::kDiscover: return SmEvent::kDiscover;
    default: return std::nullopt;
  }
}

bool SetSenderStateFits(uint32_t modifier, SmState sender_state) {
  if (modifier == mad::sminfo_mod::kAcknowledge) return sender_state == SmState::kStandby;
  return EventForSetModifier(modifier).has_value() && sender_state == SmState::kMaster;
}

bool IsBetterSm(uint8_t priority_a, uint64_t guid_a, uint8_t priority_b, uint64_t guid_b) {
  if (priority_a != priority_b) return priority_a > priority_b;
  return guid_a < guid_b;
}

std::string_view SmStateName(SmState s) {
  switch (s) {
    case SmState::kNotActive: return "NOTACTIVE";
    case SmState::kDiscovering: return "DISCOVERING";
    case SmState::kStandby: return "STANDBY";
    case SmState::kMaster: return "MASTER";
  }
  return "UNKNOWN";
}

std::string_view SmEventName(SmEvent e) {
  switch (e) {
    case SmEvent::kEnable: return "ENABLE";
    case SmEvent::kDiscoveryNoMaster: return "DISCOVERY_COMPLETED";
    case SmEvent::kDiscoveryFoundMaster: return "MASTER_OR_HIGHER_SM_DETECTED";
    case SmEvent::kHandover: return "HANDOVER";
    case SmEvent::kAcknowledge: return "ACKNOWLEDGE";
    case SmEvent::kDisable: return "DISABLE";
    case SmEvent::kStandby: return "STANDBY";
    case SmEvent::kDiscover: return "DISCOVER";
    case SmEvent::kPollingTimeout: return "POLLING_TIMEOUT";
    case SmEvent::kHandoverSent: return "HANDOVER_SENT";
    case SmEvent::kCount: break;
  }
  return "UNKNOWN";
}

SmTransition SmStateMachine::Handle(SmEvent event) {
  SmTransition t = LookUpTransition(state_, event);
  if (t.legal) state_ = t.next;
  return t;
}

uint16_t SmStateMachine::HandleSet(uint32_t modifier, SmState sender_state, SmTransition* out) {
  SmTransition t;
  auto event = EventForSetModifier(modifier);
  if (event && SetSenderStateFits(modifier, sender_state)) t = Handle(*event);
  if (out) *out = t;
  return t.legal ? 0 : kSmInfoStatusInvalidField;
}

}  // namespace ibsm::ha
