// The LIDs-and-ports stage of a sweep (ARCHITECTURE.md "Heavy sweep"): assigns every end
// port its LID (sm/model/lid_manager.h), then Sets the PortInfo of each end port whose LID,
// LMC, SM fields or link fields differ from what it holds, and the link fields (HOQLife,
// VLStallCount, MTU, ...) of switch ports that are up (docs/port-programming.md). A CA port
// is told to re-register with the SA where it lost its SA state (ClientReregister).
//
// The stage owns what it keeps between sweeps: the LIDs the subnet has held (guid2lid, for
// a restart and the next sweep), this sweep's assignment, the SM's own LID, and what each
// port should hold and answered (PortSettings, which the link and partition stages read).
// A local repair runs it on the nodes it touched alone: it kept every LID, and no other
// node's ports changed.
//
// Threading: the io thread only.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/types.h"
#include "fabric/fabric.h"
#include "sm/model/discovery.h"
#include "sm/model/lid_manager.h"
#include "sm/model/smp_pipeline.h"
#include "sm/sweep/client_reregister.h"
#include "sm/sweep/port_settings.h"
#include "sm/sweep/sm_counters.h"
#include "sm/sweep/sm_options.h"
#include "sm/sweep/sweep_engine.h"

namespace ibsm::sm {

class LidsAndPortsStage {
 public:
  // What the stage asks of the SM that hosts it.
  struct Hooks {
    std::function<const DiscoveryResult&()> model;    // the model now
    std::function<DiscoveryResult&()> mutable_model;  // the same, to change (copied if shared)
    std::function<DrPath(PortId)> end_port_path;  // where a PortInfo Set for an end port goes
    std::function<void(std::string_view id, std::string message)> issue;
    std::function<bool()> stopped;  // true: the SM stopped; nothing more runs
  };
  // REQUIRES: all outlive this.
  LidsAndPortsStage(SmpPipeline& pipeline, const SubnetManagerOptions& options,
                    SmCounters& counters, ClientReregister& rereg, Hooks hooks);

  // At start: the SM port's LID now (until a sweep assigns one), and the LIDs the subnet held
  // before (the state file's or OpenSM's guid2lid; empty with reassign_lids).
  void Start(Lid sm_lid, std::unordered_map<Guid, PersistedLid> held);

  struct Sweep {
    PortId sm_port = kNoPort;
    bool took_over = false;           // this SM took mastership over from another master
    bool first_master_sweep = false;  // no sweep of this SM has ended up as master yet
    // A warm takeover: ACTIVE switch ports keep their link fields until the heavy sweep
    // that follows it.
    bool warm_takeover = false;
    std::vector<bool> local;  // by NodeId: the nodes whose ports are compared; empty: all
    // A local repair that added no node: every port keeps the LID the last sweep assigned
    // it, so that assignment is kept (renumbered by `renumbered`, empty when the repair took
    // no node out) instead of being made again over the whole fabric. Ignored, and the LIDs
    // assigned afresh, when the last assignment does not fit the model.
    bool keep_assignment = false;
    const std::vector<PortId>* renumbered = nullptr;  // old PortId -> new (kNoPort: gone)
  };
  // Assigns the LIDs and Sets the ports that differ, counted in `ctx` (lid_changes,
  // portinfo_sets, client_reregisters); once every Set is answered, the model's LID index
  // holds the LIDs the ports accepted (a port whose Set failed keeps its own) and `done`
  // runs. Once stopped, nothing runs.
  void Run(const Sweep& sweep, SweepContext& ctx, std::function<void()> done);

  // A sweep ended: the LIDs the model's end ports hold are kept for a restart and the next
  // sweep (guid2lid()).
  void Remember(const Fabric& f);

  const LidAssignment& lids() const { return lids_; }
  Lid sm_lid() const { return sm_lid_; }
  // The LIDs kept, by port GUID (the state file's guid2lid rows).
  const std::unordered_map<Guid, PersistedLid>& guid2lid() const { return guid2lid_; }
  PortSettings& ports() { return ports_; }
  const PortSettings& ports() const { return ports_; }

 private:
  void SetEndPorts(const Sweep& sweep, SweepContext& ctx);
  void SetSwitchPorts(const Sweep& sweep, SweepContext& ctx);
  // The last assignment carried over to `f` (see Sweep::keep_assignment); false, with
  // lids_ unchanged, when it does not fit `f`.
  bool KeepAssignment(const Fabric& f, const std::vector<PortId>* renumbered);
  // Keeps the LIDs `end_ports` of `f` hold in guid2lid_ (those with one); returns how many.
  size_t Keep(const Fabric& f, const std::vector<PortId>& end_ports);

  SmpPipeline& pipeline_;
  const SubnetManagerOptions& options_;
  SmCounters& counters_;
  ClientReregister& rereg_;
  Hooks hooks_;
  LidAssignment lids_;
  Lid sm_lid_{0};
  std::unordered_map<Guid, PersistedLid> guid2lid_;
  PortSettings ports_;  // after the members it binds
};

}  // namespace ibsm::sm
