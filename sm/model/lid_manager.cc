#include "sm/model/lid_manager.h"

#include <algorithm>

#include <fmt/format.h>

namespace ibsm::sm {
namespace {

std::string Describe(const Fabric& f, PortId p) {
  const Port& port = f.port(p);
  const Node& n = f.node(port.node);
  return fmt::format("{} port {} ({}{})", ToString(port.guid), port.num.value(),
                     n.description.empty() ? n.name : n.description,
                     n.is_switch() ? ", switch" : "");
}

}  // namespace

std::vector<PortId> EndPorts(const Fabric& f) {
  std::vector<PortId> out;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    if (node.is_switch()) {
      out.push_back(f.port_id(n, PortNum{0}));
      continue;
    }
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
      if (f.port(id).guid.value() != 0) out.push_back(id);
    }
  }
  return out;
}

LidAssignment AssignLids(const Fabric& f, PortId sm_port,
                         const std::unordered_map<Guid, PersistedLid>& persisted,
                         const LidPolicy& policy) {
  LidAssignment a;
  a.base.assign(f.port_count(), 0);
  a.lmc.assign(f.port_count(), 0);
  a.end_ports = EndPorts(f);
  std::sort(a.end_ports.begin(), a.end_ports.end(), [&](PortId x, PortId y) {
    if ((x == sm_port) != (y == sm_port)) return x == sm_port;
    return f.port(x).guid < f.port(y).guid;
  });

  auto lmc_of = [&](PortId p) -> uint8_t {
    const Node& n = f.node(f.port(p).node);
    return (n.is_switch() && !policy.lmc_esp0) ? 0 : policy.lmc;
  };
  // owner[lid]: index into end_ports + 1 (0 free); reserved ranges of absent ports use
  // kReserved.
  constexpr uint32_t kReserved = UINT32_MAX;
  std::vector<uint32_t> owner(kMaxUnicastLid + 1, 0);
  auto range_free = [&](uint32_t base, uint32_t count, uint32_t me) {
    if (base == 0 || base + count - 1 > kMaxUnicastLid) return false;
    for (uint32_t l = base; l < base + count; ++l)
      if (owner[l] != 0 && owner[l] != me) return false;
    return true;
  };
  auto take = [&](uint32_t base, uint32_t count, uint32_t me) {
    for (uint32_t l = base; l < base + count; ++l) owner[l] = me;
  };

  std::vector<bool> done(a.end_ports.size(), false);
  auto assign = [&](size_t i, uint32_t base) {
    PortId p = a.end_ports[i];
    a.base[p] = static_cast<uint16_t>(base);
    a.lmc[p] = lmc_of(p);
    take(base, 1u << a.lmc[p], static_cast<uint32_t>(i + 1));
    done[i] = true;
  };

  if (!policy.reassign) {
    // Reserve the ranges of persisted ports that are not on the fabric now.
    std::unordered_map<Guid, size_t> present;
    for (size_t i = 0; i < a.end_ports.size(); ++i) present[f.port(a.end_ports[i]).guid] = i;
    for (const auto& [guid, r] : persisted) {
      if (present.count(guid) || r.min_lid == 0 || r.max_lid < r.min_lid ||
          r.max_lid > kMaxUnicastLid)
        continue;
      for (uint32_t l = r.min_lid; l <= r.max_lid; ++l)
        if (owner[l] == 0) owner[l] = kReserved;
    }
    // (1) persisted ranges of present ports.
    for (size_t i = 0; i < a.end_ports.size(); ++i) {
      auto it = persisted.find(f.port(a.end_ports[i]).guid);
      if (it == persisted.end()) continue;
      uint32_t count = 1u << lmc_of(a.end_ports[i]);
      uint32_t base = it->second.min_lid;
      if (base % count != 0 || !range_free(base, count, static_cast<uint32_t>(i + 1))) continue;
      assign(i, base);
      ++a.from_persisted;
    }
    // (2) the LID each port holds now.
    for (size_t i = 0; i < a.end_ports.size(); ++i) {
      if (done[i]) continue;
      PortId p = a.end_ports[i];
      uint32_t base = f.port(p).lid.value();
      if (base == 0) continue;
      uint32_t count = 1u << lmc_of(p);
      if (base % count != 0) continue;
      if (!range_free(base, count, static_cast<uint32_t>(i + 1))) {
        uint32_t other = owner[base];
        a.issues.push_back(
            {"SM-LID-002",
             fmt::format("{} holds LID {}, which belongs to {}; it gets a new LID",
                         Describe(f, p), base,
                         other == kReserved || other == 0
                             ? std::string("a port absent from the fabric (guid2lid)")
                             : Describe(f, a.end_ports[other - 1]))});
        continue;
      }
      assign(i, base);
      ++a.from_current;
    }
  }
  // (3) lowest free aligned range.
  uint32_t cursor[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  for (size_t i = 0; i < a.end_ports.size(); ++i) {
    if (done[i]) continue;
    PortId p = a.end_ports[i];
    uint8_t lmc = lmc_of(p);
    uint32_t count = 1u << lmc;
    uint32_t base = std::max<uint32_t>(cursor[lmc], count);  // LID 0 is never valid
    base = (base + count - 1) / count * count;
    while (base + count - 1 <= kMaxUnicastLid && !range_free(base, count, 0)) base += count;
    if (base + count - 1 > kMaxUnicastLid) {
      ++a.unassigned;
      a.issues.push_back({"SM-LID-003", fmt::format("no free LID range of {} for {}: the "
                                                    "unicast LID space is exhausted",
                                                    count, Describe(f, p))});
      continue;
    }
    cursor[lmc] = base + count;
    assign(i, base);
    ++a.fresh;
  }
  for (PortId p : a.end_ports) {
    if (a.base[p] != f.port(p).lid.value() || a.lmc[p] != f.port(p).lmc) ++a.changed;
  }
  return a;
}

}  // namespace ibsm::sm
