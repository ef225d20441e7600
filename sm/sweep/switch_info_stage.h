// The switch-info stage of a sweep (ARCHITECTURE.md "Heavy sweep"), between routing and the
// LFT push: each routed switch gets its SwitchInfo Set where LinearFDBTop, LifeTimeValue or
// PortStateChange differ from what the sweep wants, and what its LFT holds is made known
// first (LftProgrammer::Compare: blocks read back where nothing is known), so the push that
// follows sends only the blocks that differ.
//
// Its cache is the LFT stage's (LftProgrammer, the top each switch was set and the blocks it
// holds); a switch found holding tables nobody knows has its MFTs forgotten too
// (MftProgrammer::Forget).
//
// Threading: the io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "routing/routing_engine.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"
#include "sm/sweep/lft_programmer.h"
#include "sm/sweep/mft_programmer.h"
#include "sm/sweep/sm_options.h"
#include "sm/sweep/sweep_engine.h"

namespace ibsm::sm {

class SwitchInfoStage {
 public:
  // What the stage asks of the SM that hosts it.
  struct Hooks {
    std::function<const DiscoveryResult&()> model;    // the model now
    std::function<DiscoveryResult&()> mutable_model;  // the same, to change (copied if shared)
    std::function<void(std::string_view id, std::string message)> issue;
    std::function<bool()> stopped;  // true: the SM stopped; nothing more runs
  };
  // REQUIRES: all outlive this.
  SwitchInfoStage(SmpPipeline& pipeline, const SubnetManagerOptions& options,
                  LftProgrammer& lfts, MftProgrammer& mfts, Hooks hooks)
      : pipeline_(pipeline), options_(options), lfts_(lfts), mfts_(mfts),
        hooks_(std::move(hooks)) {}

  struct Sweep {
    uint16_t top = 0;  // the LinearFDBTop every switch gets (the highest LID routed)
    std::shared_ptr<const routing::RoutingTables> tables;  // switches not in them are left
    // A heavy sweep reads back what a standby read before it took over; a repair does not.
    bool reread_assumed = true;
    // A warm takeover: per block of switch `n`'s table, whether the standby saw it held
    // (empty: nothing known). Null otherwise.
    std::function<std::vector<bool>(NodeId n, size_t blocks)> warm_held;
  };
  // Compares and Sets as above, counted in `ctx` (switchinfo_sets, lft_blocks_read); once
  // every SMP is answered, `done` runs. Once stopped, nothing runs.
  void Run(Sweep sweep, SweepContext& ctx, std::function<void()> done);

 private:
  SmpPipeline& pipeline_;
  const SubnetManagerOptions& options_;
  LftProgrammer& lfts_;
  MftProgrammer& mfts_;
  Hooks hooks_;
};

}  // namespace ibsm::sm
