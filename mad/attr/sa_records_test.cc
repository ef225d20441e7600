// SA record layouts against two independent descriptions: libibmad's IB_SA_NR_* and
// IB_SA_GIR_* fields (rdma-core libibmad/fields.c) read the same bytes, and every other
// record's offsets are those of OpenSM's include/iba/ib_types.h structs (the ones saquery
// prints with), restated here as byte offsets.
#include "mad/attr/sa_records.h"

#include <infiniband/mad.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace ibsm::mad {
namespace {

template <typename R>
std::vector<uint8_t> Wire(const R& r) {
  std::vector<uint8_t> buf(size_t{SaRecord<R>::kAttrOffset} * 8, 0xEE);
  EncodeRecord(r, buf);
  return buf;
}

NodeRecord SampleNodeRecord() {
  NodeRecord r;
  r.lid = 0x1234;
  r.node_info.base_version = 1;
  r.node_info.class_version = 1;
  r.node_info.node_type = NodeType::kSwitch;
  r.node_info.num_ports = 36;
  r.node_info.system_image_guid = 0x0002c90300000001ull;
  r.node_info.node_guid = 0x0002c90300000002ull;
  r.node_info.port_guid = 0x0002c90300000003ull;
  r.node_info.partition_cap = 8;
  r.node_info.device_id = 0xcb20;
  r.node_info.revision = 0xa1;
  r.node_info.local_port_num = 7;
  r.node_info.vendor_id = 0x02c9;
  r.node_description = NodeDescription::From("leaf-001 HCA-1");
  return r;
}

TEST(SaRecordsTest, NodeRecordReadsTheSameThroughLibibmad) {
  NodeRecord r = SampleNodeRecord();
  std::vector<uint8_t> b = Wire(r);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_LID_F), 0x1234u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_BASEVER_F), 1u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_CLASSVER_F), 1u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_TYPE_F), 2u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_NPORTS_F), 36u);
  EXPECT_EQ(mad_get_field64(b.data(), 0, IB_SA_NR_SYSTEM_GUID_F), 0x0002c90300000001ull);
  EXPECT_EQ(mad_get_field64(b.data(), 0, IB_SA_NR_GUID_F), 0x0002c90300000002ull);
  EXPECT_EQ(mad_get_field64(b.data(), 0, IB_SA_NR_PORT_GUID_F), 0x0002c90300000003ull);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_PARTITION_CAP_F), 8u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_DEVID_F), 0xcb20u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_REVISION_F), 0xa1u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_LOCAL_PORT_F), 7u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_NR_VENDORID_F), 0x02c9u);
  char desc[65] = {};
  mad_decode_field(b.data(), IB_SA_NR_NODEDESC_F, desc);
  EXPECT_STREQ(desc, "leaf-001 HCA-1");
  EXPECT_EQ(Layout<NodeRecord>::kSize, size_t{IB_SA_NR_RECSZ});
  // OpenSM pads the 108 bytes to 112; the pad travels as zeros.
  EXPECT_EQ(b[108], 0xEE) << "EncodeRecord writes only the record's own bytes";

  auto back = DecodeRecord<NodeRecord>(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->lid, r.lid);
  EXPECT_EQ(back->node_info.port_guid, r.node_info.port_guid);
  EXPECT_EQ(back->node_description.str(), "leaf-001 HCA-1");
}

TEST(SaRecordsTest, GuidInfoRecordReadsTheSameThroughLibibmad) {
  GuidInfoRecord r;
  r.lid = 77;
  r.block_num = 3;
  for (size_t i = 0; i < 8; ++i) r.guid_info.guid[i] = 0x1000 + i;
  std::vector<uint8_t> b = Wire(r);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_GIR_LID_F), 77u);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_GIR_BLOCKNUM_F), 3u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(mad_get_field64(b.data(), 0, static_cast<MAD_FIELDS>(IB_SA_GIR_GUID0_F + i)),
              0x1000u + i);
  }
  EXPECT_EQ(Layout<GuidInfoRecord>::kSize, size_t{IB_SA_GIR_RECSZ});
}

