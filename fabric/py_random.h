// A random stream that reproduces CPython's `random.Random(seed)` draw for draw (MT19937
// seeded by init_by_array, getrandbits, _randbelow, choice, sample, shuffle), so the
// generators here build exactly the fabric that the reference generator gen_topology.py writes
// for the same seed. Deterministic; holds no global state; not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ibsm {

class PyRandom {
 public:
  // Same stream as Python's random.Random(seed) for a non-negative integer seed.
  explicit PyRandom(uint64_t seed);

  // random.getrandbits(k). REQUIRES: 0 <= k <= 32.
  uint32_t GetRandBits(int k);
  // random._randbelow(n): uniform in [0, n). REQUIRES: n > 0.
  uint64_t RandBelow(uint64_t n);

  // random.choice(v). REQUIRES: !v.empty().
  template <typename T>
  const T& Choice(const std::vector<T>& v) {
    return v[RandBelow(v.size())];
  }
  // random.shuffle(v).
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i-- > 1;) std::swap(v[i], v[RandBelow(i + 1)]);
  }
  // random.sample(range(n), k): k distinct indices in [0, n) in selection order.
  // REQUIRES: k <= n.
  std::vector<size_t> SampleIndices(size_t n, size_t k);

 private:
  uint32_t Next32();

  std::array<uint32_t, 624> mt_{};
  size_t mti_ = 625;
};

}  // namespace ibsm
