// QoS setup as OpenSM 3.3.23 does it with `qos TRUE` (osm_qos.c; docs/qos.md): every port's
// VL arbitration tables and SL-to-VL tables written from its class's QosLevel, by
// difference with what the port holds.
//
// - Switch external ports (not DOWN), class swe: the VLArb blocks their VLArbHighCap and
//   VLArbLowCap allow; SL2VL, when port 0 reports IsSLMappingSupported, for every input
//   port (0..N) of each such output port, modifier input << 8 | output.
// - Switch port 0, when it is an enhanced port 0, class sw0: VLArb and the (0, 0) SL2VL
//   table; a base port 0 is left alone.
// - CA and router ports, classes ca and rtr: VLArb and, with IsSLMappingSupported, SL2VL;
//   every port discovery read, each through the path that arrives on it (PathToPort).
// Every VL is masked to the port's OperationalVLs ((1 << (OperationalVLs - 1)) - 1; VL 15
// stays in SL2VL); a port with one data VL gets no VLArb. VLHighLimit is PortInfo's
// (PortSettings::Desired). A table is written when it differs from the one read (QosReader) or
// last written; a device known not to answer the attribute is not asked.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "conf/qos_config.h"
#include "fabric/fabric.h"
#include "sm/model/discovery.h"
#include "sm/model/qos_tables.h"
#include "sm/model/smp_pipeline.h"

namespace ibsm::sm {

struct QosTableSet {
  NodeId node = kNoNode;
  uint8_t port = 0;     // the port whose table it is (a switch: the output port)
  uint16_t attr_id = 0;  // SLtoVLMappingTable or VLArbitrationTable
  uint32_t modifier = 0;
  uint8_t in_port = 0;  // SL2VL: the input port (index into PortQos::sl2vl)
  uint8_t block = 0;    // VLArb: 0..3 (modifier block 1..4)
  std::array<uint8_t, 64> data{};
};

// The class of port `num` of `node` (switch port 0, external, CA, router).
conf::QosClass QosClassOf(const Node& node, uint8_t num);
// The VLHighLimit a port gets with `qos TRUE`; nullopt where QoS leaves it (a base switch
// port 0, a DOWN switch port).
std::optional<uint8_t> QosHighLimit(const Fabric& f, const std::vector<DiscoveredNode>& nodes,
                                    PortId p, const conf::QosLevels& levels);

// The Sets that bring every table to its class's, in OpenSM's order, port by port.
std::vector<QosTableSet> PlanQosSets(const Fabric& f, const std::vector<DiscoveredNode>& nodes,
                                     const QosMap& current, const QosSupportMap& support,
                                     const conf::QosLevels& levels);

struct QosProgramStats {
  uint64_t sets = 0;
  uint64_t failed = 0;
};

class QosProgrammer {
 public:
  // REQUIRES: `pipeline` outlives the programmer.
  explicit QosProgrammer(SmpPipeline& pipeline) : pipeline_(pipeline) {}

  // Sends `sets` through the pipeline. `written` gets, for every Set that succeeded, the
  // node map with the table as the port answered it (so the SA returns the tables as
  // programmed); `failures` the (node, text) of each that did not.
  struct Outcome {
    QosMap written;  // only nodes with a table written; whole NodeQos (copy of current)
    std::vector<std::pair<NodeId, std::string>> failures;
    QosProgramStats stats;
  };
  void Run(const Fabric& f, const std::vector<DiscoveredNode>& nodes, const QosMap& current,
           std::vector<QosTableSet> sets, std::function<void(Outcome)> done);
  bool running() const { return running_; }

 private:
  SmpPipeline& pipeline_;
  bool running_ = false;
};

}  // namespace ibsm::sm
