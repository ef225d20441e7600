#include "sm/model/pkey_manager.h"

#include <algorithm>

#include <fmt/format.h>

namespace ibsm::sm {
namespace {

constexpr uint16_t kFullMember = 0x8000;

bool Matches(const Fabric& f, PortId p, conf::MemberKind kind) {
  NodeKind k = f.node(f.port(p).node).kind;
  switch (kind) {
    case conf::MemberKind::kAll: return true;
    case conf::MemberKind::kAllCas: return k == NodeKind::kCa;
    case conf::MemberKind::kAllSwitches: return k == NodeKind::kSwitch;
    case conf::MemberKind::kAllRouters: return k == NodeKind::kRouter;
    default: return false;
  }
}

// OpenSM's osm_prtn_add_port after manage_membership_change: the line replaces what the
// port had for this P_Key.
uint8_t Bits(conf::Membership m, bool allow_both) {
  switch (m) {
    case conf::Membership::kFull: return kFullBit;
    case conf::Membership::kLimited: return kLimitedBit;
    case conf::Membership::kBoth: return allow_both ? kFullBit | kLimitedBit : kFullBit;
  }
  return kLimitedBit;
}

// A port's entries in table order of preference: the index-0 key first, then by value.
std::vector<uint16_t> Entries(const Memberships& m, std::optional<uint16_t> indx0) {
  std::vector<uint16_t> out;
  auto add = [&](uint16_t base, uint8_t bits) {
    if (bits & kFullBit) out.push_back(base | kFullMember);
    if (bits & kLimitedBit) out.push_back(base);
  };
  uint16_t first = indx0.value_or(conf::kDefaultPartitionKey);
  if (auto it = m.find(first); it != m.end()) add(first, it->second);
  for (const auto& [base, bits] : m)
    if (base != first) add(base, bits);
  return out;
}

}  // namespace

Result<PartEnforce> ParsePartEnforce(std::string_view s) {
  if (s == "both") return PartEnforce::kBoth;
  if (s == "in") return PartEnforce::kIn;
  if (s == "out") return PartEnforce::kOut;
  if (s == "off") return PartEnforce::kOff;
  return InvalidArgument(fmt::format("part_enforce '{}' is not both, in, out or off", s));
}

std::vector<PortId> PartitionEndPorts(const DiscoveryResult& d) {
  const Fabric& f = d.fabric;
  std::vector<PortId> out;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    if (node.is_switch()) {
      out.push_back(f.port_id(n, PortNum{0}));
      continue;
    }
    const DiscoveredNode& dn = d.nodes[n];
    for (uint8_t p = 1; p <= node.num_ports; ++p)
      if (p < dn.port_info_valid.size() && dn.port_info_valid[p])
        out.push_back(f.port_id(n, PortNum{p}));
  }
  return out;
}

std::optional<std::pair<DrPath, uint8_t>> PKeyTarget(const DiscoveryResult& d, PortId p) {
  const Port& port = d.fabric.port(p);
  auto path = PathToPort(d.fabric, d.nodes, p);
  if (!path) return std::nullopt;
  // A switch's table is named by the modifier; a CA answers for its arrival port (port 0).
  const uint8_t mod_port = d.fabric.node(port.node).is_switch() ? port.num.value() : uint8_t{0};
  return std::make_pair(std::move(*path), mod_port);
}

size_t PKeyCapacity(const DiscoveryResult& d, PortId p) {
  const Fabric& f = d.fabric;
  const Port& port = f.port(p);
  const DiscoveredNode& dn = d.nodes[port.node];
  if (f.node(port.node).is_switch() && port.num.value() != 0)
    return dn.switch_info.partition_enforcement_cap;
  return dn.node_info.partition_cap;
}

std::vector<PortId> EnforcingSwitchPorts(const DiscoveryResult& d) {
  const Fabric& f = d.fabric;
  std::vector<PortId> out;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    if (!node.is_switch() || d.nodes[n].switch_info.partition_enforcement_cap == 0) continue;
    for (uint8_t p = 1; p <= node.num_ports; ++p) {
      PortId id = f.port_id(n, PortNum{p});
      const Port& port = f.port(id);
      if (!port.connected()) continue;
      if (f.node(f.port(port.peer).node).is_switch()) continue;
      if (p >= d.nodes[n].port_info_valid.size() || !d.nodes[n].port_info_valid[p]) continue;
      out.push_back(id);
    }
  }
  return out;
}

std::map<PortId, Memberships> ResolveMemberships(const DiscoveryResult& d, PortId sm_port,
                                                 const PartitionPolicy& policy) {
  const Fabric& f = d.fabric;
  std::vector<PortId> ends = PartitionEndPorts(d);
  std::map<PortId, Memberships> out;
  for (PortId p : ends) out[p][conf::kDefaultPartitionKey] = policy.config ? kLimitedBit : kFullBit;
  if (out.count(sm_port)) out[sm_port][conf::kDefaultPartitionKey] = kFullBit;
  if (!policy.config) return out;
  for (const conf::Partition& part : policy.config->partitions) {
    for (const conf::PartitionMember& m : part.members) {
      uint8_t bits = Bits(m.membership, policy.allow_both_pkeys);
      if (m.kind == conf::MemberKind::kGuid || m.kind == conf::MemberKind::kSelf) {
        std::optional<PortId> p =
            m.kind == conf::MemberKind::kSelf ? std::optional<PortId>(sm_port) : f.FindPort(m.guid);
        if (!p || *p == kNoPort) continue;  // not on the fabric now (OpenSM: skipped)
        // A switch's GUID names its port 0; a CA port GUID names that port.
        if (f.node(f.port(*p).node).is_switch()) *p = f.port_id(f.port(*p).node, PortNum{0});
        auto it = out.find(*p);
        if (it == out.end()) continue;
        it->second[part.pkey] = bits;
        continue;
      }
      for (auto& [p, mem] : out)
        if (Matches(f, p, m.kind)) mem[part.pkey] = bits;
    }
  }
  return out;
}

