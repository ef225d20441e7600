// SwitchInfo (IBA 14.2.5.4), attribute 0x0012.
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

struct SwitchInfo {
  static constexpr uint16_t kAttrId = attr::kSwitchInfo;
  uint16_t linear_fdb_cap = 0;
  uint16_t random_fdb_cap = 0;
  uint16_t multicast_fdb_cap = 0;
  uint16_t linear_fdb_top = 0;
  uint8_t default_port = 0;
  uint8_t default_mcast_primary_port = 0;
  uint8_t default_mcast_not_primary_port = 0;
  uint8_t life_time_value = 0;
  uint8_t port_state_change = 0;  // set by the switch; the SM clears it by writing 1
  uint8_t optimized_sl_to_vl_mapping_programming = 0;
  uint16_t lids_per_port = 0;
  uint16_t partition_enforcement_cap = 0;
  uint8_t inbound_enforcement_cap = 0;
  uint8_t outbound_enforcement_cap = 0;
  uint8_t filter_raw_inbound_cap = 0;
  uint8_t filter_raw_outbound_cap = 0;
  uint8_t enhanced_port0 = 0;
  uint16_t multicast_fdb_top = 0;
};

template <>
struct Layout<SwitchInfo> {
  using S = SwitchInfo;
  static constexpr std::string_view kName = "SwitchInfo";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      F<&S::linear_fdb_cap>("linear_fdb_cap", 0, 16),
      F<&S::random_fdb_cap>("random_fdb_cap", 16, 16),
      F<&S::multicast_fdb_cap>("multicast_fdb_cap", 32, 16),
      F<&S::linear_fdb_top>("linear_fdb_top", 48, 16),
      F<&S::default_port>("default_port", 64, 8),
      F<&S::default_mcast_primary_port>("default_mcast_primary_port", 72, 8),
      F<&S::default_mcast_not_primary_port>("default_mcast_not_primary_port", 80, 8),
      F<&S::life_time_value>("life_time_value", 88, 5),
      F<&S::port_state_change>("port_state_change", 93, 1),
      F<&S::optimized_sl_to_vl_mapping_programming>("optimized_sl_to_vl_mapping_programming",
                                                     94, 2),
      F<&S::lids_per_port>("lids_per_port", 96, 16),
      F<&S::partition_enforcement_cap>("partition_enforcement_cap", 112, 16),
      F<&S::inbound_enforcement_cap>("inbound_enforcement_cap", 128, 1),
      F<&S::outbound_enforcement_cap>("outbound_enforcement_cap", 129, 1),
      F<&S::filter_raw_inbound_cap>("filter_raw_inbound_cap", 130, 1),
      F<&S::filter_raw_outbound_cap>("filter_raw_outbound_cap", 131, 1),
      F<&S::enhanced_port0>("enhanced_port0", 132, 1),
      // Bits 133-143 are reserved (libibmad IB_SW_MCAST_FDB_TOP_F and OpenSM agree on 144).
      F<&S::multicast_fdb_top>("multicast_fdb_top", 144, 16),
  };
};
static_assert(LayoutIsValid<SwitchInfo>());

}  // namespace ibsm::mad
