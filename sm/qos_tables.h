// Each port's SL-to-VL mapping tables and VL arbitration tables, read from the fabric once
// per node (IBA 14.2.5.8, 14.2.5.9), so the SA can answer SL2VLTableRecord and
// VLArbitrationTableRecord (osmtest's QoS flow, saquery --sl2vl / --vlarb).
//
// Cost: a CA port takes one SL2VL Get and up to four VLArb Gets; a switch takes one SL2VL Get
// per (input, output) pair of its cabled ports and port 0, as IBA gives a switch one table
// per pair, and up to four VLArb Gets per such port. The SM reads a node only when it first
// sees it (the tables change only when an SM writes them, and this one does not), after
// the sweep has brought the subnet up, so the reads never delay SUBNET UP.
//
// Threading: QosReader runs on the transport's io_context thread, through the SM's
// SmpPipeline; the QosMap it produces is immutable and shared with SA snapshots.
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
#include "sm/discovery.h"
#include "sm/smp_pipeline.h"

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

struct QosReadStats {
  size_t nodes = 0;       // nodes read
  uint64_t smps = 0;      // Gets sent
  uint64_t failed = 0;    // Gets that got no usable answer (table left unknown)
};

class QosReader {
 public:
  // REQUIRES: `pipeline` outlives the reader.
  explicit QosReader(SmpPipeline& pipeline) : pipeline_(pipeline) {}

  // Reads the tables of every node of `fabric` not in `known`, through the DR paths in
  // `nodes` (index = NodeId). `done` gets the new entries only. REQUIRES: not running.
  void Run(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes, const QosMap& known,
           std::function<void(QosMap fresh, QosReadStats stats)> done);
  // Queues no more reads (the ones in flight finish); `done` still runs. For shutdown.
  void Cancel() {
    if (cancelled_) *cancelled_ = true;
  }

 private:
  SmpPipeline& pipeline_;
  std::shared_ptr<bool> cancelled_;  // of the current Run
};

}  // namespace ibsm::sm
