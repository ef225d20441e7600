// What a heavy sweep leaves on disk: guid2lid, the sweep row, snapshots, LFT digests, dumps
// (sm/record/state_writer.h).
#include "sm/record/state_writer.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"
#include "conf/guid_file.h"
#include "ha/sm_state_machine.h"
#include "sm/model/multicast_tree.h"
#include "sm/perf/perf_manager.h"
#include "sm/record/control_answers.h"
#include "sm/record/dumps.h"

namespace ibsm::sm {

StateWriter::StateWriter(ha::StateFile* store, const Clock& clock, StateWriterOptions options,
                         StateWriterCounters counters)
    : store_(store), clock_(clock), counters_(counters), options_(std::move(options)) {}

StateWriter::~StateWriter() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    home_ = nullptr;  // the engine goes: what the last jobs count is dropped
  }
  wake_.notify_all();
  thread_.join();
}

void StateWriter::StartThread(std::function<void(std::function<void()>)> home) {
  if (thread_.joinable()) return;
  home_ = std::move(home);
  thread_ = std::thread([this] { Run(); });
}

void StateWriter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !urgent_.empty() || !jobs_.empty(); });
    std::deque<std::function<void()>>& from = !urgent_.empty() ? urgent_ : jobs_;
    if (from.empty()) return;  // stopping, and everything handed over is written
    std::function<void()> job = std::move(from.front());
    from.pop_front();
    if (&from == &urgent_) --urgent_queued_;
    busy_ = true;
    lock.unlock();
    job();
    lock.lock();
    busy_ = false;
    if (urgent_.empty() && jobs_.empty()) idle_.notify_all();
  }
}

void StateWriter::Hand(std::function<void()> job, bool urgent) {
  if (!thread_.joinable()) return job();
  {
    std::lock_guard<std::mutex> lock(mu_);
    (urgent ? urgent_ : jobs_).push_back(std::move(job));
    if (urgent) ++urgent_queued_;
  }
  wake_.notify_one();
}

void StateWriter::Drain() {
  if (!thread_.joinable()) return;
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return urgent_.empty() && jobs_.empty() && !busy_; });
}

void StateWriter::Count(std::function<void()> change) {
  if (!thread_.joinable() || std::this_thread::get_id() != thread_.get_id()) return change();
  std::lock_guard<std::mutex> lock(mu_);
  if (home_) home_(std::move(change));
}

void StateWriter::set_options(StateWriterOptions o) {
  Hand([this, o = std::move(o)]() mutable { options_ = std::move(o); }, /*urgent=*/true);
}

// The dump files and the SUBNET UP line go ahead of the rows and snapshots of earlier sweeps
// still waiting: a repair right after a large fabric's first sweep (whose first snapshots take
// a while to write) is announced when its dumps are written. The rows keep their order; a
// snapshot is rendered only from the newest sweep handed over (an older one's is skipped).
void StateWriter::Publish(SweepPublication p) {
  auto shared = std::make_shared<const SweepPublication>(std::move(p));
  Hand(
      [this, shared] {
        WriteDumps(shared->record, shared->groups);
        if (shared->after_dumps) shared->after_dumps();
      },
      /*urgent=*/true);
  // In steps, so a later sweep's dumps wait for one step at most.
  Hand([this, shared] { RecordSweep(shared->record, shared->guid2lid); });
  const std::shared_ptr<const DiscoveryResult> model =
      shared->record.snapshot ? shared->record.snapshot->discovery : nullptr;
  SnapshotStep(Snapshots::kNodes, ++nodes_handed_, model, shared->perf);
  SnapshotStep(Snapshots::kLinksAndHealth, ++links_handed_, model, shared->perf);
  // What this master programmed, once the sweep brought the subnet up.
  if (shared->record.subnet_up) Hand([this, shared] { SaveLftDigests(shared->record); });
}

void StateWriter::SaveSweepSnapshots(std::shared_ptr<const DiscoveryResult> discovered,
                                     std::shared_ptr<const PerfView> perf) {
  SnapshotStep(Snapshots::kLinksAndHealth, ++links_handed_, std::move(discovered),
               std::move(perf));
}

