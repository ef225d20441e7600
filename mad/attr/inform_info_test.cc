// InformInfo and InformInfoRecord against OpenSM's include/iba/ib_types.h structs
// (ib_inform_info_t, ib_inform_info_record_t), restated here as byte offsets: libibmad has
// no fields for either.
#include "mad/attr/inform_info.h"

#include <gtest/gtest.h>

#include <vector>

namespace ibsm::mad {
namespace {

uint32_t Be32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t{b[at]} << 24 | uint32_t{b[at + 1]} << 16 | uint32_t{b[at + 2]} << 8 | b[at + 3];
}
uint16_t Be16(const std::vector<uint8_t>& b, size_t at) {
  return static_cast<uint16_t>(b[at] << 8 | b[at + 1]);
}

InformInfo SampleInformInfo() {
  InformInfo ii;
  for (size_t i = 0; i < 16; ++i) ii.gid[i] = static_cast<uint8_t>(0xA0 + i);
  ii.lid_range_begin = 0x0102;
  ii.lid_range_end = 0x0304;
  ii.is_generic = 1;
  ii.subscribe = 1;
  ii.type = 0x0003;
  ii.trap_number_or_device_id = 128;
  ii.qpn = 0xABCDEF;
  ii.resp_time_value = 0x13;
  ii.producer_type_or_vendor_id = 0x123456;
  return ii;
}

TEST(InformInfoTest, FieldsSitWhereOpenSmsStructHasThem) {
  std::vector<uint8_t> b(Layout<InformInfo>::kSize, 0xEE);
  EncodeTo(SampleInformInfo(), b);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(b[i], 0xA0 + i);  // gid
  EXPECT_EQ(Be16(b, 16), 0x0102);                              // lid_range_begin
  EXPECT_EQ(Be16(b, 18), 0x0304);                              // lid_range_end
  EXPECT_EQ(Be16(b, 20), 0);                                   // reserved1
  EXPECT_EQ(b[22], 1);                                         // is_generic
  EXPECT_EQ(b[23], 1);                                         // subscribe
  EXPECT_EQ(Be16(b, 24), 3);                                   // trap_type
  EXPECT_EQ(Be16(b, 26), 128);                                 // g_or_v.generic.trap_num
  // qpn_resp_time_val: QPN in the high 24 bits, RespTimeValue in the low 5
  // (ib_inform_info_get_qpn_resp_time).
  EXPECT_EQ(Be32(b, 28), 0xABCDEF00u | 0x13u);
  EXPECT_EQ(b[32], 0);                                         // reserved2
  EXPECT_EQ(b[33], 0x12);                                      // node_type_msb
  EXPECT_EQ(Be16(b, 34), 0x3456);                              // node_type_lsb
}

TEST(InformInfoTest, RoundTripsThroughTheWire) {
  InformInfo ii = SampleInformInfo();
  std::vector<uint8_t> b(Layout<InformInfo>::kSize);
  EncodeTo(ii, b);
  auto back = Decode<InformInfo>(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, ii);
  // The vendor form is the same bits read as DeviceID / VendorID.
  ii.is_generic = 0;
  ii.trap_number_or_device_id = 0xBEEF;
  ii.producer_type_or_vendor_id = 0x0002C9;
  EncodeTo(ii, b);
  EXPECT_EQ(Be16(b, 26), 0xBEEF);
  EXPECT_EQ(b[33], 0x00);
  EXPECT_EQ(Be16(b, 34), 0x02C9);
  EXPECT_EQ(*Decode<InformInfo>(b), ii);
}

TEST(InformInfoTest, ShortInputIsCorruptNotACrash) {
  std::vector<uint8_t> b(35, 0);
  EXPECT_FALSE(Decode<InformInfo>(b).ok());
}

TEST(InformInfoRecordTest, CarriesInformInfoAtByte24AsOpenSmDoes) {
  InformInfoRecord r;
  for (size_t i = 0; i < 16; ++i) r.subscriber_gid[i] = static_cast<uint8_t>(i + 1);
  r.enum_ = 0x0203;
  r.inform_info = SampleInformInfo();
  std::vector<uint8_t> b(size_t{SaRecord<InformInfoRecord>::kAttrOffset} * 8, 0xEE);
  EncodeRecord(r, b);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(b[i], i + 1);
  EXPECT_EQ(Be16(b, 16), 0x0203);
  for (size_t i = 18; i < 24; ++i) EXPECT_EQ(b[i], 0) << "reserved byte " << i;
  EXPECT_EQ(b[24], 0xA0);                   // inform_info.gid
  EXPECT_EQ(Be16(b, 24 + 26), 128);         // inform_info trap_num
  EXPECT_EQ(Be32(b, 24 + 28), 0xABCDEF13u);  // qpn + resp time
  auto back = DecodeRecord<InformInfoRecord>(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->subscriber_gid, r.subscriber_gid);
  EXPECT_EQ(back->enum_, r.enum_);
  EXPECT_EQ(back->inform_info, r.inform_info);
}

TEST(InformInfoRecordTest, ComponentsFollowOpenSmCompMaskBits) {
  const auto& c = SaRecord<InformInfoRecord>::kComponents;
  ASSERT_EQ(c.size(), 16u);
  // IB_IIR_COMPMASK_SUBSCRIBERGID 0, ENUM 1, GID 3, LIDRANGEBEGIN 4, ISGENERIC 7, TYPE 9,
  // TRAPNUMB 10, QPN 11, RESPTIME 13, PRODTYPE 15.
  EXPECT_EQ(c[0].bit_offset, 0u);
  EXPECT_EQ(c[0].bit_width, 128u);
  EXPECT_EQ(c[1].bit_offset, 128u);
  EXPECT_EQ(c[3].bit_offset, 24u * 8);
  EXPECT_EQ(c[4].bit_offset, (24u + 16) * 8);
  EXPECT_EQ(c[7].bit_offset, (24u + 22) * 8);
  EXPECT_EQ(c[9].bit_offset, (24u + 24) * 8);
  EXPECT_EQ(c[10].bit_offset, (24u + 26) * 8);
  EXPECT_EQ(c[11].bit_offset, (24u + 28) * 8);
  EXPECT_EQ(c[11].bit_width, 24u);
  EXPECT_EQ(c[13].bit_offset, (24u + 31) * 8 + 3);
  EXPECT_EQ(c[15].bit_offset, (24u + 33) * 8);
  EXPECT_EQ(c[15].bit_width, 24u);
}

TEST(InformInfoRecordTest, SubscriberGidComponentSelectsOneSubscriber) {
  InformInfoRecord a, b;
  a.subscriber_gid[15] = 1;
  b.subscriber_gid[15] = 2;
  std::vector<uint8_t> wa(64), wb(64), req(64);
  EncodeRecord(a, wa);
  EncodeRecord(b, wb);
  EncodeRecord(a, req);
  EXPECT_TRUE(Matches<InformInfoRecord>(iir_comp::kSubscriberGid, req, wa));
  EXPECT_FALSE(Matches<InformInfoRecord>(iir_comp::kSubscriberGid, req, wb));
  EXPECT_TRUE(Matches<InformInfoRecord>(0, req, wb));
}

}  // namespace
}  // namespace ibsm::mad
