// Test helpers shared by the attribute layout tests: seeded field patterns.
#pragma once

#include <cstdint>

#include "base/split_mix.h"
#include "mad/field.h"

namespace ibsm::mad::test_util {

inline uint64_t WidthMask(uint32_t width) {
  return width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
}

// Every element of every field of S gets a seeded value truncated to its width, never zero.
template <typename S>
S PatternFilled(uint64_t seed) {
  S s{};
  SplitMix64 rng(seed);
  for (const auto& f : Layout<S>::kFields) {
    for (size_t i = 0; i < f.count; ++i) {
      uint64_t v = rng.Next() & WidthMask(f.bit_width);
      f.set(s, i, v == 0 ? 1 : v);
    }
  }
  return s;
}

}  // namespace ibsm::mad::test_util
