// Min-hop distances between switches, the base of minhop/updn and of route verification.
//
// Only switch-to-switch cables count (Port::connected() at a switch port other than 0 whose
// peer is a switch); the caller passes a fabric holding only usable cables. Memory is one byte
// per switch pair (k=64 3-tier: 5,120 switches -> 26 MB); the minimal-hop egress ports are
// derived on demand from neighbour distances instead of being stored.
//
// Thread-safety: immutable after Build; const access from many threads is safe.
#pragma once

#include <cstdint>
#include <vector>

#include "fabric/fabric.h"

namespace ibsm::routing {

// Dense switch index 0..S-1, in NodeId order.
using SwitchIdx = uint32_t;
inline constexpr SwitchIdx kNoSwitch = UINT32_MAX;
inline constexpr uint8_t kUnreachableHops = 0xFF;

class HopTable {
 public:
  // One switch-to-switch cable as seen from one end.
  struct Link {
    uint8_t port;       // local egress port number (>= 1)
    SwitchIdx remote;   // switch at the other end
  };

  // BFS from every switch over switch-to-switch cables on `threads` threads (0 means 1).
  // Distances of 255 or more hops are reported as unreachable (no real fabric comes close).
  static HopTable Build(const Fabric& fabric, unsigned threads);

  size_t switch_count() const { return switch_nodes_.size(); }
  NodeId node(SwitchIdx s) const { return switch_nodes_[s]; }
  // kNoSwitch for a non-switch node.
  SwitchIdx index(NodeId n) const { return n < index_.size() ? index_[n] : kNoSwitch; }

  // Hops from switch `from` to switch `to` (0 for itself), or kUnreachableHops.
  uint8_t hops(SwitchIdx from, SwitchIdx to) const {
    return hops_[static_cast<size_t>(from) * switch_nodes_.size() + to];
  }
  // Switch-to-switch links of `s`, by ascending local port number.
  const Link* links_begin(SwitchIdx s) const { return links_.data() + link_start_[s]; }
  const Link* links_end(SwitchIdx s) const { return links_.data() + link_start_[s + 1]; }

  // Appends to `out` (after clearing it) the egress ports of `from` that lie on a minimal-hop
  // path to `to`, ascending. Empty if from == to or `to` is unreachable.
  void MinHopPorts(SwitchIdx from, SwitchIdx to, std::vector<uint8_t>& out) const;

  // The same for every destination at once, reading neighbour rows sequentially (the fast
  // way when one switch routes to all others): the ports towards `to` are
  // ports[start[to] .. start[to + 1]). Both vectors are overwritten; O(S x degree) bytes.
  void AllMinHopPorts(SwitchIdx from, std::vector<uint32_t>& start,
                      std::vector<uint8_t>& ports) const;

 private:
  std::vector<NodeId> switch_nodes_;
  std::vector<SwitchIdx> index_;     // by NodeId
  std::vector<uint32_t> link_start_; // CSR offsets into links_, size S + 1
  std::vector<Link> links_;
  std::vector<uint8_t> hops_;        // row-major [from][to]; symmetric (cables are undirected)
};

}  // namespace ibsm::routing
