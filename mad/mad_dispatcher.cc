#include "mad/mad_dispatcher.h"

#include <algorithm>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

namespace ibsm::mad {
namespace {

// The header fields read on every MAD, straight from the codec's table (no Decode of the
// whole header on the simulator's hot path).
using HdrLayout = Layout<MadHeader>;
const Field<MadHeader>& kBaseVersionField = HdrLayout::kFields[0];
const Field<MadHeader>& kClassField = HdrLayout::kFields[1];
const Field<MadHeader>& kMethodField = HdrLayout::kFields[3];
const Field<MadHeader>& kTidField = HdrLayout::kFields[6];
const Field<MadHeader>& kAttrField = HdrLayout::kFields[7];
static_assert(HdrLayout::kFields[1].bit_width == 8 && HdrLayout::kFields[1].bit_offset == 8);
static_assert(HdrLayout::kFields[3].bit_width == 8 && HdrLayout::kFields[3].bit_offset == 24);
static_assert(HdrLayout::kFields[6].bit_width == 64);
static_assert(HdrLayout::kFields[7].bit_width == 16);

uint64_t Hdr(std::span<const uint8_t> b, const Field<MadHeader>& f) {
  return GetBits(b, f.bit_offset, f.bit_width);
}

// Which queue a request waits in for the in-flight budget: SMPs (sweep, SMInfo, traps'
// follow-ups) first, then SA, then vendor classes (AR, SHARP), the PerfMgr last.
size_t WaitQueueOf(uint8_t mgmt_class) {
  switch (static_cast<MgmtClass>(mgmt_class)) {
    case MgmtClass::kSubnDirected:
    case MgmtClass::kSubnLid:
      return 0;
    case MgmtClass::kSubnAdm:
      return 1;
    case MgmtClass::kPerfMgt:
      return 3;
    default:
      return 2;
  }
}

// Where the kernel also times a request, our deadline waits a little longer than the timeout
// handed to it, so that its ETIMEDOUT return of the send arrives first.
std::chrono::milliseconds AttemptDeadline(std::chrono::milliseconds t, bool kernel_timeouts) {
  return kernel_timeouts ? t + t / 4 + std::chrono::milliseconds(5) : t;
}

// The first ten, then every thousandth: a flood must not flood the log.
bool LogWorthy(uint64_t n) { return n <= 10 || n % 1000 == 0; }

}  // namespace

struct MadDispatcher::OutTransfer {
  OutTransfer(boost::asio::io_context& io, RmppSender s) : sender(std::move(s)), timer(io) {}
  RmppSender sender;
  MadAddress to;
  int attempts = 0;
  boost::asio::steady_timer timer;
};

MadDispatcher::MadDispatcher(boost::asio::io_context& io, MadWire& wire,
                             const DispatcherOptions& options)
    : io_(io),
      wire_(wire),
      options_(options),
      next_tid_(options.first_tid),
      timer_(io),
      inbound_(options.rmpp_inbound, options.mad_size),
      rmpp_expiry_(io) {}

MadDispatcher::~MadDispatcher() = default;

void MadDispatcher::set_mad_size(size_t mad_size) {
  options_.mad_size = mad_size;
  inbound_.set_mad_size(mad_size);
}

void MadDispatcher::Fail(ResponseHandler done, Status status) {
  boost::asio::post(io_, [done = std::move(done), status = std::move(status)]() mutable {
    done(std::move(status));
  });
}

// ---- Writes.

// A request the kernel keeps to match its response gets its timeout (it drops responses to
// sends without one): our requests sent as one MAD, and the ACKs of their RMPP responses,
// which carry the request's method, TID and class.
std::chrono::milliseconds MadDispatcher::KernelTimeout(std::span<const uint8_t> mad) const {
  if (!options_.kernel_timeouts || mad.size() < HdrLayout::kSize) return {};
  const auto m = static_cast<uint8_t>(Hdr(mad, kMethodField));
  if ((m & method::kResponseBit) != 0 || m == method::kTrapRepress) return {};
  auto it = pending_.find(
      Key(static_cast<uint8_t>(Hdr(mad, kClassField)), Hdr(mad, kTidField)));
  if (it == pending_.end() || (it->second.rmpp && it->second.rmpp->sender)) return {};
  return it->second.options.timeout;
}

Status MadDispatcher::WriteTo(std::span<const uint8_t> mad, const MadAddress& to) {
  const auto timeout = KernelTimeout(mad);
  return wire_.WriteMad(MadMessage{std::vector<uint8_t>(mad.begin(), mad.end()), to}, timeout);
}

Status MadDispatcher::Write(MadMessage mad) {
  if (closed_) return Unavailable("transport closed");
  const auto timeout = KernelTimeout(mad.bytes);
  return wire_.WriteMad(std::move(mad), timeout);
}

// ---- Requests.

void MadDispatcher::Send(MadMessage request, const SendOptions& options, ResponseHandler done) {
  if (closed_) return Fail(std::move(done), Unavailable("transport closed"));
  const auto mclass = static_cast<uint8_t>(Hdr(request.bytes, kClassField));
  uint64_t tid = next_tid_++;
  if (options_.match_low_tid && next_tid_ > 0xffffffffu) next_tid_ = 1;
  SetBits(request.bytes, kTidField.bit_offset, kTidField.bit_width, tid);
  std::unique_ptr<Rmpp> rmpp;
  if (request.bytes.size() > kMadSize) {
    auto hs = RmppHeaderSize(mclass);
    if (!hs) {
      return Fail(std::move(done),
                  InvalidArgument(fmt::format("{}-byte message in class {:#04x}, which has no "
                                              "RMPP",
                                              request.bytes.size(), mclass)));
    }
    auto sender = RmppSender::Create(request.bytes, *hs, options_.mad_size);
    if (!sender.ok()) return Fail(std::move(done), sender.status());
    rmpp = std::make_unique<Rmpp>();
    rmpp->header_size = *hs;
    rmpp->sender = std::move(sender).value();
  }
  const uint64_t key = Key(mclass, tid);
  auto [it, inserted] = pending_.try_emplace(key);
  Pending& p = it->second;
  if (!inserted) p = Pending{};  // a TID come round again: the newer request owns it
  p.mgmt_class = mclass;
  p.attr_id = static_cast<uint16_t>(Hdr(request.bytes, kAttrField));
  p.request = std::move(request);
  p.options = options;
  p.done = std::move(done);
  p.rmpp = std::move(rmpp);
  if (!options_.in_flight_budget) return Attempt(key, p);
  const bool queued = std::any_of(waiting_.begin(), waiting_.end(),
                                  [](const auto& q) { return !q.empty(); });
  if (queued || (options_.max_in_flight != 0 && InFlight() >= options_.max_in_flight)) {
    ++counters_.budget_waits;
    waiting_[WaitQueueOf(mclass)].push_back(key);
    return Admit();
  }
  StartRequest(key);
}

void MadDispatcher::NoteInFlight() {
  counters_.in_flight = InFlight();
  counters_.in_flight_high_water = std::max(counters_.in_flight_high_water, counters_.in_flight);
}

void MadDispatcher::StartRequest(uint64_t key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  it->second.started = true;
  ++started_;
  NoteInFlight();
  Attempt(key, it->second);
}

// Starts waiting requests, highest priority first, while the budget has room. Re-entered
// from a handler that sends (a request finishing on a write error): the outer loop goes on.
void MadDispatcher::Admit() {
  if (admitting_ || closed_) return;
  admitting_ = true;
  while (options_.max_in_flight == 0 || InFlight() < options_.max_in_flight) {
    auto q = std::find_if(waiting_.begin(), waiting_.end(),
                          [](const auto& w) { return !w.empty(); });
    if (q == waiting_.end()) break;
    uint64_t key = q->front();
    q->pop_front();
    StartRequest(key);
  }
  admitting_ = false;
}

// One attempt: its deadline, then the request (or its RMPP window) written; a write that
// fails ends the request and leaves the deadline stale. The medium may deliver the answer at
// once; it is queued for the io_context, so `p` stays valid here.
void MadDispatcher::Attempt(uint64_t key, Pending& p) {
  if (++p.attempts > 1) ++counters_.retries;
  SetDeadline(key, p);
  if (p.rmpp) p.rmpp->receiver.reset();  // a resend starts any RMPP response afresh
  Status st;
  if (p.rmpp && p.rmpp->sender) {
    Rmpp& r = *p.rmpp;
    std::vector<MadBytes> segs;
    if (p.attempts > 1 && r.sender->done()) {
      // Whole request delivered but no response: send it again from the start.
      auto fresh = RmppSender::Create(p.request.bytes, r.header_size, options_.mad_size);
      if (fresh.ok()) r.sender = std::move(fresh).value();
      segs = r.sender->NextSegments();
    } else {
      segs = p.attempts > 1 ? r.sender->OnTimeout() : r.sender->NextSegments();
    }
    for (const auto& s : segs) {
      st = WriteTo(s, p.request.addr);
      if (!st.ok()) break;
    }
  } else {
    const auto timeout = KernelTimeout(p.request.bytes);
    if (p.attempts > p.options.retries) {
      // The last attempt: nothing will resend it, so the bytes go to the medium.
      st = wire_.WriteMad(MadMessage{std::move(p.request.bytes), p.request.addr}, timeout);
    } else {
      st = wire_.WriteMad(p.request, timeout);
    }
  }
  if (!st.ok()) Finish(key, st);
}

void MadDispatcher::SetDeadline(uint64_t key, Pending& p) {
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
    auto it = pending_.find(dq->q.front().key);
    if (it != pending_.end() && it->second.gen == dq->q.front().gen) break;
    dq->q.pop_front();
  }
  Clock::time_point when =
      Clock::now() + AttemptDeadline(p.options.timeout, options_.kernel_timeouts);
  dq->q.push_back(Deadline{when, key, p.gen});
  if (when < timer_at_) ArmTimer();
}

