// The independent oracle: every field of our layouts is checked against
// libibmad's own field table (rdma-core libibmad/fields.c), in both directions, on the same
// bytes. libibmad numbers bits differently (LSB-first inside 32-bit big-endian words); its
// accessors do that conversion, so agreement here means our spec offsets are right.
//
// Each table below maps one of our field names to the libibmad field; `element` >= 0 maps a
// single element of an array field. A field of ours that libibmad does not describe is
// listed in the table's `unmapped` set so that a new field cannot go unchecked by accident.
#include <infiniband/mad.h>

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "mad/attr/class_port_info.h"
#include "mad/attr/guid_info.h"
#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/port_counters.h"
#include "mad/attr/port_counters_extended.h"
#include "mad/attr/port_info.h"
#include "mad/attr/sm_info.h"
#include "mad/attr/switch_info.h"
#include "mad/mad.h"
#include "mad/attr/layout_test_util.h"

namespace ibsm::mad {
namespace {

using test_util::PatternFilled;

struct Mapping {
  std::string_view ours;
  MAD_FIELDS theirs;
  int element = -1;  // -1: the whole field (scalar, or an array of bytes)
};

// What libibmad reads for `m`, as a byte vector (arrays) or one value (scalars).
std::vector<uint8_t> TheirBytes(uint8_t* buf, MAD_FIELDS field, size_t n) {
  std::vector<uint8_t> out(n);
  mad_decode_field(buf, field, out.data());
  return out;
}

template <typename S>
const Field<S>& MustFind(std::string_view name) {
  const Field<S>* f = FindField<S>(name);
  EXPECT_NE(f, nullptr) << "no field " << name << " in " << Layout<S>::kName;
  static const Field<S> kNone{};
  return f ? *f: kNone;
}

template <typename S>
void ExpectEveryFieldIsMapped(const std::vector<Mapping>& map,
                              const std::set<std::string_view>& unmapped) {
  for (const auto& f: Layout<S>::kFields) {
    bool found = unmapped.count(f.name) > 0;
    for (const auto& m: map) found = found || m.ours == f.name;
    EXPECT_TRUE(found) << Layout<S>::kName << "." << f.name << " has no libibmad counterpart";
  }
}

// Ours encodes, libibmad decodes.
template <typename S>
void ExpectLibibmadReadsOurBytes(const std::vector<Mapping>& map, uint64_t seed) {
  S s = PatternFilled<S>(seed);
  std::array<uint8_t, kMadSize> buf{};
  EncodeTo(s, buf);
  for (const auto& m: map) {
    const Field<S>& f = MustFind<S>(m.ours);
    if (f.name.empty()) continue;
    SCOPED_TRACE(std::string(Layout<S>::kName) + "." + std::string(m.ours));
    if (m.element < 0 && f.count > 1) {
      ASSERT_EQ(f.bit_width, 8);
      auto theirs = TheirBytes(buf.data(), m.theirs, f.count);
      for (size_t i = 0; i < f.count; ++i) EXPECT_EQ(theirs[i], f.get(s, i)) << "byte " << i;
      continue;
    }
    size_t idx = m.element < 0 ? 0 : static_cast<size_t>(m.element);
    uint64_t ours = f.get(s, idx);
    if (f.bit_width <= 32) {
      EXPECT_EQ(mad_get_field(buf.data(), 0, m.theirs), ours);
      uint32_t v = 0;
      mad_decode_field(buf.data(), m.theirs, &v);
      EXPECT_EQ(v, ours);
    } else {
      EXPECT_EQ(mad_get_field64(buf.data(), 0, m.theirs), ours);
      uint64_t v = 0;
      mad_decode_field(buf.data(), m.theirs, &v);
      EXPECT_EQ(v, ours);
    }
  }
}

// libibmad encodes, ours decodes.
template <typename S>
void ExpectWeReadLibibmadBytes(const std::vector<Mapping>& map, uint64_t seed) {
  S want = PatternFilled<S>(seed);
  std::array<uint8_t, kMadSize> buf{};
  for (const auto& m: map) {
    const Field<S>& f = MustFind<S>(m.ours);
    if (f.name.empty()) continue;
    if (m.element < 0 && f.count > 1) {
      std::vector<uint8_t> bytes(f.count);
      for (size_t i = 0; i < f.count; ++i) bytes[i] = static_cast<uint8_t>(f.get(want, i));
      mad_encode_field(buf.data(), m.theirs, bytes.data());
    } else if (f.bit_width <= 32) {
      auto v = static_cast<uint32_t>(f.get(want, m.element < 0 ? 0 : m.element));
      mad_encode_field(buf.data(), m.theirs, &v);
    } else {
      uint64_t v = f.get(want, m.element < 0 ? 0 : m.element);
      mad_encode_field(buf.data(), m.theirs, &v);
    }
  }
  auto got = Decode<S>(buf);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const auto& m: map) {
    const Field<S>& f = MustFind<S>(m.ours);
    if (f.name.empty()) continue;
    SCOPED_TRACE(std::string(Layout<S>::kName) + "." + std::string(m.ours));
    if (m.element < 0) {
      for (size_t i = 0; i < f.count; ++i) EXPECT_EQ(f.get(*got, i), f.get(want, i)) << i;
    } else {
      EXPECT_EQ(f.get(*got, m.element), f.get(want, m.element));
    }
  }
}

template <typename S>
void CheckAgainstLibibmad(const std::vector<Mapping>& map,
                          const std::set<std::string_view>& unmapped = {}) {
  ExpectEveryFieldIsMapped<S>(map, unmapped);
  for (uint64_t seed: {1ull, 7ull, 0x5EEDull, 0xFFFFFFFFull}) {
    ExpectLibibmadReadsOurBytes<S>(map, seed);
    ExpectWeReadLibibmadBytes<S>(map, seed);
  }
}

TEST(LibibmadOracleTest, NodeInfoAgreesFieldByField) {
  CheckAgainstLibibmad<NodeInfo>({
      {"base_version", IB_NODE_BASE_VERS_F},
      {"class_version", IB_NODE_CLASS_VERS_F},
      {"node_type", IB_NODE_TYPE_F},
      {"num_ports", IB_NODE_NPORTS_F},
      {"system_image_guid", IB_NODE_SYSTEM_GUID_F},
      {"node_guid", IB_NODE_GUID_F},
      {"port_guid", IB_NODE_PORT_GUID_F},
      {"partition_cap", IB_NODE_PARTITION_CAP_F},
      {"device_id", IB_NODE_DEVID_F},
      {"revision", IB_NODE_REVISION_F},
      {"local_port_num", IB_NODE_LOCAL_PORT_F},
      {"vendor_id", IB_NODE_VENDORID_F},
  });
}

TEST(LibibmadOracleTest, PortInfoAgreesFieldByField) {
  CheckAgainstLibibmad<PortInfo>({
      {"m_key", IB_PORT_MKEY_F},
      {"gid_prefix", IB_PORT_GID_PREFIX_F},
      {"lid", IB_PORT_LID_F},
      {"master_sm_base_lid", IB_PORT_SMLID_F},
      {"capability_mask", IB_PORT_CAPMASK_F},
      {"diag_code", IB_PORT_DIAG_F},
      {"m_key_lease_period", IB_PORT_MKEY_LEASE_F},
      {"local_port_num", IB_PORT_LOCAL_PORT_F},
      {"link_width_enabled", IB_PORT_LINK_WIDTH_ENABLED_F},
      {"link_width_supported", IB_PORT_LINK_WIDTH_SUPPORTED_F},
      {"link_width_active", IB_PORT_LINK_WIDTH_ACTIVE_F},
      {"link_speed_supported", IB_PORT_LINK_SPEED_SUPPORTED_F},
      {"port_state", IB_PORT_STATE_F},
      {"port_phys_state", IB_PORT_PHYS_STATE_F},
      {"link_down_default_state", IB_PORT_LINK_DOWN_DEF_F},
      {"m_key_protect_bits", IB_PORT_MKEY_PROT_BITS_F},
      {"lmc", IB_PORT_LMC_F},
      {"link_speed_active", IB_PORT_LINK_SPEED_ACTIVE_F},
      {"link_speed_enabled", IB_PORT_LINK_SPEED_ENABLED_F},
      {"neighbor_mtu", IB_PORT_NEIGHBOR_MTU_F},
      {"master_sm_sl", IB_PORT_SMSL_F},
      {"vl_cap", IB_PORT_VL_CAP_F},
      {"init_type", IB_PORT_INIT_TYPE_F},
      {"vl_high_limit", IB_PORT_VL_HIGH_LIMIT_F},
      {"vl_arb_high_cap", IB_PORT_VL_ARBITRATION_HIGH_CAP_F},
      {"vl_arb_low_cap", IB_PORT_VL_ARBITRATION_LOW_CAP_F},
      {"init_type_reply", IB_PORT_INIT_TYPE_REPLY_F},
      {"mtu_cap", IB_PORT_MTU_CAP_F},
      {"vl_stall_count", IB_PORT_VL_STALL_COUNT_F},
      {"hoq_life", IB_PORT_HOQ_LIFE_F},
      {"operational_vls", IB_PORT_OPER_VLS_F},
      {"partition_enforcement_inbound", IB_PORT_PART_EN_INB_F},
      {"partition_enforcement_outbound", IB_PORT_PART_EN_OUTB_F},
      {"filter_raw_inbound", IB_PORT_FILTER_RAW_INB_F},
      {"filter_raw_outbound", IB_PORT_FILTER_RAW_OUTB_F},
      {"m_key_violations", IB_PORT_MKEY_VIOL_F},
      {"p_key_violations", IB_PORT_PKEY_VIOL_F},
      {"q_key_violations", IB_PORT_QKEY_VIOL_F},
      {"guid_cap", IB_PORT_GUID_CAP_F},
      {"client_reregister", IB_PORT_CLIENT_REREG_F},
      {"multicast_pkey_trap_suppression", IB_PORT_MCAST_PKEY_SUPR_ENAB_F},
      {"subnet_timeout", IB_PORT_SUBN_TIMEOUT_F},
      {"resp_time_value", IB_PORT_RESP_TIME_VAL_F},
      {"local_phy_errors", IB_PORT_LOCAL_PHYS_ERR_F},
      {"overrun_errors", IB_PORT_OVERRUN_ERR_F},
      {"max_credit_hint", IB_PORT_MAX_CREDIT_HINT_F},
      {"link_round_trip_latency", IB_PORT_LINK_ROUND_TRIP_F},
      {"capability_mask2", IB_PORT_CAPMASK2_F},
      {"link_speed_ext_active", IB_PORT_LINK_SPEED_EXT_ACTIVE_F},
      {"link_speed_ext_supported", IB_PORT_LINK_SPEED_EXT_SUPPORTED_F},
      {"link_speed_ext_enabled", IB_PORT_LINK_SPEED_EXT_ENABLED_F},
  });
}

TEST(LibibmadOracleTest, SwitchInfoAgreesFieldByField) {
  CheckAgainstLibibmad<SwitchInfo>({
      {"linear_fdb_cap", IB_SW_LINEAR_FDB_CAP_F},
      {"random_fdb_cap", IB_SW_RANDOM_FDB_CAP_F},
      {"multicast_fdb_cap", IB_SW_MCAST_FDB_CAP_F},
      {"linear_fdb_top", IB_SW_LINEAR_FDB_TOP_F},
      {"default_port", IB_SW_DEF_PORT_F},
      {"default_mcast_primary_port", IB_SW_DEF_MCAST_PRIM_F},
      {"default_mcast_not_primary_port", IB_SW_DEF_MCAST_NOT_PRIM_F},
      {"life_time_value", IB_SW_LIFE_TIME_F},
      {"port_state_change", IB_SW_STATE_CHANGE_F},
      {"optimized_sl_to_vl_mapping_programming", IB_SW_OPT_SLTOVL_MAPPING_F},
      {"lids_per_port", IB_SW_LIDS_PER_PORT_F},
      {"partition_enforcement_cap", IB_SW_PARTITION_ENFORCE_CAP_F},
      {"inbound_enforcement_cap", IB_SW_PARTITION_ENF_INB_F},
      {"outbound_enforcement_cap", IB_SW_PARTITION_ENF_OUTB_F},
      {"filter_raw_inbound_cap", IB_SW_FILTER_RAW_INB_F},
      {"filter_raw_outbound_cap", IB_SW_FILTER_RAW_OUTB_F},
      {"enhanced_port0", IB_SW_ENHANCED_PORT0_F},
      {"multicast_fdb_top", IB_SW_MCAST_FDB_TOP_F},
  });
}

TEST(LibibmadOracleTest, SmInfoAgreesFieldByField) {
  CheckAgainstLibibmad<SmInfo>({
      {"guid", IB_SMINFO_GUID_F},
      {"sm_key", IB_SMINFO_KEY_F},
      {"act_count", IB_SMINFO_ACT_F},
      {"priority", IB_SMINFO_PRIO_F},
      {"sm_state", IB_SMINFO_STATE_F},
  });
}

TEST(LibibmadOracleTest, DirectedRouteSmpHeaderAgreesFieldByField) {
  // libibmad splits the method byte into a 7-bit method and the response bit; our Smp keeps
  // the byte whole (checked separately below). The data area has no single libibmad field.
  CheckAgainstLibibmad<Smp>(
      {
          {"base_version", IB_MAD_BASEVER_F},
          {"mgmt_class", IB_MAD_MGMTCLASS_F},
          {"class_version", IB_MAD_CLASSVER_F},
          {"direction", IB_DRSMP_DIRECTION_F},
          {"status", IB_DRSMP_STATUS_F},
          {"hop_pointer", IB_DRSMP_HOPPTR_F},
          {"hop_count", IB_DRSMP_HOPCNT_F},
          {"tid", IB_MAD_TRID_F},
          {"attr_id", IB_MAD_ATTRID_F},
          {"attr_mod", IB_MAD_ATTRMOD_F},
          {"m_key", IB_MAD_MKEY_F},
          {"dr_slid", IB_DRSMP_DRSLID_F},
          {"dr_dlid", IB_DRSMP_DRDLID_F},
          {"initial_path", IB_DRSMP_PATH_F},
          {"return_path", IB_DRSMP_RPATH_F},
      },
      {"method", "data"});
  Smp s;
  s.method = method::kGetResp;
  std::array<uint8_t, kMadSize> buf{};
  EncodeTo(s, buf);
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_MAD_METHOD_F), method::kGet);
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_MAD_RESPONSE_F), 1u);
}

