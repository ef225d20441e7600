#include "fabric/py_random.h"

#include <gtest/gtest.h>

namespace ibsm {
namespace {

// Expected values printed by CPython 3.11: random.Random(7).getrandbits(32) x3 and
// random.Random(2**40 + 5).getrandbits(32).
TEST(PyRandomTest, MatchesCPythonForASmallSeed) {
  PyRandom r(7);
  EXPECT_EQ(r.GetRandBits(32), 1390851128u);
  EXPECT_EQ(r.GetRandBits(32), 4071050724u);
  EXPECT_EQ(r.GetRandBits(32), 647892279u);
}

TEST(PyRandomTest, MatchesCPythonForASeedWiderThan32Bits) {
  PyRandom r((1ull << 40) + 5);
  EXPECT_EQ(r.GetRandBits(32), 2166296868u);
}

TEST(PyRandomTest, RandBelowStaysInRange) {
  PyRandom r(1);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.RandBelow(7), 7u);
}

TEST(PyRandomTest, SampleIndicesAreDistinct) {
  PyRandom r(3);
  for (size_t n : {2u, 10u, 100u}) {
    auto s = r.SampleIndices(n, 2);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_NE(s[0], s[1]);
    EXPECT_LT(s[0], n);
    EXPECT_LT(s[1], n);
  }
}

}  // namespace
}  // namespace ibsm
