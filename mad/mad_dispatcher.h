// MadDispatcher: what every mad::Transport does with requests, whatever carries the MADs
// (ARCHITECTURE.md "The MAD path"). It assigns TIDs, keeps the requests in flight and matches
// their responses, times each attempt and retries, bounds the requests in flight by class,
// sends multi-MAD requests and our RMPP answers as RMPP transfers (mad/rmpp.h) and
// reassembles RMPP responses and peers' unsolicited RMPP messages (mad/rmpp_inbound.h), and
// keeps the TransportCounters.
//
// A transport keeps only its medium: it implements MadWire (write one MAD to an address;
// say when the medium refused or failed it) and hands every MAD it reads to OnInbound.
// UmadTransport is libibumad, its agents, receiver thread and write backlog; SimTransport is
// the simulator's endpoint and its delivery batching.
//
// Deadlines: the attempts of every request are timed by one steady_timer and one FIFO per
// timeout value, not a timer per request. Deadlines of one timeout value come due in the
// order they were set, so a FIFO replaces a heap; an answered or resent request leaves a
// stale entry that is skipped. The in-process simulator carries millions of MADs through
// this path (README "Performance", sim_bench).
//
// Threading: everything runs on the io_context's thread, as mad::Transport requires.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/log.h"
#include "base/status.h"
#include "mad/rmpp.h"
#include "mad/rmpp_inbound.h"
#include "mad/transport.h"

namespace ibsm::mad {

// The medium under a MadDispatcher.
class MadWire {
 public:
  virtual ~MadWire() = default;
  // Writes one MAD (a whole MAD or an RMPP segment, kMadSize bytes) to `mad.addr`, counting
  // it in `sent` of the dispatcher's counters once it is written; a medium that holds it back
  // to write later counts it then. `kernel_timeout`: non-zero for a request the medium's
  // kernel should keep to match its response (DispatcherOptions::kernel_timeouts). Not OK:
  // the MAD is not written and will not be.
  virtual Status WriteMad(MadMessage mad, std::chrono::milliseconds kernel_timeout) = 0;
};

struct DispatcherOptions {
  // How a response finds its request. true: by management class and the TID's low 32 bits,
  // with 32-bit TIDs that wrap past 0 (the kernel's agent, libumad2sim and ibsim rewrite the
  // high 32 bits, as OpenSM's get_madw assumes), and RMPP transfers are told apart by the
  // peer's QP as well as its LID. false: by the whole 64-bit TID, transfers by LID alone.
  bool match_low_tid = true;
  uint64_t first_tid = 1;
  // The medium's kernel times requests too (hardware): it is handed each request's timeout,
  // and our deadline waits a little longer, so its ETIMEDOUT arrives first and one attempt
  // ends once.
  bool kernel_timeouts = false;
  // A response arriving as RMPP that stalls on a lost segment or ACK: true waits another
  // attempt's time (the peer resends its window on its own timer); false resends the
  // request, which restarts the transfer.
  bool rmpp_stall_waits = false;
  // When the last request ends, the deadline timer is cancelled, so an io_context run to
  // completion (umad_probe, a one-shot tool) returns as soon as the answer is in, as it did
  // with a timer per request. Off for the simulator: finishing one request at a time, it
  // would cancel and re-arm the timer on every round trip.
  bool stop_timer_when_idle = true;
  // Bytes of a MAD the medium carries intact (RmppSender/RmppReceiver `mad_size`).
  size_t mad_size = kMadSize;
  // The in-flight budget (TransportCounters in_flight, budget_waits): requests and Posted
  // RMPP transfers outstanding; past max_in_flight (0: no limit) requests wait by class.
  // Off: neither kept nor counted.
  bool in_flight_budget = true;
  size_t max_in_flight = 0;
  // Posted RMPP transfers: ACK wait per window and resends before ABORT.
  SendOptions rmpp_post{std::chrono::milliseconds(200), 3};
  // Caps and idle time of peers' inbound RMPP transfers.
  RmppInboundLimits rmpp_inbound;
  // Where the dispatcher logs, and the prefix of its RMPP log IDs ("MAD-RMPP", "SIM-RMPP").
  LogName log_name = LogName::kMad;
  std::string_view rmpp_log_id = "MAD-RMPP";
  // Log ID of the debug line of a request that timed out (empty: none), and the ID that
  // begins its Status message (empty: none).
  std::string_view timeout_log_id = "MAD-UMAD-010";
  std::string_view timeout_status_id;
};

class MadDispatcher {
 public:
  using ResponseHandler = Transport::ResponseHandler;
  using UnsolicitedHandler = Transport::UnsolicitedHandler;

  // REQUIRES: `io` and `wire` outlive this.
  MadDispatcher(boost::asio::io_context& io, MadWire& wire, const DispatcherOptions& options);
  ~MadDispatcher();
  MadDispatcher(const MadDispatcher&) = delete;
  MadDispatcher& operator=(const MadDispatcher&) = delete;

