// Adaptive routing in the heavy sweep: after the plain LFT push, find the AR-capable switches
// (GeneralInfo capability bit 2, SwitchX-style AR; bit 1 alone is the legacy format ibsm does
// not program; then ARInfo GroupCap from the capability Get; a timeout means a switch without
// vendor attributes when the switch answered the NodeInfo Get sent beside it, else it was not
// reachable and is asked again the next run), compute the groups on top of whatever engine made the static routes
// (routing/ar_groups.h), verify them, write the group tables by difference, then the AR LFT
// blocks, then enable AR per ar_sl_mask with an ARInfo Set, a read-modify-write of the plain
// Get. Legacy switches keep their plain LFTs. Group IDs per destination leaf are kept in the
// state file so a restart keeps them.
//
// A plain LFT Set turns AR off on a switch whose no_fallback is 0 (the facts page), so every
// heavy sweep reads ARInfo back and enables again where needed. AR problems never block
// SUBNET UP: the plain LFTs route the fabric; they are logged (SM-AR-xxx) and counted.
//
// Threading: the io_context thread that owns the pipeline; the snapshot it publishes is
// immutable and may be read from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/fabric.h"
#include "mad/attr/adaptive_routing.h"
#include "routing/ar_groups.h"
#include "routing/routing_engine.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"

namespace ibsm::ha {
class RoutingRows;
}

namespace ibsm::sm {

// opensm.conf: ar_mode / ar_enable, ar_sl_mask, ar_transport_mask, ar_lid_mode,
// ar_ageing_time_us.
struct ArConfig {
  uint8_t mode = 0;  // 0 off, 1 on, 2 on with notifications (programmed as 1), 3 auto (as 1)
  uint16_t sl_mask = 0xFFFF;
  uint8_t transport_mask = 0xA;  // bit 0 UD, 1 RC, 2 UC, 3 DC
  routing::ArLidMode lid_mode = routing::ArLidMode::kFree;  // docs/ar-sharp.md "Defaults"
  uint32_t ageing_time_us = 30;
  bool on() const { return mode != 0; }
};

// What the operator sees per switch (ibsmctl ar).
struct ArSwitchStatus {
  Guid guid{0};
  std::string name;
  bool capable = false;
  bool enabled = false;       // ARInfo E as last read or set
  uint16_t sl_mask = 0;       // EnableBySLMask in force (0 when not enabled)
  std::string mode;           // "bounded", "free", "" when not enabled
  uint32_t groups = 0;        // non-empty groups programmed
  uint16_t group_cap = 0;
  std::string why_not;        // empty when enabled
};

// An immutable picture of the last AR programming, for the operator view and the traffic
// model: the fabric and tables it was computed on, and what each switch runs.
struct ArSnapshot {
  std::shared_ptr<const Fabric> fabric;
  std::shared_ptr<const routing::LidMap> lids;
  std::shared_ptr<const routing::RoutingTables> tables;
  std::shared_ptr<const routing::ArTables> ar;  // null when AR was not computed
  std::vector<ArSwitchStatus> switches;         // every switch, NodeId order
  ArConfig config;
  std::string engine;
  std::string summary;  // the log line
};

struct ArCounters {
  uint64_t runs = 0;
  uint64_t capability_queries = 0;
  uint64_t not_capable = 0;          // switches found without AR (this and earlier sweeps)
  uint64_t group_blocks_read = 0;
  uint64_t group_blocks_sent = 0;
  uint64_t lft_blocks_read = 0;
  uint64_t lft_blocks_sent = 0;
  uint64_t info_sets = 0;
  uint64_t set_failures = 0;         // AR Sets that failed (switch then not enabled)
  uint64_t verify_failures = 0;      // AR tables refused by the verification
  uint64_t bad_answers = 0;          // undecodable AR answers
};

class ArManager {
 public:
  // REQUIRES: pipeline outlives this; `store` may be null.
  ArManager(SmpPipeline& pipeline, ha::RoutingRows* store);

