#include "sim/sim_transport.h"

#include <algorithm>

#include <boost/asio/post.hpp>

#include "base/log.h"

namespace ibsm::sim {
namespace {

using HdrLayout = mad::Layout<mad::MadHeader>;
const mad::Field<mad::MadHeader>& kBaseVersionField = HdrLayout::kFields[0];
const mad::Field<mad::MadHeader>& kClassField = HdrLayout::kFields[1];
const mad::Field<mad::MadHeader>& kMethodField = HdrLayout::kFields[3];
const mad::Field<mad::MadHeader>& kTidField = HdrLayout::kFields[6];
static_assert(HdrLayout::kFields[1].bit_width == 8 && HdrLayout::kFields[1].bit_offset == 8);
static_assert(HdrLayout::kFields[3].bit_width == 8 && HdrLayout::kFields[3].bit_offset == 24);
static_assert(HdrLayout::kFields[6].bit_width == 64);

uint64_t Hdr(std::span<const uint8_t> b, const mad::Field<mad::MadHeader>& f) {
  return mad::GetBits(b, f.bit_offset, f.bit_width);
}

}  // namespace

struct SimTransport::OutTransfer {
  OutTransfer(boost::asio::io_context& io, mad::RmppSender s)
      : sender(std::move(s)), timer(io) {}
  mad::RmppSender sender;
  mad::MadAddress to;
  int attempts = 0;
  boost::asio::steady_timer timer;
};

struct SimTransport::InTransfer {
  InTransfer(boost::asio::io_context& io, size_t header_size)
      : receiver(header_size), idle(io) {}
  mad::RmppReceiver receiver;
  boost::asio::steady_timer idle;
  uint64_t generation = 0;
};

SimTransport::SimTransport(boost::asio::io_context& io, Simulator& sim, PortId port,
                           SimTransportOptions options)
    : io_(io),
      sim_(sim),
      port_(port),
      options_(options),
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
  std::unique_ptr<Rmpp> rmpp;
  if (request.bytes.size() != mad::kMadSize) {
    uint8_t mclass = request.bytes.size() >= mad::Layout<mad::MadHeader>::kSize
                         ? static_cast<uint8_t>(Hdr(request.bytes, kClassField))
                         : 0;
    auto hs = request.bytes.size() > mad::kMadSize ? mad::RmppHeaderSize(mclass) : std::nullopt;
    if (!hs) {
      Fail(std::move(done),
           InvalidArgument("SIM-TRN-002 " + std::to_string(request.bytes.size()) +
                           "-byte request in class " + std::to_string(mclass) +
                           ", which is not one MAD and has no RMPP"));
      return;
    }
    rmpp = std::make_unique<Rmpp>();
    rmpp->header_size = *hs;
  }
  uint64_t tid = next_tid_++;
  mad::SetBits(request.bytes, kTidField.bit_offset, kTidField.bit_width, tid);
  if (rmpp) {
    auto s = mad::RmppSender::Create(request.bytes, rmpp->header_size);
    if (!s.ok()) {
      Fail(std::move(done), s.status());
      return;
    }
    rmpp->sender = std::move(s).value();
  }
  auto [it, inserted] = pending_.try_emplace(tid);
  Pending& p = it->second;
  p.request = std::move(request);
  p.options = options;
  p.done = std::move(done);
  p.rmpp = std::move(rmpp);
  Transmit(tid, p);
}

void SimTransport::SetDeadline(uint64_t tid, Pending& p) {
  ++p.gen;
  DeadlineQueue* dq = nullptr;
  for (auto& q : deadlines_) {
    if (q.timeout == p.options.timeout) {
      dq = &q;
      break;
    }
  }
  if (dq == nullptr) dq = &deadlines_.emplace_back(DeadlineQueue{p.options.timeout, {}});
  // Drop answered requests' deadlines from the front while we are here: round trips finish
  // in order, so the queue stays as short as the number in flight.
  while (!dq->q.empty()) {
    auto it = pending_.find(dq->q.front().tid);
    if (it != pending_.end() && it->second.gen == dq->q.front().gen) break;
    dq->q.pop_front();
  }
  Clock::time_point when = Clock::now() + p.options.timeout;
  dq->q.push_back(Deadline{when, tid, p.gen});
  if (when < timer_at_) ArmTimer();
}

void SimTransport::InjectSegments(const std::vector<mad::MadBytes>& segs,
                                  const mad::MadAddress& to) {
  for (const auto& s : segs) {
    ++counters_.sent;
    sim_.Inject(port_, mad::MadMessage{std::vector<uint8_t>(s.begin(), s.end()), to});
  }
}

