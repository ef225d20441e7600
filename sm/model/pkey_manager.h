// Partitions on the fabric (OpenSM's osm_pkey_mgr.c): from the partition set and the
// discovered fabric, the P_Key table every end port should hold and, with partition
// enforcement, the table of every switch port facing an end port. Pure: the sweep reads what
// the ports hold, asks PlanPKeys, and sends the blocks that differ.
//
// Membership (as OpenSM): the default partition 0x7fff holds every end port, as a full member
// when there is no partitions.conf and as a limited member when there is one; the SM's port
// is always a full member. Then the file's definitions apply in order, a later line about a
// port replacing an earlier one for the same P_Key; with allow_both_pkeys a port may hold a
// P_Key both as full and as limited member.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "conf/partitions.h"
#include "fabric/fabric.h"
#include "sm/model/discovery.h"

namespace ibsm::sm {

enum class PartEnforce : uint8_t { kBoth, kIn, kOut, kOff };

// "both" | "in" | "out" | "off" (opensm.conf part_enforce); InvalidArgument otherwise.
Result<PartEnforce> ParsePartEnforce(std::string_view s);

struct PartitionPolicy {
  // Null: no partitions.conf (every end port a full member of the default partition).
  std::shared_ptr<const conf::PartitionConfig> config;
  PartEnforce enforce = PartEnforce::kBoth;
  bool allow_both_pkeys = false;
};

// A port's memberships: P_Key base (15 bits) -> kFullBit | kLimitedBit.
inline constexpr uint8_t kFullBit = 1;
inline constexpr uint8_t kLimitedBit = 2;
using Memberships = std::map<uint16_t, uint8_t>;

// What ports' tables should hold. Tables are whole (capacity entries, 0 = unused).
struct PKeyPlan {
  std::map<PortId, std::vector<uint16_t>> tables;
  std::map<PortId, Memberships> members;  // end ports only
  // Switch ports facing an end port, on switches that can enforce: the enforcement bits
  // their PortInfo should carry (both zero with part_enforce off).
  struct Enforcement {
    bool inbound = false;
    bool outbound = false;
  };
  std::map<PortId, Enforcement> enforcement;
  // P_Key base -> the partition's sl= (PathRecords without an SL take it, as in OpenSM).
  std::map<uint16_t, uint8_t> sl_by_pkey;
  std::vector<DiscoveryIssue> issues;  // SM-PKEY-001: more P_Keys than the port holds
};

// End ports of a discovered fabric: CA and router ports that answered PortInfo, and switch
// port 0. These are the ports partitions.conf can name.
std::vector<PortId> PartitionEndPorts(const DiscoveryResult& d);
// Capacity (entries) of `p`'s P_Key table: NodeInfo PartitionCap for end ports, SwitchInfo
// PartitionEnforcementCap for switch external ports (IBA 14.2.5.3/14.2.5.4).
size_t PKeyCapacity(const DiscoveryResult& d, PortId p);
// Where `p`'s P_Key table is read and set: the DR path (PathToPort: a CA answers for its
// arrival port) and the port the modifier names (a switch's port; 0 for a CA). nullopt when
// `p` has no such path.
std::optional<std::pair<DrPath, uint8_t>> PKeyTarget(const DiscoveryResult& d, PortId p);
// Switch external ports whose tables partition enforcement governs: those facing an end
// port, on switches with PartitionEnforcementCap > 0.
std::vector<PortId> EnforcingSwitchPorts(const DiscoveryResult& d);

// Every end port's memberships under `policy`. `sm_port` is SELF.
std::map<PortId, Memberships> ResolveMemberships(const DiscoveryResult& d, PortId sm_port,
                                                 const PartitionPolicy& policy);

// `current(p)` is what `p` holds now when known (else null): a P_Key keeps its index, so
// a reload does not move the P_Key index a running IPoIB interface or QP was given.
PKeyPlan PlanPKeys(const DiscoveryResult& d, PortId sm_port, const PartitionPolicy& policy,
                   const std::function<const std::vector<uint16_t>*(PortId)>& current);

// The P_Key two end ports should use to talk, given their memberships: one both hold with at
// least one of them a full member (limited-limited does not talk, IBA 10.9.3); `requested`
// (a base or a full key) when given must be that one. Full-full first, then the default
// partition, then the lowest key. nullopt when they share none.
std::optional<uint16_t> SharedPKey(const Memberships& a, const Memberships& b,
                                   std::optional<uint16_t> requested);

}  // namespace ibsm::sm
