// Golden bytes and round trips for the SHARP wire formats (mad/attr/sharp.h). Offsets come
// from docs/ar-sharp.md; ibsm's own ones (encoding v2) from the header's own table.
#include "mad/attr/sharp.h"

#include <gtest/gtest.h>

namespace ibsm::mad {
namespace {

TEST(SharpCodecTest, AmMadPutsHeaderKeyAndDataWhereTheClassSays) {
  AmMad m = MakeAmRequest(method::kSet, am_attr::kTreeConfig, 0x01020304);
  m.hdr.tid = 0x1122334455667788ull;
  m.am_key = 0xA1A2A3A4A5A6A7A8ull;
  m.data[0] = 0x5A;
  m.data[191] = 0xC3;
  MadBytes b{};
  EncodeAm(m, b);
  EXPECT_EQ(b[0], 1);     // base version
  EXPECT_EQ(b[1], 0x0B);  // class
  EXPECT_EQ(b[2], 1);     // class version
  EXPECT_EQ(b[3], method::kSet);
  EXPECT_EQ(b[16], 0x00);
  EXPECT_EQ(b[17], 0x23);  // attribute ID
  EXPECT_EQ(b[20], 0x01);
  EXPECT_EQ(b[23], 0x04);  // modifier
  EXPECT_EQ(b[24], 0xA1);
  EXPECT_EQ(b[31], 0xA8);  // AM_Key
  for (size_t i = 32; i < 64; ++i) EXPECT_EQ(b[i], 0) << "reserved byte " << i;
  EXPECT_EQ(b[64], 0x5A);
  EXPECT_EQ(b[255], 0xC3);

  AmMad back;
  ASSERT_TRUE(DecodeAm(b, &back).ok());
  EXPECT_EQ(back.hdr.tid, m.hdr.tid);
  EXPECT_EQ(back.hdr.attr_id, am_attr::kTreeConfig);
  EXPECT_EQ(back.hdr.attr_mod, 0x01020304u);
  EXPECT_EQ(back.am_key, m.am_key);
  EXPECT_EQ(back.data, m.data);
}

TEST(SharpCodecTest, AmMadShorterThanAMadIsCorrupt) {
  std::vector<uint8_t> shortb(100, 0);
  AmMad m;
  EXPECT_FALSE(DecodeAm(shortb, &m).ok());
}

TEST(SharpCodecTest, AnInfoFieldsSitAtTheDocumentedBytes) {
  AnInfo a;
  a.tree_table_size = 0x0102;
  a.tree_radix_used = 7;
  a.tree_radix = 48;
  a.sharp_version_active = 0x0203;
  a.sharp_version_supported = 0x0405;
  a.max_groups = 0x0A0B0C0D;
  a.max_qps = 0x1234;
  a.line_size = 0x0080;
  std::array<uint8_t, kAmDataSize> d{};
  EncodeTo(a, d);
  EXPECT_EQ(d[6], 0x01);
  EXPECT_EQ(d[7], 0x02);
  EXPECT_EQ(d[9], 7);
  EXPECT_EQ(d[11], 48);
  EXPECT_EQ(d[12], 0x02);
  EXPECT_EQ(d[13], 0x03);
  EXPECT_EQ(d[14], 0x04);
  EXPECT_EQ(d[15], 0x05);
  EXPECT_EQ(d[20], 0x0A);
  EXPECT_EQ(d[23], 0x0D);
  EXPECT_EQ(d[42], 0x12);
  EXPECT_EQ(d[43], 0x34);
  EXPECT_EQ(d[46], 0x00);
  EXPECT_EQ(d[47], 0x80);
  auto back = Decode<AnInfo>(d);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->tree_table_size, 0x0102);
  EXPECT_EQ(back->tree_radix, 48);
  EXPECT_EQ(back->max_groups, 0x0A0B0C0Du);
  EXPECT_EQ(back->line_size, 0x80);
}

TEST(SharpCodecTest, TreeConfigPacksOpcodeStateAndChildren) {
  TreeConfig t;
  t.opcode = tree_op::kWriteTree;
  t.state = tree_state::kEnabled;
  t.tree_id = 0x0102;
  t.mode = 1;
  t.parent_qpn = 0xABCDEF;
  t.num_children = 2;
  t.child_index[0] = 0;
  t.child_qpn[0] = 0x000123;
  t.child_index[1] = 1;
  t.child_qpn[1] = 0x000456;
  t.child_index[43] = 43;
  t.child_qpn[43] = 0xFEDCBA;
  std::array<uint8_t, kAmDataSize> d{};
  EncodeTo(t, d);
  EXPECT_EQ(d[0], 0x21);  // opcode 2 in bits 7-4, state 1 in bits 3-0
  EXPECT_EQ(d[1], 0);     // the record locator, a Get's first child wanted
  EXPECT_EQ(d[2], 0x01);
  EXPECT_EQ(d[3], 0x02);
  EXPECT_EQ(d[4], 0x10);  // mode in bits 7-4
  EXPECT_EQ(d[9], 0xAB);
  EXPECT_EQ(d[10], 0xCD);
  EXPECT_EQ(d[11], 0xEF);
  EXPECT_EQ(d[15], 2);
  EXPECT_EQ(d[16], 0);
  EXPECT_EQ(d[17], 0x00);
  EXPECT_EQ(d[18], 0x01);
  EXPECT_EQ(d[19], 0x23);
  EXPECT_EQ(d[20], 1);
  EXPECT_EQ(d[22], 0x04);
  EXPECT_EQ(d[23], 0x56);
  EXPECT_EQ(d[188], 43);  // the 44th child fills the last four bytes
  EXPECT_EQ(d[189], 0xFE);
  EXPECT_EQ(d[191], 0xBA);
  TreeConfig get;  // a Get names the tree and the first child it wants in its data
  get.tree_id = 0x0102;
  get.record_locator = 44;
  std::array<uint8_t, kAmDataSize> g{};
  EncodeTo(get, g);
  EXPECT_EQ(g[1], 44);
  EXPECT_EQ(g[2], 0x01);
  EXPECT_EQ(g[3], 0x02);
  auto back = Decode<TreeConfig>(d);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->opcode, tree_op::kWriteTree);
  EXPECT_EQ(back->state, tree_state::kEnabled);
  EXPECT_EQ(back->parent_qpn, 0xABCDEFu);
  EXPECT_EQ(back->child_qpn, t.child_qpn);
  EXPECT_EQ(back->child_index, t.child_index);
}

