// PortInfo (IBA 14.2.5.6), attribute 0x0015, 64 bytes; modifier = port number.
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

// CapabilityMask bits (14.2.5.6 table 148) that the SM reads or sets.
namespace port_cap {
inline constexpr uint32_t kIsSm = 1u << 1;
inline constexpr uint32_t kIsNoticeSupported = 1u << 2;
inline constexpr uint32_t kIsTrapSupported = 1u << 3;
inline constexpr uint32_t kIsAutomaticMigrationSupported = 1u << 5;
inline constexpr uint32_t kIsSlMappingSupported = 1u << 6;
inline constexpr uint32_t kIsSmDisabled = 1u << 10;
inline constexpr uint32_t kIsClientReregistrationSupported = 1u << 25;
inline constexpr uint32_t kIsCapabilityMask2Supported = 1u << 15;
inline constexpr uint32_t kIsExtendedSpeedsSupported = 1u << 14;
}  // namespace port_cap
// CapabilityMask2 bits (14.2.5.6) the SM reads.
namespace port_cap2 {
inline constexpr uint16_t kIsLinkWidth2xSupported = 1u << 4;
}  // namespace port_cap2

struct PortInfo {
  static constexpr uint16_t kAttrId = attr::kPortInfo;
  uint64_t m_key = 0;
  uint64_t gid_prefix = 0;
  uint16_t lid = 0;
  uint16_t master_sm_base_lid = 0;
  uint32_t capability_mask = 0;
  uint16_t diag_code = 0;
  uint16_t m_key_lease_period = 0;
  uint8_t local_port_num = 0;
  uint8_t link_width_enabled = 0;
  uint8_t link_width_supported = 0;
  uint8_t link_width_active = 0;
  uint8_t link_speed_supported = 0;
  uint8_t port_state = 0;       // 0 no change, 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE
  uint8_t port_phys_state = 0;  // 2 Polling, 3 Disabled, 5 LinkUp ...
  uint8_t link_down_default_state = 0;
  uint8_t m_key_protect_bits = 0;
  uint8_t lmc = 0;
  uint8_t link_speed_active = 0;
  uint8_t link_speed_enabled = 0;
  uint8_t neighbor_mtu = 0;
  uint8_t master_sm_sl = 0;
  uint8_t vl_cap = 0;
  uint8_t init_type = 0;
  uint8_t vl_high_limit = 0;
  uint8_t vl_arb_high_cap = 0;
  uint8_t vl_arb_low_cap = 0;
  uint8_t init_type_reply = 0;
  uint8_t mtu_cap = 0;
  uint8_t vl_stall_count = 0;
  uint8_t hoq_life = 0;
  uint8_t operational_vls = 0;
  uint8_t partition_enforcement_inbound = 0;
  uint8_t partition_enforcement_outbound = 0;
  uint8_t filter_raw_inbound = 0;
  uint8_t filter_raw_outbound = 0;
  uint16_t m_key_violations = 0;
  uint16_t p_key_violations = 0;
  uint16_t q_key_violations = 0;
  uint8_t guid_cap = 0;
  uint8_t client_reregister = 0;
  uint8_t multicast_pkey_trap_suppression = 0;
  uint8_t subnet_timeout = 0;
  uint8_t resp_time_value = 0;
  uint8_t local_phy_errors = 0;
  uint8_t overrun_errors = 0;
  uint16_t max_credit_hint = 0;
  uint32_t link_round_trip_latency = 0;
  uint16_t capability_mask2 = 0;
  uint8_t link_speed_ext_active = 0;
  uint8_t link_speed_ext_supported = 0;
  uint8_t link_speed_ext_enabled = 0;
};

