// Directed-route discovery: a breadth-first walk of the fabric with SMPs, many in flight
// (IBA 14.2.2; OpenSM's osm_state_mgr heavy sweep). Builds a Fabric from what the nodes
// answer, with the DR path by which each node was first reached.
//
// Threading: runs on the transport's io_context; Run's callback fires on that thread.
// Ownership: the Discovery must outlive the Run callback; the transport must outlive both.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fabric/fabric.h"
#include "mad/attr/node_info.h"
#include "mad/attr/port_info.h"
#include "mad/attr/switch_info.h"
#include "mad/transport.h"
#include "sm/model/smp_pipeline.h"

namespace ibsm::sm {

// One problem a sweep met and went on past. `id` is a stable log ID ("SM-DISC-002").
struct DiscoveryIssue {
  std::string id;
  std::string message;
};

struct DiscoveredNode {
  DrPath path;                  // first DR path that reached it
  mad::NodeInfo node_info;
  mad::SwitchInfo switch_info;  // switches only
  std::vector<mad::PortInfo> port_info;  // index = port number (0..num_ports); CAs: ports seen
  std::vector<bool> port_info_valid;

  // The PortInfo read of port `num`; null when it was not read.
  const mad::PortInfo* known_port_info(size_t num) const {
    return num < port_info.size() && num < port_info_valid.size() && port_info_valid[num]
               ? &port_info[num]
               : nullptr;
  }
};

struct DiscoveryResult {
  Fabric fabric;
  std::vector<DiscoveredNode> nodes;  // index = NodeId in `fabric`
  std::vector<DiscoveryIssue> issues;
  uint64_t smps_sent = 0;       // requests issued by this walk (retries are the transport's)
  uint64_t smps_failed = 0;     // requests of this walk that got no valid answer
  std::chrono::microseconds duration{0};
};

// Gives every node the DR path a breadth-first walk of `r.fabric` from the SM's node meets
// it by first, and the arrival ports that path implies (what a discovery of that fabric
// would record). Used after discovery, and after a repair takes links out of the model.
void CanonicalPaths(DiscoveryResult& r);

// `r` without the nodes whose `keep` entry is false, as a discovery that did not find them
// would have it: the rest keep their order (NodeIds renumbered densely), cables to a removed
// node are gone, and the paths are CanonicalPaths'. Used by a repair when nodes left.
void KeepNodes(DiscoveryResult& r, const std::vector<bool>& keep);

// The DR path an SMP takes to arrive on port `p` itself, for the attributes a CA or router
// applies to its arrival port whatever the modifier says (SLtoVLMappingTable,
// VLArbitrationTable, P_KeyTable: IBA 14.2.5.7-9): the node's own path for a switch port or
// the port discovery came in by, else the path of the switch (or the SM's own node)
// cabled to `p` plus that node's port. nullopt when `p` has no such path (not cabled, cabled
// to another CA, or at the hop limit). REQUIRES: `nodes` is indexed by the NodeIds of `f`.
std::optional<DrPath> PathToPort(const Fabric& f, const std::vector<DiscoveredNode>& nodes,
                                 PortId p);

class Discovery {
 public:
  // REQUIRES: `pipeline` outlives the Discovery.
  explicit Discovery(SmpPipeline& pipeline);

  // Walks the fabric from the pipeline's port; `done` runs when every SMP of the walk has
  // been answered or has failed. REQUIRES: not already running; the pipeline carries no other
  // traffic until then (the walk waits for the pipeline to drain).
  void Run(std::function<void(DiscoveryResult)> done);

 private:
  void Get(const DrPath& path, uint16_t attr_id, uint32_t attr_mod,
           std::function<void(Result<mad::Smp>)> cb);
  void OnNodeInfo(const DrPath& path, NodeId from_node, uint8_t from_port,
                  Result<mad::Smp> r);
  void ExploreNode(NodeId id);
  void OnPortInfo(NodeId id, uint8_t port, Result<mad::Smp> r);
  void Issue(std::string id, std::string message);
  void Finish();

  SmpPipeline& pipeline_;
  DiscoveryResult result_;
  std::function<void(DiscoveryResult)> done_;
  std::chrono::steady_clock::time_point start_;
  bool running_ = false;
};

// A canonical, order-independent text listing of a fabric: nodes sorted by GUID, then each
// cabled port with its peer. Two walks of the same fabric print the same text.
std::string FormatFabric(const Fabric& fabric);

}  // namespace ibsm::sm
