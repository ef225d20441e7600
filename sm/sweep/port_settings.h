// The PortInfo each port should hold, as OpenSM's link manager writes it
// (docs/port-programming.md), and what ports answered to the SM's PortInfo Sets: the cache of
// the LIDs-and-ports stage (LidsAndPortsStage, which owns it), which the link stage
// (LinkStage) and the partition stage read too.
//
// Some agents do not keep every field they are set (ibsim keeps no SubnetTimeout,
// M_KeyLeasePeriod, NeighborMTU, MasterSMSL, VLStallCount or error thresholds): a field that
// still reads what the port answered to the SM's last Set counts as in sync, or every sweep
// would Set the port again.
//
// Threading: the io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <utility>

#include "base/types.h"
#include "fabric/fabric.h"
#include "mad/attr/port_info.h"
#include "sm/model/discovery.h"
#include "sm/model/lid_manager.h"
#include "sm/sweep/sm_options.h"

namespace ibsm::sm {

class PortSettings {
 public:
  // What Desired reads, each time it is asked: the engine's model now (the SM copies it
  // before changing it, so a reference would not do), this sweep's LIDs and the SM's LID.
  // REQUIRES: `options`, `lids` and `sm_lid` outlive this.
  PortSettings(const SubnetManagerOptions& options,
               std::function<const DiscoveryResult&()> model, const LidAssignment& lids,
               const Lid& sm_lid)
      : options_(options), model_(std::move(model)), lids_(lids), sm_lid_(sm_lid) {}

  // What port `p` of the model should hold: its LID, LMC and the SM's fields for an end port
  // (a CA port, a switch's port 0), HOQLife and VLStallCount for a switch's external port,
  // and the link fields for every port with a link. State fields are "no change".
  mad::PortInfo Desired(PortId p) const;
  // True when port `p`, holding `now`, needs a Set for the link manager's fields of `want`
  // (NeighborMTU, OperationalVLs, link width and speeds, thresholds, MasterSMSL, HOQLife,
  // VLStallCount, LinkDownDefaultState, VLHighLimit).
  bool LinkFieldsDiffer(PortId p, const mad::PortInfo& now, const mad::PortInfo& want) const;
  // True when end port `port_guid`'s SubnetTimeout and M_KeyLeasePeriod are in sync.
  bool TimeoutAndLeaseInSync(Guid port_guid, const mad::PortInfo& now,
                             const mad::PortInfo& want) const;
  // The AttributeModifier of a PortInfo Set to `p`: its number, and bit 31 where the port
  // (a switch: its port 0) has extended speeds, as OpenSM's link manager sends it.
  uint32_t SetModifier(PortId p) const;

  // What port `p` answered to a Set of its link fields (LinkFieldsDiffer's echo).
  void NoteLinkEcho(PortId p, const mad::PortInfo& answered);
  // What end port `port_guid` answered to a Set of `want` (TimeoutAndLeaseInSync's echo):
  // kept only where it did not take SubnetTimeout or M_KeyLeasePeriod.
  void NoteEndPortEcho(Guid port_guid, const mad::PortInfo& answered, const mad::PortInfo& want);

 private:
  struct DeviceEcho {
    uint8_t subnet_timeout = 0;
    uint16_t m_key_lease = 0;
  };
  const SubnetManagerOptions& options_;
  std::function<const DiscoveryResult&()> model_;
  const LidAssignment& lids_;
  const Lid& sm_lid_;
  std::unordered_map<Guid, DeviceEcho> echo_;  // by port GUID
  std::map<std::pair<Guid, uint8_t>, mad::PortInfo> link_echo_;  // by node GUID, port
};

}  // namespace ibsm::sm