void StateWriter::SnapshotStep(Snapshots which, uint64_t gen,
                               std::shared_ptr<const DiscoveryResult> discovered,
                               std::shared_ptr<const PerfView> perf) {
  Hand([this, which, gen, discovered, perf] {
    // Given way to a sweep's dumps: rendered again after them (unless a newer one follows).
    if (!SaveSnapshots(which, gen, discovered.get(), perf.get()))
      SnapshotStep(which, gen, discovered, perf);
  });
}

std::unordered_map<Guid, PersistedLid> StateWriter::LoadLids(const std::string& lidsfile) {
  std::unordered_map<Guid, PersistedLid> lids;
  if (store_) {
    auto rows = store_->LoadGuid2Lid();
    if (!rows.ok()) {
      Log(LogName::kSm).warn("SM-STATE-001 cannot read guid2lid from the state file: {}",
                             rows.status().ToString());
    } else {
      for (const auto& r: *rows) lids[r.port_guid] = {r.min_lid.value(), r.max_lid.value()};
    }
  }
  // Migration from OpenSM: its guid2lid file fills what the state file does not have.
  if (!lidsfile.empty()) {
    auto file = conf::LoadGuid2LidFile(lidsfile);
    if (file.ok()) {
      for (const auto& w: file->warnings) Log(LogName::kConf).warn("{}", w.ToString());
      size_t added = 0;
      for (const auto& e: file->entries) {
        if (lids.emplace(e.guid, PersistedLid{e.min_lid.value(), e.max_lid.value()}).second)
          ++added;
      }
      if (added) {
        Log(LogName::kSm).info("{} LIDs taken from guid2lid file {}", added,
                               lidsfile);
      }
    }
  }
  saved_guid2lid_ = lids;
  return lids;
}

bool StateWriter::NoteStateWrite(const char* id, const Status& s, std::string_view what) {
  std::lock_guard<std::mutex> lock(note_mu_);
  if (s.ok()) {
    if (state_write_failing_) {
      state_write_failing_ = false;
      Log(LogName::kSm).info("SM-STATE-012 the state file takes writes again ({}); what was "
                             "not saved meanwhile is being written now",
                             what);
    }
    return true;
  }
  Count([c = counters_, id = std::string(id)] {
    ++*c.state_write_failures;
    ++(*c.issues_by_id)[id];
  });
  if (!state_write_failing_) {
    state_write_failing_ = true;
    Log(LogName::kSm).error("{} {} not saved: {}; the fabric is still served from memory, and "
                            "guid2lid and multicast groups are written again each sweep until "
                            "the state file takes writes",
                            id, what, s.ToString());
  } else {
    Log(LogName::kSm).debug("{} {} not saved: {}", id, what, s.ToString());
  }
  return false;
}

void StateWriter::WriteDumps(const SweepRecord& r, const std::map<mad::Gid, McGroup>& groups) {
  if (options_.dump_dir.empty() || !r.discovered()) return;
  const Fabric& f = r.discovered()->fabric;
  Status s = WriteDumpFile(options_.dump_dir + "/opensm-subnet.lst",
                           [&](std::FILE* out) { WriteSubnetLst(f, r.snapshot->sm_lid, out); });
  if (s.ok() && r.tables() && options_.dump_lfts) {
    s = WriteDumpFile(options_.dump_dir + "/opensm-lfts.dump",
                      [&](std::FILE* out) { WriteLftsDump(f, *r.tables(), out); });
    // What `opensm -D 0x43` writes for ibdmchk: routes with hop counts, multicast routes.
    if (s.ok())
      s = WriteDumpFile(options_.dump_dir + "/opensm.fdbs",
                        [&](std::FILE* out) { WriteFdbsDump(f, *r.tables(), out); });
    if (s.ok())
      s = WriteDumpFile(options_.dump_dir + "/opensm.mcfdbs",
                        [&](std::FILE* out) {
                          WriteMcfdbsDump(f, PlanMfts(f, groups), out);
                        });
  }
  // Like the state file: one warning per outage (a full disk fails every sweep), a line
  // when the dumps are written again.
  if (!s.ok()) {
    Count([c = counters_] { ++*c.dump_write_failures; });
    if (!dump_write_failing_) {
      Log(LogName::kSm).warn("SM-DUMP-001 {}; dumps are tried again each heavy sweep", s.ToString());
    } else {
      Log(LogName::kSm).debug("SM-DUMP-001 {}", s.ToString());
    }
  } else if (dump_write_failing_) {
    Log(LogName::kSm).info("SM-DUMP-002 dump files are written again in {}", options_.dump_dir);
  }
  dump_write_failing_ = !s.ok();
}

