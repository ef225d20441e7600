#include "sm/model/qos_tables.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "mad/attr/modifiers.h"

namespace ibsm::sm {
namespace {


// The VLArb blocks a port has (14.2.5.9): low priority entries in blocks 1-2, high in 3-4,
// 32 entries a block, as many as VLArbLowCap / VLArbHighCap say.
std::vector<uint8_t> VlArbBlocks(const mad::PortInfo& pi) {
  std::vector<uint8_t> out;
  if (pi.vl_arb_low_cap > 0) out.push_back(1);
  if (pi.vl_arb_low_cap > mad::kVlArbBlockSize) out.push_back(2);
  if (pi.vl_arb_high_cap > 0) out.push_back(3);
  if (pi.vl_arb_high_cap > mad::kVlArbBlockSize) out.push_back(4);
  return out;
}

// Blocks past the port's VLArbLowCap/HighCap hold no entries: known empty without a read
// (and Get of them is invalid). OpenSM's SA answers them as all-zero blocks too.
void EmptyBlocksBeyondCaps(const mad::PortInfo& pi, PortQos& q) {
  std::vector<uint8_t> real = VlArbBlocks(pi);
  for (uint8_t b = 1; b <= 4; ++b)
    if (std::find(real.begin(), real.end(), b) == real.end()) q.vlarb[b - 1] = mad::VlArbitrationTable{};
}

uint32_t PortKey(NodeId n, uint8_t port) { return static_cast<uint32_t>(n) << 8 | port; }

}  // namespace

// The reads of one run (the State below holds them; not in the anonymous namespace, since
// State is a member type of QosReader).
namespace qos_detail {

struct Read {
  NodeId node;
  uint8_t port;     // the output port the table belongs to
  uint8_t in_port;  // SL2VL: input port (0 on a CA); VLArb: unused
  uint8_t block;    // VLArb block 1..4; 0 = an SL2VL read
  bool ca;          // a CA or router port (the modifier names no port)
};

// One (device, attribute): its reads, the first of which is the probe.
struct AttrReads {
  std::vector<Read> reads;
  bool sl2vl = true;
};

struct Item {
  size_t attr;  // index into State::attrs
  size_t read;  // index into its reads; 0 = the probe
};

}  // namespace qos_detail

using qos_detail::AttrReads;
using qos_detail::Item;
using qos_detail::Read;

struct QosReader::State {
  std::vector<AttrReads> attrs;
  std::vector<DrPath> paths;     // by NodeId
  // A CA's ports other than its arrival port, by PortKey: the path through their switch.
  std::unordered_map<uint32_t, DrPath> port_paths;
  const DrPath& PathOf(const qos_detail::Read& r) const {
    if (r.ca) {
      auto it = port_paths.find(PortKey(r.node, r.port));
      if (it != port_paths.end()) return it->second;
    }
    return paths[r.node];
  }
  std::vector<Guid> guids;       // by NodeId
  std::vector<uint8_t> arrival;  // by NodeId: the port a CA's SMPs arrive on
  std::vector<bool> gone;        // by NodeId: no longer reached (Reroute)
  std::unordered_set<uint32_t> gone_ports;  // PortKey: a CA port no longer reached
  bool Dropped(const qos_detail::Read& r) const {
    return gone[r.node] || (r.ca && gone_ports.count(PortKey(r.node, r.port)));
  }
  std::deque<Item> ready;
  bool feeding = false;
  std::unordered_map<NodeId, std::shared_ptr<NodeQos>> tables;
  QosReadStats stats;
};

void QosReader::Run(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes,
                    const QosMap& known, QosSupportMap* support,
                    std::function<void(QosMap fresh, QosReadStats stats)> done) {
  auto st = std::make_shared<State>();
  cancelled_ = std::make_shared<bool>(false);
  running_ = true;
  state_ = st;
  auto cancelled = cancelled_;
  st->paths.resize(fabric.node_count());
  st->gone.assign(fabric.node_count(), false);
  st->arrival.assign(fabric.node_count(), 0);
  for (NodeId n = 0; n < fabric.node_count() && n < nodes.size(); ++n)
    st->arrival[n] = nodes[n].node_info.local_port_num;
  st->guids.reserve(fabric.node_count());
  for (const Node& node : fabric.nodes()) st->guids.push_back(node.guid);
  for (NodeId n = 0; n < fabric.node_count() && n < nodes.size(); ++n) {
    const Node& node = fabric.node(n);
    if (known.count(node.guid)) continue;
    const DiscoveredNode& dn = nodes[n];
    const QosSupport have = support->count(node.guid) ? (*support)[node.guid] : QosSupport{};
    auto q = std::make_shared<NodeQos>();
    q->ports.resize(size_t{node.num_ports} + 1);
    AttrReads sl2vl, vlarb;
    vlarb.sl2vl = false;
    auto pi_known = [&](uint8_t p) {
      return p < dn.port_info_valid.size() && dn.port_info_valid[p] && p < dn.port_info.size();
    };
    if (node.is_switch()) {
      // Port 0 (the switch's management port) and every cabled port.
      std::vector<uint8_t> cabled = {0};
      for (uint8_t p = 1; p <= node.num_ports; ++p)
        if (fabric.port(n, PortNum{p}).connected()) cabled.push_back(p);
      for (uint8_t out : cabled) {
        q->ports[out].sl2vl.resize(size_t{node.num_ports} + 1);
        for (uint8_t in : cabled) sl2vl.reads.push_back({n, out, in, 0, false});
        if (pi_known(out)) {
          EmptyBlocksBeyondCaps(dn.port_info[out], q->ports[out]);
          for (uint8_t b : VlArbBlocks(dn.port_info[out])) vlarb.reads.push_back({n, out, 0, b, false});
        }
      }
    } else {
      // An SMP to a CA acts on the port it arrives through: the one discovery came in by
      // (first, so it is the probe), then every other port discovery read, each through the
      // switch cabled to it.
      const uint8_t arrival = dn.node_info.local_port_num;
      std::vector<uint8_t> order;
      if (arrival >= 1 && arrival <= node.num_ports) order.push_back(arrival);
      for (uint8_t p = 1; p <= node.num_ports; ++p) {
        if (p == arrival || !pi_known(p)) continue;
        auto path = PathToPort(fabric, nodes, fabric.port_id(n, PortNum{p}));
        if (!path) continue;
        st->port_paths[PortKey(n, p)] = std::move(*path);
        order.push_back(p);
      }
      for (uint8_t p : order) {
        q->ports[p].sl2vl.resize(1);
        sl2vl.reads.push_back({n, p, 0, 0, true});
        if (pi_known(p)) {
          EmptyBlocksBeyondCaps(dn.port_info[p], q->ports[p]);
          for (uint8_t b : VlArbBlocks(dn.port_info[p])) vlarb.reads.push_back({n, p, 0, b, true});
        }
      }
    }
    for (AttrReads* a : {&sl2vl, &vlarb}) {
      if (a->reads.empty()) continue;
      if (a->sl2vl ? have.no_sl2vl : have.no_vlarb) {
        st->stats.skipped += a->reads.size();
        continue;
      }
      st->ready.push_back({st->attrs.size(), 0});
      st->attrs.push_back(std::move(*a));
    }
    st->tables[n] = std::move(q);
    st->paths[n] = dn.path;
    ++st->stats.nodes;
  }
  Feed(st, cancelled, support);
  pipeline_.WhenIdle([this, st, done = std::move(done)]() {
    running_ = false;
    state_.reset();
    QosMap fresh;
    // A device the fabric stopped reaching mid-run was not read whole: it is read again
    // when a sweep next finds it.
    std::unordered_set<NodeId> partial;
    for (uint32_t key : st->gone_ports) partial.insert(static_cast<NodeId>(key >> 8));
    for (auto& [n, q] : st->tables)
      if (!st->gone[n] && !partial.count(n)) fresh[st->guids[n]] = std::move(q);
    done(std::move(fresh), st->stats);
  });
}

void QosReader::Reroute(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes) {
  if (!running_ || !state_) return;
  State& st = *state_;
  for (NodeId i = 0; i < st.guids.size(); ++i) {
    if (st.gone[i]) continue;
    auto n = fabric.FindNode(st.guids[i]);
    // A CA now reached through another of its ports would answer for that port instead.
    if (!n || *n >= nodes.size() ||
        (!fabric.node(*n).is_switch() && nodes[*n].node_info.local_port_num != st.arrival[i])) {
      st.gone[i] = true;
      continue;
    }
    st.paths[i] = nodes[*n].path;
  }
  for (auto it = st.port_paths.begin(); it != st.port_paths.end();) {
    const NodeId i = static_cast<NodeId>(it->first >> 8);
    const uint8_t p = static_cast<uint8_t>(it->first & 0xff);
    auto n = st.gone[i] ? std::nullopt : fabric.FindNode(st.guids[i]);
    std::optional<DrPath> path;
    if (n && p <= fabric.node(*n).num_ports)
      path = PathToPort(fabric, nodes, fabric.port_id(*n, PortNum{p}));
    if (path) {
      it->second = std::move(*path);
      ++it;
    } else {
      st.gone_ports.insert(it->first);
      it = st.port_paths.erase(it);
    }
  }
}

// Hands the pipeline the ready reads as its window frees up. A probe that answers makes the
// rest of its attribute's reads ready; a probe that fails marks the device as lacking the
// attribute.
void QosReader::Feed(const std::shared_ptr<State>& st, const std::shared_ptr<bool>& cancelled,
                     QosSupportMap* support) {
  if (st->feeding) return;
  st->feeding = true;
  pipeline_.Feed([this, st, cancelled, support]() {
    while (!st->ready.empty() &&
           st->Dropped(st->attrs[st->ready.front().attr].reads[st->ready.front().read])) {
      ++st->stats.skipped;
      st->ready.pop_front();
    }
    if (*cancelled || st->ready.empty()) {
      st->feeding = false;
      return false;
    }
    const Item item = st->ready.front();
    st->ready.pop_front();
    const Read r = st->attrs[item.attr].reads[item.read];
    uint16_t attr = r.block == 0 ? mad::attr::kSlToVlTable : mad::attr::kVlArbitrationTable;
    // On a CA the modifier is ignored (the arrival port is meant): send 0 there.
    uint32_t mod = r.block != 0  ? mad::VlArbAttrMod(r.block, r.ca ? 0 : r.port)
                   : r.ca        ? 0
                                 : mad::SlToVlAttrMod(r.in_port, r.port);
    ++st->stats.smps;
    pipeline_.Get(st->PathOf(r), attr, mod, [this, st, cancelled, support, item, r](Result<mad::Smp> res) {
      NodeQos& q = *st->tables[r.node];
      const bool probe = item.read == 0;
      bool ok = res.ok();
      if (ok) {
        std::span<const uint8_t> data(res->data);
        if (r.block == 0) {
          mad::SlToVlTable t;
          ok = mad::DecodeFrom(data, &t).ok();
          if (ok) q.ports[r.port].sl2vl[r.in_port] = t;
        } else {
          mad::VlArbitrationTable t;
          ok = mad::DecodeFrom(data, &t).ok();
          if (ok) q.ports[r.port].vlarb[r.block - 1] = t;
        }
      }
      if (!ok) ++st->stats.failed;
      if (!probe) return;
      AttrReads& a = st->attrs[item.attr];
      if (!ok) {
        ++st->stats.probes_failed;
        st->stats.skipped += a.reads.size() - 1;
        QosSupport& s = (*support)[st->guids[r.node]];
        (a.sl2vl ? s.no_sl2vl : s.no_vlarb) = true;
        return;
      }
      for (size_t i = 1; i < a.reads.size(); ++i) st->ready.push_back({item.attr, i});
      Feed(st, cancelled, support);
    });
    return true;
  });
}

}  // namespace ibsm::sm
