#include "fabric/py_random.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace ibsm {

namespace {
constexpr size_t kN = 624;
constexpr size_t kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu;
constexpr uint32_t kUpper = 0x80000000u;
constexpr uint32_t kLower = 0x7fffffffu;
}  // namespace

PyRandom::PyRandom(uint64_t seed) {
  // CPython's random_seed(): the key is the absolute value split into 32-bit words, least
  // significant first; zero gives the one-word key {0}.
  std::vector<uint32_t> key;
  if (seed == 0) key.push_back(0);
  for (uint64_t s = seed; s != 0; s >>= 32) key.push_back(static_cast<uint32_t>(s));

  // init_genrand(19650218)
  mt_[0] = 19650218u;
  for (size_t i = 1; i < kN; ++i)
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  // init_by_array(key)
  size_t i = 1, j = 0;
  for (size_t k = std::max(kN, key.size()); k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] +
             static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (size_t k = kN - 1; k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) -
             static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  mti_ = kN;
}

uint32_t PyRandom::Next32() {
  if (mti_ >= kN) {
    size_t kk = 0;
    auto mag = [](uint32_t y) { return (y & 1u) ? kMatrixA : 0u; };
    for (; kk < kN - kM; ++kk) {
      uint32_t y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
      mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ mag(y);
    }
    for (; kk < kN - 1; ++kk) {
      uint32_t y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
      mt_[kk] = mt_[kk + kM - kN] ^ (y >> 1) ^ mag(y);
    }
    uint32_t y = (mt_[kN - 1] & kUpper) | (mt_[0] & kLower);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ mag(y);
    mti_ = 0;
  }
  uint32_t y = mt_[mti_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

uint32_t PyRandom::GetRandBits(int k) {
  if (k <= 0) return 0;
  return Next32() >> (32 - k);
}

uint64_t PyRandom::RandBelow(uint64_t n) {
  int k = 0;
  for (uint64_t v = n; v; v >>= 1) ++k;  // n.bit_length()
  // Every fabric index fits in 32 bits; wider draws are not needed here.
  if (k > 32) k = 32;
  uint64_t r = GetRandBits(k);
  while (r >= n) r = GetRandBits(k);
  return r;
}

std::vector<size_t> PyRandom::SampleIndices(size_t n, size_t k) {
  std::vector<size_t> result(k);
  size_t setsize = 21;
  if (k > 5) {
    // 4 ** ceil(log(k * 3, 4)), as CPython computes it in floating point.
    double e = std::ceil(std::log(static_cast<double>(k * 3)) / std::log(4.0));
    setsize += static_cast<size_t>(std::pow(4.0, e));
  }
  if (n <= setsize) {
    std::vector<size_t> pool(n);
    for (size_t i = 0; i < n; ++i) pool[i] = i;
    for (size_t i = 0; i < k; ++i) {
      size_t j = RandBelow(n - i);
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::unordered_set<size_t> selected;
    for (size_t i = 0; i < k; ++i) {
      size_t j = RandBelow(n);
      while (selected.count(j)) j = RandBelow(n);
      selected.insert(j);
      result[i] = j;
    }
  }
  return result;
}

}  // namespace ibsm
