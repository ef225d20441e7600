// SimTransport: mad::Transport over the in-process Simulator (ARCHITECTURE.md).
//
// Threading: belongs to one io_context; every method and handler runs on its thread, the
// same thread that drives the Simulator. Send hands the request to the simulator at once;
// the response comes back through Endpoint::Deliver and is queued for the io_context (after
// a steady_timer when the simulator's latency model gives it one), so a handler never runs
// inside Send.
//
// What is the same on every medium (TIDs, matching, timeouts and retries, RMPP both ways)
// is mad::MadDispatcher's; this class is the simulator's endpoint and the batching of what
// it delivers into the io_context. Timeouts and retries are the dispatcher's one timer, as
// on ibsim, where a lost MAD never comes back by itself. Responses are matched by the whole
// 64-bit TID (TIDs are unique per port, so two transports never hand out the same one); an
// RMPP response that stalls waits for the sender's own resend rather than restarting.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "fabric/fabric.h"
#include "mad/mad_dispatcher.h"
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

class SimTransport final : public mad::Transport, public Endpoint, private mad::MadWire {
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
  const mad::TransportCounters& counters() const override { return dispatcher_.counters(); }
  void Close() override;

  size_t outstanding() const { return dispatcher_.outstanding(); }
  // RMPP transfers this side is sending by Post / receiving unsolicited, not yet finished.
  size_t rmpp_posts() const { return dispatcher_.rmpp_posts(); }
  size_t rmpp_inbound() const { return dispatcher_.rmpp_inbound(); }

  // Endpoint.
  void Deliver(mad::MadMessage msg, std::chrono::nanoseconds latency) override;

 private:
  // MadWire: one MAD into the simulator.
  Status WriteMad(mad::MadMessage mad, std::chrono::milliseconds kernel_timeout) override;
  void Drain();
  void OnReceive(mad::MadMessage msg);
  void Fail(ResponseHandler done, Status status);

  boost::asio::io_context& io_;
  Simulator& sim_;
  PortId port_;
  SimTransportOptions options_;
  Status bind_status_;
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Delivered MADs waiting for the io_context; one posted Drain handles a whole batch.
  std::vector<mad::MadMessage> inbox_;
  std::vector<mad::MadMessage> draining_;
  bool drain_posted_ = false;
  mad::MadDispatcher dispatcher_;
};

}  // namespace ibsm::sim
