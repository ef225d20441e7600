#include "sm/model/multicast.h"

#include <algorithm>
#include <set>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "base/log.h"
#include "base/log_limit.h"
#include "mad/attr/notice.h"

namespace ibsm::sm {
namespace {

using mad::mcr_comp::kFlowLabel;
using mad::mcr_comp::kHopLimit;
using mad::mcr_comp::kLife;
using mad::mcr_comp::kMgid;
using mad::mcr_comp::kMlid;
using mad::mcr_comp::kMtu;
using mad::mcr_comp::kMtuSelector;
using mad::mcr_comp::kPKey;
using mad::mcr_comp::kPortGid;
using mad::mcr_comp::kProxyJoin;
using mad::mcr_comp::kQKey;
using mad::mcr_comp::kRate;
using mad::mcr_comp::kRateSelector;
using mad::mcr_comp::kScope;
using mad::mcr_comp::kSl;
using mad::mcr_comp::kTClass;

constexpr uint8_t kFullBits = mad::join_state::kFull | mad::join_state::kSendOnlyFull;
constexpr uint64_t kDefaultPrefix = 0xfe80000000000000ull;

std::string GidString(const mad::Gid& g) {
  return fmt::format("{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}", g.prefix >> 48,
                     (g.prefix >> 32) & 0xFFFF, (g.prefix >> 16) & 0xFFFF, g.prefix & 0xFFFF,
                     g.guid >> 48, (g.guid >> 32) & 0xFFFF, (g.guid >> 16) & 0xFFFF,
                     g.guid & 0xFFFF);
}

uint8_t MgidScope(const mad::Gid& g) { return static_cast<uint8_t>((g.prefix >> 48) & 0x0F); }

// Compares `have` with `want` under an IBA selector (table 207) on an ordered scale.
bool SelectorHolds(uint8_t sel, int have, int want) {
  switch (sel) {
    case mad::selector::kGreaterThan: return have > want;
    case mad::selector::kLessThan: return have < want;
    case mad::selector::kExactly: return have == want;
    default: return true;  // "largest available": any
  }
}

// The value a create asks for on a scale where the port offers `port_max` (-1: unknown):
// nullopt when no value satisfies the selector within the port's reach.
std::optional<int> Choose(bool given, uint8_t sel, int want, int port_max, int lowest,
                          int fallback) {
  int top = port_max >= 0 ? port_max : fallback;
  if (!given) return top;
  switch (sel) {
    case mad::selector::kGreaterThan:
      if (top > want) return top;
      return std::nullopt;
    case mad::selector::kLessThan: {
      int v = std::min(top, want - 1);
      if (v >= lowest) return v;
      return std::nullopt;
    }
    case mad::selector::kExactly:
      if (want >= lowest && (port_max < 0 || want <= port_max)) return want;
      return std::nullopt;
    default:
      return top;
  }
}

bool PKeyFull(uint16_t p) { return (p & 0x8000) != 0; }

}  // namespace

mad::Gid IpoibBroadcastMgid(uint16_t p_key, uint8_t scope) {
  mad::Gid g;
  g.prefix = 0xff10401b00000000ull | (static_cast<uint64_t>(scope & 0x0F) << 48) | (uint64_t{p_key} << 16);
  g.guid = 0x00000000ffffffffull;
  return g;
}

bool McGroup::HasFullMember() const {
  return std::any_of(members.begin(), members.end(),
                     [](const auto& m) { return (m.second.join_state & kFullBits) != 0; });
}

uint8_t McGroup::JoinStates() const {
  uint8_t s = 0;
  for (const auto& [guid, m] : members) s |= m.join_state;
  return s;
}

mad::McMemberRecord McGroup::Record(const McMember* member) const {
  mad::McMemberRecord r;
  r.set_mgid(mgid);
  r.q_key = q_key;
  r.mlid = mlid;
  r.mtu_selector = mad::selector::kExactly;
  r.mtu = mtu;
  r.tclass = tclass;
  r.p_key = p_key;
  r.rate_selector = mad::selector::kExactly;
  r.rate = rate;
  r.packet_life_time_selector = mad::selector::kExactly;
  r.packet_life_time = packet_life_time;
  r.sl = sl;
  r.flow_label = flow_label;
  r.hop_limit = hop_limit;
  r.scope = scope;
  if (member) {
    r.set_port_gid(member->port_gid);
    r.join_state = member->join_state;
    r.proxy_join = member->proxy_join ? 1 : 0;
  } else {
    // The group's own JoinState: what its members hold; full for a permanent group that
    // has none yet (OpenSM creates it with the full-member state).
    r.join_state = members.empty() ? mad::join_state::kFull : JoinStates();
  }
  return r;
}

MulticastManager::MulticastManager(MulticastOptions options) : options_(options) {}

void MulticastManager::Changed() {
  ++generation_;
  if (on_change_) on_change_();
}

McAnswer MulticastManager::Refuse(bool join, uint16_t status, std::string id, std::string why) {
  ++(join ? counters_.joins_rejected : counters_.leaves_rejected);
  // Any host can send the same bad request in a loop: each ID gets the first lines and then
  // every thousandth (base/log_limit.h); the counters hold the full count.
  const uint64_t n = ++counters_.rejected_by_id[id];
  if (ShouldLogOccurrence(n)) {
    Log(LogName::kSa).info("{} MCMemberRecord {} refused: {} ({} so far)", id,
                           join ? "join" : "leave", why, n);
  }
  McAnswer a;
  a.status = status;
  a.id = std::move(id);
  a.why = std::move(why);
  return a;
}

const McGroup* MulticastManager::Find(const mad::Gid& mgid) const {
  auto it = groups_.find(mgid);
  return it == groups_.end() ? nullptr : &it->second;
}

const McGroup* MulticastManager::FindByMlid(uint16_t mlid) const {
  for (const auto& [mgid, g] : groups_)
    if (g.mlid == mlid) return &g;
  return nullptr;
}

std::optional<uint16_t> MulticastManager::FreeMlid() const {
  std::vector<bool> used(size_t{options_.max_mlid} + 1 - mad::kMulticastLidBase, false);
  for (const auto& [mgid, g] : groups_)
    if (g.mlid >= mad::kMulticastLidBase && g.mlid <= options_.max_mlid)
      used[g.mlid - mad::kMulticastLidBase] = true;
  for (size_t i = 0; i < used.size(); ++i)
    if (!used[i]) return static_cast<uint16_t>(mad::kMulticastLidBase + i);
  return std::nullopt;
}

// OpenSM's build_new_mgid: ff1S:a01b, the subnet prefix, a 32-bit counter; the first
// counter value no group holds.
std::optional<mad::Gid> MulticastManager::AssignMgid(uint8_t scope) {
  for (int i = 0; i < 1000; ++i) {
    // Bytes 4..9: the first six bytes of the subnet prefix; 10..13: the counter (OpenSM
    // writes it in host order; big-endian here); 14..15: zero.
    uint32_t c = mgid_counter_++;
    mad::Gid g;
    g.prefix = 0xff10a01b00000000ull | (static_cast<uint64_t>(scope & 0x0F) << 48) |
               (options_.subnet_prefix >> 32);
    g.guid = (((options_.subnet_prefix >> 16) & 0xFFFF) << 48) | (uint64_t{c} << 16);
    if (!groups_.count(g)) return g;
  }
  return std::nullopt;
}

void MulticastManager::CreateDefaultGroups() { SetPartitionGroups(nullptr); }

void MulticastManager::SetPartitionGroups(const conf::PartitionConfig* config) {
  struct Want {
    McGroup group;
    std::string what;
  };
  std::vector<Want> wants;
  // A partition's flags over the options' defaults (zero = not given).
  auto group_for = [&](const mad::Gid& mgid, uint16_t p_key, const conf::GroupFlags& f,
                       uint8_t scope, std::string what) {
    Want w;
    McGroup& g = w.group;
    g.mgid = mgid;
    g.p_key = p_key;
    g.q_key = f.q_key ? f.q_key : options_.broadcast_q_key;
    g.mtu = f.mtu ? f.mtu : options_.broadcast_mtu;
    g.rate = f.rate ? f.rate : options_.broadcast_rate;
    g.sl = f.sl ? f.sl : options_.broadcast_sl;
    g.tclass = f.tclass;
    g.flow_label = f.flow_label;
    g.packet_life_time = options_.packet_life_time;
    g.scope = scope;
    g.hop_limit = 0;  // link-local scope (osm_prtn_add_mcgroup)
    g.permanent = true;
    w.what = std::move(what);
    wants.push_back(std::move(w));
  };
  auto scopes = [](const conf::GroupFlags& f) {
    std::vector<uint8_t> out;
    for (uint8_t sc = 0; sc < 16; ++sc)
      if (f.scope_mask >> sc & 1u) out.push_back(sc);
    if (out.empty()) out.push_back(mad::mc_scope::kLinkLocal);
    return out;
  };
  if (config == nullptr) {
    if (options_.ipoib_broadcast)
      group_for(IpoibBroadcastMgid(0xFFFF), 0xFFFF, {}, mad::mc_scope::kLinkLocal,
                "IPoIB broadcast, default partition");
  } else {
    for (const conf::Partition& part : config->partitions) {
      const uint16_t p_key = static_cast<uint16_t>(part.pkey | 0x8000);
      if (part.ipoib && options_.ipoib_broadcast) {
        for (uint8_t sc : scopes(part.flags))
          group_for(IpoibBroadcastMgid(p_key, sc), p_key, part.flags, sc,
                    fmt::format("IPoIB broadcast, partition {} {:#06x}", part.name, part.pkey));
      }
      for (const conf::MulticastGroupSpec& spec : part.groups) {
        mad::Gid mgid;
        for (int i = 0; i < 8; ++i) {
          mgid.prefix = mgid.prefix << 8 | spec.mgid[static_cast<size_t>(i)];
          mgid.guid = mgid.guid << 8 | spec.mgid[static_cast<size_t>(i + 8)];
        }
        group_for(mgid, p_key, spec.flags, MgidScope(mgid),
                  fmt::format("partitions.conf line {}, partition {} {:#06x}", spec.line,
                              part.name, part.pkey));
      }
    }
  }
  std::set<mad::Gid> wanted;
  bool changed = false;
  for (Want& w : wants) {
    wanted.insert(w.group.mgid);
    auto it = groups_.find(w.group.mgid);
    if (it != groups_.end()) {
      // Kept as it is (its members joined with these parameters); only pinned.
      it->second.permanent = true;
      continue;
    }
    auto mlid = FreeMlid();
    if (!mlid) {
      ++counters_.mlids_exhausted;
      Log(LogName::kSm).warn("SA-MC-020 no free MLID for multicast group {} ({})",
                             GidString(w.group.mgid), w.what);
      continue;
    }
    w.group.mlid = *mlid;
    const mad::Gid mgid = w.group.mgid;
    groups_.emplace(mgid, std::move(w.group));
    ++counters_.groups_created;
    Log(LogName::kSa).info("multicast group {} created with MLID {:#06x} ({})", GidString(mgid),
                           *mlid, w.what);
    if (on_event_) on_event_(mad::trap::kMcastGroupCreated, mgid);
    changed = true;
  }
  // Permanent groups no longer asked for: ordinary groups from now on.
  for (auto it = groups_.begin(); it != groups_.end();) {
    auto next = std::next(it);
    if (it->second.permanent && !wanted.count(it->first)) {
      it->second.permanent = false;
      Log(LogName::kSa).info("multicast group {} is no longer in partitions.conf",
                             GidString(it->first));
      if (!it->second.HasFullMember()) {
        Delete(it);
      }
      changed = true;
    }
    it = next;
  }
  if (changed) Changed();
}

McAnswer MulticastManager::Join(const mad::McMemberRecord& req_in, uint64_t mask,
                                const McPortCaps& port, Guid requester) {
  // o15-0.2.1 lets only the port itself, or a proxy for a ProxyJoin membership, change a
  // membership. A requester the SA cannot name is neither: taking it for the port would let
  // any host that sets an unused LID end or rewrite anyone's membership.
  if (requester.value() == 0) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-021",
                  "the requester's LID names no port of the fabric");
  }
  if ((mask & mad::mcr_comp::kJoin) != mad::mcr_comp::kJoin) {
    return Refuse(true, mad::sa_status::kReqInsufficientComponents, "SA-MC-001",
                  fmt::format("component mask {:#x} lacks MGID, PortGID or JoinState", mask));
  }
  mad::McMemberRecord req = req_in;
  if (req.port_gid_prefix == kDefaultPrefix) req.port_gid_prefix = options_.subnet_prefix;
  if (req.port_gid_prefix != options_.subnet_prefix) {
    return Refuse(true, mad::sa_status::kReqInvalidGid, "SA-MC-002",
                  fmt::format("PortGID {} is not on subnet prefix {:#018x}",
                              GidString(req.port_gid()), options_.subnet_prefix));
  }
  if (port.port_guid.value() == 0 || port.port_guid.value() != req.port_gid_guid) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-003",
                  fmt::format("PortGID {} names no port of the fabric",
                              GidString(req.port_gid())));
  }
  if ((req.join_state & mad::join_state::kAll) == 0) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-004", "JoinState is 0");
  }
  const bool zero_mgid = req.mgid_prefix == 0 && req.mgid_guid == 0;
  auto it = zero_mgid ? groups_.end() : groups_.find(req.mgid());
  if (it == groups_.end()) return Create(req, mask, port, requester);

  McGroup& g = it->second;
  const std::string name = GidString(g.mgid);
  // Every component the join names must agree with the group (validate_other_comp_fields).
  auto differs = [&](uint64_t bit, uint64_t have, uint64_t want) {
    return (mask & bit) && have != want;
  };
  if (differs(kQKey, g.q_key, req.q_key) || differs(kTClass, g.tclass, req.tclass) ||
      differs(kSl, g.sl, req.sl) || differs(kFlowLabel, g.flow_label, req.flow_label) ||
      differs(kHopLimit, g.hop_limit, req.hop_limit) || differs(kMlid, g.mlid, req.mlid)) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-005",
                  fmt::format("join of {} names a Q_Key, TClass, SL, FlowLabel, HopLimit or "
                              "MLID the group does not have",
                              name));
  }
  if ((mask & kPKey) && ((req.p_key & 0x7FFF) != (g.p_key & 0x7FFF) ||
                         (!PKeyFull(req.p_key) && !PKeyFull(g.p_key)))) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-006",
                  fmt::format("join of {} with P_Key {:#06x}; the group has {:#06x}", name,
                              req.p_key, g.p_key));
  }
  if (port.holds_pkey && !port.holds_pkey(g.p_key)) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-018",
                  fmt::format("port {} is not in the partition of {} (P_Key {:#06x})",
                              ToString(port.port_guid), name, g.p_key));
  }
  if (((mask & kMtuSelector) && (mask & kMtu) &&
       !SelectorHolds(req.mtu_selector, g.mtu, req.mtu)) ||
      ((mask & kRateSelector) && (mask & kRate) &&
       !SelectorHolds(req.rate_selector, mad::rate::Rank(g.rate), mad::rate::Rank(req.rate)))) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-007",
                  fmt::format("join of {} asks an MTU/rate the group (MTU {}, rate {}) does "
                              "not have",
                              name, g.mtu, g.rate));
  }
  // The joining port's link must carry the group's traffic (validate_port_caps).
  if ((port.mtu != 0 && port.mtu < g.mtu) ||
      (port.rate != 0 && mad::rate::Rank(port.rate) < mad::rate::Rank(g.rate))) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-008",
                  fmt::format("port {} (link MTU {}, rate {}) cannot carry group {} (MTU {}, "
                              "rate {})",
                              ToString(port.port_guid), port.mtu, port.rate, name, g.mtu,
                              g.rate));
  }
  const uint8_t bits = req.join_state & mad::join_state::kAll;
  auto m = g.members.find(port.port_guid);
  if (m != g.members.end()) {
    // o15-0.2.1: only the port itself, or anyone in its partition for a proxy join.
    if (!m->second.proxy_join && requester != port.port_guid) {
      return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-009",
                    fmt::format("port {} may not change {}'s membership of {} (no ProxyJoin)",
                                ToString(requester), ToString(port.port_guid), name));
    }
    uint8_t before = m->second.join_state;
    m->second.join_state |= bits;
    ++counters_.joins;
    McAnswer a;
    a.record = g.Record(&m->second);
    if (m->second.join_state != before) Changed();
    return a;
  }
  McMember mem;
  mem.port_gid = req.port_gid();
  mem.join_state = bits;
  mem.proxy_join = requester != port.port_guid;
  auto [ins, added] = g.members.emplace(port.port_guid, mem);
  ++counters_.joins;
  Log(LogName::kSa).debug("port {} joined {} (JoinState {:#x})", ToString(port.port_guid), name,
                          bits);
  McAnswer a;
  a.record = g.Record(&ins->second);
  Changed();
  return a;
}

