#include "mad/rmpp_inbound.h"

namespace ibsm::mad {

size_t RmppInboundSessions::from_source(uint16_t lid, uint32_t qpn) const {
  auto it = per_source_.find({lid, qpn});
  return it == per_source_.end() ? 0 : it->second;
}

void RmppInboundSessions::Erase(Map::iterator it) {
  bytes_ -= it->second.held;
  auto src = per_source_.find({it->first.lid, it->first.qpn});
  if (src != per_source_.end() && --src->second == 0) per_source_.erase(src);
  sessions_.erase(it);
}

RmppInboundSessions::Outcome RmppInboundSessions::Feed(const RmppInboundKey& key,
                                                       size_t header_size,
                                                       std::span<const uint8_t> mad,
                                                       Clock::time_point now) {
  Outcome out;
  auto rh = DecodeRmppHeader(mad);
  const bool first = rh.ok() && rh->data1 == 1 && (rh->flags & rmpp::kFlagFirst) != 0;
  auto it = sessions_.find(key);
  if (it != sessions_.end() && first &&
      (it->second.receiver.complete() || it->second.receiver.failed())) {
    Erase(it);
    it = sessions_.end();
  }
  if (it == sessions_.end()) {
    RmppRefusal why = RmppRefusal::kNone;
    if (from_source(key.lid, key.qpn) >= limits_.per_source) {
      why = RmppRefusal::kPerSource;
      ++counters_.refused_per_source;
    } else if (sessions_.size() >= limits_.total) {
      why = RmppRefusal::kTotal;
      ++counters_.refused_total;
    }
    if (why != RmppRefusal::kNone) {
      out.refused = why;
      out.step = RmppReceiver(header_size, 32, 16384, mad_size_).Refuse(mad);
      return out;
    }
    it = sessions_.try_emplace(key, header_size, mad_size_, now).first;
    ++per_source_[{key.lid, key.qpn}];
  }
  Session& s = it->second;
  const bool was_complete = s.receiver.complete();
  out.step = s.receiver.Feed(mad);
  s.last = now;
  bytes_ -= s.held;
  s.held = s.receiver.bytes();
  bytes_ += s.held;
  if (s.receiver.failed()) {
    out.failed = true;
    Erase(it);
    return out;
  }
  if (bytes_ > limits_.total_bytes) {
    // The session that pushed the total over ends; the others keep what they hold.
    ++counters_.refused_bytes;
    out.refused = RmppRefusal::kBytes;
    out.step = s.receiver.Refuse(mad);
    Erase(it);
    return out;
  }
  if (!was_complete && s.receiver.complete()) {
    out.message = s.receiver.TakeMessage();
    bytes_ -= s.held;
    s.held = 0;
  }
  return out;
}

size_t RmppInboundSessions::Expire(Clock::time_point now) {
  size_t incomplete = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const Session& s = it->second;
    const bool idle = now - s.last >= limits_.idle;
    const bool old = now - s.opened >= limits_.lifetime;
    if (!idle && !old) {
      ++it;
      continue;
    }
    if (!s.receiver.complete()) {
      ++incomplete;
      ++counters_.expired;
    }
    Erase(it++);
  }
  return incomplete;
}

void RmppInboundSessions::Clear() {
  sessions_.clear();
  per_source_.clear();
  bytes_ = 0;
}

}  // namespace ibsm::mad
