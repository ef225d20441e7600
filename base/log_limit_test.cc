#include "base/log_limit.h"

#include <gtest/gtest.h>

namespace ibsm {
namespace {

TEST(LogLimitTest, AFloodOfAMillionLogsTheFirstTenThenOneInAThousand) {
  uint64_t lines = 0;
  for (uint64_t n = 1; n <= 1000000; ++n) lines += ShouldLogOccurrence(n);
  EXPECT_EQ(lines, 10u + 1000u);
  EXPECT_TRUE(ShouldLogOccurrence(1));
  EXPECT_TRUE(ShouldLogOccurrence(10));
  EXPECT_FALSE(ShouldLogOccurrence(11));
  EXPECT_TRUE(ShouldLogOccurrence(2000));
  EXPECT_FALSE(ShouldLogOccurrence(0)) << "nothing happened yet";
  EXPECT_TRUE(ShouldLogOccurrence(3, 1, 3)) << "other limits";
  EXPECT_FALSE(ShouldLogOccurrence(2, 1, 0)) << "every 0: only the first ones";
}

}  // namespace
}  // namespace ibsm
