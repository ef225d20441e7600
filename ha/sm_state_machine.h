// The SM state machine of the SMInfo protocol (IBA 14.4; OpenSM osm_sm_state_mgr.c and
// osm_sminfo_rcv.c): states NOTACTIVE, DISCOVERING, STANDBY, MASTER; events from the SM's
// own sweeps and polls and from SMInfo Set requests of other SMs. A pure table: no clock,
// no I/O. The daemon feeds it events and carries out the actions it returns.
//
// Legality follows OpenSM 3.3.23 so the two interoperate: a Set that the table does not
// allow in the current state is answered with MAD status 7 ("invalid attribute value or
// field") and changes nothing; so is a Set whose sender's own state does not fit the
// modifier (HANDOVER/DISABLE/STANDBY/DISCOVER come from a MASTER, ACKNOWLEDGE from a
// STANDBY).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "mad/attr/sm_info.h"

namespace ibsm::ha {

using mad::SmState;

enum class SmEvent : uint8_t {
  kEnable = 0,            // the SM starts: NOTACTIVE -> DISCOVERING
  kDiscoveryNoMaster,     // a sweep in DISCOVERING found no master and no better SM
  kDiscoveryFoundMaster,  // a sweep in DISCOVERING found a master or a better SM
  kHandover,              // SMInfo Set HANDOVER received
  kAcknowledge,           // SMInfo Set ACKNOWLEDGE received
  kDisable,               // SMInfo Set DISABLE received
  kStandby,               // SMInfo Set STANDBY received
  kDiscover,              // SMInfo Set DISCOVER received
  kPollingTimeout,        // the polled SM missed polling_retry_number polls
  kHandoverSent,          // MASTER found a better SM and it accepted our HANDOVER
  kCount,
};

// What the daemon does after a transition, a bit set.
namespace sm_action {
inline constexpr uint32_t kNone = 0;
inline constexpr uint32_t kHeavySweep = 1u << 0;     // start (or queue) a heavy sweep
inline constexpr uint32_t kStartPolling = 1u << 1;   // poll the master (STANDBY)
inline constexpr uint32_t kStopPolling = 1u << 2;
inline constexpr uint32_t kSendAcknowledge = 1u << 3;  // to the SM that handed over
inline constexpr uint32_t kFirstMasterSweep = 1u << 4;  // the next sweep is a takeover
inline constexpr uint32_t kFence = 1u << 5;          // no more writes to the fabric
}  // namespace sm_action

struct SmTransition {
  bool legal = false;
  SmState next = SmState::kNotActive;
  uint32_t actions = sm_action::kNone;
};

// The table entry for `event` in `state`. Illegal entries keep the state and do nothing.
SmTransition LookUpTransition(SmState state, SmEvent event);

// The event a SMInfo Set with `modifier` stands for; nullopt for an unknown modifier.
std::optional<SmEvent> EventForSetModifier(uint32_t modifier);

// OpenSM's smi_rcv_check_set_req_legality: the state the sender put in the Set's payload
// must fit the modifier.
bool SetSenderStateFits(uint32_t modifier, SmState sender_state);

// Election (IBA 14.4.1.1): higher priority wins, then the lower port GUID.
bool IsBetterSm(uint8_t priority_a, uint64_t guid_a, uint8_t priority_b, uint64_t guid_b);

std::string_view SmStateName(SmState s);  // "MASTER"
std::string_view SmEventName(SmEvent e);  // "HANDOVER"

// One SM's state, changed only through its table.
class SmStateMachine {
 public:
  SmState state() const { return state_; }

  // Applies `event`. Returns the transition (legal = false: nothing changed).
  SmTransition Handle(SmEvent event);

  // A SMInfo Set from another SM: the modifier and the sender's state (from the payload)
  // are checked, then the table. Returns the MAD status to answer with: 0, or 7 with the
  // state unchanged. `*out` receives the transition when not null.
  uint16_t HandleSet(uint32_t modifier, SmState sender_state, SmTransition* out = nullptr);

 private:
  SmState state_ = SmState::kNotActive;
};

inline constexpr uint16_t kSmInfoStatusInvalidField = 7;  // IBA 13.4.7 MAD status 7

}  // namespace ibsm::ha
