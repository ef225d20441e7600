// The LFT stage's state and work (ARCHITECTURE.md "Heavy sweep", switch info and lft
// blocks): what each switch's linear forwarding table is known to hold, block by block and
// without a copy of it; the reads that learn it where nothing is known; and the Sets that
// bring a switch to new tables, only of the blocks it lacks, the urgent ones first.
//
// Threading: the io_context thread that owns the pipeline.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/types.h"
#include "fabric/fabric.h"
#include "mad/attr/linear_forwarding_table.h"
#include "routing/routing_engine.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"

namespace ibsm::sm {

// LFT block `b` as a switch programmed from `t` holds it: entries past the table drop.
mad::LinearForwardingTable LftBlock(const routing::SwitchTable& t, size_t b);

// What a repair's re-route says of its tables (`to`) against the ones it started from
// (`from`): only the blocks `blocks` lists (by switch index of `to`) can differ. The push then
// compares those alone for a switch known to hold `from` (at 3-tier k=48 every block of every
// switch, 1.4 million, was compared: 14-16 ms of the repair on the io thread).
struct LftHint {
  std::shared_ptr<const routing::RoutingTables> from, to;
  routing::BlockSet blocks;
};

// A sweep's LFT SMPs.
struct LftCounts {
  uint64_t read = 0;    // blocks read where the SM knew nothing of a switch's table
  uint64_t sent = 0;    // blocks Set
  uint64_t urgent = 0;  // of those, blocks that sent LIDs to ports without a cable
};

class LftProgrammer {
 public:
  // `issue(id, message)` hears of each failed Set (SM-LFT-002).
  using IssueFn = std::function<void(std::string_view id, std::string message)>;
  // REQUIRES: `pipeline` outlives this.
  LftProgrammer(SmpPipeline& pipeline, IssueFn issue)
      : pipeline_(pipeline), issue_(std::move(issue)) {}

  // The counts start again (each sweep).
  void BeginSweep() { run_ = {}; }
  const LftCounts& run() const { return run_; }

  // The LinearFDBTop this SM set on switch `g`; nullopt for a switch it knows nothing of.
  std::optional<uint16_t> top(Guid g) const;
  // A takeover: the switch holds the top the standby read (the old master set it).
  void set_top(Guid g, uint16_t top) { cache_[g].top = top; }
  // Another SM writes the switches from now on: nothing known of them holds.
  // Stops the push too (its cursor holds entries of cache_; Sets are fenced off by then).
  void ForgetAll() {
    ++push_;
    cache_.clear();
  }

  // Before the switch's SwitchInfo Set: how the LFT of switch `g` (NodeId `n` of `tables`,
  // reached by `path`) is known. A switch whose LinearFDBTop is not the one the SM set
  // (`reported_top`: it rebooted, or another SM programmed it) holds tables nobody knows:
  // forgotten, and true is returned (its MFTs are unknown too). What a standby read before it
  // took over (`warm_held(blocks)`, empty when nothing) stands until a heavy sweep
  // (`reread_assumed`) reads it back. Where nothing is known, the blocks up to `top` are
  // read and compared with `tables`: a block that matches needs no Set.
  bool Compare(Guid g, NodeId n, const DrPath& path, uint16_t reported_top, uint16_t top,
               const std::shared_ptr<const routing::RoutingTables>& tables, bool reread_assumed,
               const std::function<std::vector<bool>(size_t blocks)>& warm_held);

  // Queues, as the SMP window frees up, the Sets of every block up to `top` that a switch
  // routed in `tables` does not hold (paths: `path(n)`): first, switch by switch, the blocks
  // whose old entries send a LID to a port of `fabric` without a cable (a repair after a
  // cut), then the rest block-major across switches, as OpenSM does. A switch not in
  // `tables` forgets what it held. The caller waits for the pipeline to drain. `hint`, when
  // its `to` is `tables`: where a block may differ from the tables a switch held (LftHint).
  void Push(const Fabric& fabric, std::shared_ptr<const routing::RoutingTables> tables,
            uint16_t top, std::function<const DrPath&(NodeId)> path,
            const LftHint* hint = nullptr);
  // Ends the push: the blocks not sent yet never are, and those in flight are no longer
  // waited for (SmpPipeline::Abandon; a repair taking over from a heavy sweep whose Sets may
  // cross a cut cable). Their blocks stay unknown, so the next push writes them. Returns how
  // many were in flight.
  size_t Stop();

 private:
  // What a switch's LFT holds: per block, whether the switch is known to hold that block of
  // `source` (the tables it was last programmed from or compared with, kept alive here). A
  // block read or Set that does not match, or whose Set failed, is unknown and is written by
  // the next push.
  struct SwitchCache {
    std::shared_ptr<const routing::RoutingTables> source;
    const routing::SwitchTable* source_table = nullptr;  // this switch's, in `source`
    std::vector<bool> held;  // per LFT block of 64 LIDs
    uint16_t top = 0;        // LinearFDBTop we set
    // `held` came from what a standby read before it took over, not from this SM's own
    // reads or Sets: the next heavy sweep reads the blocks back.
    bool assumed = false;
    bool empty() const { return held.empty(); }
    void Clear() {
      source.reset();
      source_table = nullptr;
      held.clear();
      assumed = false;
    }
  };

  SmpPipeline& pipeline_;
  IssueFn issue_;
  std::unordered_map<Guid, SwitchCache> cache_;
  LftCounts run_;
  uint64_t push_ = 0;  // which push a feeder belongs to: a stopped push's feeds nothing more
};

}  // namespace ibsm::sm
