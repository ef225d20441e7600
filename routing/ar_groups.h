// Adaptive-routing groups and AR forwarding tables, computed on top of a base
// engine's static tables. Pure: fabric + LIDs + static tables + options in, tables out.
//
// The tree rule (NVIDIA's "tree" AR algorithm, docs/ar-sharp.md): for switch S and a
// destination LID owned by a CA or router port cabled to leaf switch L (S != L), the group is
// every port of S on a minimal-hop path to L. On a fat tree that is all up-ports on a source
// leaf and the parallel down-links on a spine. On a tree with cut cables, where the static
// routes turn from down to up for want of an up*/down* way (routing/reroute.h), AR keeps away
// from those turns: a port down to a switch that reaches L only by going up again is not in
// a group, and a switch that the static routes enter from above for L groups only its ports
// down (spreading over every minimal port there closes credit loops with the other turns).
// Heights are hops from the nearest destination leaf. Group IDs are allocated per destination leaf and
// are the same on every switch (so notifications can name them) and across restarts (the
// caller persists `group_ids`). Entries stay static (the base engine's port) when S is L
// (hosts on the destination leaf), when the group has fewer than two ports, when the static
// port is not in the group, and for switch LIDs (SMP/GMP destinations). Every entry's default
// port is the static route, which the switch uses while AR is off.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "fabric/fabric.h"
#include "routing/routing_engine.h"

namespace ibsm::routing {

// Wire values of ARLFT LidState (frozen).
enum class ArLidMode: uint8_t { kBounded = 0, kFree = 1, kStatic = 2 };
std::string_view ArLidModeName(ArLidMode m);  // "bounded", "free", "static"

struct ArEntry {
  ArLidMode mode = ArLidMode::kStatic;
  uint8_t default_port = kDropPort;  // the static route
  uint16_t group = kDropPort;        // group ID; for a static entry, the port
  friend bool operator==(const ArEntry&, const ArEntry&) = default;
};

struct ArSwitchTable {
  NodeId node = kNoNode;
  // groups[id]: the member ports (ascending); empty = unused on this switch.
  std::vector<std::vector<uint8_t>> groups;
  std::vector<ArEntry> lft;  // by LID, sized like the static LFT
  uint16_t group_top = 0;    // highest id with a non-empty group (0 if none)
  uint32_t ar_entries = 0;   // entries that are not static
  uint32_t group_count = 0;  // non-empty groups
};

struct ArTables {
  std::vector<ArSwitchTable> switches;  // one per switch with a static table, NodeId order
  std::vector<size_t> switch_index;     // by NodeId, SIZE_MAX for none
  // Destination leaf (node GUID) -> group ID: the previous map plus new leaves. Leaves no
  // longer in the fabric keep their IDs (a restart with them back keeps them too) unless the
  // IDs ran out.
  std::map<Guid, uint16_t> group_ids;
  uint16_t group_top = 0;  // over all switches

  const ArSwitchTable* table(NodeId n) const {
    return n < switch_index.size() && switch_index[n] != SIZE_MAX ? &switches[switch_index[n]]
                                                                  : nullptr;
  }
};

struct ArOptions {
  ArLidMode mode = ArLidMode::kFree;     // for the entries that get a group (free: docs/ar-sharp.md)
  uint16_t group_cap = 2048;             // IDs must stay below it (ARInfo GroupCap)
  std::map<Guid, uint16_t> previous_ids; // from the state file
};

// ResourceExhausted when the destination leaves need more IDs than group_cap.
Result<ArTables> BuildArTables(const Fabric& fabric, const LidMap& lids,
                               const RoutingTables& static_tables, const ArOptions& options);

struct ArVerifyReport {
  bool ok = true;
  uint64_t group_mismatches = 0;    // AR entries whose group != the tree rule's port set
  uint64_t missing_groups = 0;      // static entries where the rule gives >= 2 ports
  uint64_t default_mismatches = 0;  // default port != the static LFT entry
  uint64_t id_mismatches = 0;       // a destination leaf named by different IDs
  // Channel dependency graph over every port of every group (plus the static routes of the
  // rest): vertices, edges, and one cycle if there is one ("leaf-001 (0x..) port 5", ...).
  bool acyclic = true;
  uint64_t channels = 0;
  uint64_t dependencies = 0;
  std::vector<std::string> cycle;
  std::vector<std::string> problems;  // the first 20 findings, readable
};

// Checks `ar`: groups against the tree rule's port sets (computed again, per destination
// leaf), defaults against `static_tables`, one ID per destination leaf, and deadlock freedom
// of the union of all AR choices. Dependencies: towards CA/router LIDs every switch's
// entry, with all group ports; towards switch LIDs the static routes walked from every
// switch with a CA cabled (as CheckCreditLoops counts them).
ArVerifyReport VerifyArTables(const Fabric& fabric, const LidMap& lids,
                              const RoutingTables& static_tables, const ArTables& ar);

}  // namespace ibsm::routing
