// What a heavy sweep leaves on disk (ARCHITECTURE.md section 5): guid2lid rows and OpenSM's
// guid2lid file, the sweep row and history pruning, the nodes, links and health snapshots
// that `ibsmctl --state-db` reads, the LFT digests, and the dump files. The sweep engine hands
// it what the sweep left (SweepPublication: immutable model and tables, copies of the rest)
// once the fabric is programmed; the writer reads only that, never the engine. A failed write
// is counted and logged once per failing spell, and what it did not save is written again at
// the next sweep.
//
// Threads: once StartThread is called (the daemon), what is handed over is written on a
// thread of the writer's own, in the order handed over, so the io thread answers traps, SA
// queries and the control socket while a large fabric's files are written. The store must
// then be safe to share (ha::LockedStateFile). Without StartThread (tests in process), the
// work runs at once on the caller's thread. Every method is called from the io thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "base/clock.h"
#include "base/status.h"
#include "ha/state_rows.h"
#include "mad/mad.h"
#include "routing/routing_engine.h"
#include "sm/model/discovery.h"
#include "sm/model/lid_manager.h"
#include "sm/model/multicast.h"
#include "sm/model/subnet_snapshot.h"
#include "sm/record/control_answers.h"

namespace ibsm::sm {

struct StateWriterOptions {
  std::string dump_dir;   // empty: no dump files
  bool dump_lfts = false;  // opensm-lfts.dump, opensm.fdbs and opensm.mcfdbs as well
  bool health_degraded_links = true;
  size_t keep_sweeps = 10000;
  size_t keep_events = 100000;
};

// The counters the writer adds to (the engine's, shown in its status answer and metrics). The
// writer's thread changes them on the io thread (StartThread's `home`).
struct StateWriterCounters {
  uint64_t* state_write_failures;
  uint64_t* dump_write_failures;
  std::map<std::string, uint64_t>* issues_by_id;
};

// What one heavy sweep left, as the writer needs it: the snapshot the sweep published (its
// model, the tables its switches hold, the SM's LID and state), and the sweep's figures.
struct SweepRecord {
  std::shared_ptr<const SubnetSnapshot> snapshot;  // null: the sweep published none
  std::optional<uint16_t> max_lid;  // of the LIDs the tables were built for; none: no LIDs
  // The snapshot's model and tables (null where it has none).
  const DiscoveryResult* discovered() const { return snapshot ? snapshot->discovery.get() : nullptr; }
  const routing::RoutingTables* tables() const { return snapshot ? snapshot->tables.get() : nullptr; }
  mad::SmState sm_state() const {
    return snapshot ? snapshot->sm_state : mad::SmState::kNotActive;
  }
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

// Everything one heavy sweep hands to the writer.
struct SweepPublication {
  SweepRecord record;
  // The multicast groups, for opensm.mcfdbs (only read with dump_lfts).
  std::map<mad::Gid, McGroup> groups;
  // The LIDs the SM holds after the sweep (the guid2lid rows and file).
  std::unordered_map<Guid, PersistedLid> guid2lid;
  // The PerfMgr's part of the links and health snapshots; null: no PerfMgr.
  std::shared_ptr<const PerfView> perf;
  // Run once the dump files are written, before the state-file rows (the SUBNET UP line:
  // a script that waits for it reads this sweep's dumps, as with OpenSM).
  std::function<void()> after_dumps;
};

class StateWriter {
 public:
  // REQUIRES: `store` (may be null: only dump files are written), `clock` and the counters'
  // targets outlive this.
  StateWriter(ha::StateFile* store, const Clock& clock, StateWriterOptions options,
              StateWriterCounters counters);
  // Finishes what was handed over, then stops the thread.
  ~StateWriter();
  StateWriter(const StateWriter&) = delete;
  StateWriter& operator=(const StateWriter&) = delete;

  // From now on the work runs on a thread of its own; `home` runs a function on the thread
  // that owns the counters (the io thread). REQUIRES: `store` is safe to share between two
  // threads (ha::LockedStateFile), and LoadLids has run.
  void StartThread(std::function<void(std::function<void()>)> home);
  bool threaded() const { return thread_.joinable(); }
  // Returns once everything handed over so far is written (shutdown, `--once`, tests).
  void Drain();

  // Takes effect for what is handed over after it.
  void set_options(StateWriterOptions o);