void MadDispatcher::ArmTimer() {
  Clock::time_point first = Clock::time_point::max();
  for (const auto& q : deadlines_)
    if (!q.q.empty()) first = std::min(first, q.q.front().when);
  timer_at_ = first;
  if (first == Clock::time_point::max()) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(timer_at_);
  timer_.async_wait([this, alive = std::weak_ptr<char>(alive_)](
                        const boost::system::error_code& ec) {
    if (ec || !alive.lock()) return;
    timer_at_ = Clock::time_point::max();
    OnTimer();
  });
}

// Deadlines are lazy: an entry whose request was answered, resent or moved on is skipped.
void MadDispatcher::OnTimer() {
  Clock::time_point now = Clock::now();
  bool again = true;
  while (again && !closed_) {
    again = false;
    // No reference into deadlines_ is held across a step: an attempt may add a queue (the
    // vector grows) and a completion callback may Close the transport (it is cleared).
    auto due = [&](size_t qi) {
      return !closed_ && qi < deadlines_.size() && !deadlines_[qi].q.empty() &&
             deadlines_[qi].q.front().when <= now;
    };
    for (size_t qi = 0; !closed_ && qi < deadlines_.size(); ++qi) {
      while (due(qi)) {
        Deadline d = deadlines_[qi].q.front();
        deadlines_[qi].q.pop_front();
        auto it = pending_.find(d.key);
        if (it == pending_.end() || it->second.gen != d.gen) continue;
        AttemptOver(d.key, it->second);
        again = true;
      }
    }
  }
  if (!closed_) ArmTimer();
}

