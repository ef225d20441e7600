// Golden bytes, round trips and truncation for the attribute layouts of mad/attr/. Golden
// bytes are worked out by hand from the IBA layout figures cited in each header.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "mad/attr/class_port_info.h"
#include "mad/attr/guid_info.h"
#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/multicast_forwarding_table.h"
#include "mad/attr/node_description.h"
#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/pkey_table.h"
#include "mad/attr/port_counters.h"
#include "mad/attr/port_counters_extended.h"
#include "mad/attr/port_info.h"
#include "mad/attr/sl_to_vl_table.h"
#include "mad/attr/sm_info.h"
#include "mad/attr/switch_info.h"
#include "mad/attr/vl_arbitration_table.h"
#include "mad/attr/layout_test_util.h"

namespace ibsm::mad {
namespace {

using test_util::PatternFilled;

template <typename S>
std::vector<uint64_t> FieldValues(const S& s) {
  std::vector<uint64_t> out;
  for (const auto& f : Layout<S>::kFields)
    for (size_t i = 0; i < f.count; ++i) out.push_back(f.get(s, i));
  return out;
}

template <typename S>
std::vector<uint8_t> Encoded(const S& s) {
  std::vector<uint8_t> b(Layout<S>::kSize + 8, 0xEE);
  EncodeTo(s, b);
  b.resize(Layout<S>::kSize);
  return b;
}

// ---- Properties every layout must have. ----

template <typename S>
class EveryAttributeTest : public ::testing::Test {};

using AllAttributes =
    ::testing::Types<NodeInfo, NodeDescription, PortInfo, SwitchInfo, LinearForwardingTable,
                     SmInfo, MulticastForwardingTable, PKeyTable, SlToVlTable,
                     VlArbitrationTable, GuidInfo, Notice, PortCounters, PortCountersExtended,
                     ClassPortInfo, Trap64Details, Trap128Details, Trap129Details,
                     Trap144Details, Trap145Details, Trap256Details, Trap257Details,
                     Trap259Details>;
TYPED_TEST_SUITE(EveryAttributeTest, AllAttributes);

TYPED_TEST(EveryAttributeTest, RoundTripPreservesEveryField) {
  for (uint64_t seed : {1ull, 42ull, 0xDEADBEEFull}) {
    TypeParam in = PatternFilled<TypeParam>(seed);
    auto bytes = Encoded(in);
    auto out = Decode<TypeParam>(bytes);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(FieldValues(*out), FieldValues(in));
    EXPECT_EQ(Encoded(*out), bytes);
  }
}

TYPED_TEST(EveryAttributeTest, AllOnesInputDecodesAndReencodesWithReservedBitsZero) {
  std::vector<uint8_t> ones(Layout<TypeParam>::kSize, 0xFF);
  auto out = Decode<TypeParam>(ones);
  ASSERT_TRUE(out.ok());
  auto again = Encoded(*out);
  // Re-encoding sets exactly the bits the table owns: decoding that gives the same struct.
  auto twice = Decode<TypeParam>(again);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(FieldValues(*twice), FieldValues(*out));
}

TYPED_TEST(EveryAttributeTest, TruncatedInputIsRejectedAsCorrupt) {
  std::vector<uint8_t> bytes(Layout<TypeParam>::kSize - 1, 0xAB);
  auto r = Decode<TypeParam>(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  auto empty = Decode<TypeParam>(std::span<const uint8_t>());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kCorrupt);
}

TYPED_TEST(EveryAttributeTest, FitsTheMadDataArea) {
  EXPECT_LE(Layout<TypeParam>::kSize, kPerfDataSize);
}

// ---- Golden bytes. ----

TEST(MulticastForwardingTableTest, PortMasksAreBigEndianSixteenBitWords) {
  MulticastForwardingTable t;
  t.port_mask[0] = 0x8001;
  t.port_mask[1] = 0x0100;
  t.port_mask[31] = 0x00F0;
  auto b = Encoded(t);
  EXPECT_EQ(b[0], 0x80);
  EXPECT_EQ(b[1], 0x01);
  EXPECT_EQ(b[2], 0x01);
  EXPECT_EQ(b[3], 0x00);
  EXPECT_EQ(b[62], 0x00);
  EXPECT_EQ(b[63], 0xF0);
  EXPECT_EQ(MftAttrMod(2, 5), 0x20000005u);
  EXPECT_EQ(MftAttrMod(15, 511), 0xF00001FFu);
}

TEST(PKeyTableTest, EntriesAreBigEndianWithTheMembershipBitOnTop) {
  PKeyTable t;
  t.pkey[0] = kDefaultPKey;
  t.pkey[1] = kPKeyFullMemberBit | 0x0001;
  t.pkey[31] = 0x7FFF;
  auto b = Encoded(t);
  EXPECT_EQ(b[0], 0xFF);
  EXPECT_EQ(b[1], 0xFF);
  EXPECT_EQ(b[2], 0x80);
  EXPECT_EQ(b[3], 0x01);
  EXPECT_EQ(b[62], 0x7F);
  EXPECT_EQ(b[63], 0xFF);
  EXPECT_EQ(PKeyAttrMod(3, 17), 0x00110003u);
}

TEST(SlToVlTableTest, SlZeroIsTheHighNibbleOfByteZero) {
  SlToVlTable t;
  t.vl[0] = 1;
  t.vl[1] = 2;
  t.vl[14] = 0;
  t.vl[15] = 0xF;
  auto b = Encoded(t);
  ASSERT_EQ(b.size(), 8u);
  EXPECT_EQ(b[0], 0x12);
  EXPECT_EQ(b[7], 0x0F);
  const std::array<uint8_t, 8> in = {0xAB, 0, 0, 0, 0, 0, 0, 0x70};
  auto d = Decode<SlToVlTable>(in);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->vl[0], 0xA);
  EXPECT_EQ(d->vl[1], 0xB);
  EXPECT_EQ(d->vl[14], 7);
  EXPECT_EQ(SlToVlAttrMod(3, 7), 0x0307u);
}

TEST(VlArbitrationTableTest, EachEntryIsFourReservedBitsAVlAndAWeight) {
  VlArbitrationTable t;
  t.vl[0] = 3;
  t.weight[0] = 0x40;
  t.vl[31] = 15;
  t.weight[31] = 0xFF;
  auto b = Encoded(t);
  EXPECT_EQ(b[0], 0x03);
  EXPECT_EQ(b[1], 0x40);
  EXPECT_EQ(b[62], 0x0F);
  EXPECT_EQ(b[63], 0xFF);
  std::array<uint8_t, 64> in{};
  in[2] = 0xF5;  // reserved nibble set: ignored
  in[3] = 0x07;
  auto d = Decode<VlArbitrationTable>(in);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->vl[1], 5);
  EXPECT_EQ(d->weight[1], 7);
  EXPECT_EQ(VlArbAttrMod(vlarb_block::kHighLower, 4), 0x00030004u);
}