  // Assigns the TID (written into `request`), and sends `request` (RMPP past one MAD) once
  // the budget lets it start. `done` sees the response, Timeout after every retry, or the
  // write's error (from inside Send when the first write fails). REQUIRES: the transport
  // checked the request: at least one MAD, and RMPP only in a class that has it.
  void Send(MadMessage request, const SendOptions& options, ResponseHandler done);
  // One MAD as it is (an answer, a repress): written at once.
  Status Write(MadMessage mad);
  // An answer larger than one MAD (TID kept): an RMPP transfer driven by the peer's ACKs.
  Status PostTransfer(MadMessage message);
  // A MAD the medium read. `returned`: our own send came back undelivered (umad status):
  // the request's attempt ends now.
  void OnInbound(MadMessage mad, bool returned = false);

  void SetUnsolicitedHandler(UnsolicitedHandler handler) { unsolicited_ = std::move(handler); }
  // Ends every request with `why`: at once, or (`deferred`) posted to the io_context. Drops
  // transfers and inbound sessions; the dispatcher takes nothing new afterwards.
  void Close(const Status& why, bool deferred);
  bool closed() const { return closed_; }
  // Nothing outstanding: no request, Posted transfer or inbound session.
  bool idle() const { return pending_.empty() && posts_.empty() && inbound_.size() == 0; }

  TransportCounters& counters() { return counters_; }
  const TransportCounters& counters() const { return counters_; }
  size_t outstanding() const { return pending_.size(); }
  size_t rmpp_posts() const { return posts_.size(); }
  size_t rmpp_inbound() const { return inbound_.size(); }
  // For sessions opened from now on (the medium's MAD size is known once the port is open).
  void set_mad_size(size_t mad_size);

 private:
  using Clock = std::chrono::steady_clock;
  struct Rmpp {
    std::optional<RmppSender> sender;      // request sent as RMPP
    std::optional<RmppReceiver> receiver;  // response arriving as RMPP
    size_t header_size = 0;
  };
  struct Pending {
    MadMessage request;  // bytes moved out on the last attempt of a one-MAD request
    SendOptions options;
    ResponseHandler done;
    int attempts = 0;      // sends so far
    uint32_t gen = 0;      // bumped whenever the deadline moves; older deadlines are stale
    uint8_t mgmt_class = 0;  // for the timeout's message, once the bytes are gone
    uint16_t attr_id = 0;
    bool started = false;  // holds a slot of the in-flight budget
    std::unique_ptr<Rmpp> rmpp;
  };
  struct Deadline {
    Clock::time_point when;
    uint64_t key;
    uint32_t gen;
  };
  struct DeadlineQueue {
    std::chrono::milliseconds timeout;
    std::deque<Deadline> q;
  };
  // Class, TID (as matched), destination LID and QP (0 unless match_low_tid): an ACK or
  // ABORT from another host must not drive or end a transfer.
  using PostKey = std::tuple<uint8_t, uint64_t, uint16_t, uint32_t>;
  struct OutTransfer;

  uint64_t Key(uint8_t mgmt_class, uint64_t tid) const {
    return options_.match_low_tid ? (uint64_t{mgmt_class} << 32) | (tid & 0xffffffffu) : tid;
  }
  uint64_t TidOf(uint64_t tid) const { return options_.match_low_tid ? tid & 0xffffffffu : tid; }
  uint32_t QpOf(const MadAddress& a) const { return options_.match_low_tid ? a.qpn : 0; }
  std::chrono::milliseconds KernelTimeout(std::span<const uint8_t> mad) const;
  Status WriteTo(std::span<const uint8_t> mad, const MadAddress& to);
  void Fail(ResponseHandler done, Status status);

  size_t InFlight() const { return started_ + posts_.size(); }
  void NoteInFlight();
  void StartRequest(uint64_t key);
  void Admit();
  void ErasePost(const PostKey& key);

  void Attempt(uint64_t key, Pending& p);
  void AttemptOver(uint64_t key, Pending& p);
  void SetDeadline(uint64_t key, Pending& p);
  void ArmTimer();
  void OnTimer();
  void Finish(uint64_t key, Result<MadMessage> result);

  void OnRmpp(MadMessage& msg, uint8_t mgmt_class, uint64_t tid, bool is_response,
              size_t header_size);
  void OnInboundData(MadMessage& msg, uint8_t mgmt_class, uint64_t tid, size_t header_size);
  void PumpPost(const PostKey& key);
  void ArmRmppExpiry();

  boost::asio::io_context& io_;
  MadWire& wire_;
  DispatcherOptions options_;
  // Guards asynchronous callbacks: they run only while this token is alive.
  std::shared_ptr<char> alive_ = std::make_shared<char>(0);
  bool closed_ = false;
  uint64_t next_tid_;
  TransportCounters counters_;
  UnsolicitedHandler unsolicited_;

  std::unordered_map<uint64_t, Pending> pending_;
  std::vector<DeadlineQueue> deadlines_;
  boost::asio::steady_timer timer_;
  Clock::time_point timer_at_ = Clock::time_point::max();

  // The in-flight budget: requests not yet started wait here, one queue per priority.
  std::array<std::deque<uint64_t>, 4> waiting_;
  size_t started_ = 0;
  bool admitting_ = false;

  std::map<PostKey, std::unique_ptr<OutTransfer>> posts_;
  RmppInboundSessions inbound_;
  boost::asio::steady_timer rmpp_expiry_;
  bool rmpp_expiry_armed_ = false;
};

}  // namespace ibsm::mad
