#include "sim/simulator.h"

#include <algorithm>
#include <string_view>

#include "base/log.h"
#include "mad/attr/class_port_info.h"
#include "mad/attr/guid_info.h"
#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/multicast_forwarding_table.h"
#include "mad/attr/node_description.h"
#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/modifiers.h"
#include "mad/attr/pkey_table.h"

namespace ibsm::sim {
namespace {

using mad::DecodeModifier;

// Defaults a freshly powered port reports, as ibsim's (sim_net.c): P_Key entry 0 is the
// default partition as full member; SLs map to VLs by ibsim's default_sl2vl; VL arbitration
// by its default_vlarb_high/low.
constexpr uint16_t kPartitionCapCa = 64;      // ibsim hcanodeinfo PartitionCap
constexpr uint16_t kPartitionCapSwitch = 8;   // ibsim swnodeinfo PartitionCap (port 0)
constexpr uint16_t kPartitionEnforcementCap = 64;  // ibsim switchinfo
constexpr std::array<uint8_t, 16> kDefaultSlToVl = {0, 1, 2, 3, 4, 5, 6, 7,
                                                    8, 9, 10, 11, 12, 13, 14, 7};

mad::SlToVlTable DefaultSlToVl() {
  mad::SlToVlTable t;
  t.vl = kDefaultSlToVl;
  return t;
}

// Block b (0..3 for modifier blocks 1..4): high-priority entries {VL0, 4}, {VLi, 0};
// low-priority entries {VL0, 0}, {VLi, 4}, for the first 15 entries of the first block.
mad::VlArbitrationTable DefaultVlArb(size_t b) {
  mad::VlArbitrationTable t;
  if (b != 0 && b != 2) return t;
  bool high = b == 2;
  for (size_t i = 0; i < 15; ++i) {
    t.vl[i] = static_cast<uint8_t>(i);
    t.weight[i] = high ? (i == 0 ? 4 : 0): (i == 0 ? 0 : 4);
  }
  return t;
}

using mad::Field;
using mad::Layout;
using mad::Smp;

// Field access on raw SMP bytes through the one Smp layout table (no hand-written shifts):
// the simulator turns a request into its response in place, like a real SMA, and decoding
// the whole 256-byte SMP per hop would cost more than the rest of the walk.
constexpr size_t SmpFieldIndex(std::string_view name) {
  for (size_t i = 0; i < Layout<Smp>::kFields.size(); ++i)
    if (Layout<Smp>::kFields[i].name == name) return i;
  return SIZE_MAX;
}
template <size_t I>
constexpr const Field<Smp>& SmpF() {
  static_assert(I < Layout<Smp>::kFields.size(), "no such Smp field");
  return Layout<Smp>::kFields[I];
}
#define SMP_FIELD(name) SmpF<SmpFieldIndex(name)>()

uint64_t Get(std::span<const uint8_t> b, const Field<Smp>& f, size_t i = 0) {
  return mad::GetBits(b, f.bit_offset + static_cast<uint32_t>(i * f.stride), f.bit_width);
}
void Put(std::span<uint8_t> b, const Field<Smp>& f, uint64_t v, size_t i = 0) {
  mad::SetBits(b, f.bit_offset + static_cast<uint32_t>(i * f.stride), f.bit_width, v);
}

const Field<Smp>& kBaseVersion = SMP_FIELD("base_version");
const Field<Smp>& kMgmtClass = SMP_FIELD("mgmt_class");
const Field<Smp>& kClassVersion = SMP_FIELD("class_version");
const Field<Smp>& kMethod = SMP_FIELD("method");
const Field<Smp>& kDirection = SMP_FIELD("direction");
const Field<Smp>& kStatus = SMP_FIELD("status");
const Field<Smp>& kHopPointer = SMP_FIELD("hop_pointer");
const Field<Smp>& kHopCount = SMP_FIELD("hop_count");
const Field<Smp>& kTid = SMP_FIELD("tid");
const Field<Smp>& kAttrId = SMP_FIELD("attr_id");
const Field<Smp>& kAttrMod = SMP_FIELD("attr_mod");
const Field<Smp>& kMKey = SMP_FIELD("m_key");
const Field<Smp>& kDrSlid = SMP_FIELD("dr_slid");
const Field<Smp>& kDrDlid = SMP_FIELD("dr_dlid");
const Field<Smp>& kInitialPath = SMP_FIELD("initial_path");
const Field<Smp>& kReturnPath = SMP_FIELD("return_path");
// The whole (15-bit) status word of a LID-routed SMP or GMP includes the D-bit position.
const mad::Field<mad::MadHeader>& kHdrStatus = Layout<mad::MadHeader>::kFields[4];
static_assert(Layout<mad::MadHeader>::kFields[4].bit_width == 16);

constexpr uint8_t kPhysPolling = 2;
constexpr uint8_t kPhysDisabled = 3;
constexpr uint8_t kPhysLinkUp = 5;
constexpr uint8_t kStateDown = 1;
constexpr uint8_t kStateInit = 2;
constexpr uint8_t kStateArmed = 3;
constexpr uint8_t kStateActive = 4;
constexpr uint32_t kMaxLidHops = 64;

std::span<uint8_t> SmpData(std::span<uint8_t> b) {
  return b.subspan(mad::kSmpDataOffset, mad::kSmpDataSize);
}

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

// ---------------------------------------------------------------------------------------
// Endpoints and faults.

Status Simulator::Bind(PortId port, Endpoint* ep) {
  if (port >= ports_.size() || ep == nullptr) return InvalidArgument("SIM-BND-001 no such port");
  if (endpoints_[port] != nullptr) return AlreadyExists("SIM-BND-002 port already bound");
  endpoints_[port] = ep;
  return Status::Ok();
}

void Simulator::Unbind(PortId port) {
  if (port < endpoints_.size()) endpoints_[port] = nullptr;
}

Status Simulator::LinkDown(PortId port) {
  if (port >= ports_.size()) return InvalidArgument("SIM-FLT-001 no such port");
  if (ports_[port].peer == kNoPort) return FailedPrecondition("SIM-FLT-002 port has no cable");
  ports_[port].cable_ok = false;
  ports_[ports_[port].peer].cable_ok = false;
  RefreshLink(port);
  return Status::Ok();
}

Status Simulator::LinkUp(PortId port) {
  if (port >= ports_.size()) return InvalidArgument("SIM-FLT-001 no such port");
  if (ports_[port].peer == kNoPort) return FailedPrecondition("SIM-FLT-002 port has no cable");
  ports_[port].cable_ok = true;
  ports_[ports_[port].peer].cable_ok = true;
  RefreshLink(port);
  return Status::Ok();
}

Status Simulator::RemoveNode(NodeId node) {
  if (node >= nodes_.size()) return InvalidArgument("SIM-FLT-003 no such node");
  SimNode& sn = nodes_[node];
  if (!sn.present) return FailedPrecondition("SIM-FLT-004 node already removed");
  sn.present = false;
  for (uint32_t p = 1; p <= sn.num_ports; ++p) {
    PortId id = sn.first_port + p;
    ports_[id].info.port_phys_state = kPhysPolling;
    ports_[id].info.port_state = kStateDown;
    if (ports_[id].peer != kNoPort) RefreshLink(id);
  }
  return Status::Ok();
}

Status Simulator::AddNode(NodeId node) {
  if (node >= nodes_.size()) return InvalidArgument("SIM-FLT-003 no such node");
  SimNode& sn = nodes_[node];
  if (sn.present) return FailedPrecondition("SIM-FLT-005 node is present");
  sn.present = true;
  ResetNodeState(node);
  for (uint32_t p = 1; p <= sn.num_ports; ++p) {
    PortId id = sn.first_port + p;
    // ResetPort already trained this end; bring the peer up to match.
    PortId q = ports_[id].peer;
    if (q != kNoPort && nodes_[ports_[q].node].present) SetLinkState(q, LinkShouldBeUp(id));
  }
  return Status::Ok();
}

Status Simulator::RebootSwitch(NodeId node) {
  if (node >= nodes_.size() || nodes_[node].sw == kNoSwitch) {
    return InvalidArgument("SIM-FLT-006 not a switch");
  }
  if (!nodes_[node].present) return FailedPrecondition("SIM-FLT-004 node is removed");
  // Power off: links drop (neighbours see DOWN), then the switch comes back fresh.
  IBSM_RETURN_IF_ERROR(RemoveNode(node));
  return AddNode(node);
}

void Simulator::SetDropRate(double p) { drop_rate_ = std::clamp(p, 0.0, 1.0); }

Status Simulator::SetNodeDropRate(NodeId node, double p) {
  if (node >= nodes_.size()) return InvalidArgument("SIM-FLT-003 no such node");
  nodes_[node].drop_rate = std::clamp(p, 0.0, 1.0);
  return Status::Ok();
}

void Simulator::SetLatency(std::chrono::nanoseconds per_hop, std::chrono::nanoseconds jitter) {
  options_.per_hop = per_hop;
  options_.jitter = jitter;
}

bool Simulator::Drop(DropReason r) {
  ++counters_.dropped;
  ++counters_.by_reason[static_cast<size_t>(r)];
  Log(LogName::kSim).trace("MAD dropped: {}", DropReasonName(r));
  return false;
}

namespace {
// Uniform in [0, 1) from 53 random bits: same sequence for the same seed on every platform.
double Unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
}  // namespace

// True if the MAD survives entering node `n`.
bool Simulator::RollDrop(NodeId n) {
  double nd = nodes_[n].drop_rate;
  if (nd > 0 && (nd >= 1.0 || Unit(rng_) < nd)) return Drop(DropReason::kNodeDrop);
  return true;
}

PortId Simulator::CrossLink(PortId out, uint8_t min_state) {
  const SimPort& o = ports_[out];
  if (o.info.port_phys_state != kPhysLinkUp || o.peer == kNoPort) {
    Drop(DropReason::kLinkDown);
    return kNoPort;
  }
  if (o.info.port_state < min_state || ports_[o.peer].info.port_state < min_state) {
    Drop(DropReason::kPortState);
    return kNoPort;
  }
  PortId in = o.peer;
  CountHop(out, in);
  return RollDrop(ports_[in].node) ? in: kNoPort;
}

std::chrono::nanoseconds Simulator::Latency(uint32_t hops) {
  auto l = options_.per_hop * hops;
  if (options_.jitter.count() > 0 && hops > 0) {
    l += std::chrono::nanoseconds(static_cast<int64_t>(rng_() % static_cast<uint64_t>(
                                                          options_.jitter.count())));
  }
  return l;
}

// ---------------------------------------------------------------------------------------
// Routing.

void Simulator::Inject(PortId from, mad::MadMessage msg) {
  ++counters_.injected;
  if (from >= ports_.size() || !nodes_[ports_[from].node].present) {
    Drop(DropReason::kBadSource);
    return;
  }
  if (msg.bytes.size() != mad::kMadSize) {
    Drop(DropReason::kMalformed);
    return;
  }
  std::span<const uint8_t> b(msg.bytes);
  if (Get(b, kBaseVersion) != 1) {
    Drop(DropReason::kMalformed);
    return;
  }
  if (drop_rate_ > 0 && (drop_rate_ >= 1.0 || Unit(rng_) < drop_rate_)) {
    Drop(DropReason::kRandom);
    return;
  }
  if (Get(b, kMgmtClass) == static_cast<uint8_t>(mad::MgmtClass::kSubnDirected)) {
    HandleDr(from, msg);
  } else {
    HandleLid(from, msg);
  }
}

// Directed route, IBA 14.2.2.2 (outbound, D = 0) and 14.2.2.4 (return, D = 1). The walk
// applies the C14-9 / C14-13 rules at each node in turn; hop_pointer and return_path are
// updated in the bytes exactly as the nodes on the path would.
void Simulator::HandleDr(PortId from, mad::MadMessage& msg) {
  std::span<uint8_t> b(msg.bytes);
  if (Get(b, kDrSlid) != 0xFFFF || Get(b, kDrDlid) != 0xFFFF) {
    Drop(DropReason::kMixedDr);  // TODO: LID-routed legs of a DR SMP
    return;
  }
  uint64_t method = Get(b, kMethod);
  bool returning = Get(b, kDirection) == 1 || (method & mad::method::kResponseBit) != 0;
  if (returning) {
    ReturnDr(from, msg, 0);
    return;
  }
  uint32_t hop_count = static_cast<uint32_t>(Get(b, kHopCount));
  if (hop_count > mad::kMaxDrHops || Get(b, kHopPointer) != 0) {
    Drop(DropReason::kBadPath);
    return;
  }
  PortId at = from;  // the port the SMP is at (arrival port once it has moved)
  NodeId node = ports_[from].node;
  for (uint32_t hp = 1; hp <= hop_count; ++hp) {
    // C14-9:2: only a switch forwards; the source may be a CA.
    if (hp > 1 && nodes_[node].sw == kNoSwitch) {
      Drop(DropReason::kNotSwitch);
      return;
    }
    uint32_t egress = static_cast<uint32_t>(Get(b, kInitialPath, hp));
    if (egress == 0 || egress > nodes_[node].num_ports) {
      Drop(DropReason::kBadPath);
      return;
    }
    at = CrossLink(nodes_[node].first_port + egress, 0);
    if (at == kNoPort) return;
    node = ports_[at].node;
    Put(b, kReturnPath, ports_[at].info.local_port_num, hp);
    Put(b, kHopPointer, hp);
  }
  ArriveAt(at, msg, 0, hop_count, true);
}

// Walks a DR response back along return_path from `from` (the responder's port) to the
// requester. The responder may leave hop_pointer anywhere; the walk sets it.
void Simulator::ReturnDr(PortId from, mad::MadMessage& msg, uint32_t hops_so_far) {
  std::span<uint8_t> b(msg.bytes);
  uint32_t hop_count = static_cast<uint32_t>(Get(b, kHopCount));
  if (hop_count > mad::kMaxDrHops) {
    Drop(DropReason::kBadPath);
    return;
  }
  Put(b, kDirection, 1);
  PortId at = from;
  NodeId node = ports_[from].node;
  for (uint32_t hp = hop_count; hp >= 1; --hp) {
    if (hp < hop_count && nodes_[node].sw == kNoSwitch) {
      Drop(DropReason::kNotSwitch);
      return;
    }
    uint32_t egress = static_cast<uint32_t>(Get(b, kReturnPath, hp));
    // The responder itself answers through the port the request arrived on.
    if (hp == hop_count && nodes_[node].sw == kNoSwitch) egress = ports_[at].info.local_port_num;
    if (egress == 0 || egress > nodes_[node].num_ports) {
      Drop(DropReason::kBadPath);
      return;
    }
    at = CrossLink(nodes_[node].first_port + egress, 0);
    if (at == kNoPort) return;
    node = ports_[at].node;
    Put(b, kHopPointer, hp - 1);
  }
  // Back at the requesting node: the SM sits at the port the path left from (a switch's
  // SM at port 0).
  if (hop_count > 0 && nodes_[node].sw != kNoSwitch) at = nodes_[node].first_port;
  DeliverTo(at, msg, hops_so_far + hop_count);
}

void Simulator::HandleLid(PortId from, mad::MadMessage& msg) {
  std::span<const uint8_t> b(msg.bytes);
  bool is_smp = Get(b, kMgmtClass) == static_cast<uint8_t>(mad::MgmtClass::kSubnLid);
  uint16_t slid = ports_[from].info.lid;
  if (nodes_[ports_[from].node].sw != kNoSwitch) slid = ports_[nodes_[ports_[from].node].first_port].info.lid;
  uint32_t hops = 0;
  PortId dest = RouteLid(from, msg.addr.lid.value(), is_smp, &hops);
  if (dest == kNoPort) return;
  ArriveAt(dest, msg, slid, hops, false);
}

namespace {
bool OwnsLid(const mad::PortInfo& pi, uint16_t lid) {
  if (pi.lid == 0) return false;
  uint32_t span = 1u << pi.lmc;
  return lid >= pi.lid && lid < pi.lid + span;
}
}  // namespace

// LID routing through the LFTs (IBA 18.2.4.3): a CA sends out of its port; a switch
// forwards by LFT[dlid]. SMPs need every link at INIT or above, GMPs ACTIVE (7.2: only
// SMPs may use a link before it is Active).
PortId Simulator::RouteLid(PortId from, uint16_t dlid, bool is_smp, uint32_t* hops) {
  uint8_t min_state = is_smp ? kStateInit: kStateActive;
  if (dlid == 0 || dlid > kMaxUnicastLid) {
    Drop(DropReason::kNoRoute);  // multicast/permissive LID routing not modelled
    return kNoPort;
  }
  PortId at = from;
  NodeId node = ports_[from].node;
  auto cross = [&](PortId out) -> bool {
    at = CrossLink(out, min_state);
    if (at == kNoPort) return false;
    node = ports_[at].node;
    ++*hops;
    return true;
  };
  if (nodes_[node].sw == kNoSwitch) {
    if (OwnsLid(ports_[from].info, dlid)) return from;
    if (!cross(from)) return kNoPort;
  }
  for (uint32_t h = 0;; ++h) {
    const SimNode& sn = nodes_[node];
    if (sn.sw == kNoSwitch) {
      if (OwnsLid(ports_[at].info, dlid)) return at;
      Drop(DropReason::kWrongDest);
      return kNoPort;
    }
    PortId mgmt = sn.first_port;
    if (OwnsLid(ports_[mgmt].info, dlid)) return mgmt;
    if (h >= kMaxLidHops) {
      Drop(DropReason::kLoop);
      return kNoPort;
    }
    const auto& lft = switches_[sn.sw].lft;
    uint8_t egress = dlid < lft.size() ? lft[dlid] : mad::kLftDropPort;
    if (egress == 0 || egress > sn.num_ports) {
      Drop(DropReason::kNoRoute);
      return kNoPort;
    }
    if (!cross(sn.first_port + egress)) return kNoPort;
  }
}

// The MAD reached `dest`. Responses and anything that is not the SMA's go to the endpoint
// bound there; SMPs for the SMA are answered and the answer routed back.
void Simulator::ArriveAt(PortId dest, mad::MadMessage& msg, uint16_t slid, uint32_t hops,
                         bool directed) {
  std::span<uint8_t> b(msg.bytes);
  uint8_t mclass = static_cast<uint8_t>(Get(b, kMgmtClass));
  uint8_t method = static_cast<uint8_t>(Get(b, kMethod));
  uint16_t attr_id = static_cast<uint16_t>(Get(b, kAttrId));
  bool is_smp = mclass == static_cast<uint8_t>(mad::MgmtClass::kSubnDirected) ||
                mclass == static_cast<uint8_t>(mad::MgmtClass::kSubnLid);
  msg.addr.lid = Lid{slid};
  if (mclass == static_cast<uint8_t>(mad::MgmtClass::kPerfMgt) &&
      (method & mad::method::kResponseBit) == 0 && method != mad::method::kTrap) {
    // The node's PMA answers, whoever is bound at the port (a real HCA's PMA sits beside
    // the user's QP1 agents); its answer is a GMP and needs an ACTIVE path back.
    if (!Pma(dest, b)) return;
    ReturnGmp(dest, slid, msg, hops);
    return;
  }
  if (!is_smp && (method & mad::method::kResponseBit) == 0 && method != mad::method::kTrap &&
      !extensions_.empty()) {
    // A class the simulator does not model itself (SHARP's 0x0B): the node's extension
    // answers; its answer is a GMP and needs an ACTIVE path back.
    NodeId dn = ports_[dest].node;
    PortNum at{ports_[dest].info.local_port_num};
    for (NodeExtension* ext: extensions_) {
      if (!ext->HandleGmp(dn, at, b)) continue;
      ReturnGmp(dest, slid, msg, hops);
      return;
    }
  }
  bool to_endpoint = (method & mad::method::kResponseBit) != 0 || !is_smp ||
                     method == mad::method::kTrap || attr_id == mad::attr::kSmInfo;
  if (to_endpoint) {
    // A switch's SM (enhanced port 0) is bound at port 0 whatever port the MAD entered.
    NodeId dn = ports_[dest].node;
    PortId ep_port = nodes_[dn].sw != kNoSwitch ? nodes_[dn].first_port: dest;
    if (endpoints_[ep_port] != nullptr) {
      DeliverTo(ep_port, msg, hops);
      return;
    }
    if (!is_smp || method == mad::method::kTrap || (method & mad::method::kResponseBit)) {
      Drop(DropReason::kNoAgent);
      return;
    }
    // SMInfo at a port with no SM: the SMA answers "unsupported" below.
  }
  if (!Sma(dest, b)) return;
  if (directed) {
    ReturnDr(dest, msg, hops);
    return;
  }
  uint32_t back_hops = 0;
  PortId back = RouteLid(dest, slid, true, &back_hops);
  if (back == kNoPort) return;
  uint16_t responder = ports_[dest].info.lid;
  msg.addr.lid = Lid{responder};
  DeliverTo(back, msg, hops + back_hops);
}

void Simulator::ReturnGmp(PortId dest, uint16_t slid, mad::MadMessage& msg, uint32_t hops) {
  uint32_t back_hops = 0;
  PortId back = RouteLid(dest, slid, false, &back_hops);
  if (back == kNoPort) return;
  msg.addr.lid = Lid{ports_[dest].info.lid};
  DeliverTo(back, msg, hops + back_hops);
}

void Simulator::DeliverTo(PortId p, mad::MadMessage& msg, uint32_t hops) {
  Endpoint* ep = endpoints_[p];
  if (ep == nullptr) {
    Drop(DropReason::kNoAgent);
    return;
  }
  // Loss on the way back as on the way out (SetDropRate: every MAD, responses included): a
  // Set can take effect and its reply still be lost.
  if (drop_rate_ > 0 && (drop_rate_ >= 1.0 || Unit(rng_) < drop_rate_)) {
    Drop(DropReason::kRandom);
    return;
  }
  ++counters_.delivered;
  std::chrono::nanoseconds latency = Latency(hops);
  const bool response = msg.bytes.size() >= mad::kMadSize &&
                        (msg.bytes[3] & mad::method::kResponseBit) != 0;
  if (response && options_.profile == SimProfile::kStrict) {
    // A late duplicate (a retransmission the fabric kept, or the switch's own resend), and
    // answers that overtake one another: the SM matches by TID and must drop the extra copy.
    if (options_.duplicate_rate > 0 && Unit(rng_) < options_.duplicate_rate) {
      ++counters_.duplicated;
      ep->Deliver(msg, latency + 2 * options_.reorder_delay);
    }
    if (options_.reorder_rate > 0 && Unit(rng_) < options_.reorder_rate) {
      ++counters_.reordered;
      latency += options_.reorder_delay;
    }
  }
  ep->Deliver(std::move(msg), latency);
}

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
    pi.local_phy_errors = req.local_phy_errors;
    pi.overrun_errors = req.overrun_errors;
    if (req.neighbor_mtu) pi.neighbor_mtu = req.neighbor_mtu;
    if (req.operational_vls) pi.operational_vls = req.operational_vls;
    pi.vl_high_limit = req.vl_high_limit;
    pi.hoq_life = req.hoq_life;
    pi.vl_stall_count = req.vl_stall_count;
    pi.subnet_timeout = req.subnet_timeout;
    pi.partition_enforcement_inbound = req.partition_enforcement_inbound;
    pi.partition_enforcement_outbound = req.partition_enforcement_outbound;
    pi.filter_raw_inbound = req.filter_raw_inbound;
    pi.filter_raw_outbound = req.filter_raw_outbound;
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

Status Simulator::SetIsSm(PortId port, bool on) {
  if (port >= ports_.size()) return InvalidArgument("no such port");
  uint32_t& mask = ports_[port].info.capability_mask;
  mask = on ? (mask | mad::port_cap::kIsSm) : (mask & ~mad::port_cap::kIsSm);
  return Status();
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

// ---------------------------------------------------------------------------------------
// Traps (14.2.5.1, 13.4.9): a switch whose PortStateChange got set sends trap 128 to its
// master SM LID, LID-routed from port 0, repeating until TrapRepress or the send cap.

void Simulator::SendTrap128(NodeId n) {
  SimNode& sn = nodes_[n];
  SimSwitch& sw = switches_[sn.sw];
  const mad::PortInfo& p0 = ports_[sn.first_port].info;
  if (p0.lid == 0 || p0.master_sm_base_lid == 0) return;  // nobody to tell yet
  for (const auto& t: sw.traps)
    if (t.trap_num == mad::trap::kLinkStateChanged) return;  // still repeating
  sw.traps.push_back(PendingTrap{next_trap_tid_++, mad::trap::kLinkStateChanged, 0});
  SendTrap(n, sw.traps.back());
  ArmTrapTimer();
}

void Simulator::SendTrap(NodeId n, PendingTrap& t) {
  SimNode& sn = nodes_[n];
  PortId p0 = sn.first_port;
  const mad::PortInfo& pi = ports_[p0].info;
  ++t.sends;
  ++counters_.traps_sent;
  mad::Smp smp = mad::MakeLidSmp(mad::method::kTrap, mad::attr::kNotice, 0);
  smp.tid = t.tid;
  mad::Notice notice = mad::MakeTrap128(pi.lid);
  mad::EncodeSmpNotice(notice, smp.data);
  mad::MadMessage msg = mad::ToMessage(smp, Lid{pi.master_sm_base_lid});
  Log(LogName::kSim).trace("trap {} from {} to SM LID {}", t.trap_num, ToString(Guid{sn.guid}),
                           pi.master_sm_base_lid);
  uint32_t hops = 0;
  PortId dest = RouteLid(p0, pi.master_sm_base_lid, true, &hops);
  if (dest == kNoPort) return;
  msg.addr.lid = Lid{pi.lid};
  if (options_.profile == SimProfile::kStrict) {
    // Switches send a trap twice back to back as often as once (a retransmission inside
    // the switch): the SM must take the second as the same trap.
    ++counters_.traps_sent;
    mad::MadMessage copy = msg;
    DeliverTo(dest, copy, hops);
  }
  DeliverTo(dest, msg, hops);
}

Status Simulator::InjectTrap(PortId from, const mad::Notice& notice) {
  if (from >= ports_.size()) return InvalidArgument("no such port");
  const SimNode& sn = nodes_[ports_[from].node];
  // A switch sends from port 0 (the port its LID is on).
  PortId src = sn.sw != kNoSwitch ? sn.first_port: from;
  const mad::PortInfo& pi = ports_[src].info;
  if (pi.lid == 0 || pi.master_sm_base_lid == 0)
    return InvalidArgument("the port has no LID or no SM LID yet");
  mad::Smp smp = mad::MakeLidSmp(mad::method::kTrap, mad::attr::kNotice, 0);
  smp.tid = next_trap_tid_++;
  mad::EncodeSmpNotice(notice, smp.data);
  mad::MadMessage msg = mad::ToMessage(smp, Lid{pi.master_sm_base_lid});
  ++counters_.traps_sent;
  uint32_t hops = 0;
  PortId dest = RouteLid(src, pi.master_sm_base_lid, true, &hops);
  if (dest == kNoPort) return Unavailable("no route to the SM LID");
  msg.addr.lid = Lid{pi.lid};
  DeliverTo(dest, msg, hops);
  return Status::Ok();
}

void Simulator::SmaTrapRepress(PortId arrival, uint64_t tid) {
  const SimNode& sn = nodes_[ports_[arrival].node];
  if (sn.sw == kNoSwitch) return;
  auto& traps = switches_[sn.sw].traps;
  std::erase_if(traps, [tid](const PendingTrap& t) { return t.tid == tid; });
}

size_t Simulator::ResendTraps() {
  size_t sent = 0;
  for (NodeId n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].sw == kNoSwitch || !nodes_[n].present) continue;
    auto& traps = switches_[nodes_[n].sw].traps;
    for (auto& t: traps) {
      if (t.sends < options_.trap_max_sends) {
        SendTrap(n, t);
        ++sent;
      }
    }
    std::erase_if(traps, [this](const PendingTrap& t) { return t.sends >= options_.trap_max_sends; });
  }
  return sent;
}

void Simulator::ArmTrapTimer() {
  if (!trap_timer_ || trap_timer_armed_) return;
  trap_timer_armed_ = true;
  trap_timer_->expires_after(options_.trap_resend_interval);
  trap_timer_->async_wait([this](const boost::system::error_code& ec) {
    trap_timer_armed_ = false;
    if (ec) return;
    ResendTraps();
    if (pending_traps() > 0) ArmTrapTimer();
  });
}

}  // namespace ibsm::sim
