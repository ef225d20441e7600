// Simulator SMA (IBA 14.2.5): the SMP attribute handlers (NodeInfo, NodeDescription,
// PortInfo, SwitchInfo, LFT, MFT, P_Key, SL2VL, VLArb, GUIDInfo, vendor attributes).
#include "sim/simulator.h"

#include <algorithm>
#include <memory>

#include "base/log.h"
#include "mad/attr/guid_info.h"
#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/modifiers.h"
#include "mad/attr/multicast_forwarding_table.h"
#include "mad/attr/node_description.h"
#include "mad/attr/node_info.h"
#include "mad/attr/pkey_table.h"
#include "sim/simulator_internal.h"

namespace ibsm::sim {
namespace {

using mad::DecodeModifier;

std::span<uint8_t> SmpData(std::span<uint8_t> b) {
  return b.subspan(mad::kSmpDataOffset, mad::kSmpDataSize);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// The SMA (IBA 14.2.5): Get/Set of the SMP attributes, in place.

bool Simulator::Sma(PortId arrival, std::span<uint8_t> b) {
  ++counters_.smps_handled;
  const SimNode& sn = nodes_[ports_[arrival].node];
  uint8_t method = static_cast<uint8_t>(Get(b, kMethod));
  uint16_t attr_id = static_cast<uint16_t>(Get(b, kAttrId));
  uint32_t mod = static_cast<uint32_t>(Get(b, kAttrMod));
  uint64_t tid = Get(b, kTid);

  if (method == mad::method::kTrapRepress) {
    SmaTrapRepress(arrival, tid);
    return false;
  }
  // M_Key check (14.2.4.1): the key of the port the SMP entered, or a switch's port 0. Set
  // with a wrong key fails at any protect level; Get fails at protect level 2 and up.
  // Failure = no response. Lease (14.2.4.2): a failure starts the lease timer when the lease
  // period is non-zero; if no SMP with the key arrives before it ends, the protect bits drop
  // to 0 and any SM may configure the port (the key itself stays).
  PortId key_port = sn.sw != kNoSwitch ? sn.first_port: arrival;
  SimPort& kp = ports_[key_port];
  mad::PortInfo& kpi = kp.info;
  const auto now = std::chrono::steady_clock::now();
  if (kp.lease_ends && now >= *kp.lease_ends) {
    kp.lease_ends.reset();
    kpi.m_key_protect_bits = 0;
  }
  bool key_ok = kpi.m_key == 0 || Get(b, kMKey) == kpi.m_key;
  if (key_ok && kpi.m_key != 0) kp.lease_ends.reset();
  if (!key_ok && (method == mad::method::kSet || kpi.m_key_protect_bits >= 2)) {
    ++kpi.m_key_violations;
    if (kpi.m_key_lease_period != 0 && !kp.lease_ends)
      kp.lease_ends = now + std::chrono::seconds(kpi.m_key_lease_period);
    Drop(DropReason::kMKey);
    return false;
  }

  if (smp_observer_) smp_observer_(ports_[arrival].node, method, attr_id, mod);
  uint16_t status = mad::mad_status::kOk;
  std::span<uint8_t> data = SmpData(b);
  // Vendor attributes: answered by the node's vendor agents; a node without one drops the
  // SMP without an answer, as ibsim and legacy switches do (the SM reads a timeout as "not
  // supported").
  const bool vendor = attr_id >= 0xFF00;
  ArSwitch* ar = sn.sw != kNoSwitch ? switches_[sn.sw].ar.get(): nullptr;
  std::optional<uint16_t> vendor_status;
  if (vendor && Get(b, kClassVersion) == 1 &&
      (method == mad::method::kGet || method == mad::method::kSet)) {
    vendor_status = VendorSmp(ports_[arrival].node, arrival, ar, method, attr_id, mod, data);
    if (!vendor_status) {
      Drop(DropReason::kVendorAttr);
      return false;
    }
  } else if (vendor && ar == nullptr) {
    Drop(DropReason::kVendorAttr);
    return false;
  }
  // Optional attributes this device does not implement: silent (dropped) or "unsupported".
  const OptionalAnswer optional = attr_id == mad::attr::kSlToVlTable          ? sn.quirks.sl2vl
                                  : attr_id == mad::attr::kVlArbitrationTable ? sn.quirks.vlarb
                                                                              : OptionalAnswer::kAnswered;
  if (optional == OptionalAnswer::kSilent) {
    Drop(DropReason::kOptionalAttr);
    return false;
  }
  if (Get(b, kClassVersion) != 1) {
    status = mad::mad_status::kBadVersion;
  } else if (method != mad::method::kGet && method != mad::method::kSet) {
    status = mad::mad_status::kMethodUnsupported;
  } else if (optional == OptionalAnswer::kUnsupported) {
    status = mad::mad_status::kMethodAttrUnsupported;
  } else if (vendor) {
    status = *vendor_status;
  } else {
    switch (attr_id) {
      case mad::attr::kNodeInfo: status = SmaNodeInfo(arrival, method, data); break;
      case mad::attr::kNodeDescription: status = SmaNodeDescription(arrival, method, data); break;
      case mad::attr::kPortInfo: status = SmaPortInfo(arrival, method, mod, data, key_ok); break;
      case mad::attr::kSwitchInfo: status = SmaSwitchInfo(arrival, method, data); break;
      case mad::attr::kLinearForwardingTable: status = SmaLft(arrival, method, mod, data); break;
      case mad::attr::kMulticastForwardingTable: status = SmaMft(arrival, method, mod, data); break;
      case mad::attr::kPKeyTable: status = SmaPKeyTable(arrival, method, mod, data); break;
      case mad::attr::kSlToVlTable: status = SmaSlToVl(arrival, method, mod, data); break;
      case mad::attr::kVlArbitrationTable: status = SmaVlArb(arrival, method, mod, data); break;
      case mad::attr::kGuidInfo: status = SmaGuidInfo(arrival, method, mod, data); break;
      default: {
        status = mad::mad_status::kMethodAttrUnsupported;
        for (NodeExtension* ext: extensions_) {
          auto st = ext->HandleSmp(ports_[arrival].node, PortNum{ports_[arrival].info.local_port_num},
                                   method, attr_id, mod, data);
          if (st) {
            status = *st;
            break;
          }
        }
        break;
      }
    }
  }
  Put(b, kMethod, mad::method::kGetResp);
  if (Get(b, kMgmtClass) == static_cast<uint8_t>(mad::MgmtClass::kSubnDirected)) {
    Put(b, kStatus, status);
  } else {
    mad::SetBits(b, kHdrStatus.bit_offset, kHdrStatus.bit_width, status);
  }
  // Per-SMP line: build its arguments (a GUID string) only when trace is on.
  if (auto& log = Log(LogName::kSim); log.should_log(spdlog::level::trace)) {
    log.trace("SMA {} attr {:#x} mod {} method {:#x} status {:#x}", ToString(Guid{sn.guid}),
              attr_id, mod, method, status);
  }
  return true;
}

std::optional<uint16_t> Simulator::VendorSmp(NodeId node, PortId arrival, ArSwitch* ar,
                                             uint8_t method, uint16_t attr_id, uint32_t mod,
                                             std::span<uint8_t> data) {
  if (attr_id == mad::attr::kGeneralInfo) {
    mad::GeneralInfoCapabilities caps;
    if (ar != nullptr) ar->AddCapabilities(caps);
    for (const NodeExtension* ext: extensions_) ext->AddCapabilities(node, caps);
    if (caps.capability == mad::GeneralInfoCapabilities{}.capability) return std::nullopt;
    if (method != mad::method::kGet) return mad::mad_status::kMethodAttrUnsupported;
    if (mod != mad::kGeneralInfoCapabilityModifier) return mad::mad_status::kInvalidField;
    std::fill(data.begin(), data.end(), uint8_t{0});
    mad::EncodeTo(caps, data);
    return mad::mad_status::kOk;
  }
  for (NodeExtension* ext: extensions_) {
    auto st = ext->HandleSmp(node, PortNum{ports_[arrival].info.local_port_num}, method, attr_id,
                             mod, data);
    if (st) return st;
  }
  if (ar != nullptr) return ar->Handle(attr_id, method, mod, data);
  return std::nullopt;
}

uint16_t Simulator::SmaNodeInfo(PortId arrival, uint8_t method, std::span<uint8_t> data) {
  if (method != mad::method::kGet) return mad::mad_status::kMethodAttrUnsupported;
  const SimPort& sp = ports_[arrival];
  const SimNode& sn = nodes_[sp.node];
  mad::NodeInfo ni;
  ni.base_version = 1;
  ni.class_version = 1;
  ni.node_type = static_cast<mad::NodeType>(sn.kind);
  ni.num_ports = sn.num_ports;
  ni.system_image_guid = sn.system_image_guid;
  ni.node_guid = sn.guid;
  ni.port_guid = sp.guid;
  ni.partition_cap = sn.sw != kNoSwitch ? kPartitionCapSwitch: kPartitionCapCa;
  ni.device_id = sn.device_id;
  ni.revision = sn.revision;
  ni.local_port_num = sp.info.local_port_num;
  ni.vendor_id = sn.vendor_id;
  mad::EncodeTo(ni, data);
  return mad::mad_status::kOk;
}

uint16_t Simulator::SmaNodeDescription(PortId arrival, uint8_t method,
                                       std::span<uint8_t> data) {
  if (method != mad::method::kGet) return mad::mad_status::kMethodAttrUnsupported;
  mad::EncodeTo(mad::NodeDescription::From(nodes_[ports_[arrival].node].description), data);
  return mad::mad_status::kOk;
}

// PortInfo (14.2.5.6). Modifier = port number; on a CA, 0 means the port the SMP arrived
// on, and a Set may only address that port (ibsim does the same).
uint16_t Simulator::SmaPortInfo(PortId arrival, uint8_t method, uint32_t mod,
                                std::span<uint8_t> data, bool key_ok) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  uint32_t arrival_num = ports_[arrival].info.local_port_num;
  mod &= 0x7FFFFFFF;  // bit 31: the SM supports extended speeds (ibsim masks it too)
  if (mod > sn.num_ports) return mad::mad_status::kInvalidField;
  if (sn.sw == kNoSwitch) {
    if (mod == 0) mod = arrival_num;
    if (method == mad::method::kSet && mod != arrival_num) return mad::mad_status::kInvalidField;
  }
  PortId target = sn.first_port + mod;
  mad::PortInfo& pi = ports_[target].info;
  if (method == mad::method::kSet) {
    mad::PortInfo req{};
    if (!mad::DecodeFrom(data, &req).ok()) return mad::mad_status::kInvalidField;
    // Validate everything before changing anything: an invalid Set changes nothing.
    uint8_t want = req.port_state;
    uint8_t cur = pi.port_state;
    const bool strict = options_.profile == SimProfile::kStrict;
    bool mgmt = sn.sw != kNoSwitch && mod == 0;
    PortId peer = ports_[target].peer;
    uint8_t peer_state =
        mgmt ? kStateActive
             : (peer != kNoPort && pi.port_phys_state == kPhysLinkUp ? ports_[peer].info.port_state
                                                                    : kStateDown);
    switch (want) {
      case 0:
        break;
      case kStateDown:
        break;
      // A transition to the state the port is in is no transition (IBA 14.2.5.6 table 146
      // lists none; ibsim's do_portinfo answers it with status 7): the strict profile
      // refuses it, so a Set retried after a lost reply meets the state its first copy left.
      case kStateArmed:  // only from INIT, and only if the neighbour is at least INIT
        if (cur == kStateArmed && strict) return mad::mad_status::kInvalidField;
        if (!(cur == kStateArmed || (cur == kStateInit && peer_state >= kStateInit))) {
          return mad::mad_status::kInvalidField;
        }
        break;
      case kStateActive:  // only from ARMED
        if (cur == kStateActive && strict) return mad::mad_status::kInvalidField;
        if (!(cur == kStateActive || cur == kStateArmed)) return mad::mad_status::kInvalidField;
        break;
      default:  // INIT is entered by link training only; 5+ are reserved
        return mad::mad_status::kInvalidField;
    }
    // PortPhysicalState: 2 (Polling) re-enables, 3 (Disabled) disables; any other value,
    // such as the LinkUp a Get-modify-Set writes back, means no change (as in ibsim).
    if (req.operational_vls > pi.vl_cap) return mad::mad_status::kInvalidField;
    if (req.neighbor_mtu != 0 && req.neighbor_mtu > pi.mtu_cap) return mad::mad_status::kInvalidField;

    pi.m_key = req.m_key;
    pi.gid_prefix = req.gid_prefix;
    pi.lid = req.lid;
    pi.master_sm_base_lid = req.master_sm_base_lid;
    pi.m_key_lease_period = req.m_key_lease_period;
    pi.m_key_protect_bits = req.m_key_protect_bits;
    pi.lmc = req.lmc;
    pi.master_sm_sl = req.master_sm_sl;
    // 255, 15 and 31 mean "set to what is supported" (14.2.5.6); 0 leaves the field.
    if (req.link_width_enabled) {
      pi.link_width_enabled =
          req.link_width_enabled == 255 ? pi.link_width_supported : req.link_width_enabled;
    }
    if (req.link_speed_enabled) {
      pi.link_speed_enabled =
          req.link_speed_enabled == 15 ? pi.link_speed_supported : req.link_speed_enabled;
    }
    if (req.link_speed_ext_enabled) {
      pi.link_speed_ext_enabled = req.link_speed_ext_enabled == 31 ? pi.link_speed_ext_supported
                                                                   : req.link_speed_ext_enabled;
    }
    const bool keeps_tuning = !(sn.quirks.drops_port_tuning && sn.sw != kNoSwitch && mod != 0);
    if (keeps_tuning) {
      pi.local_phy_errors = req.local_phy_errors;
      pi.overrun_errors = req.overrun_errors;
    }
    if (req.neighbor_mtu) pi.neighbor_mtu = req.neighbor_mtu;
    if (req.operational_vls) pi.operational_vls = req.operational_vls;
    pi.vl_high_limit = req.vl_high_limit;
    pi.hoq_life = req.hoq_life;
    if (keeps_tuning) pi.vl_stall_count = req.vl_stall_count;
    pi.subnet_timeout = req.subnet_timeout;
    if (!(sn.quirks.drops_partition_enforcement && sn.sw != kNoSwitch && mod != 0)) {
      pi.partition_enforcement_inbound = req.partition_enforcement_inbound;
      pi.partition_enforcement_outbound = req.partition_enforcement_outbound;
      pi.filter_raw_inbound = req.filter_raw_inbound;
      pi.filter_raw_outbound = req.filter_raw_outbound;
    }
    pi.multicast_pkey_trap_suppression = req.multicast_pkey_trap_suppression;
    if (req.link_down_default_state) pi.link_down_default_state = req.link_down_default_state;
    // ClientReregister is an event to the CA's clients, not state; Get reads 0.
    if (req.client_reregister && sn.sw == kNoSwitch) ++client_reregisters_;
    if (want == kStateArmed || want == kStateActive) pi.port_state = want;
    if (want == kStateDown && !mgmt && pi.port_phys_state == kPhysLinkUp) {
      // SubnSet DOWN: the link goes down and retrains to INIT at both ends (ibsim too);
      // the neighbour, not this port, reports the change.
      pi.port_state = kStateInit;
      if (peer != kNoPort) {
        ports_[peer].info.port_state = kStateInit;
        MarkPortStateChange(ports_[peer].node);
      }
    }
    if (!mgmt && req.port_phys_state == kPhysDisabled) {
      pi.port_phys_state = kPhysDisabled;
      pi.port_state = kStateDown;
      if (peer != kNoPort) RefreshLink(peer);
    } else if (!mgmt && req.port_phys_state == kPhysPolling &&
               pi.port_phys_state == kPhysDisabled) {
      pi.port_phys_state = kPhysPolling;
      RefreshLink(target);
    }
  }
  mad::PortInfo out = pi;
  out.local_port_num = static_cast<uint8_t>(arrival_num);
  out.client_reregister = 0;
  // Protect bit 1 hides the key from a Get without it (14.2.4.1 table 142).
  if (!key_ok && pi.m_key_protect_bits >= 1) out.m_key = 0;
  mad::EncodeTo(out, data);
  return mad::mad_status::kOk;
}

uint16_t Simulator::SmaSwitchInfo(PortId arrival, uint8_t method, std::span<uint8_t> data) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  if (sn.sw == kNoSwitch) return mad::mad_status::kMethodAttrUnsupported;
  mad::SwitchInfo& si = switches_[sn.sw].info;
  if (method == mad::method::kSet) {
    mad::SwitchInfo req{};
    if (!mad::DecodeFrom(data, &req).ok()) return mad::mad_status::kInvalidField;
    if (req.linear_fdb_top >= si.linear_fdb_cap) return mad::mad_status::kInvalidField;
    if (req.default_port > sn.num_ports) return mad::mad_status::kInvalidField;
    si.linear_fdb_top = req.linear_fdb_top;
    si.default_port = req.default_port;
    si.default_mcast_primary_port = req.default_mcast_primary_port;
    si.default_mcast_not_primary_port = req.default_mcast_not_primary_port;
    si.life_time_value = req.life_time_value;
    si.optimized_sl_to_vl_mapping_programming = req.optimized_sl_to_vl_mapping_programming;
    si.multicast_fdb_top = req.multicast_fdb_top;
    if (req.port_state_change) si.port_state_change = 0;  // write 1 to clear
  }
  mad::EncodeTo(si, data);
  return mad::mad_status::kOk;
}

// LinearForwardingTable (14.2.5.10): modifier = block; blocks at or past LinearFDBCap are
// an invalid field. Unset entries read 255.
uint16_t Simulator::SmaLft(PortId arrival, uint8_t method, uint32_t mod,
                           std::span<uint8_t> data) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  if (sn.sw == kNoSwitch) return mad::mad_status::kMethodAttrUnsupported;
  SimSwitch& sw = switches_[sn.sw];
  size_t first = size_t{mod} * mad::kLftBlockSize;
  if (first >= sw.info.linear_fdb_cap) return mad::mad_status::kInvalidField;
  mad::LinearForwardingTable blk;
  if (method == mad::method::kSet) {
    if (!mad::DecodeFrom(data, &blk).ok()) return mad::mad_status::kInvalidField;
    if (sw.lft.size() < first + mad::kLftBlockSize) {
      sw.lft.resize(first + mad::kLftBlockSize, mad::kLftDropPort);
    }
    std::copy(blk.port.begin(), blk.port.end(), sw.lft.begin() + static_cast<ptrdiff_t>(first));
    if (sw.ar) sw.ar->OnLftSet();
  } else {
    for (size_t i = 0; i < mad::kLftBlockSize; ++i) {
      blk.port[i] = first + i < sw.lft.size() ? sw.lft[first + i] : mad::kLftDropPort;
    }
  }
  mad::EncodeTo(blk, data);
  return mad::mad_status::kOk;
}

