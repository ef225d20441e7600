// The routing engine interface (OpenSM's struct osm_routing_engine without
// the reach into the daemon). An engine is a pure function: fabric + LIDs + options in,
// forwarding tables out. No MADs, files, clocks or globals, so engines run on a worker pool
// over an immutable snapshot and are testable on 65,536-host fabrics in a unit test.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "fabric/fabric.h"

namespace ibsm::routing {

inline constexpr uint8_t kDropPort = 0xFF;  // LFT entry: no route
// "No index" in the engines' dense per-node and per-switch arrays.
inline constexpr uint32_t kNone = UINT32_MAX;

// LID assignment the engines route for. Base LIDs are read from the fabric's ports
// (Port::lid / Port::lmc of CA ports and switch port 0); this index answers "which port
// owns LID x" for every LID of every 2^LMC range.
class LidMap {
 public:
  // Builds the index from `fabric`: each end port with a unicast base LID owns
  // base .. base + 2^Port::lmc - 1 (clipped at kMaxUnicastLid). A switch's port 0 owns one
  // LID unless its Port::lmc says otherwise (OpenSM's lmc_esp0 FALSE). Keeps no reference
  // to `fabric`.
  explicit LidMap(const Fabric& fabric);

  // The end port owning `lid`, or kNoPort.
  PortId owner(Lid lid) const {
    return lid.value() < owner_.size() ? owner_[lid.value()] : kNoPort;
  }
  // Highest assigned unicast LID (0 if none).
  uint16_t max_lid() const { return max_lid_; }
  // Every end port with a LID: CA/router ports and switch port 0, in PortId order.
  const std::vector<PortId>& end_ports() const { return end_ports_; }
  // LIDs claimed by a second end port (the first claimant in PortId order keeps them). The LID
  // manager never produces these; a non-zero count means the fabric's LIDs are corrupt.
  size_t conflicts() const { return conflicts_; }

 private:
  std::vector<PortId> owner_;
  std::vector<PortId> end_ports_;
  uint16_t max_lid_ = 0;
  size_t conflicts_ = 0;
};

struct RoutingOptions {
  uint8_t lmc = 0;
  std::vector<Guid> root_guids;         // root_guid_file (updn/ftree)
  std::vector<Guid> cn_guids;           // cn_guid_file (ftree)
  std::vector<Guid> io_guids;           // io_guid_file (ftree)
  std::vector<Guid> guid_routing_order; // guid_routing_order_file
  bool port_shifting = false;
  uint32_t scatter_ports = 0;           // seed for port scattering; 0 = off
  unsigned threads = 1;                 // worker threads the engine may use
};

// One linear forwarding table per switch: lft[lid] = egress port (0 = the switch itself,
// kDropPort = no route). Sized max_lid + 1.
struct SwitchTable {
  NodeId node = kNoNode;
  std::vector<uint8_t> lft;
};

struct RoutingTables {
  std::string engine;               // which engine produced these tables
  std::vector<SwitchTable> switches;  // one per switch, in NodeId order
  // Index into `switches` by NodeId (kNoNode-sized entries for non-switches: SIZE_MAX).
  std::vector<size_t> switch_index;

  const SwitchTable* table(NodeId n) const {
    return n < switch_index.size() && switch_index[n] != SIZE_MAX ? &switches[switch_index[n]]
                                                                  : nullptr;
  }
};

// LFT blocks (64 LIDs each) as bits, per switch: `words` 64-bit words a switch, switch index
// `s` of a RoutingTables. A block past the words is counted in (nothing known of it).
struct BlockSet {
  size_t words = 0;
  std::vector<uint64_t> bits;

