// SHARP aggregation nodes in the fabric model (docs/ar-sharp.md "SHARP"). An
// aggregation node (AN) lives inside a SHARP-capable switch ASIC and shows up as a CA whose
// NodeDescription names it "Aggregation Node", cabled to the switch's extra port (the last
// one: a SHARP switch reports NumPorts including it).
//
// Routing engines and tools must not count an AN as a host: a spine with an AN is still a
// spine. Everything that asks "is this CA a compute node" asks IsAggregationNode first.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "fabric/fabric.h"

namespace ibsm {

// The text that marks an AN's NodeDescription (NVIDIA's: "Mellanox Technologies Aggregation
// Node"); matched as a substring.
inline constexpr std::string_view kAggregationNodeText = "Aggregation Node";

// True for a CA whose NodeDescription names it an aggregation node.
bool IsAggregationNode(const Node& node);
inline bool IsAggregationNode(const Fabric& f, NodeId n) { return IsAggregationNode(f.node(n)); }

// The switch port an AN is cabled to; nullopt if `an` is not an AN or not cabled to a switch.
std::optional<PortId> AggregationNodeSwitchPort(const Fabric& f, NodeId an);

// A CA port cabled to a switch that is not an AN: a host's port.
bool IsHostPort(const Fabric& f, PortId p);

struct AggregationNodeLink {
  NodeId sw = kNoNode;
  NodeId an = kNoNode;
};

// A copy of `in` in which every switch `capable` accepts has one more port, cabled to a new
// AN CA: node GUID = switch GUID with bit 60 set (then the next free), port GUID = node
// GUID + 1, name "<switch name>-an", description "Aggregation Node <switch name>". Every
// node keeps its NodeId (ANs are appended); PortIds change. A switch already at 254 ports
// is left legacy. `links` (optional) receives the pairs added.
Result<Fabric> WithAggregationNodes(const Fabric& in,
                                    const std::function<bool(const Node&)>& capable,
                                    std::vector<AggregationNodeLink>* links = nullptr);

}  // namespace ibsm
