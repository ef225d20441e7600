// UmadTransport receive path: the receiver thread, matching what arrives to our requests,
// RMPP segments and ACKs inbound, and the expiry of inbound RMPP sessions.
#include "mad/umad_transport.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <infiniband/umad.h>

#include "base/log.h"
#include "mad/umad_transport_internal.h"

namespace ibsm::mad {
namespace {

constexpr uint32_t kGsiQkey = 0x80010000;
constexpr int kRecvPollMs = 100;  // how long Close may wait for the receiver thread

}  // namespace

bool AnswersUs(std::span<const uint8_t> mad, uint32_t umad_status) {
  if (umad_status != 0) return true;
  if (mad.size() < Layout<MadHeader>::kSize) return false;
  if ((mad[3] & method::kResponseBit) != 0) return true;
  if (!RmppHeaderSize(mad[1]) || mad.size() < rmpp::kRmppHeaderEnd || !IsRmppActive(mad))
    return false;
  auto rh = DecodeRmppHeader(mad);
  return rh.ok() && rh->type != rmpp::kTypeData;
}

void UmadTransport::ReceiverLoop() {
  std::vector<uint8_t> buf(umad_size() + kMadSize);
  std::weak_ptr<char> alive = alive_;
  // Answers come in bursts (up to max_wire_smps in flight): what is already queued is read
  // without waiting and handed over in one post, so the io thread is woken once per burst
  // rather than once per MAD (cross-thread wake-ups were a fifth of ibsmd's CPU on ibsim).
  constexpr size_t kMaxBatch = 64;
  std::vector<Inbound> batch;
  while (!stop_) {
    int length = static_cast<int>(kMadSize);
    int r = umad_recv(port_id_, buf.data(), &length, batch.empty() ? kRecvPollMs : 0);
    if (r >= 0) {
      Inbound in;
      in.status = static_cast<uint32_t>(umad_status(buf.data()));
      const ib_mad_addr_t* a = umad_get_mad_addr(buf.data());
      in.from.lid = Lid{ntohs(a->lid)};
      in.from.qpn = ntohl(a->qpn);
      in.from.qkey = kGsiQkey;
      in.from.sl = a->sl;
      in.from.pkey_index = a->pkey_index;
      size_t n = length < 0 ? 0 : std::min<size_t>(static_cast<size_t>(length), kMadSize);
      const auto* mad = static_cast<const uint8_t*>(umad_get_mad(buf.data()));
      if (!InboundAdmitted(inbound_queued_.load() + batch.size(),
                           AnswersUs({mad, n}, in.status), options_.max_inbound_queued)) {
        uint64_t dropped = ++inbound_dropped_;
        if (BacklogLogWorthy(dropped)) {
          Log(LogName::kMad).warn("MAD-UMAD-032 the io thread is {} MADs behind: a MAD from "
                                  "lid {} dropped ({} so far)",
                                  inbound_queued_.load(), in.from.lid, dropped);
        }
        continue;
      }
      in.bytes.assign(mad, mad + n);
      batch.push_back(std::move(in));
      if (batch.size() < kMaxBatch) continue;
    } else if (batch.empty()) {
      if (r != -ETIMEDOUT && r != -EWOULDBLOCK && r != -EINTR && r != -EAGAIN) {
        // A broken port must not spin a core.
        std::this_thread::sleep_for(std::chrono::milliseconds(kRecvPollMs));
      }
      continue;
    }
    inbound_queued_ += batch.size();
    boost::asio::post(io_, [this, alive, batch = std::move(batch)]() mutable {
      for (Inbound& in : batch) {
        if (!alive.lock()) return;
        OnInbound(std::move(in));
        --inbound_queued_;
      }
      if (alive.lock()) counters_.inbound_dropped = inbound_dropped_.load();
    });
    batch.clear();
  }
}

void UmadTransport::OnInbound(Inbound in) {
  ++counters_.received;
  // A peer may send an RMPP last segment short (see SendLength); libumad2sim delivers it at
  // that length, the kernel padded. The missing tail is zeros on the wire.
  if (in.bytes.size() >= rmpp::kRmppHeaderEnd && in.bytes.size() < kMadSize)
    in.bytes.resize(kMadSize, 0);
  if (in.bytes.size() < kMadSize) {
    ++counters_.malformed;
    Log(LogName::kMad).debug("MAD-UMAD-001 dropped a {}-byte MAD (need {})", in.bytes.size(),
                             kMadSize);
    return;
  }
  auto hdr = Decode<MadHeader>(in.bytes);
  if (!hdr.ok() || hdr->base_version != 1) {
    ++counters_.malformed;
    Log(LogName::kMad).debug("MAD-UMAD-002 dropped a MAD with base version {}",
                             hdr.ok() ? hdr->base_version : 0);
    return;
  }
  Log(LogName::kMad).trace("recv class {:#04x} method {:#04x} attr {:#06x} tid {:#x} status {}",
                           hdr->mgmt_class, hdr->method, hdr->attr_id, hdr->tid, in.status);
  TidKey key{hdr->mgmt_class, static_cast<uint32_t>(hdr->tid)};

  if (in.status != 0) {
    // Our own send came back: ibsim could not route it (status 110), or the kernel's timeout.
    auto it = pending_.find(key);
    if (it != pending_.end() && !hdr->is_response()) {
      Pending& p = *it->second;
      p.timer.cancel();
      OnRequestTimeout(key, p.attempt);
    } else if (!hdr->is_response() ||
               posts_.count(PostKey{key.first, key.second, in.from.lid.value(),
                                    in.from.qpn}) == 0) {
      ++counters_.unmatched;
    }
    return;
  }

  if (auto hs = RmppHeaderSize(hdr->mgmt_class)) {
    auto rh = DecodeRmppHeader(in.bytes);
    if (rh.ok() && (rh->flags & rmpp::kFlagActive) != 0) {
      OnRmppInbound(in, *hdr, *rh, *hs);
      return;
    }
  }

  if (hdr->is_response()) {
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      ++counters_.unmatched;
      return;
    }
    FinishPending(key, MadMessage{std::move(in.bytes), in.from});
    return;
  }
  ++counters_.unsolicited;
  if (unsolicited_) unsolicited_(MadMessage{std::move(in.bytes), in.from});
}

