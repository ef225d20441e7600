#include "mad/attr/registry.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/port_counters.h"
#include "mad/mad.h"

namespace ibsm::mad {
namespace {

constexpr uint8_t kSmpLid = static_cast<uint8_t>(MgmtClass::kSubnLid);
constexpr uint8_t kSmpDr = static_cast<uint8_t>(MgmtClass::kSubnDirected);
constexpr uint8_t kSa = static_cast<uint8_t>(MgmtClass::kSubnAdm);
constexpr uint8_t kPerf = static_cast<uint8_t>(MgmtClass::kPerfMgt);

TEST(RegistryTest, KnownAttributeDumpsItsLayoutByName) {
  NodeInfo ni;
  ni.node_type = NodeType::kSwitch;
  ni.num_ports = 36;
  ni.node_guid = 0x0002c90200000001;
  std::array<uint8_t, 64> b{};
  EncodeTo(ni, b);
  std::string text = DumpAttribute(kSmpDr, attr::kNodeInfo, b);
  EXPECT_EQ(text.rfind("NodeInfo\n", 0), 0u) << text;
  EXPECT_NE(text.find("num_ports"), std::string::npos);
  EXPECT_NE(text.find("0x0002c90200000001"), std::string::npos);
  EXPECT_EQ(AttributeName(kSmpLid, attr::kNodeInfo), "NodeInfo");
}

TEST(RegistryTest, TheSameAttributeIdMeansDifferentThingsInDifferentClasses) {
  EXPECT_EQ(AttributeName(kSmpDr, 0x0012), "SwitchInfo");
  EXPECT_EQ(AttributeName(kPerf, 0x0012), "PortCounters");
  EXPECT_EQ(AttributeName(kSa, 0x0001), "ClassPortInfo");
  EXPECT_EQ(AttributeName(kPerf, 0x0001), "ClassPortInfo");
  EXPECT_EQ(AttributeName(kSmpDr, 0x0001), "");
  // SHARP's aggregation management class has its own attribute space.
  EXPECT_EQ(AttributeName(0x0B, 0x0020), "ANInfo");
  EXPECT_EQ(AttributeName(0x0B, 0x0023), "TreeConfig");
  EXPECT_EQ(AttributeName(kPerf, 0x0020), "");
  EXPECT_EQ(AttributeName(kSmpDr, 0xFF90), "MlnxExtendedPortInfo");
}

TEST(RegistryTest, SmpNoticeShowsTheTrapDetails) {
  std::array<uint8_t, 64> b{};
  EncodeSmpNotice(MakeTrap128(0x0042), b);
  std::string text = DumpAttribute(kSmpLid, attr::kNotice, b);
  EXPECT_NE(text.find("Trap128Details"), std::string::npos) << text;
  EXPECT_NE(text.find("lid"), std::string::npos);
  EXPECT_NE(text.find("66"), std::string::npos);  // 0x42, LIDs in decimal
}

TEST(RegistryTest, UnknownAttributeGivesAHexDump) {
  const std::array<uint8_t, 3> b = {0xde, 0xad, 0x01};
  std::string text = DumpAttribute(kSmpDr, 0xFF10, b);
  EXPECT_EQ(text, "unknown attribute 0xff10 (class 0x81), 3 bytes\n0000: de ad 01\n");
}

TEST(RegistryTest, ShortPayloadGivesTheDecodeErrorAndTheBytes) {
  const std::array<uint8_t, 2> b = {0x01, 0x02};
  std::string text = DumpAttribute(kPerf, attr::kPortCounters, b);
  EXPECT_NE(text.find("PortCounters"), std::string::npos);
  EXPECT_NE(text.find("needs 44 bytes, got 2"), std::string::npos) << text;
  EXPECT_NE(text.find("0000: 01 02"), std::string::npos);
}

TEST(RegistryTest, AnyBytesOfAnyLengthGiveTextWithoutCrashing) {
  std::mt19937_64 rng(20261129);
  const uint8_t classes[] = {kSmpLid, kSmpDr, kSa, kPerf, 0x0B, 0x09};
  const uint16_t ids[] = {0x0001, 0x0002, 0x0010, 0x0011, 0x0012, 0x0014, 0x0015, 0x0016,
                          0x0017, 0x0018, 0x0019, 0x001A, 0x001B, 0x001D, 0x0020, 0xFF00};
  for (int iter = 0; iter < 5000; ++iter) {
    size_t len = rng() % 300;
    std::vector<uint8_t> data(len);
    for (auto& x : data) x = static_cast<uint8_t>(rng());
    uint8_t cls = (iter % 4 == 0) ? static_cast<uint8_t>(rng()) : classes[rng() % 6];
    uint16_t id = (iter % 5 == 0) ? static_cast<uint16_t>(rng()) : ids[rng() % 16];
    std::string text = DumpAttribute(cls, id, data);
    ASSERT_FALSE(text.empty());
    if (AttributeName(cls, id).empty()) {
      EXPECT_EQ(text.rfind("unknown attribute 0x", 0), 0u);
    }
  }
}

TEST(RegistryTest, HexDumpStopsAtItsLimitAndSaysHowMuchIsLeft) {
  std::vector<uint8_t> data(40, 0xAA);
  std::string text = HexDump(data, 16);
  EXPECT_EQ(text, "0000: aa aa aa aa aa aa aa aa aa aa aa aa aa aa aa aa\n... 24 more bytes\n");
}

}  // namespace
}  // namespace ibsm::mad
