// Golden bytes and round trips for the adaptive-routing attributes and GeneralInfo, worked
// out by hand from docs/ar-sharp.md ("byte N bit b", bit 7 the most significant).
#include "mad/attr/adaptive_routing.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "mad/attr/general_info.h"
#include "mad/attr/registry.h"
#include "mad/mad.h"

namespace ibsm::mad {
namespace {

template <typename S>
std::array<uint8_t, 64> Bytes(const S& s) {
  std::array<uint8_t, 64> b{};
  b.fill(0xEE);
  EncodeTo(s, b);
  return b;
}

TEST(GeneralInfoTest, CapabilityBitNIsMaskOneShiftNInBigEndianDwordNDiv32) {
  GeneralInfoCapabilities c;
  c.Set(general_cap::kAdaptiveRoutingLegacy);
  c.Set(general_cap::kSharpAggregationNode);
  c.Set(33);
  auto b = Bytes(c);
  // dword 0 = 0x00040002 (bits 1 and 18), dword 1 = 0x00000002 (bit 33).
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x04);
  EXPECT_EQ(b[2], 0x00);
  EXPECT_EQ(b[3], 0x02);
  EXPECT_EQ(b[7], 0x02);
  EXPECT_EQ(b[15], 0x00);
  auto d = Decode<GeneralInfoCapabilities>(b);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->Has(general_cap::kAdaptiveRoutingLegacy));
  EXPECT_TRUE(d->Has(general_cap::kSharpAggregationNode));
  EXPECT_FALSE(d->Has(general_cap::kAdaptiveRoutingRev1));
  EXPECT_FALSE(d->Has(200));
}

// Capability bits per NVIDIA OpenSM's ib_types.h / osm_switch.h: bit 1 pre-SwitchX AR (0xFF22
// LFT format), bit 2 "AdaptiveRoutingRev1Supported" (ARLFT_SX 0xFF23), which ibsm gates on.
TEST(GeneralInfoTest, SwitchXStyleArIsBitTwoMaskFourOfDwordZero) {
  GeneralInfoCapabilities c;
  c.Set(general_cap::kAdaptiveRoutingRev1);
  auto b = Bytes(c);
  EXPECT_EQ(b[3], 0x04);
  for (size_t i = 0; i < 16; ++i) {
    if (i == 3) continue;
    EXPECT_EQ(b[i], 0) << "byte " << i;
  }
  auto d = Decode<GeneralInfoCapabilities>(b);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->Has(general_cap::kAdaptiveRoutingRev1));
  EXPECT_FALSE(d->Has(general_cap::kAdaptiveRoutingLegacy));
}

// ARInfo byte 0 (ibis_types.h / ib_types.h ib_ar_info_t): b6 dynamic capability calculation
// supported, b5 by-transport capable, b1 IS4 mode.
TEST(ArInfoTest, ByteZeroCapabilityBitsSitWhereTheOpenHeadersPutThem) {
  ArInfo a;
  a.dyn_cap_calc_sup = 1;
  EXPECT_EQ(Bytes(a)[0], 0x40);
  a = {};
  a.by_transport_cap = 1;
  EXPECT_EQ(Bytes(a)[0], 0x20);
  a = {};
  a.is4_mode = 1;
  EXPECT_EQ(Bytes(a)[0], 0x02);
  std::array<uint8_t, 64> raw{};
  raw[0] = 0x22;
  raw[20] = 0x5A;  // cap_fields1
  raw[27] = 0x34;
  auto d = Decode<ArInfo>(raw);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->by_transport_cap, 1);
  EXPECT_EQ(d->is4_mode, 1);
  EXPECT_EQ(d->unmanaged[0], 0x5A);
  EXPECT_EQ(d->unmanaged[7], 0x34);
  EXPECT_EQ(Bytes(*d)[20], 0x5A);  // bytes 20 on survive a decode-encode round trip
}

