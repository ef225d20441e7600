// UmadTransport requests and transfers: TIDs, the in-flight budget by class, attempts,
// timeouts and retries, and the RMPP transfers we Post and pump until ACKed.
#include "mad/umad_transport.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/log.h"
#include "mad/umad_transport_internal.h"

namespace ibsm::mad {
namespace {

// Which queue a request waits in for the in-flight budget: SMPs (sweep, SMInfo, traps'
// follow-ups) first, then SA, then vendor classes (AR, SHARP), the PerfMgr last.
size_t BudgetPriority(uint8_t mgmt_class) {
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

}  // namespace

void UmadTransport::ArmTimer(boost::asio::steady_timer& timer, std::chrono::milliseconds after,
                             std::function<void()> fn) {
  timer.expires_after(after);
  std::weak_ptr<char> alive = alive_;
  timer.async_wait([alive, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec || !alive.lock()) return;
    fn();
  });
}

void UmadTransport::Send(MadMessage request, const SendOptions& options, ResponseHandler done) {
  auto fail = [&](Status s) {
    boost::asio::post(io_, [done = std::move(done), s = std::move(s)] { done(s); });
  };
  if (closed_) return fail(Unavailable("transport closed"));
  auto hdr = Decode<MadHeader>(request.bytes);
  if (!hdr.ok()) return fail(InvalidArgument("request: " + hdr.status().message()));
  if (hdr->is_response()) return fail(InvalidArgument("Send of a response; use Post"));
  uint32_t tid = next_tid_++;
  if (next_tid_ == 0) next_tid_ = 1;
  hdr->tid = tid;
  if (request.bytes.size() < kMadSize) request.bytes.resize(kMadSize, 0);
  EncodeTo(*hdr, request.bytes);

  auto p = std::make_unique<Pending>(io_);
  if (request.bytes.size() > kMadSize) {
    auto hs = RmppHeaderSize(hdr->mgmt_class);
    if (!hs) {
      return fail(InvalidArgument(fmt::format("{}-byte message in class {:#04x}, which has no RMPP",
                                              request.bytes.size(), hdr->mgmt_class)));
    }
    auto sender = RmppSender::Create(request.bytes, *hs, wire_mad_size_);
    if (!sender.ok()) return fail(sender.status());
    p->sender = std::move(sender).value();
  }
  p->request = std::move(request);
  p->options = options;
  p->done = std::move(done);
  TidKey key{hdr->mgmt_class, tid};
  pending_[key] = std::move(p);
  const bool queued = std::any_of(waiting_.begin(), waiting_.end(),
                                  [](const auto& q) { return !q.empty(); });
  if (queued || (options_.max_in_flight != 0 && InFlight() >= options_.max_in_flight)) {
    ++counters_.budget_waits;
    waiting_[BudgetPriority(key.first)].push_back(key);
    return Admit();
  }
  StartRequest(key);
}

void UmadTransport::NoteInFlight() {
  counters_.in_flight = InFlight();
  counters_.in_flight_high_water = std::max(counters_.in_flight_high_water, counters_.in_flight);
}

void UmadTransport::StartRequest(const TidKey& key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  it->second->started = true;
  ++started_;
  NoteInFlight();
  SendAttempt(key);
}

// Starts waiting requests, highest priority first, while the budget has room. Re-entered
// from a handler that sends (a request finishing on a write error): the outer loop goes on.
void UmadTransport::Admit() {
  if (admitting_ || closed_) return;
  admitting_ = true;
  while (options_.max_in_flight == 0 || InFlight() < options_.max_in_flight) {
    auto q = std::find_if(waiting_.begin(), waiting_.end(),
                          [](const auto& w) { return !w.empty(); });
    if (q == waiting_.end()) break;
    TidKey key = q->front();
    q->pop_front();
    StartRequest(key);
  }
  admitting_ = false;
}

void UmadTransport::ErasePost(const PostKey& key) {
  posts_.erase(key);
  NoteInFlight();
  Admit();
}

void UmadTransport::SendAttempt(const TidKey& key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  Pending& p = *it->second;
  if (++p.attempt > 1) ++counters_.retries;
  p.receiver.reset();
  Status st;
  if (p.sender) {
    std::vector<MadBytes> segs;
    if (p.attempt > 1 && p.sender->done()) {
      // Whole request delivered but no response: send it again from the start.
      auto hs = RmppHeaderSize(key.first);
      auto fresh = RmppSender::Create(p.request.bytes, *hs, wire_mad_size_);
      if (fresh.ok()) p.sender = std::move(fresh).value();
      segs = p.sender->NextSegments();
    } else {
      segs = p.attempt > 1 ? p.sender->OnTimeout() : p.sender->NextSegments();
    }
    for (const auto& s : segs) {
      st = WriteMad(s, p.request.addr);
      if (!st.ok()) break;
    }
  } else {
    st = WriteMad(p.request.bytes, p.request.addr);
  }
  if (!st.ok()) return FinishPending(key, st);
  uint64_t attempt = p.attempt;
  ArmTimer(p.timer, AttemptDeadline(p.options.timeout),
           [this, key, attempt] { OnRequestTimeout(key, attempt); });
}

void UmadTransport::OnRequestTimeout(const TidKey& key, uint64_t attempt) {
  auto it = pending_.find(key);
  if (it == pending_.end() || it->second->attempt != attempt) return;
  Pending& p = *it->second;
  if (p.attempt <= static_cast<uint64_t>(std::max(p.options.retries, 0))) return SendAttempt(key);
  ++counters_.timeouts;
  if (p.sender && !p.sender->done()) {
    ++counters_.rmpp_aborted;
    (void)WriteMad(p.sender->MakeAbort(rmpp::kStatusTooManyRetries), p.request.addr);
  }
  auto hdr = Decode<MadHeader>(p.request.bytes);
  Log(LogName::kMad).debug("MAD-UMAD-010 no response to class {:#04x} attr {:#06x} tid {:#x} "
                           "after {} attempts",
                           key.first, hdr.ok() ? hdr->attr_id : 0, key.second, p.attempt);
  FinishPending(key, Timeout(fmt::format("no response to class {:#04x} attr {:#06x} after {} "
                                         "attempts",
                                         key.first, hdr.ok() ? hdr->attr_id : 0, p.attempt)));
}

void UmadTransport::FinishPending(const TidKey& key, Result<MadMessage> result) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  std::unique_ptr<Pending> p = std::move(it->second);
  pending_.erase(it);
  p->timer.cancel();
  if (p->started && started_ > 0) --started_;
  NoteInFlight();
  if (p->done) p->done(std::move(result));
  Admit();
}