Simulator::PortTables& Simulator::Tables(PortId p) {
  if (!ports_[p].tables) ports_[p].tables = std::make_unique<PortTables>();
  return *ports_[p].tables;
}

std::vector<uint8_t> Simulator::mft_ports(NodeId node, Lid mlid) const {
  std::vector<uint8_t> out;
  if (node >= nodes_.size() || nodes_[node].sw == kNoSwitch) return out;
  if (mlid.value() < mad::kMulticastLidBase) return out;
  const auto& mft = switches_[nodes_[node].sw].mft;
  const uint32_t positions = MftPositions(node);
  const size_t row = size_t{mlid.value()} - mad::kMulticastLidBase;
  for (uint32_t pos = 0; pos < positions; ++pos) {
    size_t at = row * positions + pos;
    uint16_t mask = at < mft.size() ? mft[at] : 0;
    for (unsigned b = 0; b < 16; ++b)
      if ((mask >> b) & 1) out.push_back(static_cast<uint8_t>(16 * pos + b));
  }
  return out;
}

// Ports 0..NumPorts in groups of 16 (14.2.5.12).
uint32_t Simulator::MftPositions(NodeId n) const {
  return (uint32_t{nodes_[n].num_ports} + 1 + mad::kMftPortsPerPosition - 1) /
         mad::kMftPortsPerPosition;
}

