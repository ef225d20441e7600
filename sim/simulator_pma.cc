// Simulator PMA (IBA 16.1): PortCounters and PortCountersExtended of each port, their
// resets and planted values, and the traffic totals they are views of.
#include "sim/simulator.h"

#include <array>
#include <memory>
#include <string_view>

#include "mad/attr/class_port_info.h"
#include "sim/simulator_internal.h"

namespace ibsm::sim {

// ---------------------------------------------------------------------------------------
// The PMA (IBA 16.1): PortCounters and PortCountersExtended of each port.

namespace {
// CounterSelect bit i of PortCounters names these error counters (16.1.3.5 table 247);
// bits 12-15 select the data and packet counters.
constexpr std::array<std::string_view, 12> kPcErrorBits = {
    "symbol_error_counter",         "link_error_recovery_counter",
    "link_downed_counter",          "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
    "port_xmit_discards",           "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",   "local_link_integrity_errors",
    "excessive_buffer_overrun_errors", "vl15_dropped"};

bool IsSelectField(std::string_view name) {
  return name == "port_select" || name == "counter_select" || name == "counter_select2";
}

uint32_t Sat32(uint64_t v) { return v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v); }

// Adds every counter of `b` into `a`, each saturating at its wire width.
template <typename S>
void AddCounters(S& a, const S& b) {
  for (const auto& f: mad::Layout<S>::kFields) {
    if (IsSelectField(f.name)) continue;
    uint64_t max = f.bit_width >= 64 ? UINT64_MAX : (uint64_t{1} << f.bit_width) - 1;
    uint64_t x = f.get(a, 0), y = f.get(b, 0);
    f.set(a, 0, x > max - std::min(y, max) ? max: x + y);
  }
}
}  // namespace

Simulator::PmState& Simulator::Pm(PortId p) {
  if (!ports_[p].pm) ports_[p].pm = std::make_unique<PmState>();
  return *ports_[p].pm;
}

mad::PortCounters Simulator::port_counters(PortId p) const {
  const SimPort& sp = ports_[p];
  mad::PortCounters pc = sp.pm ? sp.pm->errors: mad::PortCounters{};
  Traffic base = sp.pm ? sp.pm->pc_base: Traffic{};
  pc.port_select = 0;
  pc.counter_select = 0;
  pc.counter_select2 = 0;
  pc.port_xmit_data = Sat32(sp.traffic.xmit_data - base.xmit_data);
  pc.port_rcv_data = Sat32(sp.traffic.rcv_data - base.rcv_data);
  pc.port_xmit_pkts = Sat32(sp.traffic.xmit_pkts - base.xmit_pkts);
  pc.port_rcv_pkts = Sat32(sp.traffic.rcv_pkts - base.rcv_pkts);
  return pc;
}

// The 64-bit error counters mirror PortCounters' (IsAdditionalPortCountersExtended).
mad::PortCountersExtended Simulator::port_counters_extended(PortId p) const {
  const SimPort& sp = ports_[p];
  mad::PortCountersExtended x;
  const PmState* pm = sp.pm.get();
  Traffic base = pm ? pm->ext_base: Traffic{};
  x.port_xmit_data = sp.traffic.xmit_data - base.xmit_data;
  x.port_rcv_data = sp.traffic.rcv_data - base.rcv_data;
  x.port_xmit_pkts = sp.traffic.xmit_pkts - base.xmit_pkts;
  x.port_rcv_pkts = sp.traffic.rcv_pkts - base.rcv_pkts;
  // Every MAD is unicast (no multicast forwarding is modelled).
  x.port_unicast_xmit_pkts = sp.traffic.xmit_pkts - (pm ? pm->ext_unicast_xmit_base: 0);
  x.port_unicast_rcv_pkts = sp.traffic.rcv_pkts - (pm ? pm->ext_unicast_rcv_base: 0);
  if (pm) {
    const mad::PortCounters& e = pm->errors;
    x.symbol_error_counter = e.symbol_error_counter;
    x.link_error_recovery_counter = e.link_error_recovery_counter;
    x.link_downed_counter = e.link_downed_counter;
    x.port_rcv_errors = e.port_rcv_errors;
    x.port_rcv_remote_physical_errors = e.port_rcv_remote_physical_errors;
    x.port_rcv_switch_relay_errors = e.port_rcv_switch_relay_errors;
    x.port_xmit_discards = e.port_xmit_discards;
    x.port_xmit_constraint_errors = e.port_xmit_constraint_errors;
    x.port_rcv_constraint_errors = e.port_rcv_constraint_errors;
    x.local_link_integrity_errors = e.local_link_integrity_errors;
    x.excessive_buffer_overrun_errors = e.excessive_buffer_overrun_errors;
    x.vl15_dropped = e.vl15_dropped;
    x.port_xmit_wait = e.port_xmit_wait;
  }
  return x;
}