  // Runs the AR stage for the tables just pushed; `done` runs when every SMP of the stage
  // has been answered (at once when AR is off and nothing needs switching off).
  // `switch_names` by NodeId are for the log. The fabric, LIDs and tables are copied or shared.
  void Run(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes,
           std::shared_ptr<const routing::LidMap> lids,
           std::shared_ptr<const routing::RoutingTables> tables, const ArConfig& config,
           std::function<void()> done);

  // A run is under way (Run called, `done` not yet run).
  bool running() const { return running_; }
  // Ends the run under way: it sends nothing more, the SMPs it has in flight are no longer
  // waited for (SmpPipeline::Abandon), and `done` never runs. A block whose Set was not
  // answered is not known held, so the next run reads or writes it again; ARInfo is read
  // every run. For a sweep that gives way to a repair (a cut cable: the Sets over it would
  // each wait for every timeout). Returns how many SMPs were in flight.
  size_t Stop();

  std::shared_ptr<const ArSnapshot> snapshot() const { return snapshot_; }
  // Points the snapshot at `fabric` instead of the copy Run made, when `fabric` is that
  // sweep's fabric (same nodes in the same order, same LIDs): the SM hands over the fabric
  // it shares with the SA, so the AR view costs no fabric of its own.
  void ShareFabric(std::shared_ptr<const Fabric> fabric);
  const routing::ArTables* tables() const { return snapshot_ ? snapshot_->ar.get(): nullptr; }
  const ArCounters& counters() const { return counters_; }

 private:
  struct SwitchState {
    std::optional<bool> capable;  // unknown until asked
    bool silent = false;    // this run's GeneralInfo Get timed out (Discover)
    bool answered = false;  // this run's NodeInfo Get, sent beside it, was answered
    std::string why_not;
    mad::ArInfo caps;             // the capability Get (GroupCap, by-SL, by-transport)
    bool caps_valid = false;
    mad::ArInfo info;             // current settings: the plain Get, or the Set's answer
    std::array<uint8_t, 64> raw{};  // `info` as the switch sent it: the base of every Set
    bool info_valid = false;
    // What the switch holds, as far as known: groups and AR LFT entries.
    std::vector<std::optional<mad::ArPortMask>> groups;
    std::vector<std::optional<mad::ArLftEntry>> lft;
    bool enabled = false;
    uint32_t programmed_groups = 0;
    bool failed = false;  // a Set failed in this run
  };
  struct Run_;  // one run's state

  void Discover(std::shared_ptr<Run_> run);
  void ReadInfo(std::shared_ptr<Run_> run);
  void Compute(std::shared_ptr<Run_> run);
  void ReadTables(std::shared_ptr<Run_> run);
  void WriteGroups(std::shared_ptr<Run_> run);
  void WriteLfts(std::shared_ptr<Run_> run);
  void Enable(std::shared_ptr<Run_> run);
  void Disable(std::shared_ptr<Run_> run);
  void Finish(std::shared_ptr<Run_> run);
  void LoadIds();
  // The run's SMPs and next steps, dropped once it is stopped (Stop).
  SmpPipeline::Callback OfRun(const Run_& run, SmpPipeline::Callback fn);
  void Get(const Run_& run, const DrPath& path, uint16_t attr, uint32_t mod,
           SmpPipeline::Callback fn);
  void Set(const Run_& run, const DrPath& path, uint16_t attr, uint32_t mod,
           std::span<const uint8_t> data, SmpPipeline::Callback fn);
  void Then(std::shared_ptr<Run_> run, void (ArManager::*next)(std::shared_ptr<Run_>));

  SmpPipeline& pipeline_;
  ha::RoutingRows* store_;
  std::map<Guid, SwitchState> state_;
  std::map<Guid, uint16_t> group_ids_;
  bool ids_loaded_ = false;
  std::string announced_engine_;  // the non-ar_* engine "AR enabled on top of" was logged for
  std::shared_ptr<const ArSnapshot> snapshot_;
  ArCounters counters_;
  uint64_t gen_ = 0;  // the run under way (Run_::gen); Stop moves it on
  bool running_ = false;
};

// Vendor IDs whose switches may answer the AR attributes (Mellanox / NVIDIA).
bool IsArVendor(uint32_t vendor_id);

}  // namespace ibsm::sm
