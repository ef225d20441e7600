#include "sm/daemon_options.h"

#include <gtest/gtest.h>

namespace ibsm::sm {
namespace {

TEST(DaemonOptionsTest, OpenSmFlagLettersMeanWhatTheyMeanInOpenSm) {
  auto o = ParseDaemonOptions({"-o", "-g", "0x0002c90300000011", "-s", "5", "-f", "x.log"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->once);
  EXPECT_EQ(o->port_guid->value(), 0x0002c90300000011u);
  EXPECT_EQ(o->sweep_interval_s, 5u);
  EXPECT_EQ(o->log_file, "x.log");
}

TEST(DaemonOptionsTest, BadValuesNameTheFlagAndTheAcceptedRange) {
  auto o = ParseDaemonOptions({"--max-wire-smps", "0"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().message(), "--max-wire-smps: '0' is not a number in 1..65535");
  EXPECT_FALSE(ParseDaemonOptions({"-s"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--bogus"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"-g", "0xZZ"}).ok());
}

}  // namespace
}  // namespace ibsm::sm