Status Simulator::SetPortCounters(PortId port, const mad::PortCounters& c) {
  if (port >= ports_.size()) return InvalidArgument("SIM-PMA-001 no such port");
  PmState& s = Pm(port);
  const Traffic& t = ports_[port].traffic;
  s.errors = c;
  s.errors.port_select = 0;
  s.errors.counter_select = 0;
  s.errors.counter_select2 = 0;
  // View = total - base, so base = total - planted (modulo 2^64).
  s.pc_base.xmit_data = t.xmit_data - c.port_xmit_data;
  s.pc_base.rcv_data = t.rcv_data - c.port_rcv_data;
  s.pc_base.xmit_pkts = t.xmit_pkts - c.port_xmit_pkts;
  s.pc_base.rcv_pkts = t.rcv_pkts - c.port_rcv_pkts;
  return Status::Ok();
}

// PortCounters Set (16.1.3.5): each counter whose CounterSelect bit is 1 is cleared;
// CounterSelect2 bit 0 clears PortXmitWait.
void Simulator::ResetPortCounters(PortId p, uint16_t select, uint8_t select2) {
  if (select == 0 && (select2 & 1) == 0) return;
  PmState& s = Pm(p);
  const Traffic& t = ports_[p].traffic;
  for (size_t bit = 0; bit < kPcErrorBits.size(); ++bit) {
    if (select & (1u << bit)) mad::FindField<mad::PortCounters>(kPcErrorBits[bit])->set(s.errors, 0, 0);
  }
  if (select & mad::pc_select::kPortXmitData) s.pc_base.xmit_data = t.xmit_data;
  if (select & mad::pc_select::kPortRcvData) s.pc_base.rcv_data = t.rcv_data;
  if (select & mad::pc_select::kPortXmitPkts) s.pc_base.xmit_pkts = t.xmit_pkts;
  if (select & mad::pc_select::kPortRcvPkts) s.pc_base.rcv_pkts = t.rcv_pkts;
  if (select2 & 1) s.errors.port_xmit_wait = 0;
}

// PortCountersExtended Set (16.1.4.11): CounterSelect bits 0-7 clear the data, packet,
// unicast and multicast counters in that order.
void Simulator::ResetPortCountersExtended(PortId p, uint16_t select) {
  if ((select & 0xFF) == 0) return;
  PmState& s = Pm(p);
  const Traffic& t = ports_[p].traffic;
  if (select & (1u << 0)) s.ext_base.xmit_data = t.xmit_data;
  if (select & (1u << 1)) s.ext_base.rcv_data = t.rcv_data;
  if (select & (1u << 2)) s.ext_base.xmit_pkts = t.xmit_pkts;
  if (select & (1u << 3)) s.ext_base.rcv_pkts = t.rcv_pkts;
  if (select & (1u << 4)) s.ext_unicast_xmit_base = t.xmit_pkts;
  if (select & (1u << 5)) s.ext_unicast_rcv_base = t.rcv_pkts;
}