// A Set is a read-modify-write of the plain Get's 64 bytes (docs/ar-sharp.md "Attributes"):
// the HBF/pFRN/by-VL bytes 20-35, reserved bits and capability fields go back as read.
TEST(ArInfoTest, SetDataChangesOnlyTheManagedFieldsOfWhatWasRead) {
  std::array<uint8_t, 64> read{};
  read[0] = 0xA6;   // reserved bit 7, by-transport capable, global groups, IS4
  read[2] = 0x10;   // group table copy supported
  read[3] = 0xCE;   // reserved bits 7-6, FR/FRN/ARN supported, E clear
  read[4] = 0x11;   // string width cap 1, group table cap 1
  read[6] = 0x08;   // GroupCap 0x800
  read[10] = 0x77;  // reserved
  read[15] = 0xF0;  // reserved bits 7-4 of by_transport_disable's byte
  read[20] = 0x5A;  // cap_fields1
  read[22] = 0x03;  // enable_features1
  read[24] = 0x81;
  read[26] = 0x12;
  read[27] = 0x34;
  read[63] = 0x99;
  ArInfoSettings s;
  s.e = 1;
  s.by_sl_enabled = 1;
  s.enable_by_sl_mask = 0x0003;
  s.group_top = 0x123;
  s.by_transport_disable = ar_transport::kUd | ar_transport::kUc;  // ~0xA
  s.ageing_time = 30;
  std::array<uint8_t, 64> want = read;
  want[0] = 0xB6;  // + by-SL enabled (bit 4)
  want[3] = 0xCF;  // + E
  want[5] = 0x12;  // GroupTop 0x123 in bits 23-12 of bytes 4-7
  want[6] = 0x38;
  want[9] = 0x03;
  want[15] = 0xF5;
  want[19] = 30;
  EXPECT_EQ(ArInfoSetData(read, s, /*by_transport_cap=*/true), want);
  // Without by-transport capability byte 15 stays as read.
  want[15] = 0xF0;
  EXPECT_EQ(ArInfoSetData(read, s, /*by_transport_cap=*/false), want);
}

// ARLFT entry LidState 3 is hash-based forwarding (ib_types.h), bits 7-6 of byte 0.
TEST(ArLftTest, LidStateThreeIsHashBasedInTheTopBitsOfByteZero) {
  ArLinearForwardingTable blk;
  blk.SetEntry(0, {static_cast<uint8_t>(ArLidState::kHashBased), 0, 5, 0x123});
  auto b = Bytes(blk);
  EXPECT_EQ(b[0], 0xC0);
  EXPECT_EQ(b[1], 5);
  EXPECT_EQ(b[2], 0x01);
  EXPECT_EQ(b[3], 0x23);
}

TEST(ArInfoTest, FieldsSitAtTheFactsPageOffsets) {
  ArInfo a;
  a.no_fallback = 1;
  a.by_sl_cap = 1;
  a.by_sl_enabled = 1;
  a.num_directions = 3;
  a.group_table_copy_sup = 1;
  a.e = 1;
  a.group_top = 0x123;
  a.group_cap = 0x800;
  a.enable_by_sl_mask = 0x00F1;
  a.ar_version_cap = 2;
  a.by_transport_disable = ar_transport::kUd | ar_transport::kUc;
  a.ageing_time = 30;
  auto b = Bytes(a);
  EXPECT_EQ(b[0], 0x19);  // bits 4, 3 and 0
  EXPECT_EQ(b[1], 3);
  EXPECT_EQ(b[2], 0x10);
  EXPECT_EQ(b[3], 0x01);
  // bytes 4-7: 0 | 0 | GroupTop 0x123 (bits 23-12) | GroupCap 0x800 (bits 11-0)
  EXPECT_EQ(b[4], 0x00);
  EXPECT_EQ(b[5], 0x12);
  EXPECT_EQ(b[6], 0x38);
  EXPECT_EQ(b[7], 0x00);
  EXPECT_EQ(b[8], 0x00);
  EXPECT_EQ(b[9], 0xF1);
  EXPECT_EQ(b[11], 0x02);
  EXPECT_EQ(b[15], 0x05);
  EXPECT_EQ(b[19], 30);
  for (size_t i = 20; i < 64; ++i) EXPECT_EQ(b[i], 0) << "byte " << i;
  auto d = Decode<ArInfo>(b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->group_top, 0x123);
  EXPECT_EQ(d->group_cap, 0x800);
  EXPECT_EQ(d->e, 1);
  EXPECT_EQ(EncodeModifier(ArInfoModifier{1}), 0x80000000u);
}

TEST(ArGroupTableTest, PortNIsBitNOfEachBigEndian256BitMask) {
  ArGroupTable t;
  ArPortMask g0, g1;
  g0.Add(1);
  g0.Add(9);
  g0.Add(255);
  g1.Add(0);
  g1.Add(64);
  t.SetGroup(0, g0);
  t.SetGroup(1, g1);
  auto b = Bytes(t);
  EXPECT_EQ(b[0], 0x80);   // port 255: first byte's high bit
  EXPECT_EQ(b[30], 0x02);  // port 9
  EXPECT_EQ(b[31], 0x02);  // port 1
  EXPECT_EQ(b[32 + 23], 0x01);  // port 64
  EXPECT_EQ(b[63], 0x01);  // port 0
  auto d = Decode<ArGroupTable>(b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->Group(0).Ports(), (std::vector<uint8_t>{1, 9, 255}));
  EXPECT_EQ(d->Group(1).Ports(), (std::vector<uint8_t>{0, 64}));
  EXPECT_EQ(ArGroupTableAttrMod(0x1234, 3), 0x00031234u);
}