TEST(LibibmadOracleTest, PortCountersAgreeFieldByField) {
  CheckAgainstLibibmad<PortCounters>({
      {"port_select", IB_PC_PORT_SELECT_F},
      {"counter_select", IB_PC_COUNTER_SELECT_F},
      {"symbol_error_counter", IB_PC_ERR_SYM_F},
      {"link_error_recovery_counter", IB_PC_LINK_RECOVERS_F},
      {"link_downed_counter", IB_PC_LINK_DOWNED_F},
      {"port_rcv_errors", IB_PC_ERR_RCV_F},
      {"port_rcv_remote_physical_errors", IB_PC_ERR_PHYSRCV_F},
      {"port_rcv_switch_relay_errors", IB_PC_ERR_SWITCH_REL_F},
      {"port_xmit_discards", IB_PC_XMT_DISCARDS_F},
      {"port_xmit_constraint_errors", IB_PC_ERR_XMTCONSTR_F},
      {"port_rcv_constraint_errors", IB_PC_ERR_RCVCONSTR_F},
      {"counter_select2", IB_PC_COUNTER_SELECT2_F},
      {"local_link_integrity_errors", IB_PC_ERR_LOCALINTEG_F},
      {"excessive_buffer_overrun_errors", IB_PC_ERR_EXCESS_OVR_F},
      {"vl15_dropped", IB_PC_VL15_DROPPED_F},
      {"port_xmit_data", IB_PC_XMT_BYTES_F},
      {"port_rcv_data", IB_PC_RCV_BYTES_F},
      {"port_xmit_pkts", IB_PC_XMT_PKTS_F},
      {"port_rcv_pkts", IB_PC_RCV_PKTS_F},
      {"port_xmit_wait", IB_PC_XMT_WAIT_F},
  });
}

