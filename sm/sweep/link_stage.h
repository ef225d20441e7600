// The links stage: OpenSM's link manager, which takes every link whose two ends are up
// INIT -> ARMED, then ARMED -> ACTIVE, with the PortInfo each port should hold
// (PortSettings::Desired) and the state asked for (docs/port-programming.md).
//
// A port state transition is not idempotent: when the reply of the Set that took effect is
// lost, its retry meets the new state and is refused (status 7, as ibsim and the spec have
// it). A failed Set is therefore read back, and counts as done when the port holds the state
// asked for (`sets_confirmed_by_readback`).
//
// Threading: the io thread only.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "fabric/fabric.h"
#include "mad/attr/port_info.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"
#include "sm/sweep/port_settings.h"
#include "sm/sweep/sm_counters.h"
#include "sm/sweep/sweep_engine.h"

namespace ibsm::sm {

class LinkStage {
 public:
  // What the stage asks of the SM that hosts it.
  struct Hooks {
    std::function<const DiscoveryResult&()> model;   // the model now
    std::function<DiscoveryResult&()> mutable_model;  // the same, to change (copied if shared)
    std::function<DrPath(PortId)> path;  // where a PortInfo Set for a port is sent
    std::function<void(std::string_view id, std::string message)> issue;
    std::function<bool()> master;   // false: not master; no pass begins
    std::function<bool()> stopped;  // true: the SM stopped; nothing more runs
  };
  // REQUIRES: all outlive this.
  LinkStage(SmpPipeline& pipeline, PortSettings& ports, SmCounters& counters, Hooks hooks)
      : pipeline_(pipeline), ports_(ports), counters_(counters), hooks_(std::move(hooks)) {}

  // Both passes over the model, figures counted in `sweep` (ports_armed, ports_activated,
  // port_state_readbacks); then `done`. A pass does not begin while the SM is not master
  // (nothing more runs: the HA protocol ends the sweep); once stopped, nothing runs.
  // `sweep` is the engine's context, which outlives the run.
  void Run(SweepContext& sweep, std::function<void()> done);
  // Between Run and `done`.
  bool running() const { return static_cast<bool>(done_); }
  // Ends the run without `done`: what is not sent yet never is, and the Sets and read-backs
  // in flight are no longer waited for (SmpPipeline::Abandon); their answers change nothing.
  // For a repair that takes over from a heavy sweep (a cable cut while the links came up:
  // the Sets whose DR path crosses it would each wait for every timeout). A port the stage
  // left in INIT or ARMED, or that took a Set whose answer was let go, is the next run's:
  // a Set it already took is refused there and read back. Returns how many were in flight.
  size_t Stop();

 private:
  void Pass(int pass);
  void OnPortStateSet(PortId p, NodeId node, uint8_t num, PortState to,
                      const mad::PortInfo& pi);

  SmpPipeline& pipeline_;
  PortSettings& ports_;  // reads what each port should hold, notes what it answered
  SmCounters& counters_;
  Hooks hooks_;
  SweepContext* sweep_ = nullptr;  // of the run
  std::function<void()> done_;
  uint64_t run_ = 0;  // which run a pass belongs to: a pass of a stopped run ends there
};

}  // namespace ibsm::sm