// MulticastForwardingTable (14.2.5.12): a block of 32 MLIDs from 0xC000 by one position of
// 16 ports. Blocks at or past MulticastFDBCap and positions past NumPorts are invalid.
uint16_t Simulator::SmaMft(PortId arrival, uint8_t method, uint32_t mod,
                           std::span<uint8_t> data) {
  NodeId n = ports_[arrival].node;
  const SimNode& sn = nodes_[n];
  if (sn.sw == kNoSwitch) return mad::mad_status::kMethodAttrUnsupported;
  SimSwitch& sw = switches_[sn.sw];
  auto m = DecodeModifier<mad::MftModifier>(mod);
  const uint32_t positions = MftPositions(n);
  const size_t first = size_t{m.block} * mad::kMftBlockSize;
  if (m.position >= positions || first >= sw.info.multicast_fdb_cap) {
    return mad::mad_status::kInvalidField;
  }
  mad::MulticastForwardingTable blk;
  if (method == mad::method::kSet) {
    if (!mad::DecodeFrom(data, &blk).ok()) return mad::mad_status::kInvalidField;
    size_t need = (first + mad::kMftBlockSize) * positions;
    if (sw.mft.size() < need) sw.mft.resize(need, 0);
    for (size_t i = 0; i < mad::kMftBlockSize; ++i) {
      sw.mft[(first + i) * positions + m.position] = blk.port_mask[i];
    }
  } else {
    for (size_t i = 0; i < mad::kMftBlockSize; ++i) {
      size_t at = (first + i) * positions + m.position;
      blk.port_mask[i] = at < sw.mft.size() ? sw.mft[at] : 0;
    }
  }
  mad::EncodeTo(blk, data);
  return mad::mad_status::kOk;
}

