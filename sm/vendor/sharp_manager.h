// The SHARP stage of a heavy sweep (docs/ar-sharp.md). With
// sharp_enable, after LIDs, LFTs and link activation:
//  1. every switch with an aggregation node (AN) cabled to it is asked for GeneralInfo
//     capability bit 18 (no answer = not SHARP capable), and its AN port's
//     MlnxExtendedPortInfo SHArPANEn is set if clear;
//  2. every enabled AN with a LID is asked for ANInfo (radix, tree table size) over class
//     0x0B, LID-routed like any GMP (so it needs its LID and the routes the LFTs give it);
//  3. routing/sharp_trees builds the trees (tree IDs kept per root switch GUID);
//  4. the trees whose placement changed, or whose ANs no longer hold what was written (read
//     back every sweep), are rewritten: ResourceCleanup of the tree, QPAllocation, QPCConfig
//     per tree edge, TreeConfig (write tree, then add children past 44), and read back;
//     trees that vanished are cleaned up on the ANs that still answer.
// Each tree QP's context is a whole reliable-connected one, filled from the fabric: path MTU
// (the smallest link MTU between the two ends, at most SharpOptions::mtu), the P_Key, Q_Key,
// SL and retry limits of SharpOptions, and PSNs derived from the sending end's port GUID,
// QPN and tree id (SharpPsn), so writing the same tree again writes the same bytes. The
// class 0x0B layouts are ibsm's own (mad/attr/sharp.h), unverified against a real
// aggregation node; the first Run logs so (SM-SHARP-009).
// A failed switch or link changes the next sweep's fabric, so the affected trees are rebuilt
// then; hosts that lose coverage are logged (SM-SHARP-001). Nothing here blocks SUBNET UP.
//
// Threading: the SM's io_context thread; `done` of Run runs on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mad/attr/sharp.h"
#include "mad/transport.h"
#include "routing/sharp_trees.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"

namespace ibsm::sm {

struct SharpOptions {
  mad::SendOptions send;
  size_t window = 32;  // class 0x0B MADs in flight
  uint8_t sl = 0;      // SL written into every tree QP's context
  uint8_t mtu = 5;     // largest path MTU (mad::mtu code, 5 = 4096); a smaller link wins
  uint16_t pkey = 0xFFFF;      // the default partition, full member
  uint32_t qkey = 0x53485250;  // ibsm's own; any value the hosts' SHARP daemons agree on
  uint32_t job_id = 1;         // the job every QP the SM allocates belongs to
  uint8_t retry_count = 7;
  uint8_t rnr_retry = 7;           // 7: retry for ever
  uint8_t rnr_min_timer = 12;      // IBA code 12: 0.64 ms
  uint8_t local_ack_timeout = 14;  // 4.096 us x 2^14: about 67 ms
  uint8_t max_rd_atomic = 1;
  uint8_t max_dest_rd_atomic = 1;
};

// The PSN a tree QP sends from (and its far end expects): derived from the sender's port
// GUID, QPN (0 for a host's QP not yet bound) and the tree id; never 0, below 2^24.
uint32_t SharpPsn(Guid sender, uint32_t sender_qpn, uint16_t tree_id);

// What one AN holds for one tree, by GUIDs (the intent) and the QPNs that carry it.
struct SharpAnTree {
  Guid parent{0};               // parent AN's port GUID; 0 at the root
  std::vector<Guid> children;   // child AN port GUIDs, then host port GUIDs, in index order
  uint32_t parent_qpn = 0;      // as programmed (0 until then)
  std::vector<uint32_t> child_qpn;
  bool operator==(const SharpAnTree& o) const {
    return parent == o.parent && children == o.children;
  }
};

// The operator's view of one tree (and what `ibsmctl sharp` prints).
struct SharpTreeSummary {
  uint16_t id = 0;
  Guid root_switch{0};
  std::string root_name;
  Guid root_an{0};
  uint32_t depth = 0;  // switch tiers
  size_t hosts = 0;
  size_t switches = 0;
  std::vector<Guid> missing_hosts;  // host port GUIDs this tree does not reach
  bool programmed = false;          // written and read back equal
};

struct SharpSummary {
  bool ran = false;
  size_t sharp_switches = 0;  // switches with an AN that advertise capability bit 18
  size_t ans = 0;             // ANs found in the fabric
  size_t ans_enabled = 0;
  size_t ans_usable = 0;      // enabled, with a LID, answered ANInfo
  size_t ans_unmarked = 0;    // described as ANs on ports their switch does not mark as AN
  size_t ans_by_description = 0;  // on switches that mark no special port (older firmware)
  uint32_t switch_tiers = 0;
  size_t hosts = 0;
  std::vector<SharpTreeSummary> trees;
  std::vector<Guid> uncovered;      // host port GUIDs some tree misses
  std::vector<Guid> never_covered;  // host port GUIDs no tree reaches
  std::vector<std::string> notes;
};

struct SharpCounters {
  uint64_t mads_sent = 0;
  uint64_t mads_failed = 0;       // no answer, bad status or undecodable answer
  uint64_t ans_enabled = 0;       // SHArPANEn Sets that took
  uint64_t trees_written = 0;     // (tree, AN) configurations written
  uint64_t trees_removed = 0;
  uint64_t readback_mismatches = 0;
  uint64_t qp_allocations_repeated = 0;  // a tree's QPs on an AN freed and allocated again
};

class SharpManager {
 public:
  // REQUIRES: transport and pipeline outlive this.
  SharpManager(mad::Transport& transport, SmpPipeline& pipeline, SharpOptions options);
  ~SharpManager();

