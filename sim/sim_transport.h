// SimTransport: mad::Transport over the in-process Simulator (ARCHITECTURE.md).
//
// Threading: belongs to one io_context; every method and handler runs on its thread, the
// same thread that drives the Simulator. Send hands the request to the simulator at once;
// the response comes back through Endpoint::Deliver and is queued for the io_context (after
// a steady_timer when the simulator's latency model gives it one), so a handler never runs
// inside Send. Timeouts and retries are this transport's own timers, as on ibsim, where a
// lost MAD never comes back by itself.
//
// RMPP (IBA 13.6) is done here in user space with the state machines of mad/rmpp.h, as
// UmadTransport does: a Send or Post of more than one MAD of an RMPP class (SA, vendor range
// 2) is segmented; inbound DATA segments are ACKed and reassembled before the Send handler or
// the unsolicited handler sees the message.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "fabric/fabric.h"
#include "mad/rmpp.h"
#include "mad/transport.h"
#include "sim/simulator.h"

namespace ibsm::sim {

struct SimTransportOptions {
  // A Posted RMPP transfer: how long to wait for an ACK before resending the window, and
  // how many resends before it is aborted (ABORT sent, counters().rmpp_aborted).
  mad::SendOptions rmpp_post{std::chrono::milliseconds(200), 3};
  // An inbound transfer with no segment for this long is dropped (and counted as aborted
  // if incomplete); a complete one is kept that long to answer a resent last segment.
  std::chrono::milliseconds rmpp_receive_idle{std::chrono::seconds(10)};
};

class SimTransport final : public mad::Transport, public Endpoint {
 public:
  // Binds to `port` of `sim`. REQUIRES: `io` and `sim` outlive this; the port is free
  // (check bind_status()).
  SimTransport(boost::asio::io_context& io, Simulator& sim, PortId port,
               SimTransportOptions options = {});
  ~SimTransport() override;
  SimTransport(const SimTransport&) = delete;
  SimTransport& operator=(const SimTransport&) = delete;

  // Not OK if the port did not exist or was already bound; every Send then fails.
  const Status& bind_status() const { return bind_status_; }
  PortId port() const { return port_; }

  void Send(mad::MadMessage request, const mad::SendOptions& options,
            ResponseHandler done) override;
  Status Post(mad::MadMessage message) override;
  void SetUnsolicitedHandler(UnsolicitedHandler handler) override;
  Result<mad::LocalPort> QueryLocalPort() override;
  const mad::TransportCounters& counters() const override { return counters_; }
  void Close() override;

  size_t outstanding() const { return pending_.size(); }
  // RMPP transfers this side is sending by Post / receiving unsolicited, not yet finished.
  size_t rmpp_posts() const { return posts_.size(); }
  size_t rmpp_inbound() const { return inbound_.size(); }

  // Endpoint.
  void Deliver(mad::MadMessage msg, std::chrono::nanoseconds latency) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Rmpp {
    std::optional<mad::RmppSender> sender;      // request sent as RMPP
    std::optional<mad::RmppReceiver> receiver;  // response arriving as RMPP
    size_t header_size = 0;
  };
  struct Pending {
    mad::MadMessage request;  // moved out on the last attempt (no resend needs it)
    mad::SendOptions options;
    ResponseHandler done;
    int attempts = 0;   // sends so far
    uint32_t gen = 0;   // bumped whenever the deadline moves; older deadlines are stale
    std::unique_ptr<Rmpp> rmpp;
  };
  struct Deadline {
    Clock::time_point when;
    uint64_t tid;
    uint32_t gen;
  };
  // Deadlines of one timeout value come due in the order they were set, so a FIFO per value
  // replaces a heap; answered requests leave stale entries that are popped from the front.
  struct DeadlineQueue {
    std::chrono::milliseconds timeout;
    std::deque<Deadline> q;
  };
  // Class, TID, destination LID: an ACK or ABORT from another host must not drive or end a
  // transfer (the same rule as UmadTransport's).
  using TransferKey = std::tuple<uint8_t, uint64_t, uint16_t>;
  struct OutTransfer;
  struct InTransfer;
  using InKey = std::tuple<uint8_t, uint64_t, uint16_t>;  // class, TID, sender LID

  void Transmit(uint64_t tid, Pending& p);
  void SetDeadline(uint64_t tid, Pending& p);
  void InjectSegments(const std::vector<mad::MadBytes>& segs, const mad::MadAddress& to);
  void Drain();
  void OnReceive(mad::MadMessage msg);
  void OnRmpp(mad::MadMessage& msg, uint8_t mgmt_class, uint64_t tid, bool is_response,
              size_t header_size);
  void Finish(uint64_t tid, Result<mad::MadMessage> result);
  void PumpPost(const TransferKey& key);
  void OnTimer();
  void ArmTimer();
  void Fail(ResponseHandler done, Status status);

  boost::asio::io_context& io_;
  Simulator& sim_;
  PortId port_;
  SimTransportOptions options_;
  Status bind_status_;
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  uint64_t next_tid_;
  std::unordered_map<uint64_t, Pending> pending_;
  std::vector<DeadlineQueue> deadlines_;
  boost::asio::steady_timer timer_;
  Clock::time_point timer_at_ = Clock::time_point::max();
  // Delivered MADs waiting for the io_context; one posted Drain handles a whole batch.
  std::vector<mad::MadMessage> inbox_;
  std::vector<mad::MadMessage> draining_;
  bool drain_posted_ = false;
  std::map<TransferKey, std::unique_ptr<OutTransfer>> posts_;
  std::map<InKey, std::unique_ptr<InTransfer>> inbound_;
  UnsolicitedHandler unsolicited_;
  mad::TransportCounters counters_;
};

}  // namespace ibsm::sim
