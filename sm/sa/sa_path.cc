#include "sm/sa/sa_path.h"

#include <bit>

#include <algorithm>
#include <climits>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace ibsm::sm {
namespace {

using mad::Gid;
using mad::PathRecord;
namespace pc = mad::path_comp;
namespace mc = mad::multipath_comp;

constexpr int kMaxSwitchesOnRoute = 64;         // OpenSM's MAX_HOPS
constexpr size_t kMultiPathDefaultLimit = 127;  // OpenSM's OSM_SA_MPR_MAX_NUM_PATH
// Greedy picks before the rest of a large candidate set (LMC 7 on both sides: 16,384 LID
// pairs) is appended in the order of its sharing with the picks so far.
constexpr size_t kGreedySteps = 128;

int Lanes(LinkWidth w) {
  switch (w) {
    case LinkWidth::k1x:
      return 1;
    case LinkWidth::k2x:
      return 2;
    case LinkWidth::k4x:
      return 4;
    case LinkWidth::k8x:
      return 8;
    case LinkWidth::k12x:
      return 12;
  }
  return 1;
}

// Nominal lane rate as the rate codes count it, in 0.5 Gb/s (FDR10 counts as QDR: 4x = 40).
int LaneHalfGbps(LinkSpeed s) {
  switch (s) {
    case LinkSpeed::kSdr:
      return 5;
    case LinkSpeed::kDdr:
      return 10;
    case LinkSpeed::kQdr:
      return 20;
    case LinkSpeed::kFdr10:
      return 20;
    case LinkSpeed::kFdr:
      return 28;
    case LinkSpeed::kEdr:
      return 50;
    case LinkSpeed::kHdr:
      return 100;
    case LinkSpeed::kNdr:
      return 200;
    case LinkSpeed::kXdr:
      return 400;
  }
  return 5;
}

int RateRank(const Port& p) { return mad::rate::Rank(RateCode(p.width, p.speed)); }

uint8_t PortMtu(const PathSnapshot& s, PortId p) {
  const uint8_t m = p < s.port_mtu.size() ? s.port_mtu[p] : 0;
  return mad::IsValidMtu(m) ? m : s.default_mtu;
}

// One direction of a path as the LFTs send it.
struct Route {
  std::vector<PortId> egress;    // every port the packet leaves by: directed links, in order
  std::vector<NodeId> switches;  // switches crossed, in order
  uint8_t mtu = UINT8_MAX;
  int rate_rank = INT_MAX;
  uint16_t valid_sls = 0xFFFF;  // SLs no hop maps to VL 15 (PathSnapshot::sl2vl)
};

// Takes out of r->valid_sls the SLs the table of output port `out` of `node`, for input
// port `in`, maps to VL 15 (a CA port's one table: in 0). A table not known drops none.
void DropVl15(const PathSnapshot& s, NodeId node, uint8_t out, uint8_t in, Route* r) {
  if (s.sl2vl == nullptr) return;
  auto it = s.sl2vl->find(s.fabric->node(node).guid);
  if (it == s.sl2vl->end() || !it->second || out >= it->second->ports.size()) return;
  const auto& by_in = it->second->ports[out].sl2vl;
  if (in >= by_in.size() || !by_in[in]) return;
  for (size_t sl = 0; sl < 16; ++sl)
    if (by_in[in]->vl[sl] == 15) r->valid_sls &= static_cast<uint16_t>(~(1u << sl));
}

void CrossLink(const PathSnapshot& s, PortId out, Route* r) {
  const Port& a = s.fabric->port(out);
  const Port& b = s.fabric->port(a.peer);
  r->mtu = std::min({r->mtu, PortMtu(s, out), PortMtu(s, a.peer)});
  r->rate_rank = std::min({r->rate_rank, RateRank(a), RateRank(b)});
  r->egress.push_back(out);
}

// Follows the LFTs from end port `src` towards `dlid` until the packet reaches `dst`.
// nullopt when it is dropped, reaches the wrong port, or crosses more than 64 switches.
std::optional<Route> Walk(const PathSnapshot& s, PortId src, uint16_t dlid, PortId dst) {
  const Fabric& f = *s.fabric;
  Route r;
  const Port& sp = f.port(src);
  NodeId cur = sp.node;
  if (!f.node(cur).is_switch()) {
    if (src == dst) {  // loopback inside the HCA: the port's own MTU and rate (OpenSM)
      r.mtu = PortMtu(s, src);
      r.rate_rank = RateRank(sp);
      return r;
    }
    if (!sp.connected()) return std::nullopt;
    DropVl15(s, cur, sp.num.value(), 0, &r);
    CrossLink(s, src, &r);
    if (sp.peer == dst) return r;  // back to back
    cur = f.port(sp.peer).node;
    if (!f.node(cur).is_switch()) return std::nullopt;
  }
  // The port the packet enters the current switch by (0: it starts there).
  uint8_t in = f.node(sp.node).is_switch() ? 0 : f.port(sp.peer).num.value();
  for (int n = 0; n < kMaxSwitchesOnRoute; ++n) {
    r.switches.push_back(cur);
    const routing::SwitchTable* t = s.tables->table(cur);
    if (t == nullptr || dlid >= t->lft.size()) return std::nullopt;
    const uint8_t e = t->lft[dlid];
    if (e != routing::kDropPort && e <= f.node(cur).num_ports && !(e == 0 && in == 0))
      DropVl15(s, cur, e, in, &r);
    if (e == 0) {
      if (f.port_id(cur, PortNum(0)) != dst) return std::nullopt;
      if (r.egress.empty()) {  // a switch's port 0 to itself
        r.mtu = PortMtu(s, dst);
        r.rate_rank = RateRank(f.port(dst));
      }
      return r;
    }
    if (e == routing::kDropPort || e > f.node(cur).num_ports) return std::nullopt;
    const PortId out = f.port_id(cur, PortNum(e));
    if (!f.port(out).connected()) return std::nullopt;
    CrossLink(s, out, &r);
    const PortId next = f.port(out).peer;
    if (next == dst) return r;
    in = f.port(next).num.value();
    cur = f.port(next).node;
    if (!f.node(cur).is_switch()) return std::nullopt;
  }
  return std::nullopt;
}

bool IsInterSwitch(const Fabric& f, PortId out) {
  const Port& p = f.port(out);
  return f.node(p.node).is_switch() && p.connected() && f.node(f.port(p.peer).node).is_switch();
}

// The LIDs of end port `p` that the LID map gives it: base .. base + 2^LMC - 1.
std::vector<uint16_t> LidsOf(const PathSnapshot& s, PortId p) {
  std::vector<uint16_t> out;
  const Port& port = s.fabric->port(p);
  if (!IsUnicast(port.lid)) return out;
  const uint32_t count = 1u << (port.lmc & 7);
  for (uint32_t l = port.lid.value(); l < port.lid.value() + count && l <= kMaxUnicastLid; ++l)
    if (s.lids->owner(Lid(static_cast<uint16_t>(l))) == p) out.push_back(static_cast<uint16_t>(l));
  return out;
}

Gid GidOf(const PathSnapshot& s, PortId p) {
  return Gid{s.subnet_prefix, s.fabric->port(p).guid.value()};
}

// The end port a unicast GID names (a switch GUID names its port 0).
Result<PortId> PortOfGid(const PathSnapshot& s, const Gid& g, const char* which) {
  if (g.is_multicast()) return NotFound(std::string(which) + " is a multicast GID");
  if (!g.is_link_local() && g.prefix != s.subnet_prefix) {
    return NotFound(fmt::format("{} prefix {:#018x} is not this subnet's ({:#018x})", which,
                                g.prefix, s.subnet_prefix));
  }
  auto p = s.fabric->FindPort(Guid(g.guid));
  if (!p) return NotFound(fmt::format("{} {:#018x} names no port", which, g.guid));
  const Port& port = s.fabric->port(*p);
  if (s.fabric->node(port.node).is_switch()) return s.fabric->port_id(port.node, PortNum(0));
  return *p;
}

Status CheckSnapshot(const PathSnapshot& s) {
  if (s.fabric == nullptr || s.lids == nullptr || s.tables == nullptr)
    return Unavailable("no routed fabric published yet");
  return Status::Ok();
}

Status ValidateRequest(const PathRecord& req, uint64_t comp) {
  if ((comp & pc::kServiceId) != 0 && (comp & pc::kServiceId) != pc::kServiceId)
    return FailedPrecondition("ServiceID needs both of its component mask bits");
  if ((comp & pc::kMtuSelector) && (comp & pc::kMtu) && !mad::IsValidMtu(req.mtu))
    return InvalidArgument("MTU code " + std::to_string(req.mtu) + " is reserved");
  if ((comp & pc::kRateSelector) && (comp & pc::kRate) && !mad::IsValidRate(req.rate))
    return InvalidArgument("rate code " + std::to_string(req.rate) + " is reserved");
  return Status::Ok();
}

// One LID pair's record with what ordering needs to know about its routes.
struct Candidate {
  PathRecord rec;
  size_t pair = 0;                       // index of its port pair, in query order
  std::vector<PortId> links;             // forward then reverse egress ports
  std::vector<NodeId> switches;          // forward then reverse switches
  std::vector<PortId> fwd_isl, rev_isl;  // inter-switch links of each direction
  size_t hops = 0;
};

// Applies the selectors of IBA 15.2.5.16 table 207 as OpenSM does: "greater than" and
// "exactly" can disqualify; "less than" lowers the value to the highest one below the
// requested; "largest available" (smallest, for the packet lifetime) never disqualifies.
// Each selector counts only when its value's bit is set too (OpenSM ignores a lone one).
bool ApplySelectors(const PathRecord& req, uint64_t comp, uint8_t* mtu, int* rate_rank,
                    uint8_t* plt) {
  if ((comp & pc::kMtuSelector) && (comp & pc::kMtu)) {
    switch (req.mtu_selector) {
      case mad::selector::kGreaterThan:
        if (*mtu <= req.mtu) return false;
        break;
      case mad::selector::kLessThan:
        if (*mtu >= req.mtu) {
          if (req.mtu <= mad::mtu::k256) return false;
          *mtu = req.mtu - 1;
        }
        break;
      case mad::selector::kExactly:
        if (*mtu < req.mtu) return false;
        *mtu = req.mtu;
        break;
      default:
        break;
    }
  }
  if ((comp & pc::kRateSelector) && (comp & pc::kRate)) {
    const int want = mad::rate::Rank(req.rate);
    switch (req.rate_selector) {
      case mad::selector::kGreaterThan:
        if (*rate_rank <= want) return false;
        break;
      case mad::selector::kLessThan:
        if (*rate_rank >= want) {
          if (want == 0) return false;
          *rate_rank = want - 1;
        }
        break;
      case mad::selector::kExactly:
        if (*rate_rank != want) return false;
        break;
      default:
        break;
    }
  }
  if ((comp & pc::kPacketLifeTimeSelector) && (comp & pc::kPacketLifeTime)) {
    switch (req.packet_life_time_selector) {
      case mad::selector::kGreaterThan:
        if (*plt <= req.packet_life_time) return false;
        break;
      case mad::selector::kLessThan:
        if (*plt >= req.packet_life_time) {
          if (req.packet_life_time == 0) return false;
          *plt = req.packet_life_time - 1;
        }
        break;
      case mad::selector::kExactly:
        if (*plt < req.packet_life_time) return false;
        *plt = req.packet_life_time;
        break;
      default:
        break;
    }
  }
  return true;
}

struct EndPoint {
  PortId port = kNoPort;
  std::vector<uint16_t> lids;  // the LIDs to use (the one the query names, or all)
  Gid gid;                     // as the query gave it, or the port's
};

std::optional<Candidate> MakeCandidate(const PathSnapshot& s, const PathRecord& req, uint64_t comp,
                                       PortId requester, const EndPoint& src, uint16_t slid,
                                       const EndPoint& dst, uint16_t dlid) {
  auto fwd = Walk(s, src.port, dlid, dst.port);
  if (!fwd) return std::nullopt;
  uint8_t mtu = fwd->mtu;
  int rate_rank = fwd->rate_rank;
  uint8_t plt = src.port == dst.port ? 0 : s.packet_life_time;
  if (!ApplySelectors(req, comp, &mtu, &rate_rank, &plt)) return std::nullopt;
  auto rev = Walk(s, dst.port, slid, src.port);
  // Reversible 0 in a query is "don't care" (IBA 1.2 p900), not "irreversible only".
  if ((comp & pc::kReversible) && req.reversible && !rev) return std::nullopt;

  const bool raw = (comp & pc::kRawTraffic) && req.raw_traffic;
  std::optional<uint16_t> requested;
  if ((comp & pc::kPKey) && !raw) requested = req.pkey;
  uint16_t pkey = 0xFFFF;
  if (s.partitions) {
    auto k = s.partitions(requester, src.port, dst.port, requested);
    if (!k) return std::nullopt;
    pkey = *k;
  } else if (requested) {
    if ((*requested & 0x7FFF) != 0x7FFF) return std::nullopt;  // only the default partition
    pkey = *requested;
  }
  if (raw) pkey = 0;  // raw packets carry no P_Key (OpenSM)

  Candidate c;
  PathRecord& r = c.rec;
  r.service_id = (comp & pc::kServiceId) ? req.service_id : 0;
  r.sgid = mad::ToGidBytes(src.gid);
  r.dgid = mad::ToGidBytes(dst.gid);
  r.slid = slid;
  r.dlid = dlid;
  r.raw_traffic = raw ? 1 : 0;
  r.flow_label = (comp & pc::kFlowLabel) ? req.flow_label : 0;
  r.hop_limit = (comp & pc::kHopLimit) ? req.hop_limit : 0;
  r.tclass = (comp & pc::kTClass) ? req.tclass : 0;
  r.reversible = rev ? 1 : 0;
  r.numb_path = 0;
  r.pkey = pkey;
  r.qos_class = (comp & pc::kQosClass) ? req.qos_class : 0;
  std::optional<uint8_t> policy_sl;
  if (s.qos_policy) {
    conf::QosPathQuery q;
    if ((comp & pc::kServiceId) == pc::kServiceId) q.service_id = req.service_id;
    if (comp & pc::kPKey) q.pkey = req.pkey;
    q.source = s.fabric->port(src.port).guid;
    q.target = s.fabric->port(dst.port).guid;
    policy_sl = s.qos_policy->SlFor(q);
  }
  if ((comp & pc::kSl) && policy_sl && *policy_sl != req.sl) return std::nullopt;
  if (fwd->valid_sls == 0) return std::nullopt;  // every SL leads to VL 15
  if (comp & pc::kSl) {
    r.sl = req.sl;
  } else if (policy_sl) {
    r.sl = *policy_sl;
  } else if (pkey != 0 || s.sl2vl == nullptr) {
    r.sl = s.partition_sl ? s.partition_sl(static_cast<uint16_t>(pkey & 0x7FFF)) : 0;
  } else {  // raw traffic with qos TRUE: SL 0 if valid, else the lowest valid
    r.sl = static_cast<uint8_t>(std::countr_zero(fwd->valid_sls & 1u ? 1u : fwd->valid_sls));
  }
  if (!(fwd->valid_sls & (1u << (r.sl & 15)))) return std::nullopt;  // OpenSM ERR 1F24
  // Reversible only when the chosen SL is valid on the way back as well.
  if (rev && !(rev->valid_sls & (1u << (r.sl & 15)))) {
    if ((comp & pc::kReversible) && req.reversible) return std::nullopt;
    r.reversible = 0;
  }
  r.mtu_selector = mad::selector::kExactly;
  r.mtu = mtu;
  r.rate_selector = mad::selector::kExactly;
  r.rate = mad::rate::kByBandwidth[static_cast<size_t>(rate_rank)].code;
  r.packet_life_time_selector = mad::selector::kExactly;
  r.packet_life_time = plt;

  c.hops = fwd->switches.size();
  c.links = fwd->egress;
  c.switches = fwd->switches;
  for (PortId p : fwd->egress)
    if (IsInterSwitch(*s.fabric, p)) c.fwd_isl.push_back(p);
  if (rev) {
    c.links.insert(c.links.end(), rev->egress.begin(), rev->egress.end());
    c.switches.insert(c.switches.end(), rev->switches.begin(), rev->switches.end());
    for (PortId p : rev->egress)
      if (IsInterSwitch(*s.fabric, p)) c.rev_isl.push_back(p);
  }
  return c;
}

// Appends at most `limit` of `cands` to `out`, most independent first (see sa_path.h),
// and sets their preference.
void AppendMostIndependentFirst(std::vector<Candidate>& cands, size_t limit,
                                std::vector<PathRecord>* out) {
  std::unordered_map<PortId, uint32_t> link_use;
  std::unordered_map<NodeId, uint32_t> switch_use;
  std::unordered_map<uint16_t, uint32_t> slid_use, dlid_use;
  auto cost = [&](const Candidate& c) {
    uint64_t links = 0, switches = 0;
    for (PortId p : c.links) {
      auto it = link_use.find(p);
      if (it != link_use.end()) links += it->second;
    }
    for (NodeId n : c.switches) {
      auto it = switch_use.find(n);
      if (it != switch_use.end()) switches += it->second;
    }
    const uint32_t lids = (slid_use.count(c.rec.slid) ? slid_use[c.rec.slid] : 0) +
                          (dlid_use.count(c.rec.dlid) ? dlid_use[c.rec.dlid] : 0);
    return std::make_tuple(links, switches, lids, c.hops, c.pair, c.rec.slid, c.rec.dlid);
  };
  auto shares = [&](const std::vector<PortId>& isl) {
    for (PortId p : isl)
      if (link_use.count(p)) return true;
    return false;
  };
  auto take = [&](Candidate& c) {
    c.rec.preference =
        static_cast<uint8_t>((shares(c.fwd_isl) ? 1 : 0) + (shares(c.rev_isl) ? 1 : 0));
    for (PortId p : c.links) ++link_use[p];
    for (NodeId n : c.switches) ++switch_use[n];
    ++slid_use[c.rec.slid];
    ++dlid_use[c.rec.dlid];
    out->push_back(c.rec);
  };

  limit = std::min(limit, cands.size());
  std::vector<bool> taken(cands.size(), false);
  size_t picked = 0;
  for (; picked < limit && picked < kGreedySteps; ++picked) {
    size_t best = SIZE_MAX;
    decltype(cost(cands[0])) best_cost{};
    for (size_t i = 0; i < cands.size(); ++i) {
      if (taken[i]) continue;
      auto ci = cost(cands[i]);
      if (best == SIZE_MAX || ci < best_cost) {
        best = i;
        best_cost = ci;
      }
    }
    taken[best] = true;
    take(cands[best]);
  }
  if (picked == limit) return;
  std::vector<std::pair<decltype(cost(cands[0])), size_t>> rest;
  for (size_t i = 0; i < cands.size(); ++i)
    if (!taken[i]) rest.emplace_back(cost(cands[i]), i);
  std::sort(rest.begin(), rest.end());
  for (size_t k = 0; k < rest.size() && picked < limit; ++k, ++picked) take(cands[rest[k].second]);
}

// Resolves one end of a PathRecord query. `gid_bit`/`lid_bit` are the mask bits; `is_dest`
// selects DGID/DLID. Sets *unknown_lid when the query names a LID nobody owns (no records).
Result<std::optional<EndPoint>> ResolveEnd(const PathSnapshot& s, const PathRecord& req,
                                           uint64_t comp, bool is_dest, bool* unknown_lid) {
  const uint64_t gid_bit = is_dest ? pc::kDgid : pc::kSgid;
  const uint64_t lid_bit = is_dest ? pc::kDlid : pc::kSlid;
  const char* gid_name = is_dest ? "DGID" : "SGID";
  std::optional<EndPoint> e;
  if (comp & gid_bit) {
    const Gid g = mad::ToGid(is_dest ? req.dgid : req.sgid);
    if (is_dest && g.is_multicast())
      return Unsupported("multicast DGID: the SA answers from its multicast groups");
    IBSM_ASSIGN_OR_RETURN(PortId p, PortOfGid(s, g, gid_name));
    e = EndPoint{p, LidsOf(s, p), g};
  }
  if (comp & lid_bit) {
    const uint16_t lid = is_dest ? req.dlid : req.slid;
    const PortId owner = IsUnicast(Lid(lid)) ? s.lids->owner(Lid(lid)) : kNoPort;
    if (owner == kNoPort) {
      *unknown_lid = true;
      return e;
    }
    if (e && e->port != owner) {
      return InvalidArgument(fmt::format("{} and {} {} name different ports", gid_name,
                                         is_dest ? "DLID" : "SLID", lid));
    }
    if (!e) e = EndPoint{owner, {}, GidOf(s, owner)};
    e->lids = {lid};
  }
  return e;
}

}  // namespace

