// The random permutations the quality figures and the traffic model are measured on, drawn
// from the project's SplitMix64 (base/split_mix.h).
#pragma once

#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "base/split_mix.h"

namespace ibsm::routing {

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