McAnswer MulticastManager::Create(const mad::McMemberRecord& req, uint64_t mask,
                                  const McPortCaps& port, Guid requester) {
  if ((mask & mad::mcr_comp::kCreate) != mad::mcr_comp::kCreate) {
    return Refuse(true, mad::sa_status::kReqInsufficientComponents, "SA-MC-010",
                  fmt::format("no group {} and component mask {:#x} lacks what a create needs "
                              "(Q_Key, TClass, P_Key, FlowLabel, SL)",
                              GidString(req.mgid()), mask));
  }
  if ((req.join_state & kFullBits) == 0) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-011",
                  fmt::format("no group {}, and only a full member may create one",
                              GidString(req.mgid())));
  }
  const bool zero_mgid = req.mgid_prefix == 0 && req.mgid_guid == 0;
  mad::Gid mgid = req.mgid();
  if (zero_mgid) {
    uint8_t scope = (mask & kScope) ? req.scope : mad::mc_scope::kLinkLocal;
    auto assigned = AssignMgid(scope);
    if (!assigned) {
      return Refuse(true, mad::sa_status::kNoResources, "SA-MC-012", "no free MGID");
    }
    mgid = *assigned;
  } else {
    const uint8_t flags = static_cast<uint8_t>((mgid.prefix >> 52) & 0x0F);
    const uint16_t signature = static_cast<uint16_t>((mgid.prefix >> 32) & 0xFFFF);
    if ((mgid.prefix >> 56) != 0xFF || (flags & 0xE) != 0 ||
        (signature == 0xA01B && MgidScope(mgid) == mad::mc_scope::kLinkLocal)) {
      return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-013",
                    fmt::format("MGID {} is not a valid multicast GID to create",
                                GidString(mgid)));
    }
  }
  if ((mask & kPKey) && (req.p_key & 0x7FFF) == 0) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-014", "P_Key 0 is invalid");
  }
  if (port.holds_pkey && !port.holds_pkey(req.p_key)) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-018",
                  fmt::format("port {} cannot create {} in partition {:#06x}: not a member",
                              ToString(port.port_guid), GidString(mgid), req.p_key));
  }
  const bool mtu_given = (mask & kMtu) != 0;
  const uint8_t mtu_sel = (mask & kMtuSelector) ? req.mtu_selector : mad::selector::kExactly;
  auto mtu = Choose(mtu_given, mtu_sel, req.mtu, port.mtu ? port.mtu : -1, mad::mtu::k256,
                    mad::mtu::k2048);
  const bool rate_given = (mask & kRate) != 0;
  const uint8_t rate_sel = (mask & kRateSelector) ? req.rate_selector : mad::selector::kExactly;
  int port_rank = port.rate ? mad::rate::Rank(port.rate) : -1;
  auto rate_rank = Choose(rate_given, rate_sel, mad::rate::Rank(req.rate), port_rank, 0,
                          mad::rate::Rank(mad::rate::k10));
  if (!mtu || !mad::IsValidMtu(static_cast<uint8_t>(*mtu))) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-015",
                  fmt::format("MTU {} (selector {}) cannot be met by port {} (link MTU {})",
                              req.mtu, mtu_sel, ToString(port.port_guid), port.mtu));
  }
  if (!rate_rank || *rate_rank < 0 ||
      static_cast<size_t>(*rate_rank) >= mad::rate::kByBandwidth.size()) {
    return Refuse(true, mad::sa_status::kReqInvalid, "SA-MC-016",
                  fmt::format("rate {} (selector {}) cannot be met by port {} (link rate {})",
                              req.rate, rate_sel, ToString(port.port_guid), port.rate));
  }
  if (options_.max_groups_per_requester != 0) {
    const size_t held = static_cast<size_t>(
        std::count_if(groups_.begin(), groups_.end(), [&](const auto& g) {
          return g.second.creator == requester && !g.second.permanent;
        }));
    if (held >= options_.max_groups_per_requester) {
      ++counters_.creates_over_requester_cap;
      return Refuse(true, mad::sa_status::kNoResources, "SA-MC-022",
                    fmt::format("port {} holds {} groups it created, its limit; {} not created",
                                ToString(requester), held, GidString(mgid)));
    }
  }
  auto mlid = FreeMlid();
  if (!mlid) {
    ++counters_.mlids_exhausted;
    return Refuse(true, mad::sa_status::kNoResources, "SA-MC-017",
                  fmt::format("no free MLID up to {:#06x} for {}", options_.max_mlid,
                              GidString(mgid)));
  }
  McGroup g;
  g.mgid = mgid;
  g.mlid = *mlid;
  g.q_key = req.q_key;
  g.p_key = req.p_key;
  g.mtu = static_cast<uint8_t>(*mtu);
  g.rate = mad::rate::kByBandwidth[static_cast<size_t>(*rate_rank)].code;
  g.packet_life_time = (mask & kLife) ? req.packet_life_time : options_.packet_life_time;
  g.sl = req.sl;
  g.flow_label = req.flow_label;
  g.tclass = req.tclass;
  g.hop_limit = (mask & kHopLimit) ? req.hop_limit : 0;
  g.scope = MgidScope(mgid);
  g.creator = requester;
  McMember mem;
  mem.port_gid = req.port_gid();
  mem.join_state = req.join_state & mad::join_state::kAll;
  mem.proxy_join = requester != port.port_guid;
  if ((mask & kProxyJoin) && req.proxy_join) mem.proxy_join = true;
  g.members.emplace(port.port_guid, mem);
  auto [it, added] = groups_.emplace(mgid, std::move(g));
  ++counters_.groups_created;
  ++counters_.joins;
  Log(LogName::kSa).info("multicast group {} created with MLID {:#06x} by port {}",
                         GidString(mgid), *mlid, ToString(port.port_guid));
  if (on_event_) on_event_(mad::trap::kMcastGroupCreated, mgid);
  McAnswer a;
  a.record = it->second.Record(&it->second.members.begin()->second);
  Changed();
  return a;
}

