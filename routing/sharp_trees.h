// SHARP reduction trees over the aggregation nodes of a fabric (ar-sharp.md "Trees
// on a fat tree"). Pure: fabric + AN limits in, trees out. No MADs, files or clocks.
//
// The placement (NVIDIA's is not public; this one is ibsm's, deterministic and documented):
//  1. Hosts are CA ports cabled to a switch that are not aggregation nodes. Leaf switches
//     are the switches with a host. Every switch gets a tier: its hop distance over
//     switch-to-switch cables from the nearest leaf (leaves 0). switch_tiers = highest
//     tier + 1 (2 on a 2-tier fat tree, 3 on a 3-tier one).
//  2. One tree per top-tier switch with a usable AN, in ascending switch GUID order. A tree
//     keeps the ID its root had before (`previous_ids`), else gets the lowest free ID >= 1.
//  3. A tree grows down one tier at a time: the candidates at tier t are the usable-AN
//     switches of tier t cabled to a tree node at tier t+1, in GUID order; each joins under
//     the cabled parent with the fewest children (lowest GUID on ties) that still has room
//     under its radix. An AN whose tree table is full joins no further tree.
//  4. A leaf AN's children are its switch's hosts in port order, up to its radix.
// A tree that reaches no host is dropped. Hosts a tree misses are listed per tree, and the
// plan lists the hosts missed by some tree (`uncovered`) and by every tree (`never_covered`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/types.h"
#include "fabric/fabric.h"

namespace ibsm::routing {

struct AnLimits {
  uint8_t radix = 0;             // ANInfo tree radix: children per tree node
  uint16_t tree_table_size = 0;  // ANInfo tree table size: trees per AN
};

struct SharpInput {
  std::map<NodeId, AnLimits> ans;  // usable ANs (enabled, answered ANInfo) by AN NodeId
  std::map<Guid, uint16_t> previous_ids;  // root switch GUID -> tree ID to keep
};

struct SharpTreeNode {
  NodeId an = kNoNode;
  NodeId sw = kNoNode;
  int32_t parent = -1;           // index in SharpTree::nodes; -1 at the root
  uint32_t tier = 0;             // the switch's tier (0 = leaf)
  std::vector<uint32_t> children;  // child AN node indexes, in child-index order
  std::vector<PortId> hosts;     // leaf ANs: host ports (children after the ANs: none)
};

struct SharpTree {
  uint16_t id = 0;
  NodeId root_switch = kNoNode;
  std::vector<SharpTreeNode> nodes;  // nodes[0] is the root; every parent before its children
  uint32_t depth = 0;                // switch tiers the tree spans
  size_t host_count = 0;
  std::vector<PortId> missing_hosts;  // hosts of the fabric this tree does not reach
};

struct SharpPlan {
  std::vector<SharpTree> trees;  // ascending root GUID
  uint32_t switch_tiers = 0;
  size_t an_count = 0;            // usable ANs
  std::vector<PortId> hosts;       // every host port, in PortId order
  std::vector<PortId> uncovered;   // hosts some tree misses
  std::vector<PortId> never_covered;  // hosts no tree reaches
  std::vector<std::string> notes;  // why a root, AN or host was left out
};

SharpPlan BuildSharpTrees(const Fabric& fabric, const SharpInput& input);

// The checks the SHARP stage relies on, as problems (empty = all hold): every tree acyclic (each AN
// once, parents before children), edges are cables between adjacent tiers, radix and tree
// table respected, depth = switch_tiers, each tree spans every host except the ones it lists
// missing, and with `require_full_span` none missing.
std::vector<std::string> CheckSharpPlan(const Fabric& fabric, const SharpInput& input,
                                        const SharpPlan& plan, bool require_full_span);

}  // namespace ibsm::routing