bool UmadTransport::TooBigForTheWire(std::span<const uint8_t> mad) const {
  if (wire_mad_size_ >= kMadSize || !IsRmppActive(mad)) return false;
  auto rh = DecodeRmppHeader(mad);
  constexpr uint8_t kOnly = rmpp::kFlagFirst | rmpp::kFlagLast;
  return rh.ok() && rh->type == rmpp::kTypeData && (rh->flags & kOnly) == kOnly &&
         size_t{rmpp::kRmppHeaderEnd} + rh->data2 > wire_mad_size_;
}

Status UmadTransport::Post(MadMessage message) {
  if (closed_) return Unavailable("transport closed");
  auto hdr = Decode<MadHeader>(message.bytes);
  if (!hdr.ok()) return InvalidArgument("post: " + hdr.status().message());
  if (message.bytes.size() <= kMadSize && !TooBigForTheWire(message.bytes)) {
    message.bytes.resize(kMadSize, 0);
    return WriteMad(message.bytes, message.addr);
  }
  if (message.bytes.size() <= kMadSize) {
    // A one-segment RMPP answer whose data does not fit the MADs this medium carries whole
    // (ibsim): sent as a transfer of smaller segments instead.
    auto rh = DecodeRmppHeader(message.bytes);
    message.bytes.resize(std::min<size_t>(kMadSize, rmpp::kRmppHeaderEnd + rh->data2));
  }
  auto hs = RmppHeaderSize(hdr->mgmt_class);
  if (!hs) {
    return InvalidArgument(fmt::format("{}-byte message in class {:#04x}, which has no RMPP",
                                       message.bytes.size(), hdr->mgmt_class));
  }
  auto sender = RmppSender::Create(message.bytes, *hs, wire_mad_size_);
  if (!sender.ok()) return sender.status();
  PostKey key{hdr->mgmt_class, static_cast<uint32_t>(hdr->tid), message.addr.lid.value(),
              message.addr.qpn};
  auto t = std::make_unique<OutTransfer>(io_, std::move(sender).value());
  t->to = message.addr;
  posts_[key] = std::move(t);
  NoteInFlight();
  PumpOutTransfer(key);
  return Status::Ok();
}

void UmadTransport::PumpOutTransfer(const PostKey& key) {
  auto it = posts_.find(key);
  if (it == posts_.end()) return;
  OutTransfer& t = *it->second;
  if (t.sender.done()) {
    ErasePost(key);
    return;
  }
  for (const auto& s : t.sender.NextSegments()) {
    if (!WriteMad(s, t.to).ok()) {
      ++counters_.rmpp_aborted;
      ErasePost(key);
      return;
    }
  }
  ArmTimer(t.timer, options_.rmpp_post.timeout, [this, key] {
    auto it2 = posts_.find(key);
    if (it2 == posts_.end()) return;
    OutTransfer& tt = *it2->second;
    if (++tt.attempts > options_.rmpp_post.retries) {
      ++counters_.rmpp_aborted;
      Log(LogName::kMad).warn("MAD-RMPP-001 RMPP transfer tid {:#x} to lid {} got no ACK after "
                              "{} resends; aborted",
                              std::get<1>(key), tt.to.lid, options_.rmpp_post.retries);
      (void)WriteMad(tt.sender.MakeAbort(rmpp::kStatusTooManyRetries), tt.to);
      ErasePost(key);
      return;
    }
    ++counters_.retries;
    for (const auto& s : tt.sender.OnTimeout()) (void)WriteMad(s, tt.to);
    PumpOutTransfer(key);
  });
}

}  // namespace ibsm::mad
