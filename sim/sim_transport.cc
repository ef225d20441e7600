#include "sim/sim_transport.h"

#include <cstdint>
#include <limits>

#include <boost/asio/post.hpp>

#include "base/log.h"

namespace ibsm::sim {
namespace {

// The management class, read with the codec's table.
uint8_t MgmtClassOf(std::span<const uint8_t> b) {
  const auto& f = mad::Layout<mad::MadHeader>::kFields[1];
  static_assert(mad::Layout<mad::MadHeader>::kFields[1].bit_width == 8);
  return static_cast<uint8_t>(mad::GetBits(b, f.bit_offset, f.bit_width));
}

mad::DispatcherOptions Dispatching(PortId port, const SimTransportOptions& o) {
  mad::DispatcherOptions d;
  d.match_low_tid = false;
  // TIDs unique per port so two transports never hand out the same one.
  d.first_tid = (uint64_t{port} << 32) + 1;
  d.rmpp_stall_waits = true;
  d.stop_timer_when_idle = false;
  // The simulator keeps no budget of its own: the SM's pipelines bound what it sends.
  d.in_flight_budget = false;
  d.rmpp_post = o.rmpp_post;
  // Peers here are the simulator's and the tests' own: no caps, only the idle time. (A
  // complete transfer is kept that long to answer a resent last segment.)
  constexpr size_t kNoCap = std::numeric_limits<size_t>::max();
  d.rmpp_inbound = {kNoCap, kNoCap, kNoCap, o.rmpp_receive_idle,
                    std::chrono::hours(24 * 365)};
  d.log_name = LogName::kSim;
  d.rmpp_log_id = "SIM-RMPP";
  d.timeout_log_id = {};
  d.timeout_status_id = "SIM-TRN-003";
  return d;
}

}  // namespace

SimTransport::SimTransport(boost::asio::io_context& io, Simulator& sim, PortId port,
                           SimTransportOptions options)
    : io_(io),
      sim_(sim),
      port_(port),
      options_(options),
      bind_status_(sim.Bind(port, this)),
      dispatcher_(io, *this, Dispatching(port, options)) {
  if (!bind_status_.ok()) closed_ = true;
}

SimTransport::~SimTransport() {
  *alive_ = false;
  if (bind_status_.ok()) sim_.Unbind(port_);
}

void SimTransport::Fail(ResponseHandler done, Status status) {
  boost::asio::post(io_, [done = std::move(done), status = std::move(status)]() mutable {
    done(std::move(status));
  });
}

Status SimTransport::WriteMad(mad::MadMessage mad, std::chrono::milliseconds) {
  ++dispatcher_.counters().sent;
  sim_.Inject(port_, std::move(mad));
  return Status::Ok();
}

void SimTransport::Send(mad::MadMessage request, const mad::SendOptions& options,
                        ResponseHandler done) {
  if (closed_) {
    Fail(std::move(done), Unavailable("SIM-TRN-001 transport closed or not bound"));
    return;
  }
  if (request.bytes.size() != mad::kMadSize) {
    uint8_t mclass = request.bytes.size() >= mad::Layout<mad::MadHeader>::kSize
                         ? MgmtClassOf(request.bytes)
                         : 0;
    auto hs = request.bytes.size() > mad::kMadSize ? mad::RmppHeaderSize(mclass) : std::nullopt;
    if (!hs) {
      Fail(std::move(done),
           InvalidArgument("SIM-TRN-002 " + std::to_string(request.bytes.size()) +
                           "-byte request in class " + std::to_string(mclass) +
                           ", which is not one MAD and has no RMPP"));
      return;
    }
  }
  dispatcher_.Send(std::move(request), options, std::move(done));
}

void SimTransport::Deliver(mad::MadMessage msg, std::chrono::nanoseconds latency) {
  if (latency.count() <= 0) {
    inbox_.push_back(std::move(msg));
    if (!drain_posted_) {
      drain_posted_ = true;
      boost::asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_)] {
        auto a = alive.lock();
        if (a && *a) Drain();
      });
    }
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  auto t = std::make_shared<boost::asio::steady_timer>(io_, latency);
  t->async_wait([this, alive, t, msg = std::move(msg)](const boost::system::error_code&) mutable {
    auto a = alive.lock();
    if (a && *a) OnReceive(std::move(msg));
  });
}

// Handlers may Send and so Deliver more: those land in inbox_ and get their own Drain.
void SimTransport::Drain() {
  drain_posted_ = false;
  draining_.clear();
  std::swap(draining_, inbox_);
  for (auto& m : draining_) {
    if (closed_) break;
    OnReceive(std::move(m));
  }
  draining_.clear();
}

void SimTransport::OnReceive(mad::MadMessage msg) {
  if (closed_) return;
  dispatcher_.OnInbound(std::move(msg));
}

Status SimTransport::Post(mad::MadMessage message) {
  if (closed_) return Unavailable("SIM-TRN-001 transport closed or not bound");
  if (message.bytes.size() < mad::kMadSize) {
    return InvalidArgument("SIM-TRN-006 " + std::to_string(message.bytes.size()) +
                           "-byte message is shorter than a MAD");
  }
  if (message.bytes.size() == mad::kMadSize) return dispatcher_.Write(std::move(message));
  const uint8_t mclass = MgmtClassOf(message.bytes);
  if (!mad::RmppHeaderSize(mclass)) {
    return InvalidArgument("SIM-TRN-002 " + std::to_string(message.bytes.size()) +
                           "-byte message in class " + std::to_string(mclass) +
                           ", which has no RMPP");
  }
  return dispatcher_.PostTransfer(std::move(message));
}

void SimTransport::SetUnsolicitedHandler(UnsolicitedHandler handler) {
  dispatcher_.SetUnsolicitedHandler(std::move(handler));
}

Result<mad::LocalPort> SimTransport::QueryLocalPort() {
  if (port_ >= sim_.port_count()) return InvalidArgument("SIM-TRN-004 no such port");
  const mad::PortInfo& pi = sim_.port_info(port_);
  mad::LocalPort lp;
  NodeId n = sim_.port_node(port_);
  lp.node_guid = sim_.node_guid(n);
  lp.port_guid = sim_.port_guid(port_);
  lp.port_num = PortNum{pi.local_port_num};
  lp.lid = Lid{pi.lid};
  lp.sm_lid = Lid{pi.master_sm_base_lid};
  lp.lmc = pi.lmc;
  lp.state = pi.port_state;
  lp.ca_name = "sim" + std::to_string(n);
  return lp;
}

void SimTransport::Close() {
  if (closed_ && dispatcher_.idle()) return;
  closed_ = true;
  if (bind_status_.ok()) sim_.Unbind(port_);
  bind_status_ = Unavailable("SIM-TRN-001 transport closed");
  inbox_.clear();
  dispatcher_.Close(Unavailable("SIM-TRN-005 closed"), /*deferred=*/true);
}

}  // namespace ibsm::sim