TEST(ArLftTest, EntryIsStateTableDefaultPortAndTwelveBitGroup) {
  ArLinearForwardingTable t;
  t.SetEntry(0, {static_cast<uint8_t>(ArLidState::kFree), 0, 7, 0xABC});
  t.SetEntry(15, {static_cast<uint8_t>(ArLidState::kStatic), 2, 3, 3});
  auto b = Bytes(t);
  EXPECT_EQ(b[0], 0x40);
  EXPECT_EQ(b[1], 7);
  EXPECT_EQ(b[2], 0x0A);
  EXPECT_EQ(b[3], 0xBC);
  EXPECT_EQ(b[60], 0x82);
  EXPECT_EQ(b[61], 3);
  EXPECT_EQ(b[62], 0);
  EXPECT_EQ(b[63], 3);
  std::array<uint8_t, 64> in{};
  in[4] = 0x3F;  // bounded? no: state 0, reserved bits 5-4 set, table 0xF
  in[5] = 0x11;
  in[6] = 0xF0;  // reserved high nibble ignored
  in[7] = 0x05;
  auto d = Decode<ArLinearForwardingTable>(in);
  ASSERT_TRUE(d.ok());
  ArLftEntry e = d->Entry(1);
  EXPECT_EQ(e.lid_state, 0);
  EXPECT_EQ(e.table_number, 0xF);
  EXPECT_EQ(e.default_port, 0x11);
  EXPECT_EQ(e.group_number, 0x005);
  EXPECT_EQ(ArLftAttrMod(70), 70u);
}

TEST(ArGroupTableCopyTest, RangesAreLastThenFirstBigEndian) {
  ArGroupTableCopy c;
  c.SetRange(0, {.last = 0x0102, .first = 0x0003});
  auto b = Bytes(c);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[1], 0x02);
  EXPECT_EQ(b[2], 0x00);
  EXPECT_EQ(b[3], 0x03);
  auto d = Decode<ArGroupTableCopy>(b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->Range(0), (ArCopyRange{.last = 0x0102, .first = 3}));
  EXPECT_EQ(ArGroupTableCopyAttrMod(0xFFFF), 0xFFFu);
}

TEST(ArAttributesTest, RoundTripAndTruncationAreSafe) {
  std::vector<uint8_t> ones(64, 0xFF);
  EXPECT_TRUE(Decode<ArInfo>(ones).ok());
  EXPECT_TRUE(Decode<ArGroupTable>(ones).ok());
  EXPECT_TRUE(Decode<ArLinearForwardingTable>(ones).ok());
  EXPECT_TRUE(Decode<ArGroupTableCopy>(ones).ok());
  std::vector<uint8_t> short_bytes(27, 0);
  EXPECT_EQ(Decode<ArInfo>(short_bytes).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(Decode<ArLinearForwardingTable>(short_bytes).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(Decode<GeneralInfoCapabilities>(std::span<const uint8_t>(ones).first(15))
                .status()
                .code(),
            StatusCode::kCorrupt);
}

TEST(ArAttributesTest, RegistryNamesThemForTraceDumps) {
  const uint8_t smp = static_cast<uint8_t>(MgmtClass::kSubnDirected);
  EXPECT_EQ(AttributeName(smp, attr::kArInfo), "AdaptiveRoutingInfo");
  EXPECT_EQ(AttributeName(smp, attr::kArGroupTable), "ARGroupTable");
  EXPECT_EQ(AttributeName(smp, attr::kArLinearForwardingTable), "ARLinearForwardingTable_SX");
  EXPECT_EQ(AttributeName(smp, attr::kArGroupTableCopy), "ARGroupTableCopy");
  EXPECT_EQ(AttributeName(smp, attr::kGeneralInfo), "GeneralInfoCapabilities");
  std::vector<uint8_t> three(3, 0);
  EXPECT_NE(DumpAttribute(smp, attr::kArInfo, three).find("needs 64 bytes"), std::string::npos);
}

}  // namespace
}  // namespace ibsm::mad
