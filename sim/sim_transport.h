// SimTransport: mad::Transport over the in-process Simulator (DESIGN.md "Transports").
//
// Threading: belongs to one io_context; every method and handler runs on its thread, the
// same thread that drives the Simulator. Send hands the request to the simulator at once;
// the response comes back through Endpoint::Deliver and is posted to the io_context (after
// a steady_timer when the simulator's latency model gives it one), so a handler never runs
// inside Send. Timeouts and retries are this transport's own timers, as on ibsim, where a
// lost MAD never comes back by itself.
//
// Not supported yet: RMPP (multi-MAD payloads are rejected with InvalidArgument).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "fabric/fabric.h"
#include "mad/transport.h"
#include "sim/simulator.h"

namespace ibsm::sim {

class SimTransport final : public mad::Transport, public Endpoint {
 public:
  // Binds to `port` of `sim`. REQUIRES: `io` and `sim` outlive this; the port is free
  // (check bind_status()).
  SimTransport(boost::asio::io_context& io, Simulator& sim, PortId port);
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

  // Endpoint.
  void Deliver(mad::MadMessage msg, std::chrono::nanoseconds latency) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    mad::MadMessage request;
    mad::SendOptions options;
    ResponseHandler done;
    int attempts = 0;  // sends so far
  };
  struct Deadline {
    Clock::time_point when;
    uint64_t tid;
    int attempt;
    bool operator>(const Deadline& o) const { return when > o.when; }
  };

  void Transmit(uint64_t tid, Pending& p);
  void OnReceive(mad::MadMessage msg);
  void OnTimer();
  void ArmTimer();
  void Fail(ResponseHandler done, Status status);

  boost::asio::io_context& io_;
  Simulator& sim_;
  PortId port_;
  Status bind_status_;
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  uint64_t next_tid_;
  std::unordered_map<uint64_t, Pending> pending_;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> deadlines_;
  boost::asio::steady_timer timer_;
  Clock::time_point timer_at_ = Clock::time_point::max();
  UnsolicitedHandler unsolicited_;
  mad::TransportCounters counters_;
};

}  // namespace ibsm::sim