// P_Key table size (ibsim do_pkeytbl): a switch's external ports have SwitchInfo's
// PartitionEnforcementCap entries, every other port NodeInfo's PartitionCap.
size_t Simulator::PKeyCap(PortId p) const {
  const SimNode& sn = nodes_[ports_[p].node];
  if (sn.sw == kNoSwitch) return kPartitionCapCa;
  if (p == sn.first_port) return kPartitionCapSwitch;
  return switches_[sn.sw].info.partition_enforcement_cap;
}

std::vector<uint16_t> Simulator::pkey_table(PortId port) const {
  std::vector<uint16_t> out(PKeyCap(port), 0);
  const PortTables* t = ports_[port].tables.get();
  if (t && !t->pkeys.empty()) {
    std::copy_n(t->pkeys.begin(), std::min(out.size(), t->pkeys.size()), out.begin());
  } else if (!out.empty()) {
    out[0] = mad::kDefaultPKey;
  }
  return out;
}

// P_KeyTable (14.2.5.7): modifier bits 15-0 block of 32; on a switch bits 31-16 name the
// port. A block past the table's capacity is invalid; a last block only partly inside
// stores its first entries and reads the rest as 0.
uint16_t Simulator::SmaPKeyTable(PortId arrival, uint8_t method, uint32_t mod,
                                 std::span<uint8_t> data) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  auto m = DecodeModifier<mad::PKeyModifier>(mod);
  PortId target = arrival;
  if (sn.sw != kNoSwitch) {
    if (m.port > sn.num_ports) return mad::mad_status::kInvalidField;
    target = sn.first_port + m.port;
  }
  const size_t cap = PKeyCap(target);
  const size_t first = size_t{m.block} * mad::kPKeyBlockSize;
  if (first >= cap) return mad::mad_status::kInvalidField;
  const size_t n = std::min(mad::kPKeyBlockSize, cap - first);
  mad::PKeyTable blk;
  if (method == mad::method::kSet) {
    if (!mad::DecodeFrom(data, &blk).ok()) return mad::mad_status::kInvalidField;
    auto& pkeys = Tables(target).pkeys;
    if (pkeys.empty()) {
      pkeys.assign(cap, 0);
      pkeys[0] = mad::kDefaultPKey;
    }
    std::copy_n(blk.pkey.begin(), n, pkeys.begin() + static_cast<ptrdiff_t>(first));
  }
  blk = mad::PKeyTable{};
  const PortTables* t = ports_[target].tables.get();
  for (size_t i = 0; i < n; ++i) {
    if (t && !t->pkeys.empty()) {
      blk.pkey[i] = t->pkeys[first + i];
    } else {
      blk.pkey[i] = first + i == 0 ? mad::kDefaultPKey: 0;
    }
  }
  mad::EncodeTo(blk, data);
  return mad::mad_status::kOk;
}

