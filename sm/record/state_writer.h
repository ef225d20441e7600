// What a heavy sweep leaves on disk (ARCHITECTURE.md section 5): guid2lid rows and OpenSM's
// guid2lid file, the sweep row and history pruning, the nodes, links and health snapshots
// that `ibsmctl --state-db` reads, the LFT digests, and the dump files. The sweep engine hands
// it what the sweep left (SweepRecord) once the fabric is programmed; the writer reads only
// that, never the engine. A failed write is counted and logged once per failing spell, and
// what it did not save is written again at the next sweep.
//
// Runs on the io thread, as the engine does.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/clock.h"
#include "base/status.h"
#include "ha/state_rows.h"
#include "mad/mad.h"
#include "routing/routing_engine.h"
#include "sm/model/discovery.h"
#include "sm/model/lid_manager.h"
#include "sm/model/multicast.h"

namespace ibsm::sm {

class PerfManager;

struct StateWriterOptions {
  std::string dump_dir;   // empty: no dump files
  bool dump_lfts = false;  // opensm-lfts.dump, opensm.fdbs and opensm.mcfdbs as well
  bool health_degraded_links = true;
  size_t keep_sweeps = 10000;
  size_t keep_events = 100000;
};

// The counters the writer adds to (the engine's, shown in its status answer and metrics).
struct StateWriterCounters {
  uint64_t* state_write_failures;
  uint64_t* dump_write_failures;
  std::map<std::string, uint64_t>* issues_by_id;
};

// What one heavy sweep left, as the writer needs it.
struct SweepRecord {
  std::shared_ptr<const DiscoveryResult> discovered;
  std::shared_ptr<const routing::RoutingTables> tables;  // null: routing failed
  std::optional<uint16_t> max_lid;  // of the LIDs the tables were built for; none: no LIDs
  Lid sm_lid{0};
  mad::SmState sm_state = mad::SmState::kNotActive;
  // The sweep row.
  std::chrono::microseconds duration{0};
  uint64_t smps = 0, smps_failed = 0;
  size_t nodes = 0, switches = 0, cas = 0, links = 0;
  uint32_t lid_changes = 0;
  uint64_t lft_blocks_sent = 0;
  std::string engine;
  bool subnet_up = false;
  size_t issues = 0;
};

class StateWriter {
 public:
  // REQUIRES: `store` (may be null: only dump files are written), `clock`, the counters'
  // targets and `perf` (when set) outlive this.
  StateWriter(ha::StateFile* store, const Clock& clock, StateWriterOptions options,
              StateWriterCounters counters);

  void set_options(StateWriterOptions o) { options_ = std::move(o); }
  // The PerfMgr whose counters and findings the links and health snapshots carry; null: none.
  void set_perf(const PerfManager* perf) { perf_ = perf; }

  // The LIDs the state file (and OpenSM's guid2lid file, `guid2lid_file`, for what the state
  // file lacks) hold: what the first sweep keeps. Remembered as written.
  std::unordered_map<Guid, PersistedLid> LoadLids(const std::string& guid2lid_file);

  // The dump files of `r` (dump_dir; the multicast routes from `groups`).
  void WriteDumps(const SweepRecord& r, const std::map<mad::Gid, McGroup>& groups);
  // The guid2lid rows that changed, then `flush_sa` (SA registrations not yet written), the
  // sweep row, pruning and the snapshots; OpenSM's guid2lid file in dump_dir.
  void RecordSweep(const SweepRecord& r, const std::unordered_map<Guid, PersistedLid>& guid2lid,
                   const std::function<void()>& flush_sa);
  // What this master programmed, per switch (FNV-1a over the LFT up to the top LID).
  void SaveLftDigests(const SweepRecord& r);
  // The links and health snapshots only (after a PerfMgr sweep), of the fabric `discovered`.
  void SaveSweepSnapshots(const DiscoveryResult* discovered) {
    SaveSnapshots(discovered, /*topology=*/false);
  }

  // Counts and logs a failed state-file write (once per failing spell, at error level) or
  // notes a successful one (ending a failing spell). Returns s.ok().
  bool NoteStateWrite(const char* id, const Status& s, std::string_view what);

 private:
  void SaveSnapshots(const DiscoveryResult* discovered, bool topology);
  // Stores a snapshot unless what counts as a change in it digests as it did at the last write
  // of `name`. The producer hands the text to a sink in pieces; with `for_digest` it leaves
  // out what changes without the fabric changing.
  using SnapshotProducer =
      std::function<void(const std::function<void(std::string_view)>& sink, bool for_digest)>;
  void SaveSnapshot(std::string_view name, const SnapshotProducer& produce);

  ha::StateFile* store_;
  const Clock& clock_;
  StateWriterOptions options_;
  StateWriterCounters counters_;
  const PerfManager* perf_ = nullptr;
  std::unordered_map<Guid, PersistedLid> saved_guid2lid_;  // as last written
  std::map<std::string, uint64_t, std::less<>> snapshot_hashes_;
  bool state_write_failing_ = false;
  bool dump_write_failing_ = false;
};

}  // namespace ibsm::sm