TEST(LibibmadOracleTest, PortCountersExtendedAgreeFieldByField) {
  CheckAgainstLibibmad<PortCountersExtended>({
      {"port_select", IB_PC_EXT_PORT_SELECT_F},
      {"counter_select", IB_PC_EXT_COUNTER_SELECT_F},
      {"counter_select2", IB_PC_EXT_COUNTER_SELECT2_F},
      {"port_xmit_data", IB_PC_EXT_XMT_BYTES_F},
      {"port_rcv_data", IB_PC_EXT_RCV_BYTES_F},
      {"port_xmit_pkts", IB_PC_EXT_XMT_PKTS_F},
      {"port_rcv_pkts", IB_PC_EXT_RCV_PKTS_F},
      {"port_unicast_xmit_pkts", IB_PC_EXT_XMT_UPKTS_F},
      {"port_unicast_rcv_pkts", IB_PC_EXT_RCV_UPKTS_F},
      {"port_multicast_xmit_pkts", IB_PC_EXT_XMT_MPKTS_F},
      {"port_multicast_rcv_pkts", IB_PC_EXT_RCV_MPKTS_F},
      {"symbol_error_counter", IB_PC_EXT_ERR_SYM_F},
      {"link_error_recovery_counter", IB_PC_EXT_LINK_RECOVERS_F},
      {"link_downed_counter", IB_PC_EXT_LINK_DOWNED_F},
      {"port_rcv_errors", IB_PC_EXT_ERR_RCV_F},
      {"port_rcv_remote_physical_errors", IB_PC_EXT_ERR_PHYSRCV_F},
      {"port_rcv_switch_relay_errors", IB_PC_EXT_ERR_SWITCH_REL_F},
      {"port_xmit_discards", IB_PC_EXT_XMT_DISCARDS_F},
      {"port_xmit_constraint_errors", IB_PC_EXT_ERR_XMTCONSTR_F},
      {"port_rcv_constraint_errors", IB_PC_EXT_ERR_RCVCONSTR_F},
      {"local_link_integrity_errors", IB_PC_EXT_ERR_LOCALINTEG_F},
      {"excessive_buffer_overrun_errors", IB_PC_EXT_ERR_EXCESS_OVR_F},
      {"vl15_dropped", IB_PC_EXT_VL15_DROPPED_F},
      {"port_xmit_wait", IB_PC_EXT_XMT_WAIT_F},
      {"qp1_dropped", IB_PC_EXT_QP1_DROP_F},
  });
}