// SLtoVLMappingTable (14.2.5.8): on a switch modifier bits 15-8 are the input port and 7-0
// the output port; on a CA the modifier is ignored and the arrival port's table is used.
uint16_t Simulator::SmaSlToVl(PortId arrival, uint8_t method, uint32_t mod,
                              std::span<uint8_t> data) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  PortId target = arrival;
  size_t out = 0;
  size_t count = 1;
  if (sn.sw != kNoSwitch) {
    auto m = DecodeModifier<mad::SlToVlModifier>(mod);
    if (m.in_port > sn.num_ports || m.out_port > sn.num_ports) {
      return mad::mad_status::kInvalidField;
    }
    target = sn.first_port + m.in_port;
    out = m.out_port;
    count = size_t{sn.num_ports} + 1;
  }
  mad::SlToVlTable t;
  if (method == mad::method::kSet) {
    if (!mad::DecodeFrom(data, &t).ok()) return mad::mad_status::kInvalidField;
    auto& tab = Tables(target).sl2vl;
    if (tab.empty()) tab.assign(count, DefaultSlToVl());
    tab[out] = t;
  }
  const PortTables* pt = ports_[target].tables.get();
  t = pt && !pt->sl2vl.empty() ? pt->sl2vl[out] : DefaultSlToVl();
  std::fill(data.begin(), data.end(), uint8_t{0});
  mad::EncodeTo(t, data);
  return mad::mad_status::kOk;
}

