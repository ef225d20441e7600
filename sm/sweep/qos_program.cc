#include "sm/sweep/qos_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "mad/attr/modifiers.h"
#include "mad/attr/port_info.h"

namespace ibsm::sm {
namespace {

constexpr uint8_t kPortStateDown = 1;

// OpenSM's mask: (1 << (OperationalVLs - 1)) - 1 (VL0-7 keeps 3 bits, VL0-14 all 4).
uint8_t VlMask(const mad::PortInfo& pi) {
  const unsigned op = std::clamp<unsigned>(pi.operational_vls, 1, 5);
  return static_cast<uint8_t>((1u << (op - 1)) - 1);
}

mad::SlToVlTable WantSl2Vl(const conf::QosLevel& l, const mad::PortInfo& out) {
  const uint8_t mask = VlMask(out);
  mad::SlToVlTable t;
  for (size_t sl = 0; sl < 16; ++sl) {
    const uint8_t vl = l.sl2vl[sl];
    t.vl[sl] = vl == 15 ? vl : static_cast<uint8_t>(vl & mask);
  }
  return t;
}

// Block b (0..3) as written: the first `len` entries from the class's table, masked; the
// rest zero.
mad::VlArbitrationTable WantVlArb(const conf::QosLevel& l, const mad::PortInfo& pi, uint8_t b,
                                  size_t len) {
  const auto& src = b < 2 ? l.vlarb_low : l.vlarb_high;
  const size_t first = (b % 2) * mad::kVlArbBlockSize;
  const uint8_t mask = VlMask(pi);
  mad::VlArbitrationTable t;
  for (size_t i = 0; i < len; ++i) {
    t.vl[i] = static_cast<uint8_t>(src[first + i].vl & mask);
    t.weight[i] = src[first + i].weight;
  }
  return t;
}

// OpenSM's block lengths: min(cap, 32) for the first block, cap % 32 for the second.
size_t BlockLength(const mad::PortInfo& pi, uint8_t b) {
  const size_t cap = b < 2 ? pi.vl_arb_low_cap : pi.vl_arb_high_cap;
  if (b % 2 == 0) return std::min(cap, mad::kVlArbBlockSize);
  return cap > mad::kVlArbBlockSize ? cap % mad::kVlArbBlockSize : 0;
}

const PortQos* CurrentPort(const QosMap& current, Guid g, uint8_t port) {
  auto it = current.find(g);
  if (it == current.end() || !it->second || port >= it->second->ports.size()) return nullptr;
  return &it->second->ports[port];
}

struct Planner {
  const Fabric& f;
  const std::vector<DiscoveredNode>& nodes;
  const QosMap& current;
  const conf::QosLevels& levels;
  std::vector<QosTableSet>* out;

  void VlArb(NodeId n, uint8_t port, uint8_t mod_port, const conf::QosLevel& l) {
    const mad::PortInfo* pi = nodes[n].known_port_info(port);
    if (!pi || pi->vl_cap == 1) return;  // no VLArb with one data VL
    const PortQos* have = CurrentPort(current, f.node(n).guid, port);
    for (uint8_t b = 0; b < 4; ++b) {
      const size_t len = BlockLength(*pi, b);
      if (len == 0) continue;
      const mad::VlArbitrationTable want = WantVlArb(l, *pi, b, len);
      if (have && have->vlarb[b] &&
          std::equal(want.vl.begin(), want.vl.begin() + len, have->vlarb[b]->vl.begin()) &&
          std::equal(want.weight.begin(), want.weight.begin() + len,
                     have->vlarb[b]->weight.begin())) {
        continue;
      }
      QosTableSet s{.node = n, .port = port, .attr_id = mad::attr::kVlArbitrationTable,
                    .modifier = mad::VlArbAttrMod(static_cast<uint8_t>(b + 1), mod_port),
                    .block = b};
      mad::EncodeTo(want, s.data);
      out->push_back(s);
    }
  }

