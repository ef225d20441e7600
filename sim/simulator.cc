#include "sim/simulator.h"

#include <algorithm>
#include <string_view>

#include "base/log.h"
#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/node_description.h"
#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"

namespace ibsm::sim {
namespace {

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
      pi->link_speed_ext_supported = 0xF;
      pi->link_speed_ext_enabled = 0xF;
      pi->link_speed_ext_active = s == LinkSpeed::kFdr ? 1 : s == LinkSpeed::kEdr ? 2
                                 : s == LinkSpeed::kHdr ? 4 : 8;
      break;
  }
}

}  // namespace

std::string_view DropReasonName(DropReason r) {
  static constexpr std::string_view kNames[] = {
      "malformed", "bad_source", "bad_path",  "link_down", "not_switch",
      "mixed_dr",  "no_route",   "loop",      "port_state", "wrong_dest",
      "random",    "node_drop",  "m_key",     "no_agent"};
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
    sn.vendor_id = fn.vendor_id ? fn.vendor_id : 0x0002c9;
    sn.device_id = fn.device_id;
    sn.revision = fn.revision;
    sn.first_port = fn.first_port;
    sn.description = fn.description.empty() ? fn.name : fn.description;
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
        sp.guid = fp.guid.value() ? fp.guid.value() : fn.guid.value() + p;
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
  pi.local_port_num = static_cast<uint8_t>(p - n.first_port);
  pi.capability_mask = mad::port_cap::kIsTrapSupported | mad::port_cap::kIsNoticeSupported |
                       mad::port_cap::kIsClientReregistrationSupported |
                       mad::port_cap::kIsSlMappingSupported;
  FillSpeed(speed, &pi);
  pi.link_width_supported = 3;  // 1x, 4x
  pi.link_width_enabled = 3;
  pi.link_width_active = width_active ? width_active : 2;
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
  pi.port_phys_state = up ? kPhysLinkUp : kPhysPolling;
  pi.port_state = up ? kStateInit : kStateDown;
}

void Simulator::ResetNodeState(NodeId n) {
  SimNode& sn = nodes_[n];
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
    sw.info.life_time_value = 18;
    sw.info.lids_per_port = 0;
    sw.info.partition_enforcement_cap = 32;
    sw.info.enhanced_port0 = 0;
    sw.lft.clear();
    sw.lft.shrink_to_fit();
    sw.traps.clear();
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
  for (const auto& sw : switches_) n += sw.traps.size();
  return n;
}