mad::SlToVlTable Simulator::sl_to_vl(PortId in, uint8_t out) const {
  const PortTables* pt = ports_[in].tables.get();
  return pt && out < pt->sl2vl.size() ? pt->sl2vl[out] : DefaultSlToVl();
}

mad::VlArbitrationTable Simulator::vl_arb(PortId p, size_t block) const {
  const PortTables* pt = ports_[p].tables.get();
  return pt && block < pt->vlarb.size() ? pt->vlarb[block] : DefaultVlArb(block);
}

// VLArbitrationTable (14.2.5.9): modifier bits 31-16 block (1, 2 low priority; 3, 4 high),
// on a switch bits 15-0 the port. A block beyond the port's VLArbLowCap/HighCap is invalid
// (ibsim do_vlarb); entries past the cap inside a valid block read 0 and ignore Sets.
uint16_t Simulator::SmaVlArb(PortId arrival, uint8_t method, uint32_t mod,
                             std::span<uint8_t> data) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  auto m = DecodeModifier<mad::VlArbModifier>(mod);
  PortId target = arrival;
  if (sn.sw != kNoSwitch) {
    if (m.port > sn.num_ports) return mad::mad_status::kInvalidField;
    target = sn.first_port + m.port;
  }
  if (m.block < mad::vlarb_block::kLowLower || m.block > mad::vlarb_block::kHighUpper) {
    return mad::mad_status::kInvalidField;
  }
  const size_t b = m.block - 1u;
  const mad::PortInfo& pi = ports_[target].info;
  const size_t cap = b < 2 ? pi.vl_arb_low_cap: pi.vl_arb_high_cap;
  const size_t skip = (b % 2) * mad::kVlArbBlockSize;
  if (cap <= skip) return mad::mad_status::kInvalidField;
  const size_t n = std::min(mad::kVlArbBlockSize, cap - skip);
  mad::VlArbitrationTable t;
  if (method == mad::method::kSet) {
    if (!mad::DecodeFrom(data, &t).ok()) return mad::mad_status::kInvalidField;
    auto& tab = Tables(target).vlarb;
    if (tab.empty()) {
      for (size_t i = 0; i < 4; ++i) tab.push_back(DefaultVlArb(i));
    }
    std::copy_n(t.vl.begin(), n, tab[b].vl.begin());
    std::copy_n(t.weight.begin(), n, tab[b].weight.begin());
  }
  const PortTables* pt = ports_[target].tables.get();
  const mad::VlArbitrationTable& cur =
      pt && !pt->vlarb.empty() ? pt->vlarb[b] : (t = DefaultVlArb(b));
  mad::VlArbitrationTable out;
  std::copy_n(cur.vl.begin(), n, out.vl.begin());
  std::copy_n(cur.weight.begin(), n, out.weight.begin());
  mad::EncodeTo(out, data);
  return mad::mad_status::kOk;
}

