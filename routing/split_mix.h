// The project's seeded randomness for routing: SplitMix64 (Steele, Lea, Flood 2014), whose
// output is fixed on every platform (unlike the standard distributions), and the random
// permutations the quality figures and the traffic model are measured on.
#pragma once

#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace ibsm::routing {

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

// Random permutation number `r` (0-based) of `seed` over dst->size() elements: a Fisher-Yates
// shuffle driven by SplitMix64(seed ^ (constant x (r + 1))). The same for any thread count.
inline void RandomPermutation(uint64_t seed, uint64_t r, std::vector<uint32_t>* dst) {
  std::iota(dst->begin(), dst->end(), 0u);
  if (dst->size() < 2) return;
  SplitMix64 rng(seed ^ (0xD1B54A32D192ED03ull * (r + 1)));
  for (uint32_t i = static_cast<uint32_t>(dst->size()) - 1; i > 0; --i)
    std::swap((*dst)[i], (*dst)[rng.Below(i + 1)]);
}

}  // namespace ibsm::routing
