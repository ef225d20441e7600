// One interface for MAD I/O (ARCHITECTURE.md): UmadTransport (libibumad: hardware, or
// ibsim through its preload library) and SimTransport (the in-process simulator). The SM
// cannot tell them apart.
//
// Threading: a transport belongs to one boost::asio::io_context; every handler runs on that
// context's thread, and every method must be called from it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>

#include "mad/mad.h"
#include "base/status.h"
#include "base/types.h"

namespace ibsm::mad {

struct SendOptions {
  std::chrono::milliseconds timeout{200};  // per attempt (opensm.conf transaction_timeout)
  int retries = 3;                         // extra attempts after the first
};

// What the transport knows of the port it is bound to.
struct LocalPort {
  Guid node_guid{0};
  Guid port_guid{0};
  PortNum port_num{0};
  Lid lid{0};
  Lid sm_lid{0};
  uint8_t lmc = 0;
  uint8_t state = 0;  // PortInfo PortState: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE
  std::string ca_name;
};

// Counters every transport keeps; operators act on timeouts and drops.
struct TransportCounters {
  uint64_t sent = 0;             // MADs written, every retry and RMPP segment included
  uint64_t received = 0;         // MADs read
  uint64_t timeouts = 0;         // requests that got no answer after every retry
  uint64_t retries = 0;          // resends after a per-attempt timeout
  uint64_t unmatched = 0;        // responses matching no outstanding request (dropped)
  uint64_t malformed = 0;        // inbound MADs that failed to decode (dropped)
  uint64_t unsolicited = 0;      // requests/traps handed to the unsolicited handler
  uint64_t rmpp_reassembled = 0; // multi-segment messages received whole
  uint64_t rmpp_aborted = 0;     // RMPP transfers abandoned (timeout, bad segment, ABORT)
  uint64_t rmpp_refused = 0;     // inbound RMPP segments refused over a session or byte cap
  // A medium that stops taking writes (a full ibsim socket) must not stall the io thread:
  // what it refuses waits in a bounded backlog (README "MAD transport: backpressure").
  uint64_t write_eagain = 0;          // writes the medium refused for now (kept, retried)
  uint64_t backlog = 0;               // MADs waiting to be written (gauge)
  uint64_t backlog_high_water = 0;    // most MADs ever waiting at once
  uint64_t backlog_dropped = 0;       // MADs dropped: backlog full, or a later write failed
  // One budget for every request in flight, whoever sent it (sweep, PerfMgr, SA, vendor).
  uint64_t in_flight = 0;             // requests and outbound RMPP transfers outstanding (gauge)
  uint64_t in_flight_high_water = 0;  // most ever outstanding at once
  uint64_t budget_waits = 0;          // requests that waited for a slot before their first write
  uint64_t inbound_dropped = 0;  // MADs read while the io thread was too far behind (dropped)
};

// Every TransportCounters field once, for the control answer's "transport" object and the
// metrics (ARCHITECTURE.md "Where to add ... A counter"): an event counter is one sample of
// ibsm_mad_transport_total{event="<metric>"}, a gauge a family of its own named <metric>.
struct TransportCounterRow {
  uint64_t TransportCounters::*member;
  std::string_view key;     // control answer key
  bool gauge;
  std::string_view metric;  // event label, or the gauge's family
  std::string_view help;    // the gauge's help text
};

inline constexpr TransportCounterRow kTransportCounterRows[] = {
    {&TransportCounters::sent, "sent", false, "sent", ""},
    {&TransportCounters::received, "received", false, "received", ""},
    {&TransportCounters::timeouts, "timeouts", false, "timeout", ""},
    {&TransportCounters::retries, "retries", false, "retry", ""},
    {&TransportCounters::unmatched, "unmatched", false, "unmatched", ""},
    {&TransportCounters::malformed, "malformed", false, "malformed", ""},
    {&TransportCounters::unsolicited, "unsolicited", false, "unsolicited", ""},
    {&TransportCounters::rmpp_reassembled, "rmpp_reassembled", false, "rmpp_reassembled", ""},
    {&TransportCounters::rmpp_aborted, "rmpp_aborted", false, "rmpp_aborted", ""},
    {&TransportCounters::rmpp_refused, "rmpp_refused", false, "rmpp_refused", ""},
    {&TransportCounters::inbound_dropped, "inbound_dropped", false, "inbound_dropped", ""},
    {&TransportCounters::write_eagain, "write_eagain", false, "write_eagain", ""},
    {&TransportCounters::backlog_dropped, "backlog_dropped", false, "backlog_dropped", ""},
    {&TransportCounters::budget_waits, "budget_waits", false, "budget_wait", ""},
    {&TransportCounters::backlog, "backlog", true, "ibsm_mad_backlog",
     "MADs the medium refused, waiting to be written"},
    {&TransportCounters::backlog_high_water, "backlog_high_water", true,
     "ibsm_mad_backlog_high_water", "most MADs ever waiting to be written"},
    {&TransportCounters::in_flight, "in_flight", true, "ibsm_mad_in_flight",
     "MAD requests outstanding, every sender together"},
    {&TransportCounters::in_flight_high_water, "in_flight_high_water", true,
     "ibsm_mad_in_flight_high_water", "most MAD requests ever outstanding"},
};
// A field without a row fails to build.
static_assert(std::size(kTransportCounterRows) == sizeof(TransportCounters) / sizeof(uint64_t));

class Transport {
 public:
  // Called once per request: the response, or kTimeout after every retry, or another error.
  using ResponseHandler = std::function<void(Result<MadMessage>)>;
  // Requests, traps and reports addressed to this port that are not responses to us.
  using UnsolicitedHandler = std::function<void(MadMessage)>;

  virtual ~Transport() = default;

  // Sends a request and reports its response. The transport assigns the TID (the value in
  // `request` is overwritten) and matches the response by TID and class. `request.bytes`
  // larger than one MAD is sent as an RMPP transfer. An RMPP response is reassembled before
  // `done` sees it.
  virtual void Send(MadMessage request, const SendOptions& options, ResponseHandler done) = 0;

  // Sends without waiting for an answer: responses to requests we received (TID kept as is),
  // trap represses. A payload larger than one MAD goes out as RMPP.
  virtual Status Post(MadMessage message) = 0;

  virtual void SetUnsolicitedHandler(UnsolicitedHandler handler) = 0;

  // Re-reads the port's attributes (LID and SM LID change when an SM programs them).
  virtual Result<LocalPort> QueryLocalPort() = 0;

  virtual const TransportCounters& counters() const = 0;

  // Cancels every pending request; their handlers see kUnavailable. Idempotent.
  virtual void Close() = 0;
};

}  // namespace ibsm::mad