// GUIDInfo (14.2.5.5): modifier = block of 8 GUIDs up to PortInfo's GUIDCap; entry 0 is the
// port GUID and read only (a Set's entry 0 is ignored). A switch answers for port 0.
uint16_t Simulator::SmaGuidInfo(PortId arrival, uint8_t method, uint32_t mod,
                                std::span<uint8_t> data) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  PortId target = sn.sw != kNoSwitch ? sn.first_port: arrival;
  const size_t cap = ports_[target].info.guid_cap;
  const size_t blocks = (cap + mad::kGuidInfoBlockSize - 1) / mad::kGuidInfoBlockSize;
  if (mod >= blocks) return mad::mad_status::kInvalidField;
  const size_t first = size_t{mod} * mad::kGuidInfoBlockSize;
  mad::GuidInfo blk;
  if (method == mad::method::kSet) {
    if (!mad::DecodeFrom(data, &blk).ok()) return mad::mad_status::kInvalidField;
    if (cap > 1) {
      auto& alias = Tables(target).alias_guids;
      if (alias.empty()) alias.assign(cap - 1, 0);
      for (size_t i = 0; i < mad::kGuidInfoBlockSize; ++i) {
        size_t e = first + i;
        if (e != 0 && e < cap) alias[e - 1] = blk.guid[i];
      }
    }
  }
  blk = mad::GuidInfo{};
  const PortTables* pt = ports_[target].tables.get();
  for (size_t i = 0; i < mad::kGuidInfoBlockSize; ++i) {
    size_t e = first + i;
    if (e == 0) {
      blk.guid[i] = ports_[target].guid;
    } else if (e < cap && pt && !pt->alias_guids.empty()) {
      blk.guid[i] = pt->alias_guids[e - 1];
    }
  }
  mad::EncodeTo(blk, data);
  return mad::mad_status::kOk;
}

}  // namespace ibsm::sim