TEST(GuidInfoTest, EightGuidsFillTheBlockInOrder) {
  GuidInfo g;
  g.guid[0] = 0x0002c90300001234ull;
  g.guid[7] = 0x1122334455667788ull;
  auto b = Encoded(g);
  const uint8_t first[8] = {0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x12, 0x34};
  const uint8_t last[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  EXPECT_TRUE(std::equal(std::begin(first), std::end(first), b.begin()));
  EXPECT_TRUE(std::equal(std::begin(last), std::end(last), b.begin() + 56));
}

TEST(NoticeTest, Trap128PutsHeaderBitsAndSwitchLidWhereTheSpecSays) {
  Notice n = MakeTrap128(0x0012);
  n.notice_toggle = 1;
  n.notice_count = 5;
  n.issuer_gid[0] = 0xFE;
  n.issuer_gid[15] = 0x01;
  auto b = Encoded(n);
  ASSERT_EQ(b.size(), 80u);
  EXPECT_EQ(b[0], 0x81);  // IsGeneric, type Urgent
  EXPECT_EQ(b[1], 0x00);
  EXPECT_EQ(b[2], 0x00);
  EXPECT_EQ(b[3], 0x02);  // producer: switch
  EXPECT_EQ(b[4], 0x00);
  EXPECT_EQ(b[5], 0x80);  // trap 128
  EXPECT_EQ(b[6], 0x00);
  EXPECT_EQ(b[7], 0x12);  // issuer LID
  EXPECT_EQ(b[8], 0x80);  // toggle
  EXPECT_EQ(b[9], 0x05);  // count
  EXPECT_EQ(b[10], 0x00);
  EXPECT_EQ(b[11], 0x12);  // details: switch LID
  EXPECT_EQ(b[64], 0xFE);
  EXPECT_EQ(b[79], 0x01);
  auto back = Decode<Notice>(b);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(IsGenericTrap(*back, trap::kLinkStateChanged));
  EXPECT_EQ(Trap128Lid(*back), 0x0012);
}

TEST(NoticeTest, Trap144DetailsLandAtTheirByteOffsets) {
  Trap144Details d;
  d.lid = 0x0102;
  d.local_changes = 1;
  d.capability_mask = 0x02510868;
  d.change_flags = trap144_flag::kNodeDescriptionChange | trap144_flag::kSmPriorityChange;
  d.capability_mask2 = 0x0004;
  Notice n = MakeTrap144(producer::kCa, 0x0102, d);
  auto b = Encoded(n);
  EXPECT_EQ(b[0], 0x84);  // IsGeneric, type Info
  EXPECT_EQ(b[5], 144);
  EXPECT_EQ(b[12], 0x01);
  EXPECT_EQ(b[13], 0x02);
  EXPECT_EQ(b[14], 0x00);
  EXPECT_EQ(b[15], 0x01);  // LocalChanges is the last bit of the byte
  EXPECT_EQ(b[16], 0x02);
  EXPECT_EQ(b[19], 0x68);
  EXPECT_EQ(b[20], 0x00);
  EXPECT_EQ(b[21], 0x09);
  EXPECT_EQ(b[23], 0x04);
  auto back = TrapDetails<Trap144Details>(*Decode<Notice>(b));
  EXPECT_EQ(back.lid, 0x0102);
  EXPECT_EQ(back.capability_mask, 0x02510868u);
  EXPECT_EQ(back.change_flags, 0x0009);
}

TEST(NoticeTest, Trap64CarriesTheGidAfterSixReservedBytes) {
  std::array<uint8_t, 16> gid{};
  gid[0] = 0xFE;
  gid[1] = 0x80;
  gid[15] = 0x42;
  Notice n = MakeTrap64(trap::kGidInService, gid, 1);
  auto b = Encoded(n);
  EXPECT_EQ(b[0], 0x83);  // type SubnetManagement
  EXPECT_EQ(b[3], 0x04);  // producer: class manager
  EXPECT_EQ(b[5], 64);
  EXPECT_EQ(b[15], 0x00);
  EXPECT_EQ(b[16], 0xFE);
  EXPECT_EQ(b[17], 0x80);
  EXPECT_EQ(b[31], 0x42);
  EXPECT_EQ(Trap64Gid(n), gid);
}

TEST(NoticeTest, Trap145AndTrap256DetailsMatchTheSpecTable) {
  Notice n = MakeTrap145(producer::kSwitch, 7, 0x1234567812345678ull);
  auto b = Encoded(n);
  EXPECT_EQ(b[13], 7);
  EXPECT_EQ(b[16], 0x12);  // SystemImageGUID after 16 reserved bits
  EXPECT_EQ(b[23], 0x78);

  Trap256Details d;
  d.lid = 9;
  d.dr_slid = 0xFFFF;
  d.method = method::kSet;
  d.attr_id = attr::kPortInfo;
  d.attr_mod = 0x12;
  d.m_key = 0x0102030405060708ull;
  d.dr_notice = 1;
  d.dr_hop_count = 4;
  d.dr_return_path[0] = 5;
  d.dr_return_path[29] = 6;
  Notice m = MakeGenericNotice(NoticeType::kSecurity, producer::kCa, trap::kBadMKey, 9);
  SetTrapDetails(d, &m);
  auto c = Encoded(m);
  EXPECT_EQ(c[0], 0x82);
  EXPECT_EQ(c[13], 9);
  EXPECT_EQ(c[14], 0xFF);
  EXPECT_EQ(c[16], 0x02);  // method
  EXPECT_EQ(c[19], 0x15);  // attribute ID
  EXPECT_EQ(c[23], 0x12);  // attribute modifier
  EXPECT_EQ(c[24], 0x01);  // M_Key
  EXPECT_EQ(c[31], 0x08);
  EXPECT_EQ(c[33], 0x84);  // DRNotice, hop count 4
  EXPECT_EQ(c[34], 5);
  EXPECT_EQ(c[63], 6);
}

TEST(NoticeTest, SmpFormCarriesSixtyFourBytesAndRejectsFewer) {
  Notice n = MakeTrap128(3);
  n.issuer_gid[0] = 0xAA;  // not carried by an SMP
  std::array<uint8_t, 64> smp{};
  EncodeSmpNotice(n, smp);
  Notice back;
  ASSERT_TRUE(DecodeSmpNotice(smp, &back).ok());
  EXPECT_EQ(Trap128Lid(back), 3);
  EXPECT_EQ(back.issuer_gid[0], 0);
  Status s = DecodeSmpNotice(std::span<const uint8_t>(smp).first(63), &back);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
}

TEST(PortCountersTest, CountersSitAtTheirOffsetsInThePerfMgtDataArea) {
  PortCounters pc;
  pc.port_select = 1;
  pc.counter_select = 0xFFFF;
  pc.symbol_error_counter = 0x1234;
  pc.link_downed_counter = 0x56;
  pc.local_link_integrity_errors = 0xA;
  pc.excessive_buffer_overrun_errors = 0x5;
  pc.vl15_dropped = 0x0708;
  pc.port_xmit_wait = 0xCAFEBABE;
  auto b = Encoded(pc);
  ASSERT_EQ(b.size(), 44u);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x01);
  EXPECT_EQ(b[2], 0xFF);
  EXPECT_EQ(b[4], 0x12);
  EXPECT_EQ(b[5], 0x34);
  EXPECT_EQ(b[7], 0x56);
  EXPECT_EQ(b[19], 0xA5);
  EXPECT_EQ(b[22], 0x07);
  EXPECT_EQ(b[23], 0x08);
  EXPECT_EQ(b[40], 0xCA);
  EXPECT_EQ(b[43], 0xBE);
}