// The attempt's deadline passed, or the medium returned the request undelivered: wait, send
// it again, or give up.
void MadDispatcher::AttemptOver(uint64_t key, Pending& p) {
  if (options_.rmpp_stall_waits && p.attempts <= p.options.retries && p.rmpp &&
      p.rmpp->receiver && !p.rmpp->receiver->complete() && !p.rmpp->receiver->failed()) {
    // The response is arriving as RMPP and stalled on a lost segment or ACK: its sender
    // resends the window on its own timer, while resending the request would restart the
    // whole transfer. Wait another attempt's time instead.
    ++p.attempts;
    ++counters_.retries;
    SetDeadline(key, p);
    return;
  }
  if (p.attempts <= std::max(p.options.retries, 0)) return Attempt(key, p);
  ++counters_.timeouts;
  if (p.rmpp && p.rmpp->sender && !p.rmpp->sender->done()) {
    ++counters_.rmpp_aborted;
    (void)WriteTo(p.rmpp->sender->MakeAbort(rmpp::kStatusTooManyRetries), p.request.addr);
  }
  const std::string what = fmt::format("no response to class {:#04x} attr {:#06x} after {} "
                                       "attempts",
                                       p.mgmt_class, p.attr_id, p.attempts);
  if (!options_.timeout_log_id.empty()) {
    Log(options_.log_name).debug("{} no response to class {:#04x} attr {:#06x} tid {:#x} after "
                                 "{} attempts",
                                 options_.timeout_log_id, p.mgmt_class, p.attr_id, TidOf(key),
                                 p.attempts);
  }
  Finish(key, Timeout(options_.timeout_status_id.empty()
                          ? what
                          : fmt::format("{} {}", options_.timeout_status_id, what)));
}

