// Spanning trees of the multicast groups over the switches, and the multicast forwarding
// tables (IBA 14.2.5.12, 18.2.4.4) that realise them.
//
// For each group: the switches its member ports hang off (a CA port's neighbour, or the
// switch itself when its port 0 joined) are the member switches; the root is the switch
// whose greatest hop count to a member switch is smallest (lowest GUID on a tie), so the
// tree stays shallow; the tree is the union of BFS shortest paths from the root to each
// member switch, which is loop-free because every switch has one parent. A switch on the
// tree forwards the MLID to its tree neighbours and to those attached member ports that
// receive (full and non members; a send-only member's switch is on the tree so that what
// it sends reaches every receiver, but nothing is forwarded to it).
//
// Pure: the fabric and the groups in, port masks out.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "fabric/fabric.h"
#include "sm/model/multicast.h"

namespace ibsm::sm {

// One switch's wanted MFT: for each MLID it forwards, a 16-bit mask per position
// (bit p of masks[k] is port 16 * k + p).
struct SwitchMft {
  uint32_t positions = 1;  // (NumPorts + 1 + 15) / 16
  std::map<uint16_t, std::vector<uint16_t>> masks;

  bool Forwards(uint16_t mlid, uint8_t port) const;
  std::vector<uint8_t> Ports(uint16_t mlid) const;
};

struct McTree {
  uint16_t mlid = 0;
  NodeId root = kNoNode;
  std::vector<NodeId> switches;  // on the tree, root first
  uint32_t depth = 0;            // greatest hop count root -> member switch
  size_t unreachable = 0;        // member switches the root cannot reach (left out)
};

struct MftPlan {
  std::map<NodeId, SwitchMft> switches;  // every switch of the fabric
  std::vector<McTree> trees;             // one per group with a member on a switch
  uint16_t max_mlid = 0;                 // highest MLID any switch forwards; 0: none
};

uint32_t MftPositions(uint8_t num_ports);

MftPlan PlanMfts(const Fabric& fabric, const std::map<mad::Gid, McGroup>& groups);

}  // namespace ibsm::sm