void MulticastManager::Delete(std::map<mad::Gid, McGroup>::iterator it) {
  mad::Gid mgid = it->first;
  Log(LogName::kSa).info("multicast group {} (MLID {:#06x}) deleted: no full member left",
                         GidString(mgid), it->second.mlid);
  groups_.erase(it);
  ++counters_.groups_deleted;
  if (on_event_) on_event_(mad::trap::kMcastGroupDeleted, mgid);
}

McAnswer MulticastManager::Leave(const mad::McMemberRecord& req_in, uint64_t mask,
                                 Guid requester, const PKeyFilter& requester_holds) {
  if (requester.value() == 0) {  // as in Join
    return Refuse(false, mad::sa_status::kReqInvalid, "SA-MC-021",
                  "the requester's LID names no port of the fabric");
  }
  if ((mask & (kMgid | kPortGid)) != (kMgid | kPortGid)) {
    return Refuse(false, mad::sa_status::kReqInsufficientComponents, "SA-MC-030",
                  fmt::format("component mask {:#x} lacks MGID or PortGID", mask));
  }
  mad::McMemberRecord req = req_in;
  if (req.port_gid_prefix == kDefaultPrefix) req.port_gid_prefix = options_.subnet_prefix;
  auto it = groups_.find(req.mgid());
  if (it == groups_.end()) {
    return Refuse(false, mad::sa_status::kReqInvalid, "SA-MC-031",
                  fmt::format("no group {}", GidString(req.mgid())));
  }
  McGroup& g = it->second;
  auto m = g.members.find(Guid{req.port_gid_guid});
  if (m == g.members.end() || m->second.port_gid.prefix != req.port_gid_prefix) {
    return Refuse(false, mad::sa_status::kReqInvalid, "SA-MC-032",
                  fmt::format("port {} is no member of {}", GidString(req.port_gid()),
                              GidString(g.mgid)));
  }
  const uint8_t bits =
      (mask & mad::mcr_comp::kJoinState) ? (req.join_state & mad::join_state::kAll)
                                         : mad::join_state::kAll;
  // o15-0.1.14: the bits to clear must be ones the member holds.
  if ((mask & mad::mcr_comp::kJoinState) &&
      (bits == 0 || (bits & m->second.join_state) != bits)) {
    return Refuse(false, mad::sa_status::kReqInvalid, "SA-MC-033",
                  fmt::format("leave of {} clears JoinState {:#x}; the member holds {:#x}",
                              GidString(g.mgid), bits, m->second.join_state));
  }
  if (!m->second.proxy_join && requester != m->first) {
    return Refuse(false, mad::sa_status::kReqInvalid, "SA-MC-034",
                  fmt::format("port {} may not end {}'s membership of {} (no ProxyJoin)",
                              ToString(requester), ToString(m->first), GidString(g.mgid)));
  }
  if (requester_holds && !requester_holds(g.p_key)) {
    return Refuse(false, mad::sa_status::kReqInvalid, "SA-MC-035",
                  fmt::format("port {} is not in the partition of {} (P_Key {:#06x})",
                              ToString(requester), GidString(g.mgid), g.p_key));
  }
  m->second.join_state &= static_cast<uint8_t>(~bits);
  McAnswer a;
  a.record = g.Record(&m->second);
  if (m->second.join_state == 0) g.members.erase(m);
  ++counters_.leaves;
  if (!g.permanent && !g.HasFullMember()) Delete(it);
  Changed();
  return a;
}