// Byte offsets of OpenSM's ib_*_record_t members (include/iba/ib_types.h, packed).
TEST(SaRecordsTest, ServiceRecordReadsTheSameThroughLibibmad) {
  ServiceRecord r;
  r.service_id = 0x1000000000000abcull;
  for (uint8_t i = 0; i < 16; ++i) r.service_gid[i] = static_cast<uint8_t>(0xa0 + i);
  r.service_p_key = 0xffff;
  r.service_lease = 3600;
  for (uint8_t i = 0; i < 16; ++i) r.service_key[i] = static_cast<uint8_t>(0x10 + i);
  std::memcpy(r.service_name.data(), "ibsm.test", 9);
  r.service_data8[0] = 0x11;
  r.service_data16[1] = 0x2233;
  r.service_data32[2] = 0x44556677;
  r.service_data64[1] = 0x8899aabbccddeeffull;
  std::vector<uint8_t> b = Wire(r);
  EXPECT_EQ(mad_get_field64(b.data(), 0, IB_SA_SR_ID_F), r.service_id);
  uint8_t gid[16];
  mad_decode_field(b.data(), IB_SA_SR_GID_F, gid);
  EXPECT_EQ(std::memcmp(gid, r.service_gid.data(), 16), 0);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_SR_PKEY_F), 0xffffu);
  EXPECT_EQ(mad_get_field(b.data(), 0, IB_SA_SR_LEASE_F), 3600u);
  uint8_t key[16];
  mad_decode_field(b.data(), IB_SA_SR_KEY_F, key);
  EXPECT_EQ(std::memcmp(key, r.service_key.data(), 16), 0);
  char name[65] = {};
  mad_decode_field(b.data(), IB_SA_SR_NAME_F, name);
  EXPECT_STREQ(name, "ibsm.test");
  // ServiceData: 16 x 8, 8 x 16, 4 x 32, 2 x 64 bits, big-endian, bytes 112..175.
  uint8_t data[64];
  mad_decode_field(b.data(), IB_SA_SR_DATA_F, data);
  EXPECT_EQ(data[0], 0x11);
  EXPECT_EQ(data[16 + 2], 0x22);
  EXPECT_EQ(data[16 + 3], 0x33);
  EXPECT_EQ(data[32 + 8], 0x44);
  EXPECT_EQ(data[32 + 11], 0x77);
  EXPECT_EQ(data[48 + 8], 0x88);
  EXPECT_EQ(data[63], 0xff);
  auto back = DecodeRecord<ServiceRecord>(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->service_data64[1], r.service_data64[1]);
  EXPECT_EQ(back->service_name, r.service_name);
  EXPECT_EQ(back->GidPrefix(), 0xa0a1a2a3a4a5a6a7ull);
  EXPECT_EQ(back->GidGuid(), 0xa8a9aaabacadaeafull);
}

TEST(SaRecordsTest, ServiceRecordComponentsFollowOpenSmCompMaskBits) {
  const auto& c = SaRecord<ServiceRecord>::kComponents;
  ASSERT_EQ(c.size(), 37u);  // IB_SR_COMPMASK_SID (0) .. IB_SR_COMPMASK_SDATA64_1 (36)
  EXPECT_EQ(c[1].name, "service_gid");
  EXPECT_EQ(c[6].name, "service_name");
  EXPECT_EQ(c[7].bit_offset, 896u);    // SDATA8_0
  EXPECT_EQ(c[23].bit_offset, 1024u);  // SDATA16_0
  EXPECT_EQ(c[31].bit_offset, 1152u);  // SDATA32_0
  EXPECT_EQ(c[36].bit_offset, 1344u);  // SDATA64_1
  ServiceRecord a, b;
  std::memcpy(a.service_name.data(), "one", 3);
  std::memcpy(b.service_name.data(), "two", 3);
  a.service_data8[5] = b.service_data8[5] = 7;
  EXPECT_FALSE(Matches<ServiceRecord>(1ull << 6, Wire(a), Wire(b)));
  EXPECT_TRUE(Matches<ServiceRecord>(1ull << 12, Wire(a), Wire(b)));
}