void MadDispatcher::Finish(uint64_t key, Result<MadMessage> result) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  ResponseHandler done = std::move(it->second.done);
  const bool started = it->second.started;
  pending_.erase(it);  // its deadline entries go stale and are skipped
  if (pending_.empty() && options_.stop_timer_when_idle) {
    deadlines_.clear();
    if (timer_at_ != Clock::time_point::max()) timer_.cancel();
    timer_at_ = Clock::time_point::max();
  }
  if (options_.in_flight_budget) {
    if (started && started_ > 0) --started_;
    NoteInFlight();
  }
  if (done) done(std::move(result));
  if (options_.in_flight_budget) Admit();
}

// ---- Inbound.

void MadDispatcher::OnInbound(MadMessage msg, bool returned) {
  ++counters_.received;
  if (msg.bytes.size() < kMadSize || Hdr(msg.bytes, kBaseVersionField) != 1) {
    ++counters_.malformed;
    return;
  }
  const auto mclass = static_cast<uint8_t>(Hdr(msg.bytes, kClassField));
  const bool is_response = (Hdr(msg.bytes, kMethodField) & method::kResponseBit) != 0;
  const uint64_t tid = Hdr(msg.bytes, kTidField);
  if (returned) {
    // Our own send came back: the medium could not route it, or the kernel's timeout.
    auto it = pending_.find(Key(mclass, tid));
    if (it != pending_.end() && !is_response) {
      AttemptOver(it->first, it->second);  // every way on moves or ends the deadline
    } else if (!is_response ||
               posts_.count(PostKey{mclass, TidOf(tid), msg.addr.lid.value(),
                                    QpOf(msg.addr)}) == 0) {
      ++counters_.unmatched;
    }
    return;
  }
  if (auto hs = RmppHeaderSize(mclass); hs && IsRmppActive(msg.bytes)) {
    OnRmpp(msg, mclass, tid, is_response, *hs);
    return;
  }
  if (is_response) {
    const uint64_t key = Key(mclass, tid);
    if (pending_.find(key) == pending_.end()) {
      ++counters_.unmatched;
      return;
    }
    Finish(key, std::move(msg));
    return;
  }
  ++counters_.unsolicited;
  if (unsolicited_) unsolicited_(std::move(msg));
}