std::vector<mad::McMemberRecord> MulticastManager::Query(const mad::McMemberRecord& want,
                                                         uint64_t mask, bool trusted,
                                                         const PKeyFilter& requester_holds) const {
  // MTU, rate and lifetime compare through their selectors, not bit for bit.
  const uint64_t plain = mask & ~(kMtuSelector | kMtu | kRateSelector | kRate |
                                  mad::mcr_comp::kLifeSelector | kLife);
  std::array<uint8_t, mad::Layout<mad::McMemberRecord>::kSize> want_wire{};
  mad::EncodeRecord(want, want_wire);
  auto matches = [&](const mad::McMemberRecord& r) {
    std::array<uint8_t, mad::Layout<mad::McMemberRecord>::kSize> wire{};
    mad::EncodeRecord(r, wire);
    if (!mad::Matches<mad::McMemberRecord>(plain, want_wire, wire)) return false;
    if ((mask & kMtu) &&
        !SelectorHolds((mask & kMtuSelector) ? want.mtu_selector : mad::selector::kExactly,
                       r.mtu, want.mtu))
      return false;
    if ((mask & kRate) &&
        !SelectorHolds((mask & kRateSelector) ? want.rate_selector : mad::selector::kExactly,
                       mad::rate::Rank(r.rate), mad::rate::Rank(want.rate)))
      return false;
    if ((mask & kLife) && r.packet_life_time != want.packet_life_time) return false;
    return true;
  };
  std::vector<mad::McMemberRecord> out;
  for (const auto& [mgid, g] : groups_) {
    if (requester_holds && !requester_holds(g.p_key)) continue;
    if ((mask & kPortGid) || trusted) {
      for (const auto& [guid, m] : g.members) {
        mad::McMemberRecord r = g.Record(&m);
        if (matches(r)) out.push_back(r);
      }
    } else {
      mad::McMemberRecord r = g.Record(nullptr);
      if (matches(r)) out.push_back(r);
    }
  }
  return out;
}