template <>
struct Layout<PortInfo> {
  using P = PortInfo;
  static constexpr std::string_view kName = "PortInfo";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      F<&P::m_key>("m_key", 0, 64, FieldFormat::kHex),
      F<&P::gid_prefix>("gid_prefix", 64, 64, FieldFormat::kHex),
      F<&P::lid>("lid", 128, 16),
      F<&P::master_sm_base_lid>("master_sm_base_lid", 144, 16),
      F<&P::capability_mask>("capability_mask", 160, 32, FieldFormat::kHex),
      F<&P::diag_code>("diag_code", 192, 16, FieldFormat::kHex),
      F<&P::m_key_lease_period>("m_key_lease_period", 208, 16),
      F<&P::local_port_num>("local_port_num", 224, 8),
      F<&P::link_width_enabled>("link_width_enabled", 232, 8),
      F<&P::link_width_supported>("link_width_supported", 240, 8),
      F<&P::link_width_active>("link_width_active", 248, 8),
      F<&P::link_speed_supported>("link_speed_supported", 256, 4),
      F<&P::port_state>("port_state", 260, 4),
      F<&P::port_phys_state>("port_phys_state", 264, 4),
      F<&P::link_down_default_state>("link_down_default_state", 268, 4),
      F<&P::m_key_protect_bits>("m_key_protect_bits", 272, 2),
      F<&P::lmc>("lmc", 277, 3),
      F<&P::link_speed_active>("link_speed_active", 280, 4),
      F<&P::link_speed_enabled>("link_speed_enabled", 284, 4),
      F<&P::neighbor_mtu>("neighbor_mtu", 288, 4),
      F<&P::master_sm_sl>("master_sm_sl", 292, 4),
      F<&P::vl_cap>("vl_cap", 296, 4),
      F<&P::init_type>("init_type", 300, 4),
      F<&P::vl_high_limit>("vl_high_limit", 304, 8),
      F<&P::vl_arb_high_cap>("vl_arb_high_cap", 312, 8),
      F<&P::vl_arb_low_cap>("vl_arb_low_cap", 320, 8),
      F<&P::init_type_reply>("init_type_reply", 328, 4),
      F<&P::mtu_cap>("mtu_cap", 332, 4),
      F<&P::vl_stall_count>("vl_stall_count", 336, 3),
      F<&P::hoq_life>("hoq_life", 339, 5),
      F<&P::operational_vls>("operational_vls", 344, 4),
      F<&P::partition_enforcement_inbound>("partition_enforcement_inbound", 348, 1),
      F<&P::partition_enforcement_outbound>("partition_enforcement_outbound", 349, 1),
      F<&P::filter_raw_inbound>("filter_raw_inbound", 350, 1),
      F<&P::filter_raw_outbound>("filter_raw_outbound", 351, 1),
      F<&P::m_key_violations>("m_key_violations", 352, 16),
      F<&P::p_key_violations>("p_key_violations", 368, 16),
      F<&P::q_key_violations>("q_key_violations", 384, 16),
      F<&P::guid_cap>("guid_cap", 400, 8),
      F<&P::client_reregister>("client_reregister", 408, 1),
      F<&P::multicast_pkey_trap_suppression>("multicast_pkey_trap_suppression", 409, 2),
      F<&P::subnet_timeout>("subnet_timeout", 411, 5),
      F<&P::resp_time_value>("resp_time_value", 419, 5),
      F<&P::local_phy_errors>("local_phy_errors", 424, 4),
      F<&P::overrun_errors>("overrun_errors", 428, 4),
      F<&P::max_credit_hint>("max_credit_hint", 432, 16),
      F<&P::link_round_trip_latency>("link_round_trip_latency", 456, 24),
      F<&P::capability_mask2>("capability_mask2", 480, 16, FieldFormat::kHex),
      F<&P::link_speed_ext_active>("link_speed_ext_active", 496, 4),
      F<&P::link_speed_ext_supported>("link_speed_ext_supported", 500, 4),
      F<&P::link_speed_ext_enabled>("link_speed_ext_enabled", 507, 5),
  };
};
static_assert(LayoutIsValid<PortInfo>());

}  // namespace ibsm::mad
