// The project's seeded randomness: SplitMix64 (Steele, Lea, Flood 2014), whose output is
// fixed on every platform (unlike the standard distributions), so a seed names the same
// sequence everywhere: routing's random permutations, test patterns.
#pragma once

#include <cstdint>

namespace ibsm {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by multiply-shift (bias below 2^-32 for n < 2^32).
  uint32_t Below(uint32_t n) {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace ibsm