void Simulator::SetMKey(PortId port, uint64_t m_key, uint8_t protect_bits) {
  if (port >= ports_.size()) return;
  ports_[port].info.m_key = m_key;
  ports_[port].info.m_key_protect_bits = protect_bits & 3;
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
    Drop(DropReason::kMixedDr);  // TODO(issue 2): LID-routed legs of a DR SMP
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
    PortId out = nodes_[node].first_port + egress;
    if (ports_[out].info.port_phys_state != kPhysLinkUp || ports_[out].peer == kNoPort) {
      Drop(DropReason::kLinkDown);
      return;
    }
    at = ports_[out].peer;
    node = ports_[at].node;
    if (!RollDrop(node)) return;
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
    PortId out = nodes_[node].first_port + egress;
    if (ports_[out].info.port_phys_state != kPhysLinkUp || ports_[out].peer == kNoPort) {
      Drop(DropReason::kLinkDown);
      return;
    }
    at = ports_[out].peer;
    node = ports_[at].node;
    if (!RollDrop(node)) return;
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
  uint8_t min_state = is_smp ? kStateInit : kStateActive;
  if (dlid == 0 || dlid > kMaxUnicastLid) {
    Drop(DropReason::kNoRoute);  // multicast/permissive LID routing not modelled
    return kNoPort;
  }
  PortId at = from;
  NodeId node = ports_[from].node;
  auto cross = [&](PortId out) -> bool {
    const SimPort& o = ports_[out];
    if (o.info.port_phys_state != kPhysLinkUp || o.peer == kNoPort) {
      return Drop(DropReason::kLinkDown);
    }
    if (o.info.port_state < min_state || ports_[o.peer].info.port_state < min_state) {
      return Drop(DropReason::kPortState);
    }
    at = o.peer;
    node = ports_[at].node;
    ++*hops;
    return RollDrop(node);
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
  bool to_endpoint = (method & mad::method::kResponseBit) != 0 || !is_smp ||
                     method == mad::method::kTrap || attr_id == mad::attr::kSmInfo;
  if (to_endpoint) {
    // A switch's SM (enhanced port 0) is bound at port 0 whatever port the MAD entered.
    NodeId dn = ports_[dest].node;
    PortId ep_port = nodes_[dn].sw != kNoSwitch ? nodes_[dn].first_port : dest;
    if (endpoints_[ep_port] != nullptr) {
      DeliverTo(ep_port, msg, hops);
      return;
    }
    if (!is_smp || method == mad::method::kTrap || (method & mad::method::kResponseBit)) {
      Drop(DropReason::kNoAgent);  // TODO(issue 2): PMA for PerfMgt PortCounters
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

void Simulator::DeliverTo(PortId p, mad::MadMessage& msg, uint32_t hops) {
  Endpoint* ep = endpoints_[p];
  if (ep == nullptr) {
    Drop(DropReason::kNoAgent);
    return;
  }
  ++counters_.delivered;
  ep->Deliver(std::move(msg), Latency(hops));
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
  // M_Key check (14.2.4.1, basic model without lease): the key of the port the SMP
  // entered, or a switch's port 0. Set with a wrong key fails at any protect level; Get
  // fails at protect level 2 and up. Failure = no response.
  PortId key_port = sn.sw != kNoSwitch ? sn.first_port : arrival;
  mad::PortInfo& kpi = ports_[key_port].info;
  bool key_ok = kpi.m_key == 0 || Get(b, kMKey) == kpi.m_key;
  if (!key_ok && (method == mad::method::kSet || kpi.m_key_protect_bits >= 2)) {
    ++kpi.m_key_violations;
    Drop(DropReason::kMKey);
    return false;
  }

  uint16_t status = mad::mad_status::kOk;
  std::span<uint8_t> data = SmpData(b);
  if (Get(b, kClassVersion) != 1) {
    status = mad::mad_status::kBadVersion;
  } else if (method != mad::method::kGet && method != mad::method::kSet) {
    status = mad::mad_status::kMethodUnsupported;
  } else {
    switch (attr_id) {
      case mad::attr::kNodeInfo: status = SmaNodeInfo(arrival, method, data); break;
      case mad::attr::kNodeDescription: status = SmaNodeDescription(arrival, method, data); break;
      case mad::attr::kPortInfo: status = SmaPortInfo(arrival, method, mod, data, key_ok); break;
      case mad::attr::kSwitchInfo: status = SmaSwitchInfo(arrival, method, data); break;
      case mad::attr::kLinearForwardingTable: status = SmaLft(arrival, method, mod, data); break;
      default: status = mad::mad_status::kMethodAttrUnsupported; break;
    }
  }
  Put(b, kMethod, mad::method::kGetResp);
  if (Get(b, kMgmtClass) == static_cast<uint8_t>(mad::MgmtClass::kSubnDirected)) {
    Put(b, kStatus, status);
  } else {
    mad::SetBits(b, kHdrStatus.bit_offset, kHdrStatus.bit_width, status);
  }
  Log(LogName::kSim).trace("SMA {} attr {:#x} mod {} method {:#x} status {:#x}",
                           ToString(Guid{sn.guid}), attr_id, mod, method, status);
  return true;
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
  ni.partition_cap = sn.sw != kNoSwitch ? 8 : 32;
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
      case kStateArmed:  // only from INIT, and only if the neighbour is at least INIT
        if (!(cur == kStateArmed || (cur == kStateInit && peer_state >= kStateInit))) {
          return mad::mad_status::kInvalidField;
        }
        break;
      case kStateActive:  // only from ARMED
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
    if (req.link_width_enabled) pi.link_width_enabled = req.link_width_enabled;
    if (req.link_speed_enabled) pi.link_speed_enabled = req.link_speed_enabled;
    if (req.link_speed_ext_enabled) pi.link_speed_ext_enabled = req.link_speed_ext_enabled;
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
  } else {
    for (size_t i = 0; i < mad::kLftBlockSize; ++i) {
      blk.port[i] = first + i < sw.lft.size() ? sw.lft[first + i] : mad::kLftDropPort;
    }
  }
  mad::EncodeTo(blk, data);
  return mad::mad_status::kOk;
}

// ---------------------------------------------------------------------------------------
// Traps (14.2.5.1, 13.4.9): a switch whose PortStateChange got set sends trap 128 to its
// master SM LID, LID-routed from port 0, repeating until TrapRepress or the send cap.

void Simulator::SendTrap128(NodeId n) {
  SimNode& sn = nodes_[n];
  SimSwitch& sw = switches_[sn.sw];
  const mad::PortInfo& p0 = ports_[sn.first_port].info;
  if (p0.lid == 0 || p0.master_sm_base_lid == 0) return;  // nobody to tell yet
  for (const auto& t : sw.traps)
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
  DeliverTo(dest, msg, hops);
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
    for (auto& t : traps) {
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