void UmadTransport::OnRmppInbound(Inbound& in, const MadHeader& hdr, const RmppHeader& rh,
                                  size_t hdr_size) {
  TidKey key{hdr.mgmt_class, static_cast<uint32_t>(hdr.tid)};
  MadAddress reply_to = in.from;
  reply_to.qkey = kGsiQkey;

  if (rh.type == rmpp::kTypeAck || rh.type == rmpp::kTypeStop || rh.type == rmpp::kTypeAbort) {
    // Answers to a transfer we send carry our method with the response bit flipped.
    std::optional<MadBytes> abort;
    if (hdr.is_response()) {
      auto it = pending_.find(key);
      if (it == pending_.end() || !it->second->sender) {
        ++counters_.unmatched;
        return;
      }
      Pending& p = *it->second;
      Status st = p.sender->OnReply(in.bytes, &abort);
      if (abort) (void)WriteMad(*abort, p.request.addr);
      if (!st.ok()) {
        ++counters_.rmpp_aborted;
        return FinishPending(key, st);
      }
      for (const auto& s : p.sender->NextSegments()) (void)WriteMad(s, p.request.addr);
      uint64_t attempt = p.attempt;
      ArmTimer(p.timer, AttemptDeadline(p.options.timeout),
               [this, key, attempt] { OnRequestTimeout(key, attempt); });
      return;
    }
    const PostKey pkey{key.first, key.second, in.from.lid.value(), in.from.qpn};
    auto it = posts_.find(pkey);
    if (it == posts_.end()) {
      // The final ACK of a one-segment RMPP response we Posted as a plain MAD lands here too,
      // and so does an answer from a host the transfer is not going to.
      ++counters_.unmatched;
      return;
    }
    OutTransfer& t = *it->second;
    Status st = t.sender.OnReply(in.bytes, &abort);
    if (abort) (void)WriteMad(*abort, t.to);
    if (!st.ok()) {
      ++counters_.rmpp_aborted;
      Log(LogName::kMad).warn("MAD-RMPP-002 RMPP transfer tid {:#x} to lid {} ended: {}",
                              key.second, t.to.lid, st.ToString());
      ErasePost(pkey);
      return;
    }
    t.attempts = 0;
    t.timer.cancel();
    PumpOutTransfer(pkey);
    return;
  }

  if (rh.type != rmpp::kTypeData) {
    ++counters_.malformed;
    return;
  }

  if (hdr.is_response()) {
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      ++counters_.unmatched;
      return;
    }
    Pending& p = *it->second;
    const bool first = rh.data1 == 1 && (rh.flags & rmpp::kFlagFirst) != 0;
    if (!p.receiver || (first && (p.receiver->complete() || p.receiver->failed()))) {
      p.receiver.emplace(hdr_size, 32, 16384, wire_mad_size_);
    }
    auto step = p.receiver->Feed(in.bytes);
    if (step.reply) (void)WriteMad(*step.reply, reply_to);
    if (p.receiver->failed()) {
      ++counters_.rmpp_aborted;
      return FinishPending(key, step.status);
    }
    if (!step.status.ok()) {
      ++counters_.malformed;
      return;
    }
    if (p.receiver->complete()) {
      ++counters_.rmpp_reassembled;
      return FinishPending(key, MadMessage{p.receiver->TakeMessage(), in.from});
    }
    uint64_t attempt = p.attempt;
    ArmTimer(p.timer, AttemptDeadline(p.options.timeout),
             [this, key, attempt] { OnRequestTimeout(key, attempt); });
    return;
  }

  const RmppInboundKey ikey{hdr.mgmt_class, static_cast<uint32_t>(hdr.tid), in.from.lid.value(),
                            in.from.qpn};
  auto o = inbound_rmpp_.Feed(ikey, hdr_size, in.bytes, std::chrono::steady_clock::now());
  if (o.step.reply) (void)WriteMad(*o.step.reply, reply_to);
  ArmRmppExpiry();
  if (o.refused != RmppRefusal::kNone) {
    ++counters_.rmpp_refused;
    if (BacklogLogWorthy(counters_.rmpp_refused)) {
      static constexpr const char* kWhy[] = {"", "its source holds too many transfers",
                                             "too many transfers in all",
                                             "transfers hold too many bytes in all"};
      Log(LogName::kMad).warn("MAD-RMPP-004 inbound RMPP tid {:#x} from lid {} qp {} refused: "
                              "{} ({} sessions, {} bytes held; {} refused so far)",
                              key.second, in.from.lid, in.from.qpn,
                              kWhy[static_cast<size_t>(o.refused)], inbound_rmpp_.size(),
                              inbound_rmpp_.bytes(), counters_.rmpp_refused);
    }
    return;
  }
  if (o.failed) {
    ++counters_.rmpp_aborted;
    if (BacklogLogWorthy(counters_.rmpp_aborted)) {
      Log(LogName::kMad).warn("MAD-RMPP-003 inbound RMPP tid {:#x} from lid {} aborted: {}",
                              key.second, in.from.lid, o.step.status.ToString());
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
    if (unsolicited_) unsolicited_(MadMessage{std::move(*o.message), in.from});
  }
}

// One timer for every inbound session: frees the idle and the too old (mad/rmpp_inbound.h).
void UmadTransport::ArmRmppExpiry() {
  if (rmpp_expiry_armed_ || closed_ || inbound_rmpp_.size() == 0) return;
  rmpp_expiry_armed_ = true;
  const auto every = std::clamp<std::chrono::milliseconds>(
      inbound_rmpp_.limits().idle / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
  ArmTimer(rmpp_expiry_, every, [this] {
    rmpp_expiry_armed_ = false;
    counters_.rmpp_aborted += inbound_rmpp_.Expire(std::chrono::steady_clock::now());
    ArmRmppExpiry();
  });
}

}  // namespace ibsm::mad
