// UmadTransport receive path: the receiver thread, and what arrives handed to the dispatcher
// on the io thread (mad/mad_dispatcher.h matches it to our requests and reassembles RMPP).
#include "mad/umad_transport.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <memory>
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
      if (alive.lock()) Counters().inbound_dropped = inbound_dropped_.load();
    });
    batch.clear();
  }
}

void UmadTransport::OnInbound(Inbound in) {
  // A peer may send an RMPP last segment short (see SendLength); libumad2sim delivers it at
  // that length, the kernel padded. The missing tail is zeros on the wire.
  if (in.bytes.size() >= rmpp::kRmppHeaderEnd && in.bytes.size() < kMadSize)
    in.bytes.resize(kMadSize, 0);
  // The dispatcher counts what it drops; the why is logged here, with this medium's IDs.
  if (in.bytes.size() < kMadSize) {
    Log(LogName::kMad).debug("MAD-UMAD-001 dropped a {}-byte MAD (need {})", in.bytes.size(),
                             kMadSize);
  } else if (auto hdr = Decode<MadHeader>(in.bytes); !hdr.ok() || hdr->base_version != 1) {
    Log(LogName::kMad).debug("MAD-UMAD-002 dropped a MAD with base version {}",
                             hdr.ok() ? hdr->base_version : 0);
  } else {
    Log(LogName::kMad).trace("recv class {:#04x} method {:#04x} attr {:#06x} tid {:#x} status {}",
                             hdr->mgmt_class, hdr->method, hdr->attr_id, hdr->tid, in.status);
  }
  dispatcher_.OnInbound(MadMessage{std::move(in.bytes), in.from}, in.status != 0);
}

}  // namespace ibsm::mad
