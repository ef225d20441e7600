// The subnet snapshot a sweep publishes (ARCHITECTURE.md "the published snapshot").
//
// Threading: immutable once published; any thread may read a snapshot it holds.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/types.h"
#include "conf/qos_policy.h"
#include "fabric/fabric.h"
#include "mad/attr/sm_info.h"
#include "routing/routing_engine.h"
#include "sm/model/discovery.h"
#include "sm/model/pkey_manager.h"
#include "sm/model/qos_tables.h"

namespace ibsm::sm {

// One sweep as the SM left it, published once the sweep is over and immutable from then on:
// the fabric (LIDs and PortInfo as programmed), the routing tables its switches hold, the
// partitions and QoS tables, and the SM itself. Every observer reads this one record: the SA
// answers from it, the state writer writes the sweep's rows and dumps from it, and
// ibsmctl's route, lft and check read it (ARCHITECTURE.md "the published snapshot").
struct SubnetSnapshot {
  uint64_t sweep = 0;  // heavy sweep number that produced it
  // The sweep's fabric and what its nodes answered, shared with the SM, which copies it
  // before changing it (one copy of the fabric model, not two, while nothing changes).
  std::shared_ptr<const DiscoveryResult> discovery;
  const Fabric& fabric() const;                     // empty without `discovery`
  const std::vector<DiscoveredNode>& nodes() const;  // index = NodeId of fabric()
  std::shared_ptr<const routing::RoutingTables> tables;  // null if routing never succeeded
  // The LID index of `fabric` (PathRecord); null: no PathRecord is answered (NO_RESOURCES).
  std::shared_ptr<const routing::LidMap> lids;
  // Each port's MTU as a path through it may use, by PortId of `fabric`: the smaller
  // MTUCap of the port and its neighbour (mad::mtu codes); 0 where unknown.
  std::vector<uint8_t> port_mtu;
  uint8_t packet_life_time = 18;  // PathRecord PacketLifeTime (OpenSM's subnet_timeout)
  // SL2VL and VLArb tables by node GUID (SL2VLTableRecord, VLArbitrationTableRecord); null
  // or missing nodes: not read yet.
  std::shared_ptr<const QosMap> qos;
  // The QoS policy PathRecords take their SL from (qos TRUE with a qos_policy_file); null:
  // none (docs/qos.md).
  std::shared_ptr<const conf::QosPolicy> qos_policy;
  // qos TRUE: a PathRecord's SL must not lead to VL 15 on any hop of its path (OpenSM).
  bool qos_enabled = false;
  uint64_t subnet_prefix = 0xfe80000000000000ull;
  // The SM that serves (SMInfoRecord).
  Lid sm_lid{0};
  Guid sm_port_guid{0};
  uint64_t sm_key = 0;
  uint32_t act_count = 0;
  uint8_t sm_priority = 0;
  mad::SmState sm_state = mad::SmState::kNotActive;
  // Partitions: every end port's memberships and every programmed port's P_Key table
  // (P_KeyTableRecord). With `partitioned` (a partitions.conf is in force) the SA hides
  // from an untrusted requester the CAs it shares no partition with (NodeRecord,
  // PortInfoRecord, P_KeyTableRecord, SL2VL/VLArb tables, GUIDInfoRecord, LinkRecord,
  // PathRecord, ServiceRecord), as OpenSM does.
  std::shared_ptr<const PKeyPlan> pkeys;
  bool partitioned = false;

  // True when `a` and `b` share a partition (one at least a full member); always without
  // partitions, and for a port and itself.
  bool SharePartition(PortId a, PortId b) const;
  // True when end port `p` holds P_Key base `pkey` (either membership).
  bool HoldsPKey(PortId p, uint16_t pkey) const;

  // The LID a node's records carry: port 0's for a switch, else `port`'s. 0 if none.
  uint16_t RecordLid(NodeId n, PortNum port) const;
};

}  // namespace ibsm::sm
