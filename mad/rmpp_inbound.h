// Inbound RMPP reassembly sessions: multi-segment requests peers send us (SA Set, GetMulti).
// Every peer is untrusted and one session may hold up to 16,384 segments, so what they may
// make us keep is capped: sessions per source (LID, QP), sessions in all, payload bytes held
// in all, and a session is freed when idle or too old however busy its sender keeps it
// (README "MAD transport: backpressure"). A segment over a cap is answered with an RMPP
// ABORT, status 1 (ResourcesExhausted), and counted.
//
// Pure bookkeeping, no I/O and no timers: the transport feeds segments and calls Expire.
#pragma once

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "mad/rmpp.h"

namespace ibsm::mad {

struct RmppInboundLimits {
  size_t per_source = 16;                 // sessions one (LID, QP) may hold at once
  size_t total = 256;                     // sessions in all
  size_t total_bytes = size_t{16} << 20;  // payload held across every session
  std::chrono::milliseconds idle{std::chrono::seconds(10)};      // no new segment: freed
  std::chrono::milliseconds lifetime{std::chrono::seconds(60)};  // however active: freed
};

// One transfer: TIDs are only unique per requester, so the source is part of the key.
struct RmppInboundKey {
  uint8_t mgmt_class = 0;
  uint64_t tid = 0;  // as the transport matches TIDs: UmadTransport keeps the low 32 bits
  uint16_t lid = 0;
  uint32_t qpn = 0;
  auto operator<=>(const RmppInboundKey&) const = default;
};

enum class RmppRefusal { kNone, kPerSource, kTotal, kBytes };

struct RmppInboundCounters {
  uint64_t refused_per_source = 0;  // a new session from a source already at its cap
  uint64_t refused_total = 0;       // a new session with every slot taken
  uint64_t refused_bytes = 0;       // a session ended because all sessions held too much
  uint64_t expired = 0;             // incomplete sessions freed idle or too old
};

class RmppInboundSessions {
 public:
  using Clock = std::chrono::steady_clock;

  struct Outcome {
    RmppReceiver::Step step;                     // the receiver's answer (ACK, ABORT) to send
    RmppRefusal refused = RmppRefusal::kNone;    // over a cap: dropped, ABORT in step.reply
    bool failed = false;                         // the transfer failed (bad segment, ABORT)
    std::optional<std::vector<uint8_t>> message;  // the whole message, once, when complete
  };

  // `mad_size`: the bytes of a MAD the medium carries (RmppReceiver).
  explicit RmppInboundSessions(const RmppInboundLimits& limits = {}, size_t mad_size = kMadSize)
      : limits_(limits), mad_size_(mad_size) {}

  // Feeds one DATA segment of class `header_size`. A first segment of a session that ended
  // (complete or failed) starts it afresh.
  Outcome Feed(const RmppInboundKey& key, size_t header_size, std::span<const uint8_t> mad,
               Clock::time_point now);

  // Frees sessions idle for `limits.idle` or older than `limits.lifetime`; complete ones are
  // kept until idle so a lost final ACK is answered again. Returns how many of those freed
  // were incomplete.
  size_t Expire(Clock::time_point now);

  void Clear();
  // For sessions opened from now on (the medium's MAD size is known once the port is open).
  void set_mad_size(size_t mad_size) { mad_size_ = mad_size; }
  size_t size() const { return sessions_.size(); }
  size_t bytes() const { return bytes_; }
  size_t from_source(uint16_t lid, uint32_t qpn) const;
  const RmppInboundCounters& counters() const { return counters_; }
  const RmppInboundLimits& limits() const { return limits_; }

 private:
  struct Session {
    Session(size_t header_size, size_t mad_size, Clock::time_point now)
        : receiver(header_size, 32, 16384, mad_size), opened(now), last(now) {}
    RmppReceiver receiver;
    Clock::time_point opened, last;
    size_t held = 0;  // receiver.bytes() as last counted in bytes_
  };
  using Map = std::map<RmppInboundKey, Session>;
  void Erase(Map::iterator it);

  RmppInboundLimits limits_;
  size_t mad_size_;
  Map sessions_;
  std::map<std::pair<uint16_t, uint32_t>, size_t> per_source_;
  size_t bytes_ = 0;
  RmppInboundCounters counters_;
};

}  // namespace ibsm::mad