uint8_t RateCode(LinkWidth width, LinkSpeed speed) {
  const int v = Lanes(width) * LaneHalfGbps(speed);
  uint8_t best = mad::rate::k2_5;
  for (const auto& e : mad::rate::kByBandwidth)
    if (e.half_gbps <= v) best = e.code;
  return best;
}

uint16_t SaStatusForPathError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      return 2 << 8;  // ERR_REQ_INVALID
    case StatusCode::kFailedPrecondition:
      return 6 << 8;  // ERR_REQ_INSUFFICIENT_COMPONENTS
    case StatusCode::kNotFound:
      return 5 << 8;  // ERR_REQ_INVALID_GID
    default:
      return 1 << 8;  // ERR_NO_RESOURCES
  }
}

Result<std::vector<PathRecord>> QueryPaths(const PathSnapshot& snapshot, const PathRecord& request,
                                           uint64_t comp_mask, PortId requester,
                                           const PathQueryOptions& options) {
  const PathSnapshot& s = snapshot;
  IBSM_RETURN_IF_ERROR(CheckSnapshot(s));
  IBSM_RETURN_IF_ERROR(ValidateRequest(request, comp_mask));

  std::vector<PathRecord> out;
  bool unknown_lid = false;
  IBSM_ASSIGN_OR_RETURN(std::optional<EndPoint> src,
                        ResolveEnd(s, request, comp_mask, false, &unknown_lid));
  IBSM_ASSIGN_OR_RETURN(std::optional<EndPoint> dst,
                        ResolveEnd(s, request, comp_mask, true, &unknown_lid));
  if (unknown_lid) return out;

  std::vector<EndPoint> sources, dests;
  auto whole_port = [&](PortId p) { return EndPoint{p, LidsOf(s, p), GidOf(s, p)}; };
  if (src) {
    sources.push_back(*src);
  } else if (options.all_sources_when_unspecified) {
    for (PortId p : s.lids->end_ports()) sources.push_back(whole_port(p));
  } else if (requester != kNoPort && requester < s.fabric->port_count()) {
    sources.push_back(whole_port(requester));
  } else {
    return InvalidArgument("no SGID or SLID, and the requester's port is unknown");
  }
  if (dst) {
    dests.push_back(*dst);
  } else {
    for (PortId p : s.lids->end_ports()) dests.push_back(whole_port(p));
  }

  size_t per_pair = SIZE_MAX;
  if (comp_mask & pc::kNumbPath) per_pair = request.numb_path;
  size_t total = options.max_records ? options.max_records : SIZE_MAX;
  if (options.get) total = 1;

  std::vector<Candidate> cands;
  for (const EndPoint& a : sources) {
    for (const EndPoint& b : dests) {
      cands.clear();
      for (uint16_t slid : a.lids) {
        for (uint16_t dlid : b.lids) {
          auto c = MakeCandidate(s, request, comp_mask, requester, a, slid, b, dlid);
          if (c) cands.push_back(std::move(*c));
        }
      }
      AppendMostIndependentFirst(cands, std::min(per_pair, total - out.size()), &out);
      if (out.size() >= total) return out;
    }
  }
  return out;
}