TEST(PortCountersExtendedTest, SixtyFourBitCountersFollowTheSelectWords) {
  PortCountersExtended pc;
  pc.port_select = 0xFF;
  pc.counter_select2 = 0x00FF00FF;
  pc.port_xmit_data = 0x0102030405060708ull;
  pc.qp1_dropped = 0x1122334455667788ull;
  auto b = Encoded(pc);
  ASSERT_EQ(b.size(), 184u);
  EXPECT_EQ(b[1], 0xFF);
  EXPECT_EQ(b[4], 0x00);
  EXPECT_EQ(b[5], 0xFF);
  EXPECT_EQ(b[8], 0x01);
  EXPECT_EQ(b[15], 0x08);
  EXPECT_EQ(b[176], 0x11);
  EXPECT_EQ(b[183], 0x88);
}

TEST(ClassPortInfoTest, PackedWordsSplitAtTheSpecsBitBoundaries) {
  ClassPortInfo c;
  c.base_version = 1;
  c.class_version = 2;
  c.capability_mask = 0x0600;
  c.capability_mask2 = 1;
  c.resp_time_value = 0x12;
  c.redirect_sl = 0xA;
  c.redirect_fl = 0xBCDEF;
  c.redirect_qp = 0x000001;
  c.trap_hl = 0xFF;
  c.trap_qp = 0x123456;
  c.trap_qkey = 0x80010000;
  auto b = Encoded(c);
  ASSERT_EQ(b.size(), 72u);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[1], 2);
  EXPECT_EQ(b[2], 0x06);
  EXPECT_EQ(b[3], 0x00);
  EXPECT_EQ(b[4], 0x00);
  EXPECT_EQ(b[7], 0x32);  // CapabilityMask2 = 1 above a 5-bit RespTimeValue of 0x12
  EXPECT_EQ(b[25], 0xAB);
  EXPECT_EQ(b[26], 0xCD);
  EXPECT_EQ(b[27], 0xEF);
  EXPECT_EQ(b[32], 0x00);  // reserved byte before RedirectQP
  EXPECT_EQ(b[35], 0x01);
  EXPECT_EQ(b[64], 0xFF);
  EXPECT_EQ(b[65], 0x12);
  EXPECT_EQ(b[67], 0x56);
  EXPECT_EQ(b[68], 0x80);
  EXPECT_EQ(b[70], 0x00);
}

}  // namespace
}  // namespace ibsm::mad