// An RMPP-active MAD: ACK/STOP/ABORT of a transfer we send (a Send's request or a Post),
// or DATA of a response to our Send or of a peer's unsolicited message.
void MadDispatcher::OnRmpp(MadMessage& msg, uint8_t mclass, uint64_t tid, bool is_response,
                           size_t hs) {
  auto rh = DecodeRmppHeader(msg.bytes);
  if (!rh.ok()) {
    ++counters_.malformed;
    return;
  }
  const uint64_t key = Key(mclass, tid);
  if (rh->type == rmpp::kTypeAck || rh->type == rmpp::kTypeStop ||
      rh->type == rmpp::kTypeAbort) {
    std::optional<MadBytes> abort;
    // Answers to a transfer we send carry our method with the response bit flipped: with
    // match_low_tid only a response is looked for among our requests.
    auto pit = is_response || !options_.match_low_tid ? pending_.find(key) : pending_.end();
    if (pit != pending_.end() && pit->second.rmpp && pit->second.rmpp->sender) {
      Pending& p = pit->second;
      Status st = p.rmpp->sender->OnReply(msg.bytes, &abort);
      if (abort) (void)WriteTo(*abort, p.request.addr);
      if (!st.ok()) {
        ++counters_.rmpp_aborted;
        return Finish(key, st);
      }
      for (const auto& s : p.rmpp->sender->NextSegments()) (void)WriteTo(s, p.request.addr);
      SetDeadline(key, p);
      return;
    }
    if (is_response && options_.match_low_tid) {
      ++counters_.unmatched;
      return;
    }
    const PostKey pkey{mclass, TidOf(tid), msg.addr.lid.value(), QpOf(msg.addr)};
    auto it = posts_.find(pkey);
    if (it == posts_.end()) {
      // The final ACK of a one-segment RMPP answer Posted as a plain MAD lands here too, and
      // so does an answer from a host the transfer is not going to.
      ++counters_.unmatched;
      return;
    }
    OutTransfer& t = *it->second;
    Status st = t.sender.OnReply(msg.bytes, &abort);
    if (abort) (void)WriteTo(*abort, t.to);
    if (!st.ok()) {
      ++counters_.rmpp_aborted;
      Log(options_.log_name).warn("{}-002 RMPP transfer tid {:#x} to lid {} ended: {}",
                                  options_.rmpp_log_id, TidOf(tid), t.to.lid, st.ToString());
      ErasePost(pkey);
      return;
    }
    t.attempts = 0;
    t.timer.cancel();
    PumpPost(pkey);
    return;
  }
  if (rh->type != rmpp::kTypeData) {
    ++counters_.malformed;
    return;
  }
  if (!is_response) return OnInboundData(msg, mclass, tid, hs);
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    ++counters_.unmatched;
    return;
  }
  Pending& p = it->second;
  if (!p.rmpp) {
    p.rmpp = std::make_unique<Rmpp>();
    p.rmpp->header_size = hs;
  }
  const bool first = rh->data1 == 1 && (rh->flags & rmpp::kFlagFirst) != 0;
  auto& rcv = p.rmpp->receiver;
  if (!rcv || (first && (rcv->complete() || rcv->failed())))
    rcv.emplace(hs, 32, 16384, options_.mad_size);
  auto step = rcv->Feed(msg.bytes);
  if (step.reply) (void)WriteTo(*step.reply, msg.addr);
  if (rcv->failed()) {
    ++counters_.rmpp_aborted;
    return Finish(key, step.status);
  }
  if (!step.status.ok()) {
    ++counters_.malformed;
    return;
  }
  if (rcv->complete()) {
    ++counters_.rmpp_reassembled;
    return Finish(key, MadMessage{rcv->TakeMessage(), msg.addr});
  }
  SetDeadline(key, p);  // progress: the response is still coming
}

// DATA of a message a peer sends us (an SA Set, a GetMulti): reassembled within the caps
// of mad/rmpp_inbound.h, then handed to the unsolicited handler.
void MadDispatcher::OnInboundData(MadMessage& msg, uint8_t mclass, uint64_t tid, size_t hs) {
  const RmppInboundKey ikey{mclass, TidOf(tid), msg.addr.lid.value(), QpOf(msg.addr)};
  auto o = inbound_.Feed(ikey, hs, msg.bytes, Clock::now());
  if (o.step.reply) (void)WriteTo(*o.step.reply, msg.addr);
  ArmRmppExpiry();
  if (o.refused != RmppRefusal::kNone) {
    ++counters_.rmpp_refused;
    if (LogWorthy(counters_.rmpp_refused)) {
      static constexpr const char* kWhy[] = {"", "its source holds too many transfers",
                                             "too many transfers in all",
                                             "transfers hold too many bytes in all"};
      Log(options_.log_name).warn("{}-004 inbound RMPP tid {:#x} from lid {} qp {} refused: "
                                  "{} ({} sessions, {} bytes held; {} refused so far)",
                                  options_.rmpp_log_id, TidOf(tid), msg.addr.lid, msg.addr.qpn,
                                  kWhy[static_cast<size_t>(o.refused)], inbound_.size(),
                                  inbound_.bytes(), counters_.rmpp_refused);
    }
    return;
  }
  if (o.failed) {
    ++counters_.rmpp_aborted;
    if (LogWorthy(counters_.rmpp_aborted)) {
      Log(options_.log_name).warn("{}-003 inbound RMPP tid {:#x} from lid {} aborted: {}",
                                  options_.rmpp_log_id, TidOf(tid), msg.addr.lid,
                                  o.step.status.ToString());
    }
    return;
  }
  if (!o.step.status.ok()) {
    ++counters_.malformed;
    return;
  }
  if (o.message) {
    ++counters_.rmpp_reassembled;
    ++counters_.unsolicited;
    if (unsolicited_) unsolicited_(MadMessage{std::move(*o.message), msg.addr});
  }
}

