// Repeated traps (OpenSM's trap aging tracker and babbling_port_policy, osm_trap_rcv.c): a
// trap with the same issuer, port and content that arrives again within `window` of the
// previous one counts as consecutive. From the `suppress_after`-th it is ignored (no sweep,
// no Report), until it stays away for a window (`unhealthy_window` for the port-health
// traps 129-131). A port-health trap repeated `disable_after` times names a port to disable
// when the policy is on. Memory is bounded: at most `max_keys` traps are tracked; when full,
// entries whose window passed go first, then the least recently seen.
//
// Traps are keyed by the LID the MAD came from (set by the sender's HCA), never by what the
// payload claims (IssuerLID, the details' LIDADDR: a host's root writes those): a sender that
// varies its payload still counts as one, and besides the per-trap runs each (source LID, trap
// number) has a run of its own, suppressed from `source_suppress_after` traps of that number
// in a window whatever their details.
//
// Pure and single-threaded; the SM's io thread owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>

namespace ibsm::sm {

struct TrapTrackerOptions {
  std::chrono::steady_clock::duration window = std::chrono::seconds(5);
  std::chrono::steady_clock::duration unhealthy_window = std::chrono::seconds(60);
  uint32_t suppress_after = 10;
  uint32_t source_suppress_after = 40;
  uint32_t disable_after = 250;
  size_t max_keys = 4096;
};

struct TrapKey {
  uint16_t lid = 0;       // the LID the trap MAD came from
  uint8_t port = 0;       // port the details name (129-131), else 0
  uint16_t trap = 0;
  uint64_t content = 0;   // hash of the data details
  auto operator<=>(const TrapKey&) const = default;
};

struct TrapVerdict {
  uint32_t consecutive = 1;  // this trap's count in its current run
  bool suppressed = false;   // ignore it (still TrapRepress it)
  bool first_suppressed = false;  // the run just reached suppress_after (log it once)
  bool disable_port = false;      // the run just reached disable_after (port-health traps)
};

class TrapTracker {
 public:
  explicit TrapTracker(TrapTrackerOptions o = {}) : o_(o) {}

  TrapVerdict Record(const TrapKey& key, bool port_health, std::chrono::steady_clock::time_point now);
  size_t size() const { return entries_.size(); }
  uint64_t evicted() const { return evicted_; }

  // The key of a trap from `source_lid`: traps 129-131 also by the port their details name.
  static TrapKey KeyOf(uint16_t source_lid, uint16_t trap, std::span<const uint8_t> details);
  // The LID the details of a port-health trap (129-131) name (LIDADDR), 0 for other traps.
  static uint16_t DetailsLid(uint16_t trap, std::span<const uint8_t> details);
  static bool IsPortHealthTrap(uint16_t trap) { return trap >= 129 && trap <= 131; }

 private:
  struct Entry {
    std::chrono::steady_clock::time_point last;
    uint32_t count = 0;
    bool port_health = false;
  };
  // The content of a source's all-contents run of one trap number (port 0xFF: no real
  // port-health key has it, so it never meets a per-trap key).
  static constexpr uint64_t kAnyContent = 0;
  TrapVerdict Count(const TrapKey& key, bool port_health,
                    std::chrono::steady_clock::time_point now, uint32_t after);
  std::chrono::steady_clock::duration WindowOf(const Entry& e) const;
  void MakeRoom(std::chrono::steady_clock::time_point now);

  TrapTrackerOptions o_;
  std::map<TrapKey, Entry> entries_;
  uint64_t evicted_ = 0;
};

}  // namespace ibsm::sm
