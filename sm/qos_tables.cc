#include "sm/qos_tables.h"

#include <algorithm>

#include "mad/attr/modifiers.h"

namespace ibsm::sm {
namespace {

struct Read {
  NodeId node;
  uint8_t port;     // the output port the table belongs to
  uint8_t in_port;  // SL2VL: input port (0 on a CA); VLArb: unused
  uint8_t block;    // VLArb block 1..4; 0 = an SL2VL read
  bool ca;          // a CA or router port (the modifier names no port)
};

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

struct State {
  std::vector<Read> reads;
  size_t next = 0;
  std::unordered_map<NodeId, std::shared_ptr<NodeQos>> tables;
  QosReadStats stats;
};

}  // namespace

void QosReader::Run(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes,
                    const QosMap& known,
                    std::function<void(QosMap fresh, QosReadStats stats)> done) {
  auto st = std::make_shared<State>();
  cancelled_ = std::make_shared<bool>(false);
  auto cancelled = cancelled_;
  std::vector<DrPath> paths(fabric.node_count());
  for (NodeId n = 0; n < fabric.node_count() && n < nodes.size(); ++n) {
    const Node& node = fabric.node(n);
    if (known.count(node.guid)) continue;
    const DiscoveredNode& dn = nodes[n];
    auto q = std::make_shared<NodeQos>();
    q->ports.resize(size_t{node.num_ports} + 1);
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
        for (uint8_t in : cabled) st->reads.push_back({n, out, in, 0, false});
        if (pi_known(out)) {
          EmptyBlocksBeyondCaps(dn.port_info[out], q->ports[out]);
          for (uint8_t b : VlArbBlocks(dn.port_info[out])) st->reads.push_back({n, out, 0, b, false});
        }
      }
    } else {
      // An SMP to a CA acts on the port it arrives through: the one discovery came in by.
      uint8_t p = dn.node_info.local_port_num;
      if (p >= 1 && p <= node.num_ports) {
        q->ports[p].sl2vl.resize(1);
        st->reads.push_back({n, p, 0, 0, true});
        if (pi_known(p)) {
          EmptyBlocksBeyondCaps(dn.port_info[p], q->ports[p]);
          for (uint8_t b : VlArbBlocks(dn.port_info[p])) st->reads.push_back({n, p, 0, b, true});
        }
      }
    }
    st->tables[n] = std::move(q);
    paths[n] = dn.path;
    ++st->stats.nodes;
  }

  auto guids = std::make_shared<std::vector<Guid>>();
  guids->reserve(fabric.node_count());
  for (const Node& node : fabric.nodes()) guids->push_back(node.guid);

  pipeline_.Feed([this, st, cancelled, paths = std::move(paths)]() {
    if (*cancelled || st->next >= st->reads.size()) return false;
    const Read r = st->reads[st->next++];
    uint16_t attr = r.block == 0 ? mad::attr::kSlToVlTable : mad::attr::kVlArbitrationTable;
    // On a CA the modifier is ignored (the arrival port is meant): send 0 there.
    uint32_t mod = r.block != 0  ? mad::VlArbAttrMod(r.block, r.ca ? 0 : r.port)
                   : r.ca        ? 0
                                 : mad::SlToVlAttrMod(r.in_port, r.port);
    ++st->stats.smps;
    pipeline_.Get(paths[r.node], attr, mod, [st, r](Result<mad::Smp> res) {
      NodeQos& q = *st->tables[r.node];
      if (!res.ok()) {
        ++st->stats.failed;
        return;
      }
      std::span<const uint8_t> data(res->data);
      if (r.block == 0) {
        mad::SlToVlTable t;
        if (!mad::DecodeFrom(data, &t).ok()) {
          ++st->stats.failed;
          return;
        }
        q.ports[r.port].sl2vl[r.in_port] = t;
      } else {
        mad::VlArbitrationTable t;
        if (!mad::DecodeFrom(data, &t).ok()) {
          ++st->stats.failed;
          return;
        }
        q.ports[r.port].vlarb[r.block - 1] = t;
      }
    });
    return true;
  });
  pipeline_.WhenIdle([st, guids, done = std::move(done)]() {
    QosMap fresh;
    for (auto& [n, q] : st->tables) fresh[(*guids)[n]] = std::move(q);
    done(std::move(fresh), st->stats);
  });
}

}  // namespace ibsm::sm