// ibsm's own layout (encoding v2, unverified against an aggregation node): opcode, tree id,
// job id, count and the QPN list.
TEST(SharpCodecTest, QpAllocationIsIbsmsOwnV2LayoutWithJobOpcodeTreeCountAndQpns) {
  QpAllocation q;
  q.opcode = qp_alloc_op::kRelease;
  q.tree_id = 0x0009;
  q.job_id = 0xA1B2C3D4;
  q.count = 3;
  q.qpn[0] = 0x010203;
  q.qpn[43] = 0xFFFFFF;
  std::array<uint8_t, kAmDataSize> d{};
  d.fill(0xEE);  // every byte not named below must come out 0
  EncodeTo(q, d);
  std::array<uint8_t, kAmDataSize> want{};
  want[0] = 0x10;  // opcode 1 in bits 7-4
  want[2] = 0x00;
  want[3] = 0x09;  // tree id
  want[4] = 0xA1;
  want[5] = 0xB2;
  want[6] = 0xC3;
  want[7] = 0xD4;  // job id
  want[15] = 3;    // count
  want[17] = 0x01;
  want[18] = 0x02;
  want[19] = 0x03;  // QPN 0 in the low 24 bits of the BE32 at 16
  want[189] = 0xFF;
  want[190] = 0xFF;
  want[191] = 0xFF;  // QPN 43 ends the data
  EXPECT_EQ(d, want);
  auto back = Decode<QpAllocation>(d);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->opcode, qp_alloc_op::kRelease);
  EXPECT_EQ(back->job_id, 0xA1B2C3D4u);
  EXPECT_EQ(back->tree_id, 9);
  EXPECT_EQ(back->count, 3);
  EXPECT_EQ(back->qpn, q.qpn);
}

