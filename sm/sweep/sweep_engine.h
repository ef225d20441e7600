// The heavy sweep's engine: a table of stages run in order over one sweep context
// (ARCHITECTURE.md "Heavy sweep").
//
// A stage is a function that queues its requests and, once they are answered, hands on to
// the next row (SweepEngine::Next) or to a later one (JumpTo). What a sweep carries from
// stage to stage lives in its SweepContext, fresh for each sweep (Begin); what outlives a
// sweep (caches, the last good tables, the model) belongs to the stages' own objects.
//
// Threading: the io thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/types.h"
#include "fabric/fabric.h"

namespace ibsm::sm {

struct SweepStats {
  uint64_t number = 0;
  bool heavy = true;
  // A repair sweep: discovery replaced by a re-read of the switches that reported a change
  // (heavy is true too: every later stage ran).
  bool repair = false;
  // A repair that a heavy sweep handed its model to once switches reported changes while it
  // routed (log "a repair sweep takes over"): it did what that heavy sweep would have, and
  // no heavy sweep follows for it.
  bool in_place_of_heavy = false;
  size_t repair_links_lost = 0;  // cables a repair sweep took out of the model
  size_t repair_nodes_lost = 0;  // nodes a repair sweep found unreachable and took out
  // Cables a repair sweep found up where the model had none, or bounced (INIT again), and
  // put (back) into the model; nodes it found behind them that the model did not hold.
  size_t repair_links_up = 0;
  size_t repair_nodes_joined = 0;
  std::chrono::steady_clock::time_point started;
  std::chrono::microseconds duration{0};
  uint64_t smps = 0;
  uint64_t smps_failed = 0;
  size_t nodes = 0, switches = 0, cas = 0, links = 0;
  uint32_t lid_changes = 0;
  uint64_t portinfo_sets = 0;
  uint64_t client_reregisters = 0;  // CA ports told to register with the SA again
  uint64_t lft_blocks_sent = 0;
  // Of those, the blocks sent first because the switch's previous table sent a LID in them
  // to a port that is no longer cabled (traffic there is being dropped until rewritten).
  uint64_t lft_blocks_urgent = 0;
  uint64_t lft_blocks_read = 0;
  uint64_t switchinfo_sets = 0;
  uint64_t pkey_blocks_sent = 0;   // P_KeyTable Sets (blocks that differed)
  uint64_t pkey_blocks_read = 0;   // P_KeyTable Gets (ports whose table was not known)
  uint64_t enforcement_sets = 0;   // PortInfo Sets of partition enforcement bits
  uint64_t qos_sets = 0;           // SL2VL and VLArb Sets (tables that differed; qos TRUE)
  uint64_t qos_sets_failed = 0;
  uint64_t ports_armed = 0, ports_activated = 0;
  uint64_t port_state_readbacks = 0;  // state Sets that failed and were read back
  std::string engine;
  std::vector<std::string> declined;  // "ftree: not a fat tree"
  size_t issues = 0;
  bool subnet_up = false;
  // Wall time of each stage in the order it ran ("re-reads", "routing", "lft blocks", ...),
  // waits for answers included; logged after the sweep (log line "sweep N stages").
  std::vector<std::pair<std::string, std::chrono::microseconds>> stages;
};

// How a repair that took nodes out renumbered the model's ports (old PortId -> new, kNoPort
// for a port of a node taken out); empty when it took none out. Stages that keep per-port
// plans across a local repair carry them over with it
// (PartitionProgrammer::KeepPlanRenumbered).
struct RepairRenumbering {
  std::vector<PortId> ports;
  bool switches_only = true;  // every node taken out was a switch
};

// What one sweep carries from stage to stage: its figures, the counts it is measured
// against, and what its first stage leaves for the later ones.
struct SweepContext {
  SweepStats stats;
  // The SMP pipeline's counts when the sweep began: its SMPs and failures are counted from
  // them.
  uint64_t smps_at_start = 0;
  uint64_t failed_at_start = 0;
  size_t issues = 0;  // problems this sweep reported and went on past (SUBNET UP needs none)
  // A repair sweep's nodes whose ports may need new settings (the switches it re-read and
  // the far ends it checked); empty when every stage must look at the whole fabric.
  std::unordered_set<Guid> touched;
  RepairRenumbering renumbered;
};

// A repair that a later repair took over from (SubnetManager::HandSweepToRepair) did part of
// the work the later one finishes: its figures are added to the later one's when that one
// closes, so the sweep reported counts every cable, block and SMP of both. `into` keeps its
// own number, model figures, engine and verdict; the earlier start (the duration covers
// both); the stage times of `from` first, each named "sweep N <stage>". Every count of
// SweepStats is a sum here: a count added to it belongs here too.
void AddHandedOver(SweepStats& into, const SweepStats& from);

class SweepEngine {
 public:
  struct Row {
    std::string_view name;      // in the log line "sweep N stages"
    std::function<void()> run;  // null for row 0: whoever begins the sweep runs it
  };
  // `rows`: at least two; the last is the finish, which names its own parts (OpenStage).
  SweepEngine(const Clock& clock, std::vector<Row> rows);

  // A fresh context for sweep `number`, at row 0 (not run: the caller runs discovery, or a
  // repair's re-reads, which row 0 is then named in the stage times), its clock started.
  SweepContext& Begin(uint64_t number, bool repair, std::string_view row0_name = {});
  SweepContext& context() { return ctx_; }
  const SweepContext& context() const { return ctx_; }
  size_t row() const { return row_; }
  size_t finish_row() const { return rows_.size() - 1; }

  // The running row ends (its wall time goes to the context's stage times) and the next one
  // runs. Each row calls it once, when its requests are answered.
  void Next() { JumpTo(row_ + 1); }
  // The same to a later row. Entering the finish leaves the part before it open, under the
  // running row's name: the finish closes it (CloseOpenStage), and may name parts of its own
  // (OpenStage) that it closes in turn when it runs again.
  void JumpTo(size_t row);
  void CloseOpenStage() { EndStage(open_name_); }
  void OpenStage(std::string_view name) { open_name_ = name; }
  // Closes the time since the last stage ended as `name`.
  void EndStage(std::string_view name);
  // "discovery 1.0 ms, election 0.2 ms, ..." of this sweep so far.
  std::string Summary() const;

 private:
  const Clock& clock_;
  std::vector<Row> rows_;
  std::string_view row0_name_;
  size_t row_ = 0;
  SweepContext ctx_;
  std::chrono::steady_clock::time_point mark_;  // when the running stage began
  std::string_view open_name_;
};

}  // namespace ibsm::sm