  void resize(size_t switches, size_t words_per_switch) {
    words = words_per_switch;
    bits.assign(switches * words, 0);
  }
  void add(size_t s, size_t b) { bits[s * words + (b >> 6)] |= uint64_t{1} << (b & 63); }
  // Word `w` of switch `s`: blocks 64w .. 64w + 63, all set past the words or the switches.
  uint64_t word(size_t s, size_t w) const {
    return w < words && s * words + w < bits.size() ? bits[s * words + w] : ~uint64_t{0};
  }
};

// Where tables differ from tables they were derived from (a re-route's, from the old ones),
// LID by LID, for a list of LIDs kept beside it (Rerouted::examined): for the i-th LID, when
// known[i], the switches nodes[begin[i] .. begin[i + 1]) (ascending NodeIds of the new
// fabric) are those whose entry differs from the old one or whose old entry went into a port
// whose cable changed; every other switch's entry is the old one, over the same cable, and
// the LID's owner is cabled as before. When not known[i], any switch may differ.
struct EntryChanges {
  std::vector<uint8_t> known;
  std::vector<uint32_t> begin;
  std::vector<NodeId> nodes;
};

class RoutingEngine {
 public:
  virtual ~RoutingEngine() = default;
  virtual std::string_view name() const = 0;
  // Routes every LID in `lids` on `fabric`. A non-OK Status means the engine declines (its
  // message says why: "not a fat tree: ...", "LMC > 0 unsupported"), and the chain tries the
  // next one.
  virtual Result<RoutingTables> Route(const Fabric& fabric, const LidMap& lids,
                                      const RoutingOptions& options) const = 0;
};

using EngineFactory = std::unique_ptr<RoutingEngine> (*)();

// The registry: {"minhop", MakeMinHop}, ... in one explicit table (routing_registry.cc).
struct EngineEntry {
  std::string_view name;
  EngineFactory make;
};
const std::vector<EngineEntry>& EngineRegistry();
std::unique_ptr<RoutingEngine> MakeEngine(std::string_view name);  // nullptr if unknown

// Result of running a comma-separated chain ("ftree,updn"): the tables of the first engine
// that succeeded, and why each earlier one declined.
struct ChainResult {
  RoutingTables tables;
  std::vector<std::pair<std::string, Status>> declined;
};

// The chain ibsm routes with when no routing_engine is configured: engines whose routes are
// up*/down* and so free of credit loops. OpenSM's default is minhop, which is not (the
// README's OpenSM compatibility section says so); minhop stays the last resort after them.
inline constexpr std::string_view kDefaultChain = "ftree,updn";

// True when `chain` names minhop itself (not only as the appended last resort): the operator
// chose shortest paths over deadlock freedom, and a credit loop is reported, not refused.
bool ChainNamesMinHop(std::string_view chain);

// True when `a` and `b` give every engine the same input: the same nodes (kind, ports, node
// and system image GUIDs) at the same NodeIds, the same port GUIDs, cables, LIDs and LMC.
// What routing does not read (port states, link width and speed, names) may differ: tables
// made and checked for one are the tables any engine makes, and passes, for the other.
bool SameRoutingInputs(const Fabric& a, const Fabric& b);

// True when `a` and `b` hold the same nodes (by node GUID) at the same NodeIds: tables of
// one index the switches of the other.
bool SameNodeIds(const Fabric& a, const Fabric& b);

// `tables`, made for `from`, indexed by `to`'s NodeIds: each switch of `to` gets the table
// of the switch of `from` with its node GUID (the entries are its own ports, unchanged);
// a switch of `to` that `from` did not hold gets none.
RoutingTables TablesForNodeIds(const RoutingTables& tables, const Fabric& from, const Fabric& to);

// Runs `chain` in order; minhop is appended as the last resort unless `chain` contains
// "no_fallback". InvalidArgument for an unknown engine name, and for a chain of no engine
// with "no_fallback" (nothing may route); the last engine's Status if every engine declined.
Result<ChainResult> RouteChain(std::string_view chain, const Fabric& fabric, const LidMap& lids,
                               const RoutingOptions& options);

}  // namespace ibsm::routing