  // The LIDs the state file (and OpenSM's guid2lid file, `guid2lid_file`, for what the state
  // file lacks) hold: what the first sweep keeps. Remembered as written. Before StartThread.
  std::unordered_map<Guid, PersistedLid> LoadLids(const std::string& guid2lid_file);

  // What a heavy sweep leaves: the dump files (dump_dir) and then `after_dumps`, ahead of
  // what earlier sweeps still have to write; then, after those, the guid2lid rows that
  // changed, the sweep row, pruning, OpenSM's guid2lid file in dump_dir, the nodes, links and
  // health snapshots (unless a newer sweep's follow) and the LFT digests (when the sweep
  // brought the subnet up).
  void Publish(SweepPublication p);
  // The links and health snapshots only (after a PerfMgr sweep), of the fabric `discovered`.
  void SaveSweepSnapshots(std::shared_ptr<const DiscoveryResult> discovered,
                          std::shared_ptr<const PerfView> perf);

  // Another part of the SM's write (the PerfMgr's history rows), run in order after what was
  // handed over before it; `job` must touch only the store and what it owns.
  void Write(std::function<void()> job) { Hand(std::move(job)); }

  // Counts and logs a failed state-file write (once per failing spell, at error level) or
  // notes a successful one (ending a failing spell). Returns s.ok(). Either thread.
  bool NoteStateWrite(const char* id, const Status& s, std::string_view what);

 private:
  // Runs `job` on the writer's thread after what was handed over before it (an `urgent` one
  // after the urgent ones only), or at once.
  void Hand(std::function<void()> job, bool urgent = false);
  void Run();  // the writer's thread
  // Changes the counters where they live (home, or here when not threaded).
  void Count(std::function<void()> change);

  void WriteDumps(const SweepRecord& r, const std::map<mad::Gid, McGroup>& groups);
  void RecordSweep(const SweepRecord& r, const std::unordered_map<Guid, PersistedLid>& guid2lid);
  void SaveLftDigests(const SweepRecord& r);
  // The snapshots a step writes: nodes (heavy sweeps), or links and health (heavy sweeps and
  // PerfMgr sweeps). Each kind counts what was handed over (nodes_handed_, links_handed_).
  enum class Snapshots { kNodes, kLinksAndHealth };
  // Those snapshots of `discovered`, unless `gen` is no longer the newest of its kind handed
  // over (a newer sweep's follow). Returns false when it gave way to a sweep's dumps before it
  // was done.
  bool SaveSnapshots(Snapshots which, uint64_t gen, const DiscoveryResult* discovered,
                     const PerfView* perf);
  // Hands SaveSnapshots over as a step of its own, again after the dumps it gave way to.
  void SnapshotStep(Snapshots which, uint64_t gen,
                    std::shared_ptr<const DiscoveryResult> discovered,
                    std::shared_ptr<const PerfView> perf);
  // Stores a snapshot unless what counts as a change in it digests as it did at the last write
  // of `name`. The producer hands the text to a sink in pieces; with `for_digest` it leaves
  // out what changes without the fabric changing. False: it gave way to a sweep's dumps
  // (threaded only) and wrote nothing.
  using SnapshotProducer =
      std::function<void(const std::function<void(std::string_view)>& sink, bool for_digest)>;
  bool SaveSnapshot(std::string_view name, const SnapshotProducer& produce);

  ha::StateFile* store_;
  const Clock& clock_;
  StateWriterCounters counters_;
  // The writer's own (its thread's once threaded).
  StateWriterOptions options_;
  std::unordered_map<Guid, PersistedLid> saved_guid2lid_;  // as last written
  std::map<std::string, uint64_t, std::less<>> snapshot_hashes_;
  bool dump_write_failing_ = false;

  std::mutex note_mu_;  // NoteStateWrite runs on both threads
  bool state_write_failing_ = false;

  std::thread thread_;
  std::mutex mu_;  // guards what follows
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> urgent_, jobs_;
  bool busy_ = false;
  bool stopping_ = false;
  std::function<void(std::function<void()>)> home_;
  // How many sweeps (nodes) and sweeps or PerfMgr sweeps (links, health) were handed over.
  std::atomic<uint64_t> nodes_handed_{0}, links_handed_{0};
  std::atomic<size_t> urgent_queued_{0};  // urgent_.size(), read without the lock
};

}  // namespace ibsm::sm