TEST(SaRecordsTest, RecordsPlaceTheirFieldsWhereOpenSmStructsHaveThem) {
  PortInfoRecord pir;
  pir.lid = 0x0102;
  pir.port_num = 9;
  pir.options = 0x5a;
  pir.port_info.lid = 0xbeef;      // ib_port_info_t.base_lid at byte 16 of port_info
  auto b = Wire(pir);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[2], 9);
  EXPECT_EQ(b[3], 0x5a);
  EXPECT_EQ(b[4 + 16], 0xbe);
  EXPECT_EQ(b[4 + 17], 0xef);
  EXPECT_EQ(SaRecord<PortInfoRecord>::kAttrOffset * 8, 72);  // sizeof(ib_portinfo_record_t)

  SmInfoRecord smir;
  smir.lid = 5;
  smir.sm_info.guid = 0x1122334455667788ull;
  smir.sm_info.priority = 0xA;
  smir.sm_info.sm_state = SmState::kMaster;
  b = Wire(smir);
  EXPECT_EQ(b[1], 5);
  EXPECT_EQ(b[4], 0x11);
  EXPECT_EQ(b[4 + 20], 0xA3);  // pri_state
  EXPECT_EQ(SaRecord<SmInfoRecord>::kAttrOffset * 8, 32);  // sizeof(ib_sminfo_record_t)

  LftRecord lftr;
  lftr.lid = 3;
  lftr.block_num = 0x0203;
  lftr.lft.port[0] = 17;
  b = Wire(lftr);
  EXPECT_EQ(b[2], 0x02);
  EXPECT_EQ(b[3], 0x03);
  EXPECT_EQ(b[8], 17);

  LinkRecord lr{10, 2, 3, 0x0b0c};
  b = Wire(lr);
  EXPECT_EQ((std::vector<uint8_t>(b.begin(), b.begin() + 8)),
            (std::vector<uint8_t>{0, 10, 2, 3, 0x0b, 0x0c, 0, 0}));

  PKeyTableRecord pk;
  pk.lid = 1;
  pk.block_num = 0x0405;
  pk.port_num = 6;
  pk.pkey_table.pkey[0] = 0xffff;
  b = Wire(pk);
  EXPECT_EQ(b[2], 0x04);
  EXPECT_EQ(b[3], 0x05);
  EXPECT_EQ(b[4], 6);
  EXPECT_EQ(b[8], 0xff);

  Sl2VlTableRecord sl;
  sl.lid = 1;
  sl.in_port_num = 2;
  sl.out_port_num = 3;
  sl.table.vl[0] = 0xA;
  sl.table.vl[1] = 0x5;
  b = Wire(sl);
  EXPECT_EQ(b[2], 2);
  EXPECT_EQ(b[3], 3);
  EXPECT_EQ(b[8], 0xA5);
  EXPECT_EQ(SaRecord<Sl2VlTableRecord>::kAttrOffset * 8, 16);

  VlArbitrationTableRecord va;
  va.lid = 1;
  va.output_port_num = 4;
  va.block_num = 2;
  va.table.weight[0] = 0x40;
  b = Wire(va);
  EXPECT_EQ(b[2], 4);
  EXPECT_EQ(b[3], 2);
  EXPECT_EQ(b[9], 0x40);

  SwitchInfoRecord sw;
  sw.lid = 1;
  sw.switch_info.linear_fdb_top = 0x0c00;  // ib_switch_info_t.lin_top at byte 6
  b = Wire(sw);
  EXPECT_EQ(b[4 + 6], 0x0c);
  EXPECT_EQ(SaRecord<SwitchInfoRecord>::kAttrOffset * 8, 24);
}