// One timer for every inbound session: frees the idle and the too old (mad/rmpp_inbound.h).
void MadDispatcher::ArmRmppExpiry() {
  if (rmpp_expiry_armed_ || closed_ || inbound_.size() == 0) return;
  rmpp_expiry_armed_ = true;
  const auto every = std::clamp<std::chrono::milliseconds>(
      inbound_.limits().idle / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
  rmpp_expiry_.expires_after(every);
  rmpp_expiry_.async_wait([this, alive = std::weak_ptr<char>(alive_)](
                              const boost::system::error_code& ec) {
    if (ec || !alive.lock()) return;
    rmpp_expiry_armed_ = false;
    counters_.rmpp_aborted += inbound_.Expire(Clock::now());
    ArmRmppExpiry();
  });
}

// ---- Posted RMPP transfers.

Status MadDispatcher::PostTransfer(MadMessage message) {
  if (closed_) return Unavailable("transport closed");
  const auto mclass = static_cast<uint8_t>(Hdr(message.bytes, kClassField));
  auto hs = RmppHeaderSize(mclass);
  if (!hs) {
    return InvalidArgument(fmt::format("{}-byte message in class {:#04x}, which has no RMPP",
                                       message.bytes.size(), mclass));
  }
  auto sender = RmppSender::Create(message.bytes, *hs, options_.mad_size);
  if (!sender.ok()) return sender.status();
  const PostKey key{mclass, TidOf(Hdr(message.bytes, kTidField)), message.addr.lid.value(),
                    QpOf(message.addr)};
  auto t = std::make_unique<OutTransfer>(io_, std::move(sender).value());
  t->to = message.addr;
  posts_[key] = std::move(t);
  if (options_.in_flight_budget) NoteInFlight();
  PumpPost(key);
  return Status::Ok();
}

void MadDispatcher::ErasePost(const PostKey& key) {
  posts_.erase(key);
  if (!options_.in_flight_budget) return;
  NoteInFlight();
  Admit();
}

// Sends what the window allows and (re)arms the ACK timer; on expiry resends the window,
// and after rmpp_post.retries resends aborts the transfer.
void MadDispatcher::PumpPost(const PostKey& key) {
  auto it = posts_.find(key);
  if (it == posts_.end()) return;
  OutTransfer& t = *it->second;
  if (t.sender.done()) {
    ErasePost(key);
    return;
  }
  for (const auto& s : t.sender.NextSegments()) {
    if (!WriteTo(s, t.to).ok()) {
      ++counters_.rmpp_aborted;
      ErasePost(key);
      return;
    }
  }
  t.timer.expires_after(options_.rmpp_post.timeout);
  t.timer.async_wait([this, alive = std::weak_ptr<char>(alive_),
                      key](const boost::system::error_code& ec) {
    if (ec || !alive.lock() || closed_) return;
    auto it2 = posts_.find(key);
    if (it2 == posts_.end()) return;
    OutTransfer& tt = *it2->second;
    if (++tt.attempts > options_.rmpp_post.retries) {
      ++counters_.rmpp_aborted;
      Log(options_.log_name).warn("{}-001 RMPP transfer tid {:#x} to lid {} got no ACK after "
                                  "{} resends; aborted",
                                  options_.rmpp_log_id, std::get<1>(key), tt.to.lid,
                                  options_.rmpp_post.retries);
      (void)WriteTo(tt.sender.MakeAbort(rmpp::kStatusTooManyRetries), tt.to);
      ErasePost(key);
      return;
    }
    ++counters_.retries;
    for (const auto& s : tt.sender.OnTimeout()) (void)WriteTo(s, tt.to);
    PumpPost(key);
  });
}

// ---- Close.

void MadDispatcher::Close(const Status& why, bool deferred) {
  closed_ = true;
  std::vector<std::pair<uint64_t, ResponseHandler>> handlers;
  handlers.reserve(pending_.size());
  for (auto& [key, p] : pending_) handlers.emplace_back(key, std::move(p.done));
  pending_.clear();
  posts_.clear();
  inbound_.Clear();
  rmpp_expiry_.cancel();
  for (auto& q : waiting_) q.clear();
  started_ = 0;
  if (options_.in_flight_budget) counters_.in_flight = 0;
  deadlines_.clear();
  timer_.cancel();
  timer_at_ = Clock::time_point::max();
  if (deferred) {
    for (auto& [key, done] : handlers)
      if (done) Fail(std::move(done), why);
    return;
  }
  // In request order (class, then TID), as the handlers were always called.
  std::sort(handlers.begin(), handlers.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [key, done] : handlers)
    if (done) done(why);
}

}  // namespace ibsm::mad
