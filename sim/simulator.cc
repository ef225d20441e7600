// The Simulator core: building the model from a Fabric, power-on state of ports and
// switches, link training, and the setters and inspection the tests and SimTransport use.
#include "sim/simulator.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <string_view>

#include "mad/attr/linear_forwarding_table.h"
#include "sim/simulator_internal.h"

namespace ibsm::sim {
namespace {

// LinkSpeedActive / LinkSpeedExtActive wire encodings for the model's speed.
void FillSpeed(LinkSpeed s, mad::PortInfo* pi) {
  pi->link_speed_supported = 7;  // SDR, DDR, QDR
  pi->link_speed_enabled = 7;
  pi->link_speed_ext_supported = 0;
  pi->link_speed_ext_enabled = 0;
  pi->link_speed_ext_active = 0;
  switch (s) {
    case LinkSpeed::kSdr: pi->link_speed_active = 1; break;
    case LinkSpeed::kDdr: pi->link_speed_active = 2; break;
    case LinkSpeed::kQdr: case LinkSpeed::kFdr10: pi->link_speed_active = 4; break;
    default:
      pi->link_speed_active = 4;
      pi->capability_mask |= mad::port_cap::kIsExtendedSpeedsSupported;
      pi->link_speed_ext_active = s == LinkSpeed::kFdr ? 1 : s == LinkSpeed::kEdr ? 2
                                 : s == LinkSpeed::kHdr ? 4 : 8;
      // A port supports the speeds up to the one it runs at (the model has no slower-than-
      // possible links unless a test makes one), so link health sees no false degradation.
      pi->link_speed_ext_supported = static_cast<uint8_t>((pi->link_speed_ext_active << 1) - 1);
      pi->link_speed_ext_enabled = pi->link_speed_ext_supported;
      break;
  }
}

}  // namespace

std::string_view DropReasonName(DropReason r) {
  static constexpr std::string_view kNames[] = {
      "malformed", "bad_source", "bad_path",  "link_down", "not_switch",
      "mixed_dr",  "no_route",   "loop",      "port_state", "wrong_dest",
      "random",    "node_drop",  "m_key",     "no_agent",   "vendor_attr",
      "optional_attr"};
  static_assert(std::size(kNames) == static_cast<size_t>(DropReason::kCount));
  auto i = static_cast<size_t>(r);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

Simulator::Simulator(const Fabric& fabric, SimOptions options)
    : options_(options), rng_(options.seed) {
  nodes_.resize(fabric.node_count());
  ports_.resize(fabric.port_count());
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    const Node& fn = fabric.node(n);
    SimNode& sn = nodes_[n];
    sn.kind = fn.kind;
    sn.num_ports = fn.num_ports;
    sn.guid = fn.guid.value();
    sn.system_image_guid = fn.system_image_guid.value() ? fn.system_image_guid.value()
                                                        : fn.guid.value();
    sn.vendor_id = fn.vendor_id ? fn.vendor_id: 0x0002c9;
    sn.device_id = fn.device_id;
    sn.revision = fn.revision;
    sn.first_port = fn.first_port;
    sn.description = fn.description.empty() ? fn.name: fn.description;
    sn.quirks = QuirksFor(options_.profile, options_.seed, fn.guid, fn.kind);
    if (sn.quirks.hostile_description && options_.hostile_descriptions)
      sn.description = HostileDescription(sn.description, n);
    if (fn.is_switch()) {
      sn.sw = static_cast<uint32_t>(switches_.size());
      switches_.emplace_back();
    }
    for (uint32_t p = 0; p <= fn.num_ports; ++p) {
      PortId id = fn.first_port + p;
      const Port& fp = fabric.port(id);
      SimPort& sp = ports_[id];
      sp.node = n;
      sp.peer = fp.peer;
      // Port GUIDs: a CA port has its own (node GUID + port number when the model has
      // none); every port of a switch reports port 0's, the node GUID by default.
      if (fn.is_switch()) {
        uint64_t g0 = fabric.port(fn.first_port).guid.value();
        sp.guid = g0 ? g0 : fn.guid.value();
      } else {
        sp.guid = fp.guid.value() ? fp.guid.value(): fn.guid.value() + p;
      }
      FillSpeed(fp.speed, &sp.info);
      sp.info.link_width_active = static_cast<uint8_t>(fp.width);
    }
  }
  // Second pass: link training needs both ends of every cable copied.
  for (NodeId n = 0; n < nodes_.size(); ++n) ResetNodeState(n);
  endpoints_.assign(ports_.size(), nullptr);
  if (options_.io) trap_timer_ = std::make_unique<boost::asio::steady_timer>(*options_.io);
}

Simulator::~Simulator() = default;

// A port as a freshly powered node shows it: no LID, no keys, link trained if cabled.
void Simulator::ResetPort(PortId p) {
  SimPort& sp = ports_[p];
  const SimNode& n = nodes_[sp.node];
  mad::PortInfo& pi = sp.info;
  uint8_t width_active = pi.link_width_active;
  LinkSpeed speed = pi.link_speed_ext_active == 1   ? LinkSpeed::kFdr
                    : pi.link_speed_ext_active == 2 ? LinkSpeed::kEdr
                    : pi.link_speed_ext_active == 4 ? LinkSpeed::kHdr
                    : pi.link_speed_ext_active == 8 ? LinkSpeed::kNdr
                    : pi.link_speed_active == 1     ? LinkSpeed::kSdr
                    : pi.link_speed_active == 2     ? LinkSpeed::kDdr
                                                    : LinkSpeed::kQdr;
  pi = mad::PortInfo{};
  sp.tables.reset();
  sp.pm.reset();
  sp.traffic = Traffic{};
  pi.local_port_num = static_cast<uint8_t>(p - n.first_port);
  pi.capability_mask = mad::port_cap::kIsTrapSupported | mad::port_cap::kIsNoticeSupported |
                       mad::port_cap::kIsClientReregistrationSupported |
                       mad::port_cap::kIsSlMappingSupported;
  FillSpeed(speed, &pi);
  pi.link_width_supported = 3;  // 1x, 4x
  pi.link_width_enabled = 3;
  pi.link_width_active = width_active ? width_active: 2;
  pi.link_down_default_state = kPhysPolling;
  pi.mtu_cap = 5;  // 4096
  pi.neighbor_mtu = 5;
  pi.vl_cap = 4;   // VL0-7
  pi.operational_vls = 4;
  pi.vl_arb_high_cap = 8;
  pi.vl_arb_low_cap = 8;
  pi.guid_cap = n.kind == NodeKind::kSwitch ? 1 : 8;
  pi.subnet_timeout = 18;
  pi.resp_time_value = 8;
  bool mgmt = n.kind == NodeKind::kSwitch && pi.local_port_num == 0;
  bool up = mgmt || LinkShouldBeUp(p);
  pi.port_phys_state = up ? kPhysLinkUp: kPhysPolling;
  pi.port_state = up ? kStateInit: kStateDown;
  if (options_.profile == SimProfile::kStrict) {
    // What no SM has written yet: the smallest NeighborMTU (256) and OperationalVLs (VL0),
    // no error thresholds, HOQLife and VLStallCount 0. Only the SM sets them as the fabric
    // needs (docs/port-programming.md), so a field it forgets shows.
    pi.neighbor_mtu = 1;
    pi.operational_vls = 1;
    pi.local_phy_errors = 0;
    pi.overrun_errors = 0;
    pi.hoq_life = 0;
    pi.vl_stall_count = 0;
  }
}

void Simulator::ResetNodeState(NodeId n) {
  SimNode& sn = nodes_[n];
  for (NodeExtension* ext: extensions_) ext->OnNodeReset(n);
  for (uint32_t p = 0; p <= sn.num_ports; ++p) ResetPort(sn.first_port + p);
  if (sn.sw != kNoSwitch) {
    SimSwitch& sw = switches_[sn.sw];
    sw.info = mad::SwitchInfo{};
    sw.info.linear_fdb_cap = options_.linear_fdb_cap;
    sw.info.multicast_fdb_cap = options_.multicast_fdb_cap;
    sw.info.linear_fdb_top = 0;
    sw.info.default_port = 0;
    sw.info.default_mcast_primary_port = 0xFF;
    sw.info.default_mcast_not_primary_port = 0xFF;
    // The strict profile's switches start at LifeTimeValue 0: packet_life_time is the SM's.
    sw.info.life_time_value = options_.profile == SimProfile::kStrict ? 0 : 18;
    sw.info.lids_per_port = 0;
    sw.info.partition_enforcement_cap = kPartitionEnforcementCap;
    sw.info.enhanced_port0 = 0;
    sw.lft.clear();
    sw.lft.shrink_to_fit();
    sw.mft.clear();
    sw.mft.shrink_to_fit();
    sw.traps.clear();
    if (sw.ar) sw.ar->Reset();
  }
}

bool Simulator::LinkShouldBeUp(PortId p) const {
  const SimPort& a = ports_[p];
  if (a.peer == kNoPort || !a.cable_ok || !nodes_[a.node].present) return false;
  const SimPort& b = ports_[a.peer];
  if (!b.cable_ok || !nodes_[b.node].present) return false;
  // Disabled by PortInfo Set (PortPhysicalState 3) at either end keeps the link down.
  return a.info.port_phys_state != kPhysDisabled && b.info.port_phys_state != kPhysDisabled;
}

void Simulator::MarkPortStateChange(NodeId n) {
  SimNode& sn = nodes_[n];
  if (sn.sw == kNoSwitch || !sn.present) return;
  switches_[sn.sw].info.port_state_change = 1;
  SendTrap128(n);
}

// Link training result: up -> LinkUp/INIT at both ends; down -> DOWN (Polling, or
// Disabled when disabled). Either way the switch at each end flags PortStateChange
// (14.2.5.4: transitions by the link state machine, not by SubnSet).
void Simulator::SetLinkState(PortId p, bool up) {
  SimPort& sp = ports_[p];
  mad::PortInfo& pi = sp.info;
  bool is_up = pi.port_phys_state == kPhysLinkUp;
  if (up == is_up) return;
  if (up) {
    pi.port_phys_state = kPhysLinkUp;
    pi.port_state = kStateInit;
  } else {
    if (pi.port_phys_state != kPhysDisabled) pi.port_phys_state = kPhysPolling;
    pi.port_state = kStateDown;
    // LinkDownedCounter (16.1.3.5): the link training state machine left LinkUp.
    uint8_t& downed = Pm(p).errors.link_downed_counter;
    if (downed < UINT8_MAX) ++downed;
  }
  MarkPortStateChange(sp.node);
}

void Simulator::RefreshLink(PortId p) {
  bool up = LinkShouldBeUp(p);
  if (nodes_[ports_[p].node].present) SetLinkState(p, up);
  PortId q = ports_[p].peer;
  if (q != kNoPort && nodes_[ports_[q].node].present) SetLinkState(q, up);
}

PortId Simulator::port_id(NodeId node, PortNum num) const {
  if (node >= nodes_.size() || num.value() > nodes_[node].num_ports) return kNoPort;
  return nodes_[node].first_port + num.value();
}

const mad::SwitchInfo& Simulator::switch_info(NodeId node) const {
  return switches_[nodes_[node].sw].info;
}

uint8_t Simulator::lft_entry(NodeId node, Lid lid) const {
  if (node >= nodes_.size() || nodes_[node].sw == kNoSwitch) return mad::kLftDropPort;
  const auto& lft = switches_[nodes_[node].sw].lft;
  return lid.value() < lft.size() ? lft[lid.value()] : mad::kLftDropPort;
}

size_t Simulator::pending_traps() const {
  size_t n = 0;
  for (const auto& sw: switches_) n += sw.traps.size();
  return n;
}

void Simulator::SetMKey(PortId port, uint64_t m_key, uint8_t protect_bits) {
  if (port >= ports_.size()) return;
  ports_[port].info.m_key = m_key;
  ports_[port].info.m_key_protect_bits = protect_bits & 3;
}

void Simulator::SetPortCaps(PortId port, uint8_t mtu_cap, uint8_t vl_cap) {
  if (port >= ports_.size()) return;
  mad::PortInfo& pi = ports_[port].info;
  pi.mtu_cap = mtu_cap;
  pi.vl_cap = vl_cap;
  pi.neighbor_mtu = std::min(pi.neighbor_mtu, mtu_cap);
  pi.operational_vls = std::min(pi.operational_vls, vl_cap);
}

Status Simulator::SetArCapable(NodeId node, bool capable, ArSwitchCaps caps) {
  if (node >= nodes_.size() || nodes_[node].sw == kNoSwitch) {
    return InvalidArgument("SIM-AR-001 not a switch");
  }
  SimSwitch& sw = switches_[nodes_[node].sw];
  if (!capable) {
    sw.ar.reset();
  } else {
    sw.ar = std::make_unique<ArSwitch>(nodes_[node].num_ports, options_.linear_fdb_cap, caps);
  }
  return Status::Ok();
}

const ArSwitch* Simulator::ar_switch(NodeId node) const {
  if (node >= nodes_.size() || nodes_[node].sw == kNoSwitch) return nullptr;
  return switches_[nodes_[node].sw].ar.get();
}

Status Simulator::SetIsSm(PortId port, bool on) {
  if (port >= ports_.size()) return InvalidArgument("no such port");
  uint32_t& mask = ports_[port].info.capability_mask;
  mask = on ? (mask | mad::port_cap::kIsSm) : (mask & ~mad::port_cap::kIsSm);
  return Status();
}

size_t Simulator::state_bytes() const {
  size_t n = nodes_.capacity() * sizeof(SimNode) + ports_.capacity() * sizeof(SimPort) +
             switches_.capacity() * sizeof(SimSwitch) + endpoints_.capacity() * sizeof(Endpoint*);
  for (const auto& nd: nodes_) n += nd.description.capacity() > 15 ? nd.description.capacity() : 0;
  for (const auto& sw: switches_) {
    n += sw.lft.capacity() + sw.mft.capacity() * 2;
    if (sw.ar) n += sw.ar->state_bytes();
  }
  for (const auto& p: ports_) {
    if (p.pm) n += sizeof(PmState);
    if (p.tables) {
      n += sizeof(PortTables) + p.tables->pkeys.capacity() * 2 +
           p.tables->sl2vl.capacity() * sizeof(mad::SlToVlTable) +
           p.tables->vlarb.capacity() * sizeof(mad::VlArbitrationTable) +
           p.tables->alias_guids.capacity() * 8;
    }
  }
  return n;
}

}  // namespace ibsm::sim
