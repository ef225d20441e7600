// PortCounters (IBA 16.1.3.5), PerfMgt attribute 0x0012. Offsets are relative to the PerfMgt
// data area (byte 64 of the MAD, kPerfDataOffset). Counters saturate at their maximum
// rather than wrap; a Set with a counter_select bit clears that counter.
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

// CounterSelect bits (which counters a Set clears).
namespace pc_select {
inline constexpr uint16_t kSymbolError = 1u << 0;
inline constexpr uint16_t kLinkErrorRecovery = 1u << 1;
inline constexpr uint16_t kLinkDowned = 1u << 2;
inline constexpr uint16_t kPortRcvErrors = 1u << 3;
inline constexpr uint16_t kPortRcvRemotePhysicalErrors = 1u << 4;
inline constexpr uint16_t kPortRcvSwitchRelayErrors = 1u << 5;
inline constexpr uint16_t kPortXmitDiscards = 1u << 6;
inline constexpr uint16_t kPortXmitConstraintErrors = 1u << 7;
inline constexpr uint16_t kPortRcvConstraintErrors = 1u << 8;
inline constexpr uint16_t kLocalLinkIntegrityErrors = 1u << 9;
inline constexpr uint16_t kExcessiveBufferOverrunErrors = 1u << 10;
inline constexpr uint16_t kVl15Dropped = 1u << 11;
inline constexpr uint16_t kPortXmitData = 1u << 12;
inline constexpr uint16_t kPortRcvData = 1u << 13;
inline constexpr uint16_t kPortXmitPkts = 1u << 14;
inline constexpr uint16_t kPortRcvPkts = 1u << 15;
inline constexpr uint16_t kAll = 0xFFFF;
}  // namespace pc_select

struct PortCounters {
  static constexpr uint16_t kAttrId = attr::kPortCounters;
  uint8_t port_select = 0;
  uint16_t counter_select = 0;
  uint16_t symbol_error_counter = 0;
  uint8_t link_error_recovery_counter = 0;
  uint8_t link_downed_counter = 0;
  uint16_t port_rcv_errors = 0;
  uint16_t port_rcv_remote_physical_errors = 0;
  uint16_t port_rcv_switch_relay_errors = 0;
  uint16_t port_xmit_discards = 0;
  uint8_t port_xmit_constraint_errors = 0;
  uint8_t port_rcv_constraint_errors = 0;
  uint8_t counter_select2 = 0;  // bit 0 selects port_xmit_wait
  uint8_t local_link_integrity_errors = 0;      // 4 bits
  uint8_t excessive_buffer_overrun_errors = 0;  // 4 bits
  uint16_t vl15_dropped = 0;
  uint32_t port_xmit_data = 0;  // in units of 4 bytes
  uint32_t port_rcv_data = 0;   // in units of 4 bytes
  uint32_t port_xmit_pkts = 0;
  uint32_t port_rcv_pkts = 0;
  uint32_t port_xmit_wait = 0;
};

template <>
struct Layout<PortCounters> {
  using P = PortCounters;
  static constexpr std::string_view kName = "PortCounters";
  static constexpr size_t kSize = 44;
  static constexpr std::array kFields = {
      F<&P::port_select>("port_select", 8, 8),
      F<&P::counter_select>("counter_select", 16, 16, FieldFormat::kHex),
      F<&P::symbol_error_counter>("symbol_error_counter", 32, 16),
      F<&P::link_error_recovery_counter>("link_error_recovery_counter", 48, 8),
      F<&P::link_downed_counter>("link_downed_counter", 56, 8),
      F<&P::port_rcv_errors>("port_rcv_errors", 64, 16),
      F<&P::port_rcv_remote_physical_errors>("port_rcv_remote_physical_errors", 80, 16),
      F<&P::port_rcv_switch_relay_errors>("port_rcv_switch_relay_errors", 96, 16),
      F<&P::port_xmit_discards>("port_xmit_discards", 112, 16),
      F<&P::port_xmit_constraint_errors>("port_xmit_constraint_errors", 128, 8),
      F<&P::port_rcv_constraint_errors>("port_rcv_constraint_errors", 136, 8),
      F<&P::counter_select2>("counter_select2", 144, 8, FieldFormat::kHex),
      F<&P::local_link_integrity_errors>("local_link_integrity_errors", 152, 4),
      F<&P::excessive_buffer_overrun_errors>("excessive_buffer_overrun_errors", 156, 4),
      F<&P::vl15_dropped>("vl15_dropped", 176, 16),
      F<&P::port_xmit_data>("port_xmit_data", 192, 32),
      F<&P::port_rcv_data>("port_rcv_data", 224, 32),
      F<&P::port_xmit_pkts>("port_xmit_pkts", 256, 32),
      F<&P::port_rcv_pkts>("port_rcv_pkts", 288, 32),
      F<&P::port_xmit_wait>("port_xmit_wait", 320, 32),
  };
};
static_assert(LayoutIsValid<PortCounters>());

}  // namespace ibsm::mad