bool Simulator::Pma(PortId arrival, std::span<uint8_t> b) {
  ++counters_.pma_handled;
  uint8_t method = static_cast<uint8_t>(Get(b, kMethod));
  uint16_t attr_id = static_cast<uint16_t>(Get(b, kAttrId));
  std::span<uint8_t> data = b.subspan(mad::kPerfDataOffset, mad::kPerfDataSize);
  uint16_t status = mad::mad_status::kOk;
  if (Get(b, kClassVersion) != 1) {
    status = mad::mad_status::kBadVersion;
  } else if (method != mad::method::kGet && method != mad::method::kSet) {
    status = mad::mad_status::kMethodUnsupported;
  } else {
    switch (attr_id) {
      case mad::attr::kClassPortInfo:
        if (method != mad::method::kGet) {
          status = mad::mad_status::kMethodAttrUnsupported;
        } else {
          // 16.1.2: AllPortSelect (bit 8) and IsExtendedWidthSupported (bit 9).
          mad::ClassPortInfo cpi;
          cpi.base_version = 1;
          cpi.class_version = 1;
          cpi.capability_mask = (1u << 8) | (1u << 9);
          if (nodes_[ports_[arrival].node].quirks.no_extended_counters) cpi.capability_mask &= ~(1u << 9);
          cpi.resp_time_value = 18;
          std::fill(data.begin(), data.end(), uint8_t{0});
          mad::EncodeTo(cpi, data);
        }
        break;
      case mad::attr::kPortCounters: status = PmaPortCounters(arrival, method, data); break;
      case mad::attr::kPortCountersExtended:
        status = nodes_[ports_[arrival].node].quirks.no_extended_counters
                     ? mad::mad_status::kMethodAttrUnsupported
                     : PmaPortCountersExtended(arrival, method, data);
        break;
      default: status = mad::mad_status::kMethodAttrUnsupported; break;
    }
  }
  Put(b, kMethod, mad::method::kGetResp);
  mad::SetBits(b, kHdrStatus.bit_offset, kHdrStatus.bit_width, status);
  return true;
}

namespace {
// PortSelect (16.1.3.5): a switch's port 0..N, a CA's port 1..N (0: the port the request
// came in on), 0xFF every port (AllPortSelect). Returns false for a port that does not exist.
bool SelectPorts(uint8_t select, bool is_switch, uint32_t num_ports, uint32_t arrival_num,
                 uint32_t* lo, uint32_t* hi) {
  if (select == 0xFF) {
    *lo = 1;
    *hi = num_ports;
    return true;
  }
  uint32_t p = select;
  if (!is_switch && p == 0) p = arrival_num;
  if (p > num_ports) return false;
  *lo = *hi = p;
  return true;
}
}  // namespace

uint16_t Simulator::PmaPortCounters(PortId arrival, uint8_t method, std::span<uint8_t> data) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  mad::PortCounters req;
  if (!mad::DecodeFrom(data, &req).ok()) return mad::mad_status::kInvalidField;
  uint32_t lo = 0, hi = 0;
  if (!SelectPorts(req.port_select, sn.sw != kNoSwitch, sn.num_ports,
                   ports_[arrival].info.local_port_num, &lo, &hi)) {
    return mad::mad_status::kInvalidField;
  }
  mad::PortCounters out;
  for (uint32_t p = lo; p <= hi; ++p) {
    if (method == mad::method::kSet) {
      ResetPortCounters(sn.first_port + p, req.counter_select, req.counter_select2);
    }
    AddCounters(out, port_counters(sn.first_port + p));
  }
  out.port_select = req.port_select;
  out.counter_select = req.counter_select;
  out.counter_select2 = req.counter_select2;
  std::fill(data.begin(), data.end(), uint8_t{0});
  mad::EncodeTo(out, data);
  return mad::mad_status::kOk;
}

uint16_t Simulator::PmaPortCountersExtended(PortId arrival, uint8_t method,
                                            std::span<uint8_t> data) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  mad::PortCountersExtended req;
  if (!mad::DecodeFrom(data, &req).ok()) return mad::mad_status::kInvalidField;
  uint32_t lo = 0, hi = 0;
  if (!SelectPorts(req.port_select, sn.sw != kNoSwitch, sn.num_ports,
                   ports_[arrival].info.local_port_num, &lo, &hi)) {
    return mad::mad_status::kInvalidField;
  }
  mad::PortCountersExtended out;
  for (uint32_t p = lo; p <= hi; ++p) {
    if (method == mad::method::kSet) ResetPortCountersExtended(sn.first_port + p, req.counter_select);
    AddCounters(out, port_counters_extended(sn.first_port + p));
  }
  out.port_select = req.port_select;
  out.counter_select = req.counter_select;
  out.counter_select2 = req.counter_select2;
  std::fill(data.begin(), data.end(), uint8_t{0});
  mad::EncodeTo(out, data);
  return mad::mad_status::kOk;
}

}  // namespace ibsm::sim
