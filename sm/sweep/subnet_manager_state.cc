// SubnetManager, the state file and what is published from each sweep: the SA snapshot,
// the dump files, guid2lid and the persisted rows (ARCHITECTURE.md section 5).
#include "sm/sweep/subnet_manager.h"

#include <algorithm>
#include <unordered_set>

#include <boost/asio/executor_work_guard.hpp>
#include <fmt/format.h>

#include "base/log.h"
#include "conf/guid_file.h"
#include "sm/record/control_answers.h"
#include "sm/record/dumps.h"
#include "sm/record/multicast_state.h"
#include "sm/perf/perf_manager.h"

namespace ibsm::sm {

void SubnetManager::ScheduleStateFlush() {
  if (!store_) return;
  if (stopped_) {
    FlushState();
    return;
  }
  if (state_flush_armed_) return;  // the armed flush takes this change too
  state_flush_armed_ = true;
  state_flush_timer_.expires_after(kStateFlushInterval);
  state_flush_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: FlushState ran already
    state_flush_armed_ = false;
    FlushState();
  });
}

void SubnetManager::FlushState() {
  if (state_flush_armed_) {
    state_flush_armed_ = false;
    state_flush_timer_.cancel();
  }
  if (!store_) return;
  // A failed write is counted and logged by the SA (SA-SR-001) and kept: the next change's
  // flush or the next heavy sweep (PersistState) writes it, as with the multicast groups.
  if (sa_.services_dirty()) (void)sa_.FlushServices();
  if (mcast_save_pending_) {
    mcast_save_pending_ =
        !NoteStateWrite("SM-STATE-009", SaveMulticastChanges(), "multicast groups");
  }
}

Status SubnetManager::SaveMulticastChanges() {
  std::map<std::array<uint8_t, 16>, ha::McGroupRow> now;
  for (ha::McGroupRow& r : ToRows(mcast_.groups())) {
    auto key = r.mgid;
    now.emplace(key, std::move(r));
  }
  std::vector<ha::McGroupRow> upserts;
  std::vector<std::array<uint8_t, 16>> removals;
  for (const auto& [mgid, row] : now) {
    auto was = saved_mcast_.find(mgid);
    if (was == saved_mcast_.end() || !(was->second == row)) upserts.push_back(row);
  }
  for (const auto& [mgid, row] : saved_mcast_)
    if (!now.count(mgid)) removals.push_back(mgid);
  if (!mcast_saved_whole_) {
    // The first save of this run writes every group: what the file holds may not be what
    // was read from it (a read that failed, a store that was degraded, groups skipped at
    // restore), and a row-level save can only correct what it knows.
    std::vector<ha::McGroupRow> all;
    for (const auto& [mgid, row] : now) all.push_back(row);
    IBSM_RETURN_IF_ERROR(store_->SaveMulticastGroups(all));
    mcast_saved_whole_ = true;
  } else if (!upserts.empty() || !removals.empty()) {
    IBSM_RETURN_IF_ERROR(store_->SaveMulticastChanges(upserts, removals));
  }
  saved_mcast_ = std::move(now);
  return Status();
}

bool SubnetManager::LoadMulticastGroups() {
  if (!store_) return true;
  auto rows = store_->LoadMulticastGroups();
  Result<std::vector<McGroup>> groups =
      rows.ok() ? FromRows(*rows): Result<std::vector<McGroup>>(rows.status());
  if (!groups.ok()) {
    Log(LogName::kSm).warn("SM-STATE-008 cannot read multicast groups from the state file: {}",
                           groups.status().ToString());
    return false;
  }
  size_t skipped = mcast_.Restore(std::move(*groups));
  Log(LogName::kSm).info("{} multicast group(s) restored from the state file{}",
                         mcast_.groups().size(),
                         skipped ? fmt::format(", {} skipped (MLID clash or out of range)", skipped)
                                 : std::string());
  return true;
}