// One attempt: a deadline, then the simulator (which may Deliver the answer at once; the
// answer is queued, so `p` stays valid here).
void SimTransport::Transmit(uint64_t tid, Pending& p) {
  ++p.attempts;
  SetDeadline(tid, p);
  if (p.rmpp) p.rmpp->receiver.reset();  // a resend starts any RMPP response afresh
  if (p.rmpp && p.rmpp->sender) {
    Rmpp& r = *p.rmpp;
    std::vector<mad::MadBytes> segs;
    if (p.attempts > 1 && r.sender->done()) {
      // Whole request delivered but no response: send it again from the start.
      auto fresh = mad::RmppSender::Create(p.request.bytes, r.header_size);
      if (fresh.ok()) r.sender = std::move(fresh).value();
      segs = r.sender->NextSegments();
    } else {
      segs = p.attempts > 1 ? r.sender->OnTimeout() : r.sender->NextSegments();
    }
    InjectSegments(segs, p.request.addr);
    return;
  }
  ++counters_.sent;
  if (p.attempts > p.options.retries) {
    sim_.Inject(port_, std::move(p.request));  // last attempt: nothing will resend it
  } else {
    sim_.Inject(port_, p.request);
  }
}

void SimTransport::ArmTimer() {
  Clock::time_point first = Clock::time_point::max();
  for (const auto& q : deadlines_)
    if (!q.q.empty()) first = std::min(first, q.q.front().when);
  if (first == Clock::time_point::max()) {
    timer_at_ = first;
    timer_.cancel();
    return;
  }
  timer_at_ = first;
  timer_.expires_at(timer_at_);
  std::weak_ptr<bool> alive = alive_;
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    auto a = alive.lock();
    if (!a || !*a || ec) return;
    timer_at_ = Clock::time_point::max();
    OnTimer();
  });
}

// Deadlines are lazy: an entry whose request was answered, resent or moved on is skipped.
void SimTransport::OnTimer() {
  Clock::time_point now = Clock::now();
  bool again = true;
  while (again && !closed_) {
    again = false;
    // No reference into deadlines_ is held across a step: Transmit may add a queue (the
    // vector grows) and a completion callback may Close() the transport (it is cleared).
    auto due = [&](size_t qi) {
      return !closed_ && qi < deadlines_.size() && !deadlines_[qi].q.empty() &&
             deadlines_[qi].q.front().when <= now;
    };
    for (size_t qi = 0; !closed_ && qi < deadlines_.size(); ++qi) {
      while (due(qi)) {
        Deadline d = deadlines_[qi].q.front();
        deadlines_[qi].q.pop_front();
        auto it = pending_.find(d.tid);
        if (it == pending_.end() || it->second.gen != d.gen) continue;
        Pending& p = it->second;
        if (p.attempts <= p.options.retries && p.rmpp && p.rmpp->receiver &&
            !p.rmpp->receiver->complete() && !p.rmpp->receiver->failed()) {
          // The response is arriving as RMPP and stalled on a lost segment or ACK: its
          // sender resends the window on its own timer, while resending the request would
          // restart the whole transfer. Wait another attempt's time instead.
          ++p.attempts;
          ++counters_.retries;
          SetDeadline(d.tid, p);
          again = true;
          continue;
        }
        if (p.attempts <= p.options.retries) {
          ++counters_.retries;
          Transmit(d.tid, p);  // may push to this or another queue
          again = true;
          continue;
        }
        ++counters_.timeouts;
        if (p.rmpp && p.rmpp->sender && !p.rmpp->sender->done()) {
          ++counters_.rmpp_aborted;
          InjectSegments({p.rmpp->sender->MakeAbort(mad::rmpp::kStatusTooManyRetries)},
                         p.request.addr);
        }
        int attempts = p.attempts;
        Finish(d.tid, Timeout("SIM-TRN-003 no response after " + std::to_string(attempts) +
                              " attempts"));
      }
    }
  }
  if (!closed_) ArmTimer();
}

void SimTransport::Finish(uint64_t tid, Result<mad::MadMessage> result) {
  auto it = pending_.find(tid);
  if (it == pending_.end()) return;
  ResponseHandler done = std::move(it->second.done);
  pending_.erase(it);  // its deadline entries go stale and are skipped
  if (done) done(std::move(result));
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
  ++counters_.received;
  if (msg.bytes.size() < mad::kMadSize || Hdr(msg.bytes, kBaseVersionField) != 1) {
    ++counters_.malformed;
    return;
  }
  const uint8_t mclass = static_cast<uint8_t>(Hdr(msg.bytes, kClassField));
  const bool is_response = (Hdr(msg.bytes, kMethodField) & mad::method::kResponseBit) != 0;
  const uint64_t tid = Hdr(msg.bytes, kTidField);
  if (auto hs = mad::RmppHeaderSize(mclass); hs && mad::IsRmppActive(msg.bytes)) {
    OnRmpp(msg, mclass, tid, is_response, *hs);
    return;
  }
  if (is_response) {
    if (pending_.find(tid) == pending_.end()) {
      ++counters_.unmatched;
      return;
    }
    Finish(tid, std::move(msg));
    return;
  }
  ++counters_.unsolicited;
  if (unsolicited_) unsolicited_(std::move(msg));
}

