#include "conf/qos_config.h"

#include <gtest/gtest.h>

namespace ibsm::conf {
namespace {

TEST(QosConfigTest, NothingSetGivesOpenSmsDefaultsToEveryClass) {
  const QosLevels l = BuildQosLevels(SmConfig{});
  for (const QosLevel* c : {&l.ca, &l.sw0, &l.swe, &l.rtr}) {
    EXPECT_EQ(c->high_limit, 0);
    // OSM_DEFAULT_QOS_SL2VL: SL i -> VL i, SL 15 -> VL 7.
    for (uint8_t sl = 0; sl < 15; ++sl) EXPECT_EQ(c->sl2vl[sl], sl);
    EXPECT_EQ(c->sl2vl[15], 7);
    // High: VL0 weight 4, VL1-14 weight 0; low: VL0 weight 0, VL1-14 weight 4; 15 entries.
    EXPECT_EQ(c->vlarb_high[0], (QosVlArbEntry{0, 4}));
    EXPECT_EQ(c->vlarb_high[14], (QosVlArbEntry{14, 0}));
    EXPECT_EQ(c->vlarb_low[0], (QosVlArbEntry{0, 0}));
    EXPECT_EQ(c->vlarb_low[14], (QosVlArbEntry{14, 4}));
    EXPECT_EQ(c->vlarb_low[15], (QosVlArbEntry{}));
    EXPECT_EQ(c->vlarb_low[63], (QosVlArbEntry{}));
  }
}

TEST(QosConfigTest, AClassKeyWinsOverTheCommonKeyWhichWinsOverTheDefault) {
  auto r = ParseConfig("qos TRUE\nqos_high_limit 8\nqos_vlarb_low 0:32,1:64\n"
                       "qos_ca_high_limit 255\nqos_swe_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,15\n"
                       "qos_ca_vlarb_low (null)\n",
                       "f");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const QosLevels l = BuildQosLevels(r->config);
  EXPECT_EQ(l.ca.high_limit, 255);
  EXPECT_EQ(l.swe.high_limit, 8);
  EXPECT_EQ(l.rtr.high_limit, 8);
  EXPECT_EQ(l.swe.sl2vl[4], 0);
  EXPECT_EQ(l.swe.sl2vl[15], 15);
  EXPECT_EQ(l.ca.sl2vl[4], 4);  // not the switch's
  for (const QosLevel* c : {&l.ca, &l.sw0, &l.swe, &l.rtr}) {
    EXPECT_EQ(c->vlarb_low[0], (QosVlArbEntry{0, 32}));
    EXPECT_EQ(c->vlarb_low[1], (QosVlArbEntry{1, 64}));
    EXPECT_EQ(c->vlarb_low[2], (QosVlArbEntry{}));  // the text ends: VL 0, weight 0
  }
}

TEST(QosConfigTest, TextsOpenSmWouldReadAsSomethingElseAreRefusedWithTheReason) {
  struct Case {
    const char* line;
    const char* says;
  };
  for (const Case& c : {Case{"qos_sl2vl 0,1,2", "3 VLs, not one for each of the 16 SLs"},
                        Case{"qos_sl2vl 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,16", "SL 15"},
                        Case{"qos_vlarb_high 0:4,15:1", "entry 2"},
                        Case{"qos_vlarb_low 0:256", "entry 1"},
                        Case{"qos_ca_vlarb_low 1", "entry 1"},
                        Case{"qos_swe_high_limit 256", "not -1 (not set) or 0-255"},
                        Case{"qos_rtr_high_limit -2", "not -1"}}) {
    auto r = ParseConfig(std::string(c.line) + "\n", "opensm.conf");
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.status().message().find("opensm.conf:1:"), std::string::npos);
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
  std::string many = "qos_vlarb_high ";
  for (int i = 0; i < 65; ++i) many += (i ? ",1:1" : "1:1");
  EXPECT_FALSE(ParseConfig(many + "\n", "f").ok());
}

TEST(QosConfigTest, WrittenQosKeysReadBackTheSame) {
  SmConfig c;
  c.qos = true;
  c.qos_sw0_vlarb_high = "0:255,3:16";
  c.qos_ca_high_limit = "4";
  auto back = ParseConfig(WriteConfig(c), "w");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->config.qos_sw0_vlarb_high, "0:255,3:16");
  EXPECT_EQ(back->config.qos_ca_high_limit, "4");
  EXPECT_EQ(BuildQosLevels(back->config), BuildQosLevels(c));
}

}  // namespace
}  // namespace ibsm::conf
