// Every call of a LockedStateFile under its mutex (ha/locked_state_file.h).
#include "ha/locked_state_file.h"

namespace ibsm::ha {

Result<std::vector<Guid2LidEntry>> LockedStateFile::LoadGuid2Lid() {
  return Locked([&](StateFile& f) { return f.LoadGuid2Lid(); });
}

Status LockedStateFile::SaveGuid2Lid(const std::vector<Guid2LidEntry>& upserts,
                                     const std::vector<Guid>& removals) {
  return Locked([&](StateFile& f) { return f.SaveGuid2Lid(upserts, removals); });
}

Status LockedStateFile::ReplaceGuid2Lid(const std::vector<Guid2LidEntry>& all) {
  return Locked([&](StateFile& f) { return f.ReplaceGuid2Lid(all); });
}

Status LockedStateFile::SaveLftDigests(const std::vector<LftDigestEntry>& upserts,
                                       const std::vector<Guid>& removals) {
  return Locked([&](StateFile& f) { return f.SaveLftDigests(upserts, removals); });
}

Result<std::vector<LftDigestEntry>> LockedStateFile::LoadLftDigests() {
  return Locked([&](StateFile& f) { return f.LoadLftDigests(); });
}

Status LockedStateFile::SaveArGroupIds(const std::map<Guid, uint16_t>& ids) {
  return Locked([&](StateFile& f) { return f.SaveArGroupIds(ids); });
}

Result<std::map<Guid, uint16_t>> LockedStateFile::LoadArGroupIds() {
  return Locked([&](StateFile& f) { return f.LoadArGroupIds(); });
}

Result<int64_t> LockedStateFile::RecordSweep(const SweepRow& row) {
  return Locked([&](StateFile& f) { return f.RecordSweep(row); });
}

Result<std::vector<SweepRow>> LockedStateFile::RecentSweeps(size_t n) {
  return Locked([&](StateFile& f) { return f.RecentSweeps(n); });
}

Status LockedStateFile::RecordEvent(const EventRow& row) {
  return Locked([&](StateFile& f) { return f.RecordEvent(row); });
}

Status LockedStateFile::RecordEvents(const std::vector<EventRow>& rows) {
  return Locked([&](StateFile& f) { return f.RecordEvents(rows); });
}

Result<std::vector<EventRow>> LockedStateFile::RecentEvents(size_t n, int64_t since_us,
                                                            std::string_view kind) {
  return Locked([&](StateFile& f) { return f.RecentEvents(n, since_us, kind); });
}

Result<uint64_t> LockedStateFile::CountEvents(int64_t since_us) {
  return Locked([&](StateFile& f) { return f.CountEvents(since_us); });
}

Status LockedStateFile::Prune(size_t keep_sweeps, size_t keep_events) {
  return Locked([&](StateFile& f) { return f.Prune(keep_sweeps, keep_events); });
}

Status LockedStateFile::SetValue(std::string_view key, std::string_view value) {
  return Locked([&](StateFile& f) { return f.SetValue(key, value); });
}

Result<std::optional<std::string>> LockedStateFile::GetValue(std::string_view key) {
  return Locked([&](StateFile& f) { return f.GetValue(key); });
}

Status LockedStateFile::UpsertPeer(const PeerRow& peer) {
  return Locked([&](StateFile& f) { return f.UpsertPeer(peer); });
}

Status LockedStateFile::RemovePeer(Guid guid) {
  return Locked([&](StateFile& f) { return f.RemovePeer(guid); });
}

Result<std::vector<PeerRow>> LockedStateFile::Peers() {
  return Locked([&](StateFile& f) { return f.Peers(); });
}

Status LockedStateFile::SaveServiceRecords(const std::vector<ServiceRow>& upserts,
                                           const std::vector<ServiceKey>& removals) {
  return Locked([&](StateFile& f) { return f.SaveServiceRecords(upserts, removals); });
}

Result<std::vector<ServiceRow>> LockedStateFile::LoadServiceRecords() {
  return Locked([&](StateFile& f) { return f.LoadServiceRecords(); });
}

Status LockedStateFile::SaveInformSubscriptions(const std::vector<InformRow>& upserts,
                                                const std::vector<std::vector<uint8_t>>& removals) {
  return Locked([&](StateFile& f) { return f.SaveInformSubscriptions(upserts, removals); });
}

Result<std::vector<InformRow>> LockedStateFile::LoadInformSubscriptions() {
  return Locked([&](StateFile& f) { return f.LoadInformSubscriptions(); });
}

Status LockedStateFile::SaveMulticastGroups(const std::vector<McGroupRow>& groups) {
  return Locked([&](StateFile& f) { return f.SaveMulticastGroups(groups); });
}

Status LockedStateFile::SaveMulticastChanges(const std::vector<McGroupRow>& upserts,
                                             const std::vector<std::array<uint8_t, 16>>& removals) {
  return Locked([&](StateFile& f) { return f.SaveMulticastChanges(upserts, removals); });
}

Result<std::vector<McGroupRow>> LockedStateFile::LoadMulticastGroups() {
  return Locked([&](StateFile& f) { return f.LoadMulticastGroups(); });
}

Status LockedStateFile::SaveSnapshot(std::string_view name, std::string_view json) {
  return Locked([&](StateFile& f) { return f.SaveSnapshot(name, json); });
}

Status LockedStateFile::SaveSnapshotStreamed(
    std::string_view name, const std::function<void(const SnapshotSink&)>& produce) {
  return Locked([&](StateFile& f) { return f.SaveSnapshotStreamed(name, produce); });
}

Result<std::optional<SnapshotRow>> LockedStateFile::LoadSnapshot(std::string_view name) {
  return Locked([&](StateFile& f) { return f.LoadSnapshot(name); });
}

Status LockedStateFile::RecordPerfHistory(const std::vector<PerfHistoryRow>& rows,
                                          size_t keep_sweeps) {
  return Locked([&](StateFile& f) { return f.RecordPerfHistory(rows, keep_sweeps); });
}

Result<std::vector<PerfHistoryRow>> LockedStateFile::LoadPerfHistory(std::optional<Guid> node,
                                                                     size_t limit) {
  return Locked([&](StateFile& f) { return f.LoadPerfHistory(node, limit); });
}

Result<int64_t> LockedStateFile::LastPerfSweep() {
  return Locked([&](StateFile& f) { return f.LastPerfSweep(); });
}

Status LockedStateFile::RetryWritable() {
  return Locked([&](StateFile& f) { return f.RetryWritable(); });
}

bool LockedStateFile::degraded() const {
  return Locked([](const StateFile& f) { return f.degraded(); });
}
uint64_t LockedStateFile::transactions() const {
  return Locked([](const StateFile& f) { return f.transactions(); });
}

}  // namespace ibsm::ha