// An RMPP-active MAD: ACK/STOP/ABORT of a transfer we send (a Send's request or a Post),
// or DATA of a response to our Send or of an unsolicited message.
void SimTransport::OnRmpp(mad::MadMessage& msg, uint8_t mclass, uint64_t tid, bool is_response,
                          size_t hs) {
  auto rh = mad::DecodeRmppHeader(msg.bytes);
  if (!rh.ok()) {
    ++counters_.malformed;
    return;
  }
  mad::MadAddress reply_to = msg.addr;
  if (rh->type == mad::rmpp::kTypeAck || rh->type == mad::rmpp::kTypeStop ||
      rh->type == mad::rmpp::kTypeAbort) {
    std::optional<mad::MadBytes> abort;
    auto pit = pending_.find(tid);
    if (pit != pending_.end() && pit->second.rmpp && pit->second.rmpp->sender) {
      Pending& p = pit->second;
      Status st = p.rmpp->sender->OnReply(msg.bytes, &abort);
      if (abort) InjectSegments({*abort}, p.request.addr);
      if (!st.ok()) {
        ++counters_.rmpp_aborted;
        Finish(tid, st);
        return;
      }
      InjectSegments(p.rmpp->sender->NextSegments(), p.request.addr);
      SetDeadline(tid, p);
      return;
    }
    const TransferKey key{mclass, tid, msg.addr.lid.value()};
    auto it = posts_.find(key);
    if (it == posts_.end()) {
      ++counters_.unmatched;
      return;
    }
    OutTransfer& t = *it->second;
    Status st = t.sender.OnReply(msg.bytes, &abort);
    if (abort) InjectSegments({*abort}, t.to);
    if (!st.ok()) {
      ++counters_.rmpp_aborted;
      Log(LogName::kSim).warn("SIM-RMPP-002 RMPP transfer tid {:#x} to lid {} ended: {}", tid,
                              t.to.lid.value(), st.ToString());
      posts_.erase(it);
      return;
    }
    t.attempts = 0;
    PumpPost(key);
    return;
  }
  if (rh->type != mad::rmpp::kTypeData) {
    ++counters_.malformed;
    return;
  }
  const bool first = rh->data1 == 1 && (rh->flags & mad::rmpp::kFlagFirst) != 0;
  if (is_response) {
    auto it = pending_.find(tid);
    if (it == pending_.end()) {
      ++counters_.unmatched;
      return;
    }
    Pending& p = it->second;
    if (!p.rmpp) {
      p.rmpp = std::make_unique<Rmpp>();
      p.rmpp->header_size = hs;
    }
    auto& rcv = p.rmpp->receiver;
    if (!rcv || (first && (rcv->complete() || rcv->failed()))) rcv.emplace(hs);
    auto step = rcv->Feed(msg.bytes);
    if (step.reply) InjectSegments({*step.reply}, reply_to);
    if (rcv->failed()) {
      ++counters_.rmpp_aborted;
      Finish(tid, step.status);
      return;
    }
    if (!step.status.ok()) {
      ++counters_.malformed;
      return;
    }
    if (rcv->complete()) {
      ++counters_.rmpp_reassembled;
      Finish(tid, mad::MadMessage{rcv->TakeMessage(), msg.addr});
      return;
    }
    SetDeadline(tid, p);  // progress: the response is still coming
    return;
  }
  InKey key{mclass, tid, msg.addr.lid.value()};
  auto it = inbound_.find(key);
  if (it == inbound_.end() ||
      (first && (it->second->receiver.complete() || it->second->receiver.failed()))) {
    it = inbound_.insert_or_assign(key, std::make_unique<InTransfer>(io_, hs)).first;
  }
  InTransfer& t = *it->second;
  bool was_complete = t.receiver.complete();
  auto step = t.receiver.Feed(msg.bytes);
  if (step.reply) InjectSegments({*step.reply}, reply_to);
  if (t.receiver.failed()) {
    ++counters_.rmpp_aborted;
    Log(LogName::kSim).warn("SIM-RMPP-003 inbound RMPP tid {:#x} from lid {} aborted: {}", tid,
                            msg.addr.lid.value(), step.status.ToString());
    inbound_.erase(it);
    return;
  }
  if (!step.status.ok()) {
    ++counters_.malformed;
    return;
  }
  // Kept (complete or not) until idle, so a lost final ACK is answered again.
  uint64_t gen = ++t.generation;
  t.idle.expires_after(options_.rmpp_receive_idle);
  t.idle.async_wait([this, alive = std::weak_ptr<bool>(alive_), key,
                     gen](const boost::system::error_code& ec) {
    auto a = alive.lock();
    if (ec || !a || !*a) return;
    auto i = inbound_.find(key);
    if (i == inbound_.end() || i->second->generation != gen) return;
    if (!i->second->receiver.complete()) ++counters_.rmpp_aborted;
    inbound_.erase(i);
  });
  if (!was_complete && t.receiver.complete()) {
    ++counters_.rmpp_reassembled;
    ++counters_.unsolicited;
    mad::MadMessage m{t.receiver.TakeMessage(), msg.addr};
    if (unsolicited_) unsolicited_(std::move(m));
  }
}

