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

// `r` with its nodes renumbered in ascending node GUID order (what a discovery ends with, so
// NodeIds and routing tie-breaks do not depend on the order answers arrived in), then
// CanonicalPaths.
void Canonicalize(DiscoveryResult& r);

// A port of a model to look behind (Discovery::Grow): a NodeId of its fabric and a port.
struct GrowFrom {
  NodeId node = kNoNode;
  uint8_t port = 0;
};

// What a Grow changed in the model it started from.
struct GrowStats {
  size_t nodes_added = 0;    // nodes the model did not hold
  size_t cables_added = 0;   // cables put in where the model had none, or another
  size_t cables_moved = 0;   // model cables taken out because an end now faces another port
  size_t cables_down = 0;    // model cables of re-read nodes whose port is DOWN now
  size_t nodes_reread = 0;   // nodes the model held, read again
  size_t forgot = 0;         // of those, switches that no longer hold what the model says
};

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

  // Walks on from `base` (a repair's model, the SM's node its root) behind the ports of
  // `from`, which are up with no cable in the model or trained again (INIT) since it was
  // made; their nodes are taken as read already. Behind each port:
  // - A node `base` does not hold is read and walked as Run walks (its other ports followed).
  // - One it holds is cabled there (a cable either end had elsewhere is taken out) and read
  //   again by the path the walk came by: a CA its arrival PortInfo; a switch its SwitchInfo
  //   and the PortInfo of port 0 and of the arrival port (and of each further port the walk
  //   meets it on), and when those say it no longer
  //   holds what the model does (a LinearFDBTop or a LID not the model's: it rebooted) every
  //   PortInfo. Of a known node's ports only those up without a cable in the model, or INIT
  //   where the model had the cable up, are followed; one now DOWN is taken out.
  // A NodeInfo behind a port of `from` that is not answered is an issue (SM-DISC-001).
  // `done` gets the model in GUID order with canonical paths (Canonicalize); the nodes no
  // longer reached from the root are the caller's to take out. REQUIRES: as for Run.
  void Grow(DiscoveryResult base, const std::vector<GrowFrom>& from,
            std::function<void(DiscoveryResult, GrowStats)> done);

  // Stops a walk (Run or Grow) where it is: what it has not sent is taken back from the
  // pipeline, answers still in flight are ignored when they come, and `done` never runs.
  // The Discovery can Run or Grow again at once. No effect when nothing runs.
  void Cancel();
  bool running() const { return running_; }

 private:
  void Get(const DrPath& path, uint16_t attr_id, uint32_t attr_mod,
           std::function<void(Result<mad::Smp>)> cb);
  void OnNodeInfo(const DrPath& path, NodeId from_node, uint8_t from_port,
                  Result<mad::Smp> r);
  void ExploreNode(NodeId id);
  // SwitchInfo of `id` into the result (SM-DISC-007 when not answered), then `then`.
  void GetSwitchInfo(const DrPath& path, NodeId id,
                     std::function<void(const mad::SwitchInfo&)> then);
  void OnPortInfo(NodeId id, uint8_t port, Result<mad::Smp> r);
  // Asks the node behind `port` of `id` (reached by `path`) for its NodeInfo.
  void Follow(const DrPath& path, NodeId id, uint8_t port);
  // Grow: a node the model held, met again by `path` arriving on `arrival`.
  void OnKnownNode(const DrPath& path, NodeId id, uint8_t arrival);
  void ReadAllPorts(NodeId id);
  void Issue(std::string id, std::string message);
  void Finish();

  SmpPipeline& pipeline_;
  DiscoveryResult result_;
  std::function<void(DiscoveryResult)> done_;
  // Grow only. Per NodeId of result_: read in this walk (added or read again), its ports all
  // asked, and the path and arrival port the walk met it by.
  struct Met {
    bool read = false;
    bool all_ports = false;
    bool added = false;
    DrPath path;
    uint8_t arrival = 0;
    std::vector<uint8_t> arrivals;  // known nodes: the ports the walk arrived on, each read
  };
  bool growing_ = false;
  std::vector<Met> met_;
  GrowStats grow_stats_;
  std::function<void(DiscoveryResult, GrowStats)> grown_;
  std::chrono::steady_clock::time_point start_;
  bool running_ = false;
  // Bumped by Run, Grow and Cancel: an answer or an idle call of an earlier walk is ignored.
  uint64_t walk_ = 0;
};

// A canonical, order-independent text listing of a fabric: nodes sorted by GUID, then each
// cabled port with its peer. Two walks of the same fabric print the same text.
std::string FormatFabric(const Fabric& fabric);

}  // namespace ibsm::sm
