// LID assignment (IBA 4.1.3, 14.2.5.6; OpenSM's osm_lid_mgr behaviour):
// 2^LMC LIDs per end port, base aligned to 2^LMC; preference (1) the persisted guid2lid
// entry, (2) the LID the port holds now if its range is free, (3) the lowest free aligned
// range. No two ports ever share a LID: of two ports claiming one, the first in assignment
// order keeps it and the other is moved, with an issue reported.
//
// Pure: fabric and persisted map in, assignment out. Deterministic: ports are taken in a
// canonical order (the SM's own port, then ascending port GUID), whatever order a sweep
// found them in.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/types.h"
#include "fabric/fabric.h"

namespace ibsm::sm {

struct LidPolicy {
  uint8_t lmc = 0;          // 0..7
  bool lmc_esp0 = false;    // switch port 0 gets 2^LMC LIDs too
  bool reassign = false;    // reassign_lids: ignore persisted and current LIDs
};

struct PersistedLid {
  uint16_t min_lid = 0;
  uint16_t max_lid = 0;
};

struct LidIssue {
  std::string id;  // stable log ID
  std::string message;
};

struct LidAssignment {
  // Per PortId: the base LID and LMC the port should hold (0 for ports that own no LID).
  std::vector<uint16_t> base;
  std::vector<uint8_t> lmc;
  std::vector<PortId> end_ports;  // in assignment order
  uint32_t changed = 0;           // end ports whose LID or LMC differs from what they hold
  uint32_t from_persisted = 0;
  uint32_t from_current = 0;
  uint32_t fresh = 0;
  uint32_t unassigned = 0;        // LID space exhausted
  std::vector<LidIssue> issues;
};

// The ports that own LIDs: switch port 0 and every CA/router port with a port GUID.
std::vector<PortId> EndPorts(const Fabric& fabric);

// `persisted` maps port GUID -> range from guid2lid (state DB or OpenSM's file); entries of
// ports absent from `fabric` keep their ranges reserved so the ports get them back.
LidAssignment AssignLids(const Fabric& fabric, PortId sm_port,
                         const std::unordered_map<Guid, PersistedLid>& persisted,
                         const LidPolicy& policy);

}  // namespace ibsm::sm