  void Sl2Vl(NodeId n, uint8_t out_port, uint8_t in_port, uint32_t modifier,
             const conf::QosLevel& l) {
    const mad::PortInfo* pi = nodes[n].known_port_info(out_port);
    if (!pi) return;
    const mad::SlToVlTable want = WantSl2Vl(l, *pi);
    const PortQos* have = CurrentPort(current, f.node(n).guid, out_port);
    if (have && in_port < have->sl2vl.size() && have->sl2vl[in_port] &&
        have->sl2vl[in_port]->vl == want.vl) {
      return;
    }
    QosTableSet s{.node = n, .port = out_port, .attr_id = mad::attr::kSlToVlTable,
                  .modifier = modifier, .in_port = in_port};
    mad::EncodeTo(want, s.data);
    out->push_back(s);
  }
};

bool SlMapping(const mad::PortInfo* pi) {
  return pi && (pi->capability_mask & mad::port_cap::kIsSlMappingSupported);
}

}  // namespace

conf::QosClass QosClassOf(const Node& node, uint8_t num) {
  if (node.is_switch()) return num == 0 ? conf::QosClass::kSwitchPort0 : conf::QosClass::kSwitchExternal;
  return node.kind == NodeKind::kRouter ? conf::QosClass::kRouter : conf::QosClass::kCa;
}

std::optional<uint8_t> QosHighLimit(const Fabric& f, const std::vector<DiscoveredNode>& nodes,
                                    PortId p, const conf::QosLevels& levels) {
  const Port& port = f.port(p);
  const Node& node = f.node(port.node);
  const uint8_t num = port.num.value();
  const mad::PortInfo* pi = nodes[port.node].known_port_info(num);
  if (!pi) return std::nullopt;
  if (node.is_switch()) {
    if (num == 0 && !nodes[port.node].switch_info.enhanced_port0) return std::nullopt;
    if (num != 0 && pi->port_state == kPortStateDown) return std::nullopt;
  }
  if (pi->vl_cap == 1) return uint8_t{0};
  return levels.For(QosClassOf(node, num)).high_limit;
}

std::vector<QosTableSet> PlanQosSets(const Fabric& f, const std::vector<DiscoveredNode>& nodes,
                                     const QosMap& current, const QosSupportMap& support,
                                     const conf::QosLevels& levels) {
  std::vector<QosTableSet> sets;
  Planner pl{f, nodes, current, levels, &sets};
  for (NodeId n = 0; n < f.node_count() && n < nodes.size(); ++n) {
    const Node& node = f.node(n);
    const DiscoveredNode& dn = nodes[n];
    auto sup = support.find(node.guid);
    const bool no_sl2vl = sup != support.end() && sup->second.no_sl2vl;
    const bool no_vlarb = sup != support.end() && sup->second.no_vlarb;
    if (node.is_switch()) {
      const bool enhanced = dn.switch_info.enhanced_port0 != 0;
      auto up = [&](uint8_t p) {
        const mad::PortInfo* pi = dn.known_port_info(p);
        return pi && pi->port_state != kPortStateDown;
      };
      if (!no_vlarb) {
        for (uint8_t out = 1; out <= node.num_ports; ++out)
          if (up(out)) pl.VlArb(n, out, out, levels.swe);
        if (enhanced) pl.VlArb(n, 0, 0, levels.sw0);
      }
      if (!no_sl2vl && SlMapping(dn.known_port_info(0))) {
        for (uint8_t out = enhanced ? 0 : 1; out <= node.num_ports; ++out) {
          if (!up(out)) continue;
          for (uint8_t in = 0; in <= node.num_ports; ++in) {
            // Port 0's own table (0, 0) is its class's: sw0, as OpenSM's last write leaves it.
            const conf::QosLevel& l = (out == 0 && in == 0) ? levels.sw0 : levels.swe;
            pl.Sl2Vl(n, out, in, mad::SlToVlAttrMod(in, out), l);
          }
        }
      }
      continue;
    }
    // Every port of a CA or router discovery read. An SMP acts on the port it arrives
    // through, so Run sends each port's Sets by the path that arrives there (PathToPort).
    for (uint8_t p = 1; p <= node.num_ports; ++p) {
      if (!dn.known_port_info(p) || !PathToPort(f, nodes, f.port_id(n, PortNum{p}))) continue;
      const conf::QosLevel& l = levels.For(QosClassOf(node, p));
      if (!no_vlarb) pl.VlArb(n, p, 0, l);
      if (!no_sl2vl && SlMapping(dn.known_port_info(p))) pl.Sl2Vl(n, p, 0, 0, l);
    }
  }
  return sets;
}

void QosProgrammer::Run(const Fabric& f, const std::vector<DiscoveredNode>& nodes,
                        const QosMap& current, std::vector<QosTableSet> sets,
                        std::function<void(Outcome)> done) {
  struct State {
    Outcome outcome;
    std::unordered_map<NodeId, std::shared_ptr<NodeQos>> tables;
    std::vector<Guid> guids;
    std::vector<QosTableSet> sets;
    size_t next = 0;
  };
  auto st = std::make_shared<State>();
  st->sets = std::move(sets);
  st->guids.reserve(f.node_count());
  for (const Node& node : f.nodes()) st->guids.push_back(node.guid);
  for (const QosTableSet& s : st->sets) {
    if (st->tables.count(s.node)) continue;
    auto it = current.find(st->guids[s.node]);
    auto q = it != current.end() && it->second ? std::make_shared<NodeQos>(*it->second)
                                               : std::make_shared<NodeQos>();
    q->ports.resize(std::max(q->ports.size(), size_t{f.node(s.node).num_ports} + 1));
    st->tables[s.node] = std::move(q);
  }
  std::vector<DrPath> paths;
  paths.reserve(nodes.size());
  for (const DiscoveredNode& dn : nodes) paths.push_back(dn.path);
  // A CA port's Sets go by the path that arrives on that port.
  std::unordered_map<uint32_t, DrPath> port_paths;
  for (const QosTableSet& s : st->sets) {
    if (f.node(s.node).is_switch() || s.port == nodes[s.node].node_info.local_port_num) continue;
    const uint32_t key = static_cast<uint32_t>(s.node) << 8 | s.port;
    if (port_paths.count(key)) continue;
    if (auto path = PathToPort(f, nodes, f.port_id(s.node, PortNum{s.port})))
      port_paths.emplace(key, std::move(*path));
  }
  running_ = true;
  pipeline_.Feed([this, st, paths = std::move(paths), port_paths = std::move(port_paths)]() {
    if (st->next == st->sets.size()) return false;
    const size_t i = st->next++;
    const QosTableSet& s = st->sets[i];
    ++st->outcome.stats.sets;
    auto via = port_paths.find(static_cast<uint32_t>(s.node) << 8 | s.port);
    pipeline_.Set(via != port_paths.end() ? via->second : paths[s.node], s.attr_id, s.modifier, s.data, [st, i](Result<mad::Smp> r) {
      const QosTableSet& s = st->sets[i];
      const bool sl2vl = s.attr_id == mad::attr::kSlToVlTable;
      const char* what = sl2vl ? "SL2VL" : "VLArb";
      if (!r.ok()) {
        ++st->outcome.stats.failed;
        st->outcome.failures.emplace_back(
            s.node, fmt::format("{} Set (port {}, modifier {:#x}) failed: {}", what, s.port,
                                s.modifier, r.status().ToString()));
        return;
      }
      PortQos& pq = st->tables[s.node]->ports[s.port];
      if (sl2vl) {
        auto t = mad::Decode<mad::SlToVlTable>(r->data);
        if (!t.ok()) return;
        if (pq.sl2vl.size() <= s.in_port) pq.sl2vl.resize(size_t{s.in_port} + 1);
        pq.sl2vl[s.in_port] = *t;
      } else {
        auto t = mad::Decode<mad::VlArbitrationTable>(r->data);
        if (t.ok()) pq.vlarb[s.block] = *t;
      }
    });
    return true;
  });
  pipeline_.WhenIdle([this, st, done = std::move(done)]() {
    running_ = false;
    for (auto& [n, q] : st->tables) st->outcome.written[st->guids[n]] = std::move(q);
    done(std::move(st->outcome));
  });
}

}  // namespace ibsm::sm