TEST(LibibmadOracleTest, ClassPortInfoAgreesFieldByField) {
  CheckAgainstLibibmad<ClassPortInfo>({
      {"base_version", IB_CPI_BASEVER_F},
      {"class_version", IB_CPI_CLASSVER_F},
      {"capability_mask", IB_CPI_CAPMASK_F},
      {"capability_mask2", IB_CPI_CAPMASK2_F},
      {"resp_time_value", IB_CPI_RESP_TIME_VALUE_F},
      {"redirect_gid", IB_CPI_REDIRECT_GID_F},
      {"redirect_tc", IB_CPI_REDIRECT_TC_F},
      {"redirect_sl", IB_CPI_REDIRECT_SL_F},
      {"redirect_fl", IB_CPI_REDIRECT_FL_F},
      {"redirect_lid", IB_CPI_REDIRECT_LID_F},
      {"redirect_pkey", IB_CPI_REDIRECT_PKEY_F},
      {"redirect_qp", IB_CPI_REDIRECT_QP_F},
      {"redirect_qkey", IB_CPI_REDIRECT_QKEY_F},
      {"trap_gid", IB_CPI_TRAP_GID_F},
      {"trap_tc", IB_CPI_TRAP_TC_F},
      {"trap_sl", IB_CPI_TRAP_SL_F},
      {"trap_fl", IB_CPI_TRAP_FL_F},
      {"trap_lid", IB_CPI_TRAP_LID_F},
      {"trap_pkey", IB_CPI_TRAP_PKEY_F},
      {"trap_hl", IB_CPI_TRAP_HL_F},
      {"trap_qp", IB_CPI_TRAP_QP_F},
      {"trap_qkey", IB_CPI_TRAP_QKEY_F},
  });
}