Status SimTransport::Post(mad::MadMessage message) {
  if (closed_) return Unavailable("SIM-TRN-001 transport closed or not bound");
  if (message.bytes.size() < mad::kMadSize) {
    return InvalidArgument("SIM-TRN-006 " + std::to_string(message.bytes.size()) +
                           "-byte message is shorter than a MAD");
  }
  if (message.bytes.size() == mad::kMadSize) {
    ++counters_.sent;
    sim_.Inject(port_, std::move(message));
    return Status::Ok();
  }
  const uint8_t mclass = static_cast<uint8_t>(Hdr(message.bytes, kClassField));
  auto hs = mad::RmppHeaderSize(mclass);
  if (!hs) {
    return InvalidArgument("SIM-TRN-002 " + std::to_string(message.bytes.size()) +
                           "-byte message in class " + std::to_string(mclass) +
                           ", which has no RMPP");
  }
  auto sender = mad::RmppSender::Create(message.bytes, *hs);
  if (!sender.ok()) return sender.status();
  TransferKey key{mclass, Hdr(message.bytes, kTidField), message.addr.lid.value()};
  auto t = std::make_unique<OutTransfer>(io_, std::move(sender).value());
  t->to = message.addr;
  posts_[key] = std::move(t);
  PumpPost(key);
  return Status::Ok();
}

// Sends what the window allows and (re)arms the ACK timer; on expiry resends the window,
// and after rmpp_post.retries resends aborts the transfer.
void SimTransport::PumpPost(const TransferKey& key) {
  auto it = posts_.find(key);
  if (it == posts_.end()) return;
  OutTransfer& t = *it->second;
  if (t.sender.done()) {
    posts_.erase(it);
    return;
  }
  InjectSegments(t.sender.NextSegments(), t.to);
  t.timer.expires_after(options_.rmpp_post.timeout);
  t.timer.async_wait([this, alive = std::weak_ptr<bool>(alive_),
                      key](const boost::system::error_code& ec) {
    auto a = alive.lock();
    if (ec || !a || !*a || closed_) return;
    auto it2 = posts_.find(key);
    if (it2 == posts_.end()) return;
    OutTransfer& tt = *it2->second;
    if (++tt.attempts > options_.rmpp_post.retries) {
      ++counters_.rmpp_aborted;
      Log(LogName::kSim).warn("SIM-RMPP-001 RMPP transfer tid {:#x} to lid {} got no ACK after "
                              "{} resends; aborted",
                              std::get<1>(key), tt.to.lid.value(), options_.rmpp_post.retries);
      InjectSegments({tt.sender.MakeAbort(mad::rmpp::kStatusTooManyRetries)}, tt.to);
      posts_.erase(it2);
      return;
    }
    ++counters_.retries;
    InjectSegments(tt.sender.OnTimeout(), tt.to);
    PumpPost(key);
  });
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
  if (closed_ && pending_.empty() && posts_.empty() && inbound_.empty()) return;
  closed_ = true;
  if (bind_status_.ok()) sim_.Unbind(port_);
  bind_status_ = Unavailable("SIM-TRN-001 transport closed");
  for (auto& [tid, p] : pending_) Fail(std::move(p.done), Unavailable("SIM-TRN-005 closed"));
  pending_.clear();
  posts_.clear();
  inbound_.clear();
  inbox_.clear();
  deadlines_.clear();
  timer_.cancel();
  timer_at_ = Clock::time_point::max();
}

}  // namespace ibsm::sim
