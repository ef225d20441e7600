// The partition stage (ARCHITECTURE.md "Heavy sweep", partitions; docs/port-programming.md):
// what each port's P_Key table holds, read once and kept across sweeps; the plan of what it
// should hold (PlanPKeys, sm/model/pkey_manager.h); the Sets of the blocks that differ; and
// the partition enforcement bits of the switch ports facing end ports (OpenSM's
// pkey_mgr_enforce_partition), only where they differ and the port keeps them.
//
// Threading: the io_context thread that owns the pipeline.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/types.h"
#include "fabric/fabric.h"
#include "mad/attr/pkey_table.h"
#include "mad/attr/port_info.h"
#include "sm/model/discovery.h"
#include "sm/model/pkey_manager.h"
#include "sm/model/smp_pipeline.h"
#include "sm/sweep/sm_counters.h"

namespace ibsm::sm {

// A port by node GUID and port number: what survives the model's renumbering.
using PortKey = std::pair<Guid, uint8_t>;

// What a port's P_Key table is known to hold.
struct PKeyCache {
  std::vector<uint16_t> keys;
  std::vector<bool> known;  // per block of 32
  // Read by this SM as a standby before it took over: read again by the next heavy sweep.
  bool assumed = false;
  // Block `b` as read.
  void Store(size_t b, const mad::PKeyTable& blk) {
    if (b >= known.size()) return;
    for (size_t i = 0; i < mad::kPKeyBlockSize; ++i)
      if (b * mad::kPKeyBlockSize + i < keys.size()) keys[b * mad::kPKeyBlockSize + i] = blk.pkey[i];
    known[b] = true;
  }
};

// A sweep's partition SMPs.
struct PartitionCounts {
  uint64_t read = 0;              // P_KeyTable blocks read (not known)
  uint64_t sent = 0;              // P_KeyTable blocks Set
  uint64_t enforcement_sets = 0;  // PortInfo Sets of the enforcement bits
};

class PartitionProgrammer {
 public:
  struct Hooks {
    // The model of the running sweep, read at each step (the engine may copy it meanwhile).
    std::function<const DiscoveryResult&()> model;
    // A failed Set (SM-PKEY-002, SM-PKEY-003).
    std::function<void(std::string_view id, std::string message)> issue;
    // The PortInfo an enforcement Set carries besides the enforcement bits.
    std::function<mad::PortInfo(PortId)> desired;
    // What a port answered to an enforcement Set (what it holds now).
    std::function<void(NodeId, uint8_t port, const mad::PortInfo&)> answered;
    std::function<bool()> stopped;  // the SM is stopping: no further step
  };
  // What one run asks.
  struct Sweep {
    uint64_t number = 0;  // for the log lines
    PortId sm_port = kNoPort;
    PartitionPolicy policy;
    // A heavy sweep reads again what a standby read before it took over.
    bool reread_assumed = false;
    // A warm takeover leaves ACTIVE ports' enforcement to the heavy sweep that follows.
    bool leave_active_enforcement = false;
    // The LinearFDBTop the SM set on a switch (nullopt: none): a switch that answers another
    // rebooted, and its tables are read again.
    std::function<std::optional<uint16_t>(Guid)> top;
  };

  // REQUIRES: `pipeline` and `counters` outlive this.
  PartitionProgrammer(SmpPipeline& pipeline, SmCounters& counters, Hooks hooks)
      : pipeline_(pipeline), counters_(counters), hooks_(std::move(hooks)) {}

  // The plan of the last run: what the SA answers P_Key questions from (renumbered first,
  // where KeepPlanRenumbered left that to be done).
  const std::shared_ptr<const PKeyPlan>& plan();
  bool has_plan() const { return plan_ != nullptr; }
  // This run's counts.
  const PartitionCounts& run() const { return run_; }

  // Reads the tables not known (first sweep, a link that restarted, a switch that rebooted),
  // then sets the blocks that differ from the plan, then the switches' enforcement, waiting
  // for the pipeline between the steps; then `done`.
  void Run(Sweep sweep, std::function<void()> done);

  // After a repair that took nodes out and renumbered the model's ports (`renumbered`: old
  // PortId -> new, kNoPort for a port of a node taken out): keeps the plan, renumbered, when
  // every node taken out was a switch that faced no end port (`switches_only`), and says so.
  // The check is made now; the plan itself (a table per end port: 30 ms and more at 3-tier
  // k=48) is renumbered when it is next asked for, after the repair's last LFT block.
  bool KeepPlanRenumbered(const std::vector<PortId>& renumbered, bool switches_only);

  // A takeover: the tables the standby read stand for what the ports hold, until the next
  // heavy sweep reads them again.
  void Assume(std::map<PortKey, PKeyCache> read);
  // The fabric changed since the standby read them: they are read again.
  void ForgetAssumed();

 private:
  void ReadUnknown();
  void SetTables();
  void SetEnforcement();

  SmpPipeline& pipeline_;
  SmCounters& counters_;
  Hooks hooks_;
  Sweep sweep_;
  std::function<void()> done_;
  PartitionCounts run_;
  // What each port's P_Key table holds; a block not known is absent from `known`. Kept
  // across sweeps like the LFT cache; re-read when a port's link restarted (not ACTIVE) or
  // its switch rebooted.
  std::map<PortKey, PKeyCache> cache_;
  std::shared_ptr<const PKeyPlan> plan_;
  std::vector<PortId> pending_;  // plan_'s PortId -> the model's, not yet applied (or empty)
  // What a switch port that answered our enforcement Set without the bits asked for (ibsim's
  // switches keep none) answered: not Set again while the plan asks the same and the port
  // answers the same (SM-PKEY-004).
  struct EnforcementEcho {
    bool asked_inbound = false, asked_outbound = false;
    uint8_t got_inbound = 0, got_outbound = 0;
  };
  std::map<PortKey, EnforcementEcho> echo_;
};

}  // namespace ibsm::sm
