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
#include <string>

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