TEST(LibibmadOracleTest, GuidInfoAgreesElementByElement) {
  CheckAgainstLibibmad<GuidInfo>({
      {"guid", IB_GI_GUID0_F, 0},
      {"guid", IB_GI_GUID1_F, 1},
      {"guid", IB_GI_GUID2_F, 2},
      {"guid", IB_GI_GUID3_F, 3},
      {"guid", IB_GI_GUID4_F, 4},
      {"guid", IB_GI_GUID5_F, 5},
      {"guid", IB_GI_GUID6_F, 6},
      {"guid", IB_GI_GUID7_F, 7},
  });
}

TEST(LibibmadOracleTest, NoticeHeaderAgreesFieldByField) {
  // libibmad has no IssuerGID field: its Notice stops at the SMP's 64 bytes.
  CheckAgainstLibibmad<Notice>(
      {
          {"is_generic", IB_NOTICE_IS_GENERIC_F},
          {"type", IB_NOTICE_TYPE_F},
          {"producer_type_or_vendor_id", IB_NOTICE_PRODUCER_F},
          {"trap_number_or_device_id", IB_NOTICE_TRAP_NUMBER_F},
          {"issuer_lid", IB_NOTICE_ISSUER_LID_F},
          {"notice_toggle", IB_NOTICE_TOGGLE_F},
          {"notice_count", IB_NOTICE_COUNT_F},
          {"data_details", IB_NOTICE_DATA_DETAILS_F},
      },
      {"issuer_gid"});
}

