#include "sm/sweep/trap_tracker.h"

#include <algorithm>

namespace ibsm::sm {

std::chrono::steady_clock::duration TrapTracker::WindowOf(const Entry& e) const {
  return e.port_health && e.count >= o_.suppress_after ? o_.unhealthy_window : o_.window;
}

void TrapTracker::MakeRoom(std::chrono::steady_clock::time_point now) {
  std::erase_if(entries_, [&](const auto& kv) {
    const bool gone = now - kv.second.last >= WindowOf(kv.second);
    evicted_ += gone;
    return gone;
  });
  while (entries_.size() >= o_.max_keys && !entries_.empty()) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
      return a.second.last < b.second.last;
    });
    entries_.erase(oldest);
    ++evicted_;
  }
}

TrapVerdict TrapTracker::Record(const TrapKey& key, bool port_health,
                                std::chrono::steady_clock::time_point now) {
  TrapVerdict v = Count(key, port_health, now, o_.suppress_after);
  // Every trap of that number from the source, whatever its content: a sender that varies
  // its details to dodge the per-trap run is still one sender. (Per number, so that a burst
  // of port-health traps cannot hold back the same switch's trap 128.)
  const TrapKey source{key.lid, 0xFF, key.trap, kAnyContent};
  const TrapVerdict all = Count(source, false, now, o_.source_suppress_after);
  if (all.suppressed && !v.suppressed) {
    v.suppressed = true;
    v.first_suppressed = all.first_suppressed;
  }
  return v;
}

TrapVerdict TrapTracker::Count(const TrapKey& key, bool port_health,
                               std::chrono::steady_clock::time_point now, uint32_t after) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= o_.max_keys) MakeRoom(now);
    it = entries_.emplace(key, Entry{now, 0, port_health}).first;
  } else if (now - it->second.last >= WindowOf(it->second)) {
    it->second.count = 0;  // it stayed away long enough: a new run
  }
  Entry& e = it->second;
  e.last = now;
  if (e.count < UINT32_MAX) ++e.count;
  TrapVerdict v;
  v.consecutive = e.count;
  v.suppressed = e.count > after;
  v.first_suppressed = e.count == after + 1;
  v.disable_port = port_health && e.count == o_.disable_after;
  return v;
}

uint16_t TrapTracker::DetailsLid(uint16_t trap, std::span<const uint8_t> details) {
  // Data details of traps 129-131: LIDADDR at bytes 2-3, PORTNO at byte 5.
  if (!IsPortHealthTrap(trap) || details.size() < 6) return 0;
  return static_cast<uint16_t>(details[2] << 8 | details[3]);
}

TrapKey TrapTracker::KeyOf(uint16_t source_lid, uint16_t trap, std::span<const uint8_t> details) {
  TrapKey k;
  k.lid = source_lid;
  k.trap = trap;
  if (IsPortHealthTrap(trap) && details.size() >= 6) k.port = details[5];
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (uint8_t b : details) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  k.content = h;
  return k;
}

}  // namespace ibsm::sm
