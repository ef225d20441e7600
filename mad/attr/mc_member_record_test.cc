// MCMemberRecord and MulticastForwardingTableRecord against independent descriptions:
// libibmad's IB_SA_MCM_* fields read the same bytes; MFTRecord's offsets are those of
// OpenSM's ib_mft_record_t (position in the top 4 bits of the second 16-bit word, the block
// in its low 9).
#include "mad/attr/mc_member_record.h"

#include <infiniband/mad.h>

#include <gtest/gtest.h>

#include <vector>

namespace ibsm::mad {
namespace {

McMemberRecord SampleMember() {
  McMemberRecord r;
  r.set_mgid(Gid{0xff12401bffff0000ull, 0x00000000ffffffffull});
  r.set_port_gid(Gid{0xfe80000000000000ull, 0x0002c90300000011ull});
  r.q_key = 0x0b1b;
  r.mlid = 0xc001;
  r.mtu_selector = selector::kExactly;
  r.mtu = mtu::k2048;
  r.tclass = 0x12;
  r.p_key = 0xffff;
  r.rate_selector = selector::kExactly;
  r.rate = rate::k10;
  r.packet_life_time_selector = selector::kExactly;
  r.packet_life_time = 18;
  r.sl = 3;
  r.flow_label = 0xabcde;
  r.hop_limit = 7;
  r.scope = mc_scope::kLinkLocal;
  r.join_state = join_state::kFull | join_state::kSendOnlyNon;
  r.proxy_join = 1;
  return r;
}

TEST(McMemberRecordTest, FieldsSitWhereLibibmadReadsThem) {
  std::vector<uint8_t> b(SaRecord<McMemberRecord>::kAttrOffset * 8, 0);
  EncodeRecord(SampleMember(), b);
  uint8_t mgid[16];
  mad_decode_field(b.data(), IB_SA_MCM_MGID_F, mgid);
  EXPECT_EQ(mgid[0], 0xff);
  EXPECT_EQ(mgid[1], 0x12);
  EXPECT_EQ(mgid[2], 0x40);
  EXPECT_EQ(mgid[3], 0x1b);
  EXPECT_EQ(mgid[15], 0xff);
  uint8_t pgid[16];
  mad_decode_field(b.data(), IB_SA_MCM_PORTGID_F, pgid);
  EXPECT_EQ(pgid[0], 0xfe);
  EXPECT_EQ(pgid[15], 0x11);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_QKEY_F), 0x0b1bu);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_MLID_F), 0xc001u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_SL_F), 3u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_MTU_F), uint32_t{mtu::k2048});
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_RATE_F), uint32_t{rate::k10});
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_TCLASS_F), 0x12u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_PKEY_F), 0xffffu);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_FLOW_LABEL_F), 0xabcdeu);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_JOIN_STATE_F), 0x5u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_MCM_PROXY_JOIN_F), 1u);
  // Selectors in the top two bits of the MTU/rate/life bytes, as OpenSM's ib_member_rec_t.
  EXPECT_EQ(b[38], (selector::kExactly << 6) | mtu::k2048);
  EXPECT_EQ(b[42], (selector::kExactly << 6) | rate::k10);
  EXPECT_EQ(b[43], (selector::kExactly << 6) | 18);
  EXPECT_EQ(b[44] >> 4, 3);   // SL
  EXPECT_EQ(b[47], 7);        // HopLimit
  EXPECT_EQ(b[48], 0x25);     // Scope 2, JoinState 5
}

TEST(McMemberRecordTest, RoundTripsEveryField) {
  std::vector<uint8_t> b(56, 0);
  McMemberRecord r = SampleMember();
  EncodeRecord(r, b);
  auto back = DecodeRecord<McMemberRecord>(b);
  ASSERT_TRUE(back.ok());
  std::vector<uint8_t> again(56, 0);
  EncodeRecord(*back, again);
  EXPECT_EQ(b, again);
  EXPECT_EQ(back->mgid(), r.mgid());
  EXPECT_EQ(back->port_gid(), r.port_gid());
  EXPECT_EQ(back->flow_label, r.flow_label);
  EXPECT_EQ(back->join_state, r.join_state);
}

TEST(McMemberRecordTest, ComponentMaskSelectsTheNamedField) {
  std::vector<uint8_t> have(56, 0), want(56, 0);
  McMemberRecord r = SampleMember();
  EncodeRecord(r, have);
  McMemberRecord q;
  q.set_mgid(r.mgid());
  q.join_state = join_state::kNon;  // differs, but not asked
  EncodeRecord(q, want);
  EXPECT_TRUE(Matches<McMemberRecord>(mcr_comp::kMgid, want, have));
  EXPECT_FALSE(Matches<McMemberRecord>(mcr_comp::kMgid | mcr_comp::kJoinState, want, have));
  EXPECT_FALSE(Matches<McMemberRecord>(mcr_comp::kPortGid, want, have));
}

TEST(McMemberRecordTest, ShortInputIsCorruptNotACrash) {
  std::vector<uint8_t> b(20, 0);
  EXPECT_FALSE(DecodeRecord<McMemberRecord>(b).ok());
  EXPECT_FALSE(DecodeRecord<MftRecord>(b).ok());
}

TEST(MftRecordTest, PositionAndBlockShareOneWordAsInOpenSM) {
  MftRecord r;
  r.lid = 0x0102;
  r.position = 2;
  r.block_num = 0x1ab;
  r.mft.port_mask[0] = 0x8001;
  r.mft.port_mask[31] = 0x0010;
  std::vector<uint8_t> b(72, 0);
  EncodeRecord(r, b);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[1], 0x02);
  uint16_t word = static_cast<uint16_t>(b[2] << 8 | b[3]);
  EXPECT_EQ(word >> 12, 2);         // ib_mft_record_t position_block_num >> 12
  EXPECT_EQ(word & 0x01ff, 0x1ab);  // & IB_MCAST_BLOCK_ID_MASK_HO
  EXPECT_EQ(b[8], 0x80);            // mft[0], big-endian
  EXPECT_EQ(b[9], 0x01);
  EXPECT_EQ(b[8 + 62], 0x00);
  EXPECT_EQ(b[8 + 63], 0x10);
  auto back = DecodeRecord<MftRecord>(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->position, 2);
  EXPECT_EQ(back->block_num, 0x1ab);
  EXPECT_EQ(back->mft.port_mask, r.mft.port_mask);
}

}  // namespace
}  // namespace ibsm::mad