size_t MulticastManager::Prune(const std::function<bool(Guid)>& present) {
  size_t removed = 0;
  for (auto it = groups_.begin(); it != groups_.end();) {
    McGroup& g = it->second;
    size_t n = std::erase_if(g.members, [&](const auto& m) { return !present(m.first); });
    removed += n;
    if (n && !g.permanent && !g.HasFullMember()) {
      auto gone = it++;
      Delete(gone);
      continue;
    }
    ++it;
  }
  if (removed) {
    counters_.members_pruned += removed;
    Log(LogName::kSm).info("{} multicast member(s) pruned: their ports left the fabric",
                           removed);
    Changed();
  }
  return removed;
}

size_t MulticastManager::Restore(std::vector<McGroup> groups) {
  groups_.clear();
  size_t skipped = 0;
  for (McGroup& g : groups) {
    if (g.mlid < mad::kMulticastLidBase || g.mlid > options_.max_mlid || FindByMlid(g.mlid) ||
        groups_.count(g.mgid)) {
      ++skipped;
      continue;
    }
    if ((g.mgid.prefix >> 32 & 0xFFFF) == 0xA01B) {
      // Keep assigned MGIDs unique after a restart.
      mgid_counter_ = std::max<uint32_t>(mgid_counter_,
                                         static_cast<uint32_t>(((g.mgid.guid >> 16) & 0xFFFFFFFF) + 1));
    }
    groups_.emplace(g.mgid, std::move(g));
  }
  Changed();
  return skipped;
}

}  // namespace ibsm::sm