TEST(LibibmadOracleTest, Trap128And144DetailsAgreeWithLibibmadsNoticeDataFields) {
  std::array<uint8_t, kMadSize> buf{};
  EncodeSmpNotice(MakeTrap128(0xBEEF), buf);
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_NOTICE_DATA_LID_F), 0xBEEFu);
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_NOTICE_TRAP_NUMBER_F), 128u);
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_NOTICE_TYPE_F), 1u);

  Trap144Details d;
  d.lid = 0x1234;
  d.capability_mask = 0xA5A55A5A;
  d.local_changes = 1;
  d.change_flags = 0x3F;
  buf.fill(0);
  EncodeSmpNotice(MakeTrap144(producer::kCa, 0x1234, d), buf);
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_NOTICE_DATA_144_LID_F), 0x1234u);
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_NOTICE_DATA_144_CAPMASK_F), 0xA5A55A5Au);

  // And the reverse: libibmad writes, our typed helpers read.
  buf.fill(0);
  uint32_t v = 0x4321;
  mad_encode_field(buf.data(), IB_NOTICE_DATA_144_LID_F, &v);
  v = 0x00010203;
  mad_encode_field(buf.data(), IB_NOTICE_DATA_144_CAPMASK_F, &v);
  Notice n;
  ASSERT_TRUE(DecodeSmpNotice(buf, &n).ok());
  EXPECT_EQ(TrapDetails<Trap144Details>(n).lid, 0x4321);
  EXPECT_EQ(TrapDetails<Trap144Details>(n).capability_mask, 0x00010203u);
  buf.fill(0);
  v = 0x77;
  mad_encode_field(buf.data(), IB_NOTICE_DATA_LID_F, &v);
  ASSERT_TRUE(DecodeSmpNotice(buf, &n).ok());
  EXPECT_EQ(Trap128Lid(n), 0x77);
}

}  // namespace
}  // namespace ibsm::mad