  // Runs the stage on this sweep's fabric (LIDs assigned, LFTs written, links ACTIVE).
  // Holds `sweep` until `done` runs. One Run at a time.
  void Run(std::shared_ptr<const DiscoveryResult> sweep, std::function<void()> done);

  // A Run is under way (`done` not yet run).
  bool running() const { return running_; }
  // Ends the Run under way: nothing more is sent, nothing in flight is waited for, `done`
  // never runs (a sweep that gives way to a repair: a cut cable left MADs that would each
  // wait for every timeout). What it wrote half is found by the next Run's read-back and
  // written again. Returns how many MADs were in flight.
  size_t Stop();

  const SharpSummary& summary() const { return summary_; }
  const SharpCounters& counters() const { return counters_; }
  // Tree -> AN port GUID -> what the SM wrote there (after the last Run).
  const std::map<uint16_t, std::map<Guid, SharpAnTree>>& programmed() const { return programmed_; }
  // Tree IDs by root switch GUID: kept across sweeps; seeded from the state file.
  const std::map<Guid, uint16_t>& tree_ids() const { return tree_ids_; }
  void SetTreeIds(std::map<Guid, uint16_t> ids) { tree_ids_ = std::move(ids); }

 private:
  struct Run_;
  class GmpWindow;
  void Probe();
  void QueryAnInfo();
  void Plan();
  void Verify(bool after_write);
  void Write();
  void AllocateQps(uint16_t tid, Guid an, int attempt);
  void CleanUpTree(Lid lid, uint16_t tid, std::function<void(Result<mad::AmMad>)> then);
  void Finish();
  void Note(const std::string& id, const std::string& text);
  // The context of `qpn` on AN `me` for tree `tree_id`, whose far end is `remote`'s QP
  // `remote_qpn`: what QPCConfig Set writes and the read-back expects.
  mad::QpcConfig QpContext(uint16_t tree_id, Guid me, uint32_t qpn, Guid remote,
                           uint32_t remote_qpn) const;
  uint8_t PathMtu(Guid a, Guid b) const;

  mad::Transport& transport_;
  SmpPipeline& pipeline_;
  SharpOptions options_;
  std::unique_ptr<GmpWindow> gmp_;
  std::unique_ptr<Run_> run_;
  SharpSummary summary_;
  SharpCounters counters_;
  std::map<uint16_t, std::map<Guid, SharpAnTree>> programmed_;
  std::map<Guid, uint16_t> tree_ids_;
  bool announced_ = false;  // SM-SHARP-009 logged
  bool description_only_logged_ = false;  // SM-SHARP-011 logged
  bool running_ = false;
  uint64_t gen_ = 0;  // the Run under way; Stop moves it on, so its answers change nothing
};

}  // namespace ibsm::sm