void StateWriter::RecordSweep(const SweepRecord& r,
                              const std::unordered_map<Guid, PersistedLid>& guid2lid) {
  if (store_ && store_->degraded()) {
    // Started on a state directory that took no writes (SM-STATE-015): try it again.
    Status reopened = store_->RetryWritable();
    if (reopened.ok()) {
      Log(LogName::kSm).info("SM-STATE-016 state file {} is open for writing; what this SM "
                             "holds in memory is written now",
                             store_->path());
      NoteStateWrite("SM-STATE-010", store_->SetValue("sm_state", ha::SmStateName(r.sm_state())),
                     "SM state");
    } else {
      Log(LogName::kSm).debug("SM-STATE-015 state file still not writable: {}",
                              reopened.ToString());
    }
  }
  std::vector<ha::Guid2LidEntry> upserts;
  for (const auto& [guid, l] : guid2lid) {
    auto it = saved_guid2lid_.find(guid);
    if (it != saved_guid2lid_.end() && it->second.min_lid == l.min_lid &&
        it->second.max_lid == l.max_lid)
      continue;
    upserts.push_back({guid, Lid{l.min_lid}, Lid{l.max_lid}});
  }
  bool guid2lid_saved = true;
  if (store_) {
    if (!upserts.empty()) {
      guid2lid_saved = NoteStateWrite("SM-STATE-002", store_->SaveGuid2Lid(upserts, {}),
                                      fmt::format("guid2lid ({} rows)", upserts.size()));
    }
    ha::SweepRow row;
    row.kind = ha::SweepKind::kHeavy;
    row.ended_us = clock_.UnixMicros();
    row.started_us = row.ended_us - r.duration.count();
    row.smps_sent = r.smps;
    row.smps_failed = r.smps_failed;
    row.nodes = static_cast<uint32_t>(r.nodes);
    row.switches = static_cast<uint32_t>(r.switches);
    row.cas = static_cast<uint32_t>(r.cas);
    row.links = static_cast<uint32_t>(r.links);
    row.lid_changes = r.lid_changes;
    row.lft_blocks_sent = static_cast<uint32_t>(r.lft_blocks_sent);
    row.engine = r.engine;
    row.outcome = r.subnet_up ? "ok" : "partial";
    row.note = fmt::format("{} issues", r.issues);
    auto id = store_->RecordSweep(row);
    if (NoteStateWrite("SM-STATE-003", id.status(), "sweep row"))
      NoteStateWrite("SM-STATE-017", store_->Prune(options_.keep_sweeps, options_.keep_events),
                     "history pruning");
  }
  // OpenSM's format beside the other dumps, so a switch back to OpenSM keeps every LID.
  if (!upserts.empty() && !options_.dump_dir.empty()) {
    std::vector<conf::Guid2LidEntry> all;
    all.reserve(guid2lid.size());
    for (const auto& [guid, l] : guid2lid) all.push_back({guid, Lid{l.min_lid}, Lid{l.max_lid}});
    std::sort(all.begin(), all.end(),
              [](const auto& a, const auto& b) { return a.min_lid < b.min_lid; });
    Status s = conf::SaveGuid2LidFile(options_.dump_dir + "/guid2lid", all);
    if (!s.ok()) Log(LogName::kSm).warn("SM-STATE-004 guid2lid file not written: {}", s.ToString());
  }
  // Rows the state file refused stay unsaved, so the next sweep writes them again.
  if (guid2lid_saved) saved_guid2lid_ = guid2lid;
}

