// Simulated SHARP aggregation nodes (docs/ar-sharp.md). A
// SHARP-capable switch (fabric/aggregation_node.h: WithAggregationNodes) has an AN CA behind
// its last port. This extension makes those switches and ANs answer what real ones do:
//  - the switch: GeneralInfo (0xFF17, modifier 4) with capability bit 18 set, and
//    MlnxExtendedPortInfo (0xFF90) of the AN-facing port with SHArPANEn read/write;
//  - the AN, once SHArPANEn is set: class 0x0B ANInfo, QPAllocation, QPCConfig, TreeConfig
//    and ResourceCleanup (mad/attr/sharp.h, ibsm encoding v2), storing what was configured
//    so tests read it back. Before it is enabled the AN answers nothing, as a disabled AN.
//    It is strict where a device would be: a QPCConfig Set to ready that leaves a field a
//    reliable-connected QP needs unset or invalid (IncompleteRcField) is refused with status
//    0x1C and changes nothing; QPCConfig Get finds the QP by the QPN in its data; a release
//    or a cleanup names QPs of the job and tree that own them.
// Legacy switches answer none of these (the SMA's "unsupported attribute").
//
// Threading: the Simulator's (single) thread. Untrusted input: every MAD gets a status
// (never a crash); counters say how many were refused.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "fabric/aggregation_node.h"
#include "fabric/fabric.h"
#include "mad/attr/sharp.h"
#include "sim/simulator.h"

namespace ibsm::sim {

struct SimAnOptions {
  uint16_t tree_table_size = 64;  // trees per AN
  uint8_t tree_radix = 48;        // children per tree node (> 44: needs "add children")
  uint16_t max_qps = 2048;
  uint16_t sharp_version = 2;
  // Firmware that marks the AN-facing switch port as a special port of type AN
  // (MlnxExtendedPortInfo byte 47) and says so in GeneralInfo (bit 21); older firmware
  // does neither, and an SM can only go by the NodeDescription.
  bool special_port_marking = true;
};

class SharpSim: public NodeExtension {
 public:
  struct Qp {
    uint16_t tree_id = 0;
    uint32_t job_id = 0;
    mad::QpcConfig qpc;  // as last configured (state reset until QPCConfig Set)
  };
  struct Tree {
    uint8_t state = 0;
    uint8_t mode = 0;
    uint32_t parent_qpn = 0;
    std::vector<uint32_t> child_qpn;  // by child index
  };
  struct An {
    NodeId an = kNoNode;
    NodeId sw = kNoNode;
    PortNum sw_port{0};
    bool enabled = false;  // SHArPANEn on the switch's AN port
    bool marked = true;    // its switch port reads as a special port of type AN
    std::map<uint32_t, Qp> qps;
    std::map<uint16_t, Tree> trees;
    uint32_t next_qpn = 0x100;
  };
  struct Counters {
    uint64_t requests = 0;  // class 0x0B requests answered
    uint64_t refused = 0;   // answered with a non-zero status
    uint64_t ignored = 0;   // sent to a disabled AN (no answer)
    uint64_t answers_lost = 0;  // Sets applied whose answer LoseAnswers dropped
  };

  // Finds every AN of `fabric` (the one the Simulator was built from). Register with
  // Simulator::AddExtension.
  SharpSim(const Fabric& fabric, SimAnOptions options = {});

  // The switch port of the AN at `an_node` reads unmarked (a CA that only calls itself an
  // aggregation node). No-op for a node that is not an AN.
  void SetMarked(NodeId an_node, bool marked);

  std::optional<uint16_t> HandleSmp(NodeId node, PortNum arrival, uint8_t method,
                                    uint16_t attr_id, uint32_t attr_mod,
                                    std::span<uint8_t> data) override;
  bool HandleGmp(NodeId node, PortNum arrival, std::span<uint8_t> mad) override;
  void OnNodeReset(NodeId node) override;
  // A switch with an aggregation node reports GeneralInfo capability bit 18.
  void AddCapabilities(NodeId node, mad::GeneralInfoCapabilities& caps) const override;

  // Inspection (tests): the AN with node GUID `an_guid`, or nullptr.
  const An* FindAn(Guid an_guid) const;
  const std::vector<An>& ans() const { return ans_; }
  const Counters& counters() const { return counters_; }
  // Test hook: a different radix/tree table for one AN (an older ASIC).
  void SetLimits(Guid an_guid, uint8_t radix, uint16_t tree_table_size);
  // Fault: the next `count` Sets of class 0x0B attribute `attr_id` (any AN) are applied and
  // their answers lost on the way back, as a congested or flapping path loses them. The
  // sender cannot tell this from a request lost on the way in.
  void LoseAnswers(uint16_t attr_id, uint32_t count) { lose_[attr_id] = count; }

  // The first field a ready reliable-connected context lacks ("mtu", "pkey", ...), or
  // nullptr when `c` is complete: transport RC, a valid path MTU, a P_Key other than 0, a
  // Q_Key, both PSNs in 1..2^24-1, a unicast remote LID, a remote port GUID and a finite
  // local ACK timeout.
  static const char* IncompleteRcField(const mad::QpcConfig& c);

 private:
  struct Limits {
    uint8_t radix;
    uint16_t tree_table_size;
  };
  uint16_t AnInfoGet(const An& an, std::span<uint8_t> data) const;
  uint16_t QpAlloc(An& an, std::span<uint8_t> data);
  uint16_t QpcSet(An& an, std::span<uint8_t> data);
  uint16_t QpcGet(const An& an, uint32_t mod, std::span<uint8_t> data) const;  // QPN in data
  uint16_t TreeSet(An& an, std::span<uint8_t> data);
  uint16_t TreeGet(const An& an, std::span<uint8_t> data) const;
  uint16_t Cleanup(An& an, std::span<uint8_t> data);
  Limits LimitsOf(const An& an) const;

  SimAnOptions options_;
  std::vector<An> ans_;
  std::unordered_map<NodeId, size_t> by_an_;  // AN node -> ans_ index
  std::unordered_map<NodeId, size_t> by_sw_;  // switch node -> ans_ index
  std::unordered_map<Guid, size_t> by_guid_;
  std::unordered_map<size_t, Limits> limits_;
  std::unordered_map<uint16_t, uint32_t> lose_;  // LoseAnswers: attribute -> answers to drop
  Counters counters_;
};

}  // namespace ibsm::sim