TEST(SaRecordsTest, ComponentNumbersFollowOpenSmCompMaskBits) {
  const auto& nr = SaRecord<NodeRecord>::kComponents;
  EXPECT_EQ(nr[7].name, "node_guid");   // IB_NR_COMPMASK_NODEGUID = bit 7
  EXPECT_EQ(nr[14].name, "text");       // IB_NR_COMPMASK_NODEDESC = bit 14
  const auto& pir = SaRecord<PortInfoRecord>::kComponents;
  EXPECT_EQ(pir[7].name, "capability_mask");  // IB_PIR_COMPMASK_CAPMASK
  EXPECT_EQ(pir[20].name, "lmc");              // IB_PIR_COMPMASK_LMC
  EXPECT_EQ(pir[31].name, "mtu_cap");          // IB_PIR_COMPMASK_MTUCAP
  EXPECT_EQ(pir[45].name, "subnet_timeout");   // IB_PIR_COMPMASK_SUBNTO
  EXPECT_EQ(pir[53].name, "capability_mask2"); // IB_PIR_COMPMASK_CAPMASK2
  EXPECT_EQ(SaRecord<SmInfoRecord>::kComponents[6].name, "sm_state");  // IB_SMIR_COMPMASK_SMSTATE
  EXPECT_EQ(SaRecord<VlArbitrationTableRecord>::kComponents[2].name, "block_num");
  EXPECT_EQ(SaRecord<GuidInfoRecord>::kComponents[11].name, "guid7");
}

TEST(SaRecordsTest, RecordMatchesWhenEveryMaskedComponentIsEqual) {
  NodeRecord r = SampleNodeRecord();
  auto rec = Wire(r);
  NodeRecord want;
  want.node_info.node_guid = r.node_info.node_guid;
  auto req = Wire(want);
  const uint64_t kGuid = 1u << 7, kLid = 1u << 0;
  EXPECT_TRUE(Matches<NodeRecord>(0, req, rec));
  EXPECT_TRUE(Matches<NodeRecord>(kGuid, req, rec));
  EXPECT_FALSE(Matches<NodeRecord>(kGuid | kLid, req, rec));
  want.lid = r.lid;
  EXPECT_TRUE(Matches<NodeRecord>(kGuid | kLid, Wire(want), rec));
  // The 512-bit description compares every chunk.
  want.node_description = NodeDescription::From("leaf-001 HCA-2");
  EXPECT_FALSE(Matches<NodeRecord>(1u << 14, Wire(want), rec));
  want.node_description = r.node_description;
  EXPECT_TRUE(Matches<NodeRecord>(1u << 14, Wire(want), rec));
}

TEST(SaRecordsTest, MaskBitsBeyondTheComponentsAreIgnored) {
  LinkRecord r{1, 2, 3, 4};
  EXPECT_TRUE(Matches<LinkRecord>(uint64_t{1} << 40, Wire(LinkRecord{}), Wire(r)));
}

TEST(SaRecordsTest, ShortRequestReadsAsZeros) {
  NodeRecord r = SampleNodeRecord();
  std::vector<uint8_t> tiny = {0x12, 0x34};  // only the LID
  EXPECT_TRUE(Matches<NodeRecord>(1, tiny, Wire(r)));
  EXPECT_FALSE(Matches<NodeRecord>(1u << 7, tiny, Wire(r)));
}

TEST(SaRecordsTest, CapabilityMaskMatchesBitsSetOnlyWhenAsked) {
  PortInfoRecord r;
  r.port_info.capability_mask = 0x0251084a;  // IsSM (bit 1) among others
  PortInfoRecord want;
  want.port_info.capability_mask = 0x2;
  const uint64_t kCap = 1u << 7;
  EXPECT_FALSE(Matches<PortInfoRecord>(kCap, Wire(want), Wire(r), /*enhanced=*/false));
  EXPECT_TRUE(Matches<PortInfoRecord>(kCap, Wire(want), Wire(r), /*enhanced=*/true));
  want.port_info.capability_mask = 0x4;
  EXPECT_FALSE(Matches<PortInfoRecord>(kCap, Wire(want), Wire(r), /*enhanced=*/true));
}

}  // namespace
}  // namespace ibsm::mad
