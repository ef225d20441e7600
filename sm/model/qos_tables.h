// Each port's SL-to-VL mapping tables and VL arbitration tables, read from the fabric once
// per node (IBA 14.2.5.8, 14.2.5.9), so the SA can answer SL2VLTableRecord and
// VLArbitrationTableRecord (osmtest's QoS flow, saquery --sl2vl / --vlarb).
//
// Both attributes are optional: some devices do not answer them at all, others answer
// "unsupported". So each (device, attribute) is probed with one read first; only a device that
// answers the probe gets its other reads, and one that does not is remembered as such
// (QosSupport) and not asked again until it changes (leaves the fabric and comes back). A
// device without a table costs one timed-out request per attribute, never one per table.
//
// Cost for a device that answers: a CA port takes one SL2VL Get and up to four VLArb Gets; a
// switch one SL2VL Get per (input, output) pair of its cabled ports and port 0 (IBA gives a
// switch one table per pair), and up to four VLArb Gets per such port.
//
// The reads go through a pipeline of their own (a small window, one round), never the
// sweep's: a heavy sweep, a trap, the SA and the control socket never wait behind them. The SM
// starts them right after discovery and logs SUBNET UP once they are in, so the SA's records
// are complete when SUBNET UP is logged.
//
// Threading: QosReader runs on the transport's io_context thread, through its SmpPipeline;
// the QosMap it produces is immutable and shared with SA snapshots.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "fabric/fabric.h"
#include "mad/attr/sl_to_vl_table.h"
#include "mad/attr/vl_arbitration_table.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"

namespace ibsm::sm {

struct PortQos {
  // SL2VL tables of this port as the output port, by input port (index 0..num_ports). A CA
  // or router port has one, at index 0. nullopt where not read.
  std::vector<std::optional<mad::SlToVlTable>> sl2vl;
  // VL arbitration blocks 1..4 (index 0..3: low lower, low upper, high lower, high upper);
  // blocks past the port's capabilities are empty tables (they hold no entry); nullopt
  // where a read failed or the port's PortInfo is unknown.
  std::array<std::optional<mad::VlArbitrationTable>, 4> vlarb;
};

struct NodeQos {
  std::vector<PortQos> ports;  // index = port number (0..num_ports)
};

// By node GUID.
using QosMap = std::unordered_map<Guid, std::shared_ptr<const NodeQos>>;

// Per device (node GUID): the optional attributes it has been found not to answer, either
// silently or with an "unsupported" status. Kept by the SM across sweeps.
struct QosSupport {
  bool no_sl2vl = false;
  bool no_vlarb = false;
};
using QosSupportMap = std::unordered_map<Guid, QosSupport>;

struct QosReadStats {
  size_t nodes = 0;            // nodes read
  uint64_t smps = 0;           // Gets sent
  uint64_t failed = 0;         // Gets that got no usable answer (table left unknown)
  uint64_t probes_failed = 0;  // (device, attribute) pairs found without the table now
  uint64_t skipped = 0;        // reads not sent: the device is known not to answer them
};

class QosReader {
 public:
  // REQUIRES: `pipeline` outlives the reader.
  explicit QosReader(SmpPipeline& pipeline) : pipeline_(pipeline) {}

  // Reads the tables of every node of `fabric` not in `known`, through the DR paths in
  // `nodes` (index = NodeId), asking no device for an attribute `support` says it lacks and
  // recording there the ones it finds lacking. `done` gets the new entries only.
  // REQUIRES: not running(); `support` outlives the run.
  void Run(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes, const QosMap& known,
           QosSupportMap* support, std::function<void(QosMap fresh, QosReadStats stats)> done);
  bool running() const { return running_; }
  // Queues no more reads (the ones in flight finish); `done` still runs. For shutdown.
  void Cancel() {
    if (cancelled_) *cancelled_ = true;
  }
  // The fabric changed under a running read (a repair took cables or nodes out): the reads
  // not sent yet go by `fabric`'s paths (nodes matched by GUID), and those of a node or port
  // it no longer reaches the same way are dropped (counted as not sent), so that no read
  // waits out its timeouts on a dead path. Reads in flight end as they end.
  void Reroute(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes);

 private:
  struct State;
  void Feed(const std::shared_ptr<State>& st, const std::shared_ptr<bool>& cancelled,
            QosSupportMap* support);

  SmpPipeline& pipeline_;
  std::shared_ptr<bool> cancelled_;  // of the current Run
  std::shared_ptr<State> state_;     // of the current Run
  bool running_ = false;
};

}  // namespace ibsm::sm