// What this master programmed, per switch (FNV-1a over the LFT up to LinearFDBTop), so the
// state file tells which tables the fabric should hold after this sweep.
void SubnetManager::SaveLftDigests() {
  if (!store_ || !tables_ || !lid_map_ || !discovered_) return;
  const Fabric& f = discovered_->fabric;
  std::vector<ha::LftDigestEntry> rows;
  uint16_t top = lid_map_->max_lid();
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch() || !tables_->table(n)) continue;
    const auto& lft = tables_->table(n)->lft;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i <= top; ++i) {
      h ^= i < lft.size() ? lft[i] : mad::kLftDropPort;
      h *= 0x100000001b3ull;
    }
    rows.push_back({f.node(n).guid, h, Lid{top}, 0});
  }
  NoteStateWrite("SM-STATE-011", store_->SaveLftDigests(rows, {}), "LFT digests");
}

DiscoveryResult& SubnetManager::MutableDiscovered() {
  // Every DiscoveryResult here is made non-const (make_shared<DiscoveryResult>), so casting
  // the constness away from the only owner is sound.
  if (discovered_.use_count() > 1) discovered_ = std::make_shared<DiscoveryResult>(*discovered_);
  return const_cast<DiscoveryResult&>(*discovered_);
}

// Shares discovered_: a later change to it copies it first (MutableDiscovered), so the SA
// keeps answering from the fabric as this sweep left it.
void SubnetManager::PublishSaSnapshot() {
  auto s = std::make_shared<SaSnapshot>();
  s->sweep = current_.number;
  s->discovery = discovered_;
  ar_.ShareFabric(std::shared_ptr<const Fabric>(discovered_, &discovered_->fabric));
  s->tables = tables_;
  // Indexed from the snapshot's own fabric rather than shared with lid_map_: when routing
  // failed and the last good tables are kept, lid_map_ belongs to an earlier fabric whose
  // PortIds need not match this one.
  s->lids = std::make_shared<const routing::LidMap>(s->fabric());
  s->port_mtu = LinkMtus(s->fabric(), s->nodes());
  s->qos = qos_;
  if (options_.qos) s->qos_policy = options_.qos_policy;
  s->qos_enabled = options_.qos;
  s->subnet_prefix = options_.subnet_prefix;
  s->sm_lid = sm_lid_;
  s->sm_port_guid = sm_port_guid_;
  s->sm_key = options_.sm_key;
  s->act_count = ha_.act_count();
  s->sm_priority = options_.sm_priority;
  s->sm_state = state();
  s->pkeys = pkey_plan_;
  s->partitioned = options_.partitions.config != nullptr;
  sa_.Publish(std::move(s));
  ha_.PublishKnownSms();  // their LIDs as this sweep left them
}

