#include "sim/sim_transport.h"

#include <boost/asio/post.hpp>

#include "base/log.h"

namespace ibsm::sim {
namespace {

const mad::Field<mad::MadHeader>& kTidField = mad::Layout<mad::MadHeader>::kFields[6];
static_assert(mad::Layout<mad::MadHeader>::kFields[6].bit_width == 64);

}  // namespace

SimTransport::SimTransport(boost::asio::io_context& io, Simulator& sim, PortId port)
    : io_(io),
      sim_(sim),
      port_(port),
      bind_status_(sim.Bind(port, this)),
      // TIDs unique per port so two transports never hand out the same one.
      next_tid_((uint64_t{port} << 32) + 1),
      timer_(io) {
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

void SimTransport::Send(mad::MadMessage request, const mad::SendOptions& options,
                        ResponseHandler done) {
  if (closed_) {
    Fail(std::move(done), Unavailable("SIM-TRN-001 transport closed or not bound"));
    return;
  }
  if (request.bytes.size() != mad::kMadSize) {
    // TODO(issue 2): RMPP segmentation for multi-MAD requests.
    Fail(std::move(done), InvalidArgument("SIM-TRN-002 SimTransport sends single MADs only"));
    return;
  }
  uint64_t tid = next_tid_++;
  mad::SetBits(request.bytes, kTidField.bit_offset, kTidField.bit_width, tid);
  auto [it, inserted] = pending_.try_emplace(tid);
  Pending& p = it->second;
  p.request = std::move(request);
  p.options = options;
  p.done = std::move(done);
  Transmit(tid, p);
}

// One attempt: a deadline, then the simulator (which may Deliver the answer at once; the
// answer is posted, so `p` stays valid here).
void SimTransport::Transmit(uint64_t tid, Pending& p) {
  ++p.attempts;
  ++counters_.sent;
  Clock::time_point when = Clock::now() + p.options.timeout;
  deadlines_.push(Deadline{when, tid, p.attempts});
  if (when < timer_at_) ArmTimer();
  sim_.Inject(port_, p.request);
}

void SimTransport::ArmTimer() {
  if (deadlines_.empty()) {
    timer_at_ = Clock::time_point::max();
    timer_.cancel();
    return;
  }
  timer_at_ = deadlines_.top().when;
  timer_.expires_at(timer_at_);
  std::weak_ptr<bool> alive = alive_;
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    auto a = alive.lock();
    if (!a || !*a || ec) return;
    timer_at_ = Clock::time_point::max();
    OnTimer();
  });
}

// Deadlines are lazy: an entry whose request was answered or resent since is skipped.
void SimTransport::OnTimer() {
  Clock::time_point now = Clock::now();
  while (!deadlines_.empty() && deadlines_.top().when <= now) {
    Deadline d = deadlines_.top();
    deadlines_.pop();
    auto it = pending_.find(d.tid);
    if (it == pending_.end() || it->second.attempts != d.attempt) continue;
    Pending& p = it->second;
    if (p.attempts <= p.options.retries) {
      ++counters_.retries;
      Transmit(d.tid, p);
      continue;
    }
    ++counters_.timeouts;
    ResponseHandler done = std::move(p.done);
    pending_.erase(it);
    done(Timeout("SIM-TRN-003 no response after " + std::to_string(d.attempt) + " attempts"));
    if (closed_) return;
  }
  if (!deadlines_.empty() && deadlines_.top().when < timer_at_) ArmTimer();
}

void SimTransport::Deliver(mad::MadMessage msg, std::chrono::nanoseconds latency) {
  std::weak_ptr<bool> alive = alive_;
  if (latency.count() <= 0) {
    boost::asio::post(io_, [this, alive, msg = std::move(msg)]() mutable {
      auto a = alive.lock();
      if (a && *a) OnReceive(std::move(msg));
    });
    return;
  }
  auto t = std::make_shared<boost::asio::steady_timer>(io_, latency);
  t->async_wait([this, alive, t, msg = std::move(msg)](const boost::system::error_code&) mutable {
    auto a = alive.lock();
    if (a && *a) OnReceive(std::move(msg));
  });
}

void SimTransport::OnReceive(mad::MadMessage msg) {
  if (closed_) return;
  ++counters_.received;
  auto hdr = msg.header();
  if (!hdr.ok()) {
    ++counters_.malformed;
    return;
  }
  if (hdr->is_response()) {
    auto it = pending_.find(hdr->tid);
    if (it == pending_.end()) {
      ++counters_.unmatched;
      return;
    }
    ResponseHandler done = std::move(it->second.done);
    pending_.erase(it);  // its deadline entries go stale and are skipped
    done(std::move(msg));
    return;
  }
  ++counters_.unsolicited;
  if (unsolicited_) unsolicited_(std::move(msg));
}

Status SimTransport::Post(mad::MadMessage message) {
  if (closed_) return Unavailable("SIM-TRN-001 transport closed or not bound");
  if (message.bytes.size() != mad::kMadSize) {
    return InvalidArgument("SIM-TRN-002 SimTransport sends single MADs only");
  }
  ++counters_.sent;
  sim_.Inject(port_, std::move(message));
  return Status::Ok();
}

void SimTransport::SetUnsolicitedHandler(UnsolicitedHandler handler) {
  unsolicited_ = std::move(handler);
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
  if (closed_ && pending_.empty()) return;
  closed_ = true;
  if (bind_status_.ok()) sim_.Unbind(port_);
  bind_status_ = Unavailable("SIM-TRN-001 transport closed");
  for (auto& [tid, p] : pending_) Fail(std::move(p.done), Unavailable("SIM-TRN-005 closed"));
  pending_.clear();
  deadlines_ = {};
  timer_.cancel();
  timer_at_ = Clock::time_point::max();
}

}  // namespace ibsm::sim