PKeyPlan PlanPKeys(const DiscoveryResult& d, PortId sm_port, const PartitionPolicy& policy,
                   const std::function<const std::vector<uint16_t>*(PortId)>& current) {
  const Fabric& f = d.fabric;
  PKeyPlan plan;
  plan.members = ResolveMemberships(d, sm_port, policy);
  // The P_Key each port wants at index 0: the last indx0 partition naming it.
  std::map<PortId, uint16_t> indx0;
  if (policy.config) {
    for (const conf::Partition& part : policy.config->partitions) {
      plan.sl_by_pkey[part.pkey] = part.flags.sl;
      if (!part.indx0) continue;
      for (auto& [p, mem] : plan.members)
        if (mem.count(part.pkey)) indx0[p] = part.pkey;
    }
  }
  for (auto& [p, mem] : plan.members) {
    size_t cap = PKeyCapacity(d, p);
    if (cap == 0) continue;  // a port that holds no table (PartitionCap 0)
    auto x = indx0.find(p);
    std::vector<uint16_t> want =
        Entries(mem, x == indx0.end() ? std::nullopt : std::optional<uint16_t>(x->second));
    std::vector<uint16_t> table(cap, 0);
    std::vector<bool> placed(want.size(), false);
    table[0] = want.empty() ? 0 : want[0];
    if (!want.empty()) placed[0] = true;
    // Keys the port already holds keep their index.
    if (const std::vector<uint16_t>* now = current ? current(p) : nullptr) {
      for (size_t i = 1; i < std::min(cap, now->size()); ++i) {
        for (size_t k = 1; k < want.size(); ++k) {
          if (!placed[k] && (*now)[i] == want[k]) {
            table[i] = want[k];
            placed[k] = true;
            break;
          }
        }
      }
    }
    size_t next = 1;
    size_t dropped = 0;
    for (size_t k = 1; k < want.size(); ++k) {
      if (placed[k]) continue;
      while (next < cap && table[next] != 0) ++next;
      if (next >= cap) {
        ++dropped;
        continue;
      }
      table[next] = want[k];
    }
    if (dropped) {
      const Port& port = f.port(p);
      plan.issues.push_back(
          {"SM-PKEY-001", fmt::format("{} port {} holds {} P_Keys; {} of its {} partitions "
                                      "left out",
                                      ToString(f.node(port.node).guid), port.num.value(), cap,
                                      dropped, want.size())});
    }
    plan.tables[p] = std::move(table);
  }
  for (PortId sp : EnforcingSwitchPorts(d)) {
    PortId peer = f.port(sp).peer;
    PKeyPlan::Enforcement e;
    e.inbound = policy.enforce == PartEnforce::kBoth || policy.enforce == PartEnforce::kIn;
    e.outbound = policy.enforce == PartEnforce::kBoth || policy.enforce == PartEnforce::kOut;
    plan.enforcement[sp] = e;
    if (policy.enforce == PartEnforce::kOff) continue;
    auto it = plan.tables.find(peer);
    if (it == plan.tables.end()) continue;
    // The switch checks packets to and from the end port against the end port's keys; a
    // limited entry adds nothing where the full one is there (OpenSM drops it too).
    size_t cap = PKeyCapacity(d, sp);
    std::vector<uint16_t> table(cap, 0);
    size_t n = 0, dropped = 0;
    const std::vector<uint16_t>& end = it->second;
    for (uint16_t k : end) {
      if (k == 0) continue;
      if (!(k & kFullMember) &&
          std::find(end.begin(), end.end(), static_cast<uint16_t>(k | kFullMember)) != end.end())
        continue;
      if (n < cap) table[n++] = k;
      else ++dropped;
    }
    if (dropped) {
      const Port& port = f.port(sp);
      plan.issues.push_back({"SM-PKEY-001",
                             fmt::format("switch {} port {} enforces {} P_Keys; {} of its "
                                         "neighbour's left out",
                                         ToString(f.node(port.node).guid), port.num.value(),
                                         cap, dropped)});
    }
    plan.tables[sp] = std::move(table);
  }
  return plan;
}

std::optional<uint16_t> SharedPKey(const Memberships& a, const Memberships& b,
                                   std::optional<uint16_t> requested) {
  auto talk = [&](uint16_t base, bool* both_full) {
    auto x = a.find(base);
    auto y = b.find(base);
    if (x == a.end() || y == b.end()) return false;
    bool af = x->second & kFullBit, bf = y->second & kFullBit;
    *both_full = af && bf;
    return af || bf;
  };
  auto key = [&](uint16_t base) {
    return static_cast<uint16_t>(base | ((a.at(base) & kFullBit) ? kFullMember : 0));
  };
  bool both_full = false;
  if (requested) {
    uint16_t base = *requested & 0x7FFF;
    if (!talk(base, &both_full)) return std::nullopt;
    return *requested;
  }
  std::optional<uint16_t> best;
  int best_rank = 99;
  for (const auto& [base, bits] : a) {
    if (!talk(base, &both_full)) continue;
    int rank = both_full ? 0 : 2;
    if (base == conf::kDefaultPartitionKey) rank -= 1;
    if (rank < best_rank) {
      best_rank = rank;
      best = key(base);
    }
  }
  return best;
}

}  // namespace ibsm::sm
