#include "routing/hop_table.h"
#include "routing/parallel.h"

#include <algorithm>
#include <atomic>

namespace ibsm::routing {

HopTable HopTable::Build(const Fabric& fabric, unsigned threads) {
  HopTable t;
  t.index_.assign(fabric.node_count(), kNoSwitch);
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    if (!fabric.node(n).is_switch()) continue;
    t.index_[n] = static_cast<SwitchIdx>(t.switch_nodes_.size());
    t.switch_nodes_.push_back(n);
  }
  const size_t S = t.switch_nodes_.size();
  t.link_start_.reserve(S + 1);
  t.link_start_.push_back(0);
  for (SwitchIdx s = 0; s < S; ++s) {
    const Node& node = fabric.node(t.switch_nodes_[s]);
    for (uint32_t num = 1; num <= node.num_ports; ++num) {
      const Port& port = fabric.port(node.first_port + num);
      if (!port.connected()) continue;
      const SwitchIdx remote = t.index(fabric.port(port.peer).node);
      if (remote == kNoSwitch) continue;
      t.links_.push_back(Link{static_cast<uint8_t>(num), remote});
    }
    t.link_start_.push_back(static_cast<uint32_t>(t.links_.size()));
  }

  t.hops_.assign(S * S, kUnreachableHops);
  // One BFS per source switch writes one row; rows are disjoint, so workers share nothing
  // but the atomic cursor.
  std::atomic<size_t> next{0};
  auto worker = [&t, &next, S] {
    std::vector<SwitchIdx> queue(S);
    for (size_t src; (src = next.fetch_add(1, std::memory_order_relaxed)) < S;) {
      uint8_t* row = t.hops_.data() + src * S;
      size_t head = 0, tail = 0;
      row[src] = 0;
      queue[tail++] = static_cast<SwitchIdx>(src);
      while (head < tail) {
        const SwitchIdx u = queue[head++];
        const uint8_t d = row[u];
        if (d + 1 >= kUnreachableHops) continue;
        for (const Link* l = t.links_begin(u); l != t.links_end(u); ++l) {
          if (row[l->remote] != kUnreachableHops) continue;
          row[l->remote] = static_cast<uint8_t>(d + 1);
          queue[tail++] = l->remote;
        }
      }
    }
  };
  RunWorkers(threads, S, [&worker](size_t) { worker(); });
  return t;
}

void HopTable::MinHopPorts(SwitchIdx from, SwitchIdx to, std::vector<uint8_t>& out) const {
  out.clear();
  const uint8_t d = hops(from, to);
  if (d == 0 || d == kUnreachableHops) return;
  const uint8_t* to_row = hops_.data();  // hops(x, to) == hops(to, x): read row `to`
  to_row += static_cast<size_t>(to) * switch_nodes_.size();
  for (const Link* l = links_begin(from); l != links_end(from); ++l)
    if (to_row[l->remote] == d - 1) out.push_back(l->port);
}



void HopTable::AllMinHopPorts(SwitchIdx from, std::vector<uint32_t>& start,
                              std::vector<uint8_t>& ports) const {
  const size_t S = switch_nodes_.size();
  const uint8_t* own = hops_.data() + static_cast<size_t>(from) * S;
  // Pass 1 counts candidates per destination, pass 2 fills them; links are in port order,
  // so each destination's ports come out ascending.
  start.assign(S + 1, 0);
  for (const Link* l = links_begin(from); l != links_end(from); ++l) {
    const uint8_t* row = hops_.data() + static_cast<size_t>(l->remote) * S;
    for (size_t d = 0; d < S; ++d)
      start[d + 1] += own[d] != kUnreachableHops && own[d] != 0 && row[d] + 1 == own[d];
  }
  for (size_t d = 0; d < S; ++d) start[d + 1] += start[d];
  ports.resize(start[S]);
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (const Link* l = links_begin(from); l != links_end(from); ++l) {
    const uint8_t* row = hops_.data() + static_cast<size_t>(l->remote) * S;
    for (size_t d = 0; d < S; ++d)
      if (own[d] != kUnreachableHops && own[d] != 0 && row[d] + 1 == own[d])
        ports[fill[d]++] = l->port;
  }
}

}  // namespace ibsm::routing
