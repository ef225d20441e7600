// The port choice shared by minhop, updn and dnup: an engine says, for each switch s and each
// destination switch d, which egress ports of s may carry traffic towards d (its "candidates");
// the builder turns that into s's linear forwarding table for every destination LID, with
// OpenSM's rule (osm_switch_recommend_path):
//   - the first LID of a destination port leaves by the candidate carrying the fewest routes
//     so far on s, ties to the lowest port;
//   - the extra LIDs of an LMC range prefer a candidate towards a remote system image that no
//     earlier LID of the same destination port uses on s, then towards an unused remote node,
//     then any (each tier: fewest routes, lowest port);
//   - every CA/router LID counts on the port it leaves by; a switch's LIDs count once (its
//     base LID), so switch-LID routes do not weigh on the balancing of extra LIDs.
// Options (RoutingOptions):
//   - guid_routing_order: the destinations listed (end ports by port GUID, a switch also by
//     node GUID) are routed first, in that order (a GUID listed twice counts once; unknown
//     GUIDs are ignored), then the rest in LidMap::end_ports() order.
//   - port_shifting (OpenSM's rule): candidates are scanned from offset
//     (sum of their route counts / their number) mod their number, so among equally loaded
//     ports each round of destinations starts one port further on and the LIDs do not align
//     across switches. Applies to every tier above.
//   - scatter_ports (seed, 0 = off): a uniformly random choice among the least-loaded
//     candidates of the tier above (OpenSM drops the LMC tiers when scattering; we keep them).
//     The random stream is seeded per switch from the seed and the switch's node GUID, so the
//     tables do not depend on thread scheduling. Takes precedence over port_shifting.
//
// Thread-safety: BuildLfts runs options.threads workers, each owning whole switches (the route
// counters are per switch), so the result does not depend on the number of threads.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "fabric/fabric.h"
#include "routing/hop_table.h"
#include "routing/routing_engine.h"

namespace ibsm::routing {

// Switch-to-switch cables only, indexed exactly as HopTable (dense switch index in NodeId
// order; a switch's links by ascending local port), without HopTable's all-pairs distances.
// Immutable after Build; const access from many threads is safe.
class SwitchGraph {
 public:
  using Link = HopTable::Link;

  static SwitchGraph Build(const Fabric& fabric);

  size_t switch_count() const { return switch_nodes_.size(); }
  NodeId node(SwitchIdx s) const { return switch_nodes_[s]; }
  SwitchIdx index(NodeId n) const { return n < index_.size() ? index_[n] : kNoSwitch; }
  const Link* links_begin(SwitchIdx s) const { return links_.data() + link_start_[s]; }
  const Link* links_end(SwitchIdx s) const { return links_.data() + link_start_[s + 1]; }
  uint32_t link_count(SwitchIdx s) const { return link_start_[s + 1] - link_start_[s]; }

 private:
  std::vector<NodeId> switch_nodes_;
  std::vector<SwitchIdx> index_;
  std::vector<uint32_t> link_start_;
  std::vector<Link> links_;
};

// Number of 64-bit words of one destination's candidate mask on a switch with `links`
// switch-to-switch links.
inline uint32_t CandidateMaskWords(uint32_t links) { return links <= 64 ? 1 : (links + 63) / 64; }

// Where the candidates come from (an engine's path rule).
class CandidateSource {
 public:
  virtual ~CandidateSource() = default;
  // Writes, for every destination switch d, the candidate links of switch `s` towards d as a
  // bit mask: bit i of masks[d * W + i / 64] (W = CandidateMaskWords(graph.link_count(s)))
  // names the i-th link of s in SwitchGraph order. The buffer arrives zeroed; all-zero means
  // no route (always the case for d == s). Called from several threads at once, for
  // different s.
  virtual void Candidates(SwitchIdx s, uint64_t* masks) const = 0;
};

// Fills one LFT per switch of `graph` for every LID of `lids`. LIDs of end ports attached to
// no switch stay kDropPort, as do destinations a switch has no candidate towards.
RoutingTables BuildLfts(const Fabric& fabric, const LidMap& lids, const SwitchGraph& graph,
                        const CandidateSource& candidates, const RoutingOptions& options,
                        std::string_view engine);

}  // namespace ibsm::routing