// ibsm's own layout (encoding v2, unverified against an aggregation node): every field of a
// reliable-connected QP context at its byte.
TEST(SharpCodecTest, QpcConfigIsIbsmsOwnV2LayoutWithEveryRcField) {
  QpcConfig c;
  c.qpn = 0x000102;
  c.state = qp_state::kReady;
  c.transport = qp_transport::kRc;
  c.remote_qpn = 0x030405;
  c.remote_lid = 0x0607;
  c.tree_id = 0x0809;
  c.mtu = 5;  // 4096
  c.sl = 3;
  c.retry_count = 7;
  c.rnr_retry = 6;
  c.rnr_min_timer = 12;
  c.local_ack_timeout = 14;
  c.remote_guid = 0x0002c90300000010ull;
  c.pkey = 0xFFFF;
  c.qkey = 0x11223344;
  c.send_psn = 0x00ABCDEF;
  c.recv_psn = 0x00123456;
  c.max_rd_atomic = 4;
  c.max_dest_rd_atomic = 8;
  std::array<uint8_t, kAmDataSize> d{};
  d.fill(0xEE);
  EncodeTo(c, d);
  const std::array<uint8_t, 42> want = {
      0x00, 0x00, 0x01, 0x02,  // 0: reserved, QPN
      0x11, 0x03, 0x04, 0x05,  // 4: state 1 | transport RC 1, remote QPN
      0x06, 0x07, 0x08, 0x09,  // 8: remote LID, tree id
      0x53, 0x76, 0x0C, 0x0E,  // 12: MTU 5 | SL 3, retry 7 / RNR retry 6, RNR timer, ACK timeout
      0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x10,  // 16: remote port GUID
      0xFF, 0xFF, 0x00, 0x00,  // 24: P_Key, reserved
      0x11, 0x22, 0x33, 0x44,  // 28: Q_Key
      0x00, 0xAB, 0xCD, 0xEF,  // 32: send PSN
      0x00, 0x12, 0x34, 0x56,  // 36: receive PSN
      0x04, 0x08,              // 40: outstanding reads as requester, as responder
  };
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(d[i], want[i]) << "byte " << i;
  for (size_t i = want.size(); i < kAmDataSize; ++i) EXPECT_EQ(d[i], 0) << "reserved byte " << i;
  auto back = Decode<QpcConfig>(d);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, c);
}

// A PSN field is 32 bits wide so that a value past 24 bits reaches the AN, which refuses it,
// instead of being cut to a different valid PSN by the codec.
TEST(SharpCodecTest, QpcConfigCarriesAnOutOfRangePsnWhole) {
  QpcConfig c;
  c.send_psn = 0x01000000;
  std::array<uint8_t, kAmDataSize> d{};
  EncodeTo(c, d);
  EXPECT_EQ(d[32], 0x01);
  auto back = Decode<QpcConfig>(d);
  ASSERT_TRUE(back.ok());
  EXPECT_GE(back->send_psn, kPsnLimit);
}

