// PortCountersExtended (IBA 16.1.4.11), PerfMgt attribute 0x001D: 64-bit data and packet
// counters, and (when ClassPortInfo.CapabilityMask2 bit IsAdditionalPortCountersExtended is
// set) 64-bit copies of the PortCounters error counters. Offsets are relative to the PerfMgt
// data area (byte 64 of the MAD).
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

struct PortCountersExtended {
  static constexpr uint16_t kAttrId = attr::kPortCountersExtended;
  uint8_t port_select = 0;
  uint16_t counter_select = 0;
  uint32_t counter_select2 = 0;
  uint64_t port_xmit_data = 0;  // in units of 4 bytes
  uint64_t port_rcv_data = 0;   // in units of 4 bytes
  uint64_t port_xmit_pkts = 0;
  uint64_t port_rcv_pkts = 0;
  uint64_t port_unicast_xmit_pkts = 0;
  uint64_t port_unicast_rcv_pkts = 0;
  uint64_t port_multicast_xmit_pkts = 0;
  uint64_t port_multicast_rcv_pkts = 0;
  uint64_t symbol_error_counter = 0;
  uint64_t link_error_recovery_counter = 0;
  uint64_t link_downed_counter = 0;
  uint64_t port_rcv_errors = 0;
  uint64_t port_rcv_remote_physical_errors = 0;
  uint64_t port_rcv_switch_relay_errors = 0;
  uint64_t port_xmit_discards = 0;
  uint64_t port_xmit_constraint_errors = 0;
  uint64_t port_rcv_constraint_errors = 0;
  uint64_t local_link_integrity_errors = 0;
  uint64_t excessive_buffer_overrun_errors = 0;
  uint64_t vl15_dropped = 0;
  uint64_t port_xmit_wait = 0;
  uint64_t qp1_dropped = 0;
};

template <>
struct Layout<PortCountersExtended> {
  using P = PortCountersExtended;
  static constexpr std::string_view kName = "PortCountersExtended";
  static constexpr size_t kSize = 184;
  static constexpr std::array kFields = {
      F<&P::port_select>("port_select", 8, 8),
      F<&P::counter_select>("counter_select", 16, 16, FieldFormat::kHex),
      F<&P::counter_select2>("counter_select2", 32, 32, FieldFormat::kHex),
      F<&P::port_xmit_data>("port_xmit_data", 64, 64),
      F<&P::port_rcv_data>("port_rcv_data", 128, 64),
      F<&P::port_xmit_pkts>("port_xmit_pkts", 192, 64),
      F<&P::port_rcv_pkts>("port_rcv_pkts", 256, 64),
      F<&P::port_unicast_xmit_pkts>("port_unicast_xmit_pkts", 320, 64),
      F<&P::port_unicast_rcv_pkts>("port_unicast_rcv_pkts", 384, 64),
      F<&P::port_multicast_xmit_pkts>("port_multicast_xmit_pkts", 448, 64),
      F<&P::port_multicast_rcv_pkts>("port_multicast_rcv_pkts", 512, 64),
      F<&P::symbol_error_counter>("symbol_error_counter", 576, 64),
      F<&P::link_error_recovery_counter>("link_error_recovery_counter", 640, 64),
      F<&P::link_downed_counter>("link_downed_counter", 704, 64),
      F<&P::port_rcv_errors>("port_rcv_errors", 768, 64),
      F<&P::port_rcv_remote_physical_errors>("port_rcv_remote_physical_errors", 832, 64),
      F<&P::port_rcv_switch_relay_errors>("port_rcv_switch_relay_errors", 896, 64),
      F<&P::port_xmit_discards>("port_xmit_discards", 960, 64),
      F<&P::port_xmit_constraint_errors>("port_xmit_constraint_errors", 1024, 64),
      F<&P::port_rcv_constraint_errors>("port_rcv_constraint_errors", 1088, 64),
      F<&P::local_link_integrity_errors>("local_link_integrity_errors", 1152, 64),
      F<&P::excessive_buffer_overrun_errors>("excessive_buffer_overrun_errors", 1216, 64),
      F<&P::vl15_dropped>("vl15_dropped", 1280, 64),
      F<&P::port_xmit_wait>("port_xmit_wait", 1344, 64),
      F<&P::qp1_dropped>("qp1_dropped", 1408, 64),
  };
};
static_assert(LayoutIsValid<PortCountersExtended>());

}  // namespace ibsm::mad
