// The SM's half of the option rows (sm/sweep/config_options.h) against conf's half: one row
// each, and what each kind of row must carry.
#include "sm/sweep/config_options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "conf/opensm_keys.h"

namespace ibsm::sm {
namespace {

TEST(ConfigOptionsTest, EveryTypedOptionHasExactlyOneTargetAndEveryTargetAnOption) {
  std::set<std::string_view> options;
  for (const conf::OptionDesc& d : conf::OptionTable())
    if (d.alias_of.empty()) options.insert(d.name);
  std::set<std::string_view> targets;
  for (const OptionTarget& t : OptionTargets()) {
    EXPECT_TRUE(targets.insert(t.option).second) << t.option << " has two rows";
    EXPECT_TRUE(options.count(t.option)) << t.option << " is not a typed option";
  }
  for (std::string_view o : options)
    EXPECT_TRUE(targets.count(o)) << o << " is parsed but nothing says who reads it";
}

TEST(ConfigOptionsTest, ARowCarriesTheFunctionsItsUseNeedsAndNoOthers) {
  for (const OptionTarget& t : OptionTargets()) {
    switch (t.use) {
      case OptionUse::kSweep:
        EXPECT_NE(t.sweep, nullptr) << t.option;
        break;
      case OptionUse::kPerfMgr:
        EXPECT_EQ(t.sweep, nullptr) << t.option;
        EXPECT_NE(t.perf, nullptr) << t.option;
        break;
      default:
        EXPECT_EQ(t.sweep, nullptr) << t.option;
        EXPECT_EQ(t.perf, nullptr) << t.option;
    }
  }
}

// An option ibsm does not act on is one OpenSM's key table says ibsm behaves as one value
// of, or a feature ibsm does not have; and every key that table says ibsm acts on is read.
TEST(ConfigOptionsTest, OnlyKeysIbsmDoesNotActOnAreLeftUnread) {
  for (const OptionTarget& t : OptionTargets()) {
    const conf::OpenSmKey* key = conf::FindOpenSmKey(t.option);
    if (t.use == OptionUse::kNotActedOn) {
      ASSERT_NE(key, nullptr) << t.option << ": an ibsm option that nothing reads";
      EXPECT_NE(key->support, conf::KeySupport::kActs) << t.option;
    } else if (key) {
      EXPECT_EQ(key->support, conf::KeySupport::kActs)
          << t.option << " is read, but conf/opensm_keys.h says ibsm does not act on it";
    }
  }
}

TEST(ConfigOptionsTest, ValuesLandWhereTheSweepAndThePerfMgrReadThem) {
  conf::SmConfig c;
  ASSERT_TRUE(conf::SetOption(&c, "lmc", "2").ok());
  ASSERT_TRUE(conf::SetOption(&c, "no_partition_enforcement", "TRUE").ok());
  ASSERT_TRUE(conf::SetOption(&c, "transaction_timeout", "350").ok());
  ASSERT_TRUE(conf::SetOption(&c, "transaction_retries", "7").ok());
  ASSERT_TRUE(conf::SetOption(&c, "link_flap_window", "99").ok());
  ASSERT_TRUE(conf::SetOption(&c, "max_wire_smps", "0").ok());
  ASSERT_TRUE(conf::SetOption(&c, "log_flags", "0x43").ok());
  ASSERT_TRUE(conf::SetOption(&c, "dump_files_dir", "/var/log/ibsm///").ok());
  ASSERT_TRUE(conf::SetOption(&c, "ar_lid_mode", "bounded").ok());
  ASSERT_TRUE(conf::SetOption(&c, "health_degraded_links", "FALSE").ok());
  ASSERT_TRUE(conf::SetOption(&c, "perfmgr_sweep_time_s", "42").ok());
  ASSERT_TRUE(conf::SetOption(&c, "ar_enable", "TRUE").ok());  // an alias of ar_mode
  const SubnetManagerOptions o = SweepOptionsFrom(c);
  EXPECT_EQ(o.lids.lmc, 2);
  EXPECT_EQ(o.partitions.enforce, PartEnforce::kOff);
  EXPECT_EQ(o.send.timeout, std::chrono::milliseconds(350));
  EXPECT_EQ(o.send.retries, 7);
  EXPECT_EQ(o.link_damping.window, std::chrono::seconds(99));
  EXPECT_EQ(o.max_wire_smps, 65535u);  // 0: no cap
  EXPECT_TRUE(o.dump_lfts);
  EXPECT_EQ(o.dump_dir, "/var/log/ibsm");
  EXPECT_EQ(o.ar.lid_mode, routing::ArLidMode::kBounded);
  EXPECT_EQ(o.ar.mode, 1);
  EXPECT_FALSE(o.health_degraded_links);
  const PerfManagerOptions p = PerfOptionsFrom(c);
  EXPECT_EQ(p.send.timeout, std::chrono::milliseconds(350));
  EXPECT_EQ(p.send.retries, 7);
  EXPECT_FALSE(p.thresholds.degraded_links);
  EXPECT_EQ(p.sweep_time, std::chrono::seconds(42));

  // A QoS table option reaches the levels the QoS Sets are planned from.
  conf::SmConfig q;
  ASSERT_TRUE(conf::SetOption(&q, "qos_ca_sl2vl", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1").ok());
  const SubnetManagerOptions with_qos = SweepOptionsFrom(q);
  EXPECT_NE(with_qos.qos_levels.ca.sl2vl, SweepOptionsFrom(conf::SmConfig{}).qos_levels.ca.sl2vl);
}

}  // namespace
}  // namespace ibsm::sm