void StateWriter::SaveLftDigests(const SweepRecord& r) {
  if (!store_ || !r.tables() || !r.max_lid || !r.discovered()) return;
  const Fabric& f = r.discovered()->fabric;
  const routing::RoutingTables& tables = *r.tables();
  std::vector<ha::LftDigestEntry> rows;
  uint16_t top = *r.max_lid;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch() || !tables.table(n)) continue;
    const auto& lft = tables.table(n)->lft;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i <= top; ++i) {
      h ^= i < lft.size() ? lft[i] : mad::kLftDropPort;
      h *= 0x100000001b3ull;
    }
    rows.push_back({f.node(n).guid, h, Lid{top}, 0});
  }
  NoteStateWrite("SM-STATE-011", store_->SaveLftDigests(rows, {}), "LFT digests");
}

bool StateWriter::SaveSnapshots(Snapshots which, uint64_t gen, const DiscoveryResult* discovered,
                                const PerfView* perf) {
  const Fabric* f = discovered ? &discovered->fabric : nullptr;
  if (!store_ || !f) return true;
  if (gen != (which == Snapshots::kNodes ? nodes_handed_ : links_handed_)) return true;
  if (which == Snapshots::kNodes) {
    return SaveSnapshot(ha::kSnapshotNodes,
                        [f](const AnswerSink& sink, bool) { StreamNodesAnswer(*f, sink); });
  }
  // The PerfMgr sweep number changes every sweep; the links answer counts as changed only
  // when a cable or its error counters did, so a quiet fabric costs no write. The stored
  // "perfmgr_sweep" is then that of the last write.
  // Without the degraded-link rule no cable is judged degraded (discovery's PortInfo unused).
  const DiscoveryResult* judged = options_.health_degraded_links ? discovered : nullptr;
  if (!SaveSnapshot(ha::kSnapshotLinks, [&](const AnswerSink& sink, bool for_digest) {
        StreamLinksAnswer(*f, judged, perf, /*with_sweep=*/!for_digest, sink);
      }))
    return false;
  // The age of the PerfMgr sweep is relative to now: the snapshot holds when it ended
  // instead (PerfView::perfmgr), and the reader computes the age from that.
  return SaveSnapshot(ha::kSnapshotHealth, [&](const AnswerSink& sink, bool) {
    StreamHealthAnswer(judged, perf, sink);
  });
}

namespace {
// Thrown from a snapshot's sink when a sweep's dumps wait: the render stops where it is.
struct GiveWay {};
}  // namespace

// After the first write the answer is first produced into a digest (FNV-1a) alone, and
// written only when that changed. On the writer's own thread the text is rendered whole
// before the write, so the store's lock (shared with the io thread) is held for the write
// alone, and the render gives way (returns false, nothing written) as soon as a sweep's dumps
// are handed over; without the thread the answer goes to the state file in parts, never held
// whole.
bool StateWriter::SaveSnapshot(std::string_view name, const SnapshotProducer& produce) {
  uint64_t digest = 0xcbf29ce484222325ull;
  auto into_digest = [&digest](std::string_view piece) {
    for (unsigned char c: piece) digest = (digest ^ c) * 0x100000001b3ull;
  };
  const bool threaded_now = threaded();
  auto give_way = [&] {
    if (threaded_now && urgent_queued_.load(std::memory_order_relaxed) > 0) throw GiveWay{};
  };
  const bool known = snapshot_hashes_.contains(name);
  // The first write digests on the way all but the piece a digest pass leaves out.
  auto write_pass = [&](const ha::SnapshotRows::SnapshotSink& sink) {
    produce(
        [&](std::string_view piece) {
          if (!known && !piece.starts_with(kLinksSweepPiece)) into_digest(piece);
          sink(piece);
        },
        false);
  };
  Status s;
  try {
    if (known) {
      produce(
          [&](std::string_view piece) {
            give_way();
            into_digest(piece);
          },
          /*for_digest=*/true);
      if (snapshot_hashes_.find(name)->second == digest) return true;
    }
    if (threaded_now) {
      std::string text;
      write_pass([&](std::string_view piece) {
        give_way();
        text.append(piece);
      });
      s = store_->SaveSnapshot(name, text);
    } else {
      s = store_->SaveSnapshotStreamed(name, write_pass);
    }
  } catch (const GiveWay&) {
    return false;
  }
  // A failed write keeps the old digest, so the next sweep tries again.
  if (NoteStateWrite("SM-STATE-013", s, fmt::format("{} snapshot", name)))
    snapshot_hashes_.insert_or_assign(std::string(name), digest);
  return true;
}

}  // namespace ibsm::sm