// ibsm's own layout (encoding v2, unverified against an aggregation node): scope, tree id,
// job id and QPN.
TEST(SharpCodecTest, ResourceCleanupIsIbsmsOwnV2LayoutWithScopeJobTreeAndQpn) {
  ResourceCleanup r;
  r.scope = cleanup_scope::kQp;
  r.tree_id = 0x0A0B;
  r.job_id = 0x01020304;
  r.qpn = 0x0C0D0E;
  std::array<uint8_t, kAmDataSize> d{};
  d.fill(0xEE);
  EncodeTo(r, d);
  std::array<uint8_t, kAmDataSize> want{};
  want[0] = 0x30;  // scope 3 (QP) in bits 7-4
  want[2] = 0x0A;
  want[3] = 0x0B;  // tree id
  want[4] = 0x01;
  want[5] = 0x02;
  want[6] = 0x03;
  want[7] = 0x04;  // job id
  want[9] = 0x0C;
  want[10] = 0x0D;
  want[11] = 0x0E;  // QPN
  EXPECT_EQ(d, want);
  EXPECT_EQ(cleanup_scope::kAll, 0);
  EXPECT_EQ(cleanup_scope::kJob, 1);
  EXPECT_EQ(cleanup_scope::kTree, 2);
  auto back = Decode<ResourceCleanup>(d);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->scope, cleanup_scope::kQp);
  EXPECT_EQ(back->job_id, 0x01020304u);
  EXPECT_EQ(back->qpn, 0x0C0D0Eu);
}

TEST(SharpCodecTest, SharpAnEnableIsByteZeroBitSix) {
  std::array<uint8_t, kSmpDataSize> d{};
  EncodeTo(MlnxExtendedPortInfo{1}, d);
  EXPECT_EQ(d[0], 0x40);
  d[0] = 0xBF;  // every other bit set
  auto m = Decode<MlnxExtendedPortInfo>(d);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->sharp_an_en, 0);
}

// MLNX OpenSM ib_types.h (GPLv2/BSD), ib_mlnx_ext_port_info_t: special_port_type is byte
// 47, IB_IS_SPECIAL_PORT_TYPE_BIT = 1 << 7, IB_SPECIAL_PORT_TYPE_MASK = 0xF, type 1 = AN;
// ibdiagnet's capability enum: bit 21 IsSpecialPortsMarkingSupported.
TEST(SharpCodecTest, SpecialPortMarkingIsByte47AndCapabilityBit21) {
  std::array<uint8_t, kSmpDataSize> d{};
  d[47] = 0x81;
  auto m = Decode<MlnxExtendedPortInfo>(d);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->is_special_port, 1);
  EXPECT_EQ(m->special_port_type, special_port_type::kAggregationNode);
  d[47] = 0x71;  // type bits set beyond the nibble, IsSpecialPort clear
  m = Decode<MlnxExtendedPortInfo>(d);
  EXPECT_EQ(m->is_special_port, 0);
  EXPECT_EQ(m->special_port_type, 1);
  MlnxExtendedPortInfo router;
  router.is_special_port = 1;
  router.special_port_type = special_port_type::kRouter;
  d.fill(0);
  EncodeTo(router, d);
  EXPECT_EQ(d[47], 0x82);
  GeneralInfoCapabilities caps;
  caps.Set(general_cap::kSpecialPortsMarking);
  std::array<uint8_t, kSmpDataSize> c{};
  EncodeTo(caps, c);
  EXPECT_EQ(c[1], 0x20);  // 1 << 21 in the first big-endian dword
}

TEST(SharpCodecTest, CapabilityBitNIsInBigEndianDwordNOver32) {
  GeneralInfoCapabilities caps;
  caps.Set(general_cap::kSharpAggregationNode);
  caps.Set(general_cap::kAdaptiveRoutingLegacy);
  caps.Set(33);  // second dword
  std::array<uint8_t, kSmpDataSize> d{};
  EncodeTo(caps, d);
  EXPECT_EQ(d[0], 0x00);
  EXPECT_EQ(d[1], 0x04);  // 1 << 18
  EXPECT_EQ(d[3], 0x02);  // 1 << 1
  EXPECT_EQ(d[7], 0x02);  // bit 33 = dword 1, 1 << 1
  auto back = Decode<GeneralInfoCapabilities>(d);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->Has(general_cap::kSharpAggregationNode));
  EXPECT_TRUE(back->Has(1));
  EXPECT_FALSE(back->Has(2));
  EXPECT_FALSE(back->Has(200));
}

}  // namespace
}  // namespace ibsm::mad