Result<std::vector<PathRecord>> QueryMultiPaths(const PathSnapshot& snapshot,
                                                const mad::MultiPathRequest& request,
                                                uint64_t comp_mask, PortId requester,
                                                MultiPathStats* stats) {
  MultiPathStats unused;
  if (stats == nullptr) stats = &unused;
  *stats = {};
  const PathSnapshot& s = snapshot;
  IBSM_RETURN_IF_ERROR(CheckSnapshot(s));
  if (!(comp_mask & mc::kSgidCount) || !(comp_mask & mc::kDgidCount))
    return FailedPrecondition("MultiPathRecord needs SGIDCount and DGIDCount");

  // The same constraints as a PathRecord query, in PathRecord terms.
  const mad::MultiPathRecord& m = request.record;
  PathRecord req;
  uint64_t comp = 0;
  const std::pair<uint64_t, uint64_t> bits[] = {
      {mc::kRawTraffic, pc::kRawTraffic},
      {mc::kFlowLabel, pc::kFlowLabel},
      {mc::kHopLimit, pc::kHopLimit},
      {mc::kTClass, pc::kTClass},
      {mc::kReversible, pc::kReversible},
      {mc::kNumbPath, pc::kNumbPath},
      {mc::kPKey, pc::kPKey},
      {mc::kQosClass, pc::kQosClass},
      {mc::kSl, pc::kSl},
      {mc::kMtuSelector, pc::kMtuSelector},
      {mc::kMtu, pc::kMtu},
      {mc::kRateSelector, pc::kRateSelector},
      {mc::kRate, pc::kRate},
      {mc::kPacketLifeTimeSelector, pc::kPacketLifeTimeSelector},
      {mc::kPacketLifeTime, pc::kPacketLifeTime},
      {mc::kServiceIdMsb, pc::kServiceIdMsb},
      {mc::kServiceIdLsb, pc::kServiceIdLsb},
  };
  for (auto [from, to] : bits)
    if (comp_mask & from) comp |= to;
  req.service_id = m.service_id();
  req.raw_traffic = m.raw_traffic;
  req.flow_label = m.flow_label;
  req.hop_limit = m.hop_limit;
  req.tclass = m.tclass;
  req.reversible = m.reversible;
  req.numb_path = m.numb_path;
  req.pkey = m.pkey;
  req.qos_class = m.qos_class;
  req.sl = m.sl;
  req.mtu_selector = m.mtu_selector;
  req.mtu = m.mtu;
  req.rate_selector = m.rate_selector;
  req.rate = m.rate;
  req.packet_life_time_selector = m.packet_life_time_selector;
  req.packet_life_time = m.packet_life_time;
  IBSM_RETURN_IF_ERROR(ValidateRequest(req, comp));

  if (request.sgids.empty() || request.dgids.empty())
    return InvalidArgument("MultiPathRecord needs at least one SGID and one DGID");
  std::vector<EndPoint> sources, dests;
  for (const Gid& g : request.sgids) {
    IBSM_ASSIGN_OR_RETURN(PortId p, PortOfGid(s, g, "SGID"));
    sources.push_back(EndPoint{p, LidsOf(s, p), g});
  }
  for (const Gid& g : request.dgids) {
    IBSM_ASSIGN_OR_RETURN(PortId p, PortOfGid(s, g, "DGID"));
    dests.push_back(EndPoint{p, LidsOf(s, p), g});
  }

  // A GID listed twice adds no paths. Keeping each side's first GID of every port gives
  // the pairs a pairwise deduplication would keep, in the same order, in O(S + D) rather
  // than comparing every pair with every other (255 x 255 GIDs: 65,025 pairs).
  auto distinct_ports = [](std::vector<EndPoint>& ends) {
    std::unordered_set<PortId> seen;
    std::erase_if(ends, [&seen](const EndPoint& e) { return !seen.insert(e.port).second; });
  };
  distinct_ports(sources);
  distinct_ports(dests);
  const size_t pairs = sources.size() * dests.size();
  stats->port_pairs = pairs;
  if (pairs > kMultiPathMaxPortPairs) {
    return ResourceExhausted(fmt::format(
        "MultiPathRecord names {} source and {} destination ports: {} pairs, over the {} "
        "one request may ask",
        sources.size(), dests.size(), pairs, kMultiPathMaxPortPairs));
  }

  // Each pair's share of kMultiPathMaxCandidates. Shift t, source LID i: (i, i + t), so
  // the first LID pairs are OpenSM's "fully redundant" (base+i, base+i) and any prefix
  // uses every LID of both ports about equally.
  const size_t share = std::max<size_t>(1, kMultiPathMaxCandidates / pairs);
  std::vector<Candidate> cands;
  size_t pair = 0;
  for (const EndPoint& a : sources) {
    for (const EndPoint& b : dests) {
      const size_t ns = a.lids.size(), nd = b.lids.size();
      const size_t take = std::min(ns * nd, share);
      if (take < ns * nd) stats->trimmed = true;
      for (size_t k = 0; k < take; ++k) {
        const size_t i = k % ns;
        const uint16_t slid = a.lids[i];
        const uint16_t dlid = b.lids[(i + k / ns) % nd];
        ++stats->candidates;
        auto c = MakeCandidate(s, req, comp, requester, a, slid, b, dlid);
        if (!c) continue;
        c->pair = pair;
        cands.push_back(std::move(*c));
      }
      ++pair;
    }
  }
  const size_t limit = (comp & pc::kNumbPath) ? m.numb_path : kMultiPathDefaultLimit;
  std::vector<PathRecord> out;
  AppendMostIndependentFirst(cands, limit, &out);
  return out;
}

}  // namespace ibsm::sm