void SubnetManager::WriteDumps() {
  if (options_.dump_dir.empty()) return;
  const Fabric& f = discovered_->fabric;
  Status s = WriteDumpFile(options_.dump_dir + "/opensm-subnet.lst",
                           [&](std::FILE* out) { WriteSubnetLst(f, sm_lid_, out); });
  if (s.ok() && tables_ && options_.dump_lfts) {
    s = WriteDumpFile(options_.dump_dir + "/opensm-lfts.dump",
                      [&](std::FILE* out) { WriteLftsDump(f, *tables_, out); });
    // What `opensm -D 0x43` writes for ibdmchk: routes with hop counts, multicast routes.
    if (s.ok())
      s = WriteDumpFile(options_.dump_dir + "/opensm.fdbs",
                        [&](std::FILE* out) { WriteFdbsDump(f, *tables_, out); });
    if (s.ok())
      s = WriteDumpFile(options_.dump_dir + "/opensm.mcfdbs",
                        [&](std::FILE* out) {
                          WriteMcfdbsDump(f, PlanMfts(f, mcast_.groups()), out);
                        });
  }
  // Like the state file: one warning per outage (a full disk fails every sweep), a line
  // when the dumps are written again.
  if (!s.ok()) {
    ++counters_.dump_write_failures;
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

void SubnetManager::LoadPersistedLids() {
  if (options_.lids.reassign) return;
  if (store_) {
    auto rows = store_->LoadGuid2Lid();
    if (!rows.ok()) {
      Log(LogName::kSm).warn("SM-STATE-001 cannot read guid2lid from the state file: {}",
                             rows.status().ToString());
    } else {
      for (const auto& r: *rows) guid2lid_[r.port_guid] = {r.min_lid.value(), r.max_lid.value()};
    }
  }
  // Migration from OpenSM: its guid2lid file fills what the state file does not have.
  if (!options_.guid2lid_file.empty()) {
    auto file = conf::LoadGuid2LidFile(options_.guid2lid_file);
    if (file.ok()) {
      for (const auto& w: file->warnings) Log(LogName::kConf).warn("{}", w.ToString());
      size_t added = 0;
      for (const auto& e: file->entries) {
        if (guid2lid_.emplace(e.guid, PersistedLid{e.min_lid.value(), e.max_lid.value()}).second)
          ++added;
      }
      if (added) {
        Log(LogName::kSm).info("{} LIDs taken from guid2lid file {}", added,
                               options_.guid2lid_file);
      }
    }
  }
  saved_guid2lid_ = guid2lid_;
}

bool SubnetManager::NoteStateWrite(const char* id, const Status& s, std::string_view what) {
  if (s.ok()) {
    if (state_write_failing_) {
      state_write_failing_ = false;
      Log(LogName::kSm).info("SM-STATE-012 the state file takes writes again ({}); what was "
                             "not saved meanwhile is being written now",
                             what);
    }
    return true;
  }
  ++counters_.state_write_failures;
  ++counters_.issues_by_id[id];
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

void SubnetManager::PersistState() {
  if (store_ && store_->degraded()) {
    // Started on a state directory that took no writes (SM-STATE-015): try it again.
    Status reopened = store_->RetryWritable();
    if (reopened.ok()) {
      Log(LogName::kSm).info("SM-STATE-016 state file {} is open for writing; what this SM "
                             "holds in memory is written now",
                             store_->path());
      NoteStateWrite("SM-STATE-010", store_->SetValue("sm_state", ha::SmStateName(state())),
                     "SM state");
    } else {
      Log(LogName::kSm).debug("SM-STATE-015 state file still not writable: {}",
                              reopened.ToString());
    }
  }
  std::vector<ha::Guid2LidEntry> upserts;
  for (const auto& [guid, r] : guid2lid_) {
    auto it = saved_guid2lid_.find(guid);
    if (it != saved_guid2lid_.end() && it->second.min_lid == r.min_lid &&
        it->second.max_lid == r.max_lid)
      continue;
    upserts.push_back({guid, Lid{r.min_lid}, Lid{r.max_lid}});
  }
  bool guid2lid_saved = true;
  if (store_) {
    if (!upserts.empty()) {
      guid2lid_saved = NoteStateWrite("SM-STATE-002", store_->SaveGuid2Lid(upserts, {}),
                                      fmt::format("guid2lid ({} rows)", upserts.size()));
    }
    FlushState();  // and what a failed flush left
    ha::SweepRow row;
    row.kind = ha::SweepKind::kHeavy;
    row.ended_us = clock_.UnixMicros();
    row.started_us = row.ended_us - current_.duration.count();
    row.smps_sent = current_.smps;
    row.smps_failed = current_.smps_failed;
    row.nodes = static_cast<uint32_t>(current_.nodes);
    row.switches = static_cast<uint32_t>(current_.switches);
    row.cas = static_cast<uint32_t>(current_.cas);
    row.links = static_cast<uint32_t>(current_.links);
    row.lid_changes = current_.lid_changes;
    row.lft_blocks_sent = static_cast<uint32_t>(current_.lft_blocks_sent);
    row.engine = current_.engine;
    row.outcome = current_.subnet_up ? "ok" : "partial";
    row.note = fmt::format("{} issues", current_.issues);
    auto id = store_->RecordSweep(row);
    if (NoteStateWrite("SM-STATE-003", id.status(), "sweep row"))
      NoteStateWrite("SM-STATE-017", store_->Prune(options_.keep_sweeps, options_.keep_events),
                     "history pruning");
    SaveSnapshots(/*topology=*/true);
  }
  // OpenSM's format beside the other dumps, so a switch back to OpenSM keeps every LID.
  if (!upserts.empty() && !options_.dump_dir.empty()) {
    std::vector<conf::Guid2LidEntry> all;
    all.reserve(guid2lid_.size());
    for (const auto& [guid, r] : guid2lid_) all.push_back({guid, Lid{r.min_lid}, Lid{r.max_lid}});
    std::sort(all.begin(), all.end(),
              [](const auto& a, const auto& b) { return a.min_lid < b.min_lid; });
    Status s = conf::SaveGuid2LidFile(options_.dump_dir + "/guid2lid", all);
    if (!s.ok()) Log(LogName::kSm).warn("SM-STATE-004 guid2lid file not written: {}", s.ToString());
  }
  // Rows the state file refused stay unsaved, so the next sweep writes them again.
  if (guid2lid_saved) saved_guid2lid_ = guid2lid_;
}

void SubnetManager::SaveSnapshots(bool topology) {
  const Fabric* f = fabric();
  if (!store_ || !f) return;
  if (topology) {
    SaveSnapshot(ha::kSnapshotNodes,
                 [f](const AnswerSink& sink, bool) { StreamNodesAnswer(*f, sink); });
  }
  // The PerfMgr sweep number changes every sweep; the links answer counts as changed only
  // when a cable or its error counters did, so a quiet fabric costs no write. The stored
  // "perfmgr_sweep" is then that of the last write.
  // Without the degraded-link rule no cable is judged degraded (discovery's PortInfo unused).
  const DiscoveryResult* judged = options_.health_degraded_links ? discovered() : nullptr;
  SaveSnapshot(ha::kSnapshotLinks, [&](const AnswerSink& sink, bool for_digest) {
    StreamLinksAnswer(*f, judged, perf_, /*with_sweep=*/!for_digest, sink);
  });
  // The age of the PerfMgr sweep is relative to now: the snapshot holds when it ended
  // instead, and the reader computes the age from that.
  nlohmann::json perfmgr = HealthPerfmgrJson(perf_);
  perfmgr.erase("last_sweep_age_s");
  if (perf_ && perf_->last_sweep_end())
    perfmgr["last_sweep_end_us"] = std::chrono::duration_cast<std::chrono::microseconds>(
                                       perf_->last_sweep_end()->time_since_epoch())
                                       .count();
  SaveSnapshot(ha::kSnapshotHealth, [&](const AnswerSink& sink, bool) {
    StreamHealthAnswer(judged, perf_, perfmgr, sink);
  });
}

// The answer goes to the state file in parts, never held whole. After the first write it is
// first produced into a digest (FNV-1a) alone, and written only when that changed.
void SubnetManager::SaveSnapshot(std::string_view name, const SnapshotProducer& produce) {
  uint64_t digest = 0xcbf29ce484222325ull;
  auto into_digest = [&digest](std::string_view piece) {
    for (unsigned char c: piece) digest = (digest ^ c) * 0x100000001b3ull;
  };
  auto it = snapshot_hashes_.find(name);
  if (it == snapshot_hashes_.end()) {
    // The first write: one pass (the io thread answers nothing meanwhile), digesting on the
    // way all but the piece a digest pass leaves out.
    Status s = store_->SaveSnapshotStreamed(name, [&](const ha::StateStore::SnapshotSink& sink) {
      produce(
          [&](std::string_view piece) {
            if (!piece.starts_with(kLinksSweepPiece)) into_digest(piece);
            sink(piece);
          },
          false);
    });
    if (NoteStateWrite("SM-STATE-013", s, fmt::format("{} snapshot", name)))
      snapshot_hashes_.insert_or_assign(std::string(name), digest);
    return;
  }
  produce(into_digest, /*for_digest=*/true);
  if (it->second == digest) return;
  // A failed write keeps the old digest, so the next sweep tries again.
  Status s = store_->SaveSnapshotStreamed(
      name, [&](const ha::StateStore::SnapshotSink& sink) { produce(sink, false); });
  if (NoteStateWrite("SM-STATE-013", s, fmt::format("{} snapshot", name)))
    snapshot_hashes_.insert_or_assign(std::string(name), digest);
}

}  // namespace ibsm::sm
