// MemoryStateStore: the rows of ha/state_rows.h in memory, the twin of the SQLite
// StateStore for tests that need a state file's behaviour and not its bytes. It keeps the
// same contract, checked by the suite both run (ha/state_rows_test.cc): the same orders,
// ids, retention, the same refusals of rows the schema's constraints refuse (as
// InvalidArgument; the file says which constraint in its own words), every write all or
// nothing.
//
// What the file has and this has not: durability (it lives as long as the object; a test
// "restarts" an SM by building a new one on the same store), the schema and migrations,
// concurrent readers. What this has and the file has not: an outage on demand
// (`RefuseWrites`), which a test of the write-failure paths would otherwise make by taking
// a directory's permissions away.
//
// Threading: as StateStore, one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/clock.h"
#include "ha/state_rows.h"

namespace ibsm::ha {

class MemoryStateStore final: public StateFile {
 public:
  // `clock` stamps updated_us and written_us, as the file's clock does; it must outlive this.
  explicit MemoryStateStore(const Clock& clock, std::string name = "memory");

  // Every write from now on returns Unavailable(why) and degraded() is true, as a store
  // opened degraded; RetryWritable succeeds once AcceptWrites is called.
  void RefuseWrites(std::string why);
  void AcceptWrites() { writable_ = true; }

  const std::string& path() const override { return name_; }
  bool degraded() const override { return !refused_why_.empty(); }
  Status RetryWritable() override;
  uint64_t transactions() const override { return commits_; }

  // RoutingRows.
  Result<std::vector<Guid2LidEntry>> LoadGuid2Lid() override;
  Status SaveGuid2Lid(const std::vector<Guid2LidEntry>& upserts,
                      const std::vector<Guid>& removals) override;
  Status ReplaceGuid2Lid(const std::vector<Guid2LidEntry>& all) override;
  Status SaveLftDigests(const std::vector<LftDigestEntry>& upserts,
                        const std::vector<Guid>& removals) override;
  Result<std::vector<LftDigestEntry>> LoadLftDigests() override;
  Status SaveArGroupIds(const std::map<Guid, uint16_t>& ids) override;
  Result<std::map<Guid, uint16_t>> LoadArGroupIds() override;

  // HistoryRows.
  Result<int64_t> RecordSweep(const SweepRow& row) override;
  Result<std::vector<SweepRow>> RecentSweeps(size_t n) override;
  Status RecordEvent(const EventRow& row) override;
  Status RecordEvents(const std::vector<EventRow>& rows) override;
  Result<std::vector<EventRow>> RecentEvents(size_t n, int64_t since_us = 0,
                                             std::string_view kind = {}) override;
  Result<uint64_t> CountEvents(int64_t since_us = 0) override;
  Status Prune(size_t keep_sweeps, size_t keep_events) override;

  // SmStateRows.
  Status SetValue(std::string_view key, std::string_view value) override;
  Result<std::optional<std::string>> GetValue(std::string_view key) override;
  Status UpsertPeer(const PeerRow& peer) override;
  Status RemovePeer(Guid guid) override;
  Result<std::vector<PeerRow>> Peers() override;

  // SaRows.
  Status SaveServiceRecords(const std::vector<ServiceRow>& upserts,
                            const std::vector<ServiceKey>& removals) override;
  Result<std::vector<ServiceRow>> LoadServiceRecords() override;
  Status SaveInformSubscriptions(const std::vector<InformRow>& upserts,
                                 const std::vector<std::vector<uint8_t>>& removals) override;
  Result<std::vector<InformRow>> LoadInformSubscriptions() override;
  Status SaveMulticastGroups(const std::vector<McGroupRow>& groups) override;
  Status SaveMulticastChanges(const std::vector<McGroupRow>& upserts,
                              const std::vector<std::array<uint8_t, 16>>& removals) override;
  Result<std::vector<McGroupRow>> LoadMulticastGroups() override;

  // SnapshotRows.
  Status SaveSnapshot(std::string_view name, std::string_view json) override;
  Status SaveSnapshotStreamed(std::string_view name,
                              const std::function<void(const SnapshotSink&)>& produce) override;
  Result<std::optional<SnapshotRow>> LoadSnapshot(std::string_view name) override;

  // PerfRows.
  Status RecordPerfHistory(const std::vector<PerfHistoryRow>& rows, size_t keep_sweeps) override;
  Result<std::vector<PerfHistoryRow>> LoadPerfHistory(std::optional<Guid> node,
                                                      size_t limit) override;
  Result<int64_t> LastPerfSweep() override;

 private:
  // GUID-keyed tables are ordered as the file orders them: by the two's-complement int64
  // the GUID is stored as.
  using DbKey = int64_t;
  using Mgid = std::array<uint8_t, 16>;
  // Service keys as the file orders them: ID as int64, then GID bytes, then P_Key.
  using ServiceOrder = std::tuple<int64_t, Mgid, uint16_t>;
  using McGroups = std::map<Mgid, McGroupRow>;

  Status Writable() const;
  Status Commit();
  static Status CheckGroups(const McGroups& groups);
  int64_t Now() const { return clock_.UnixMicros(); }

  const Clock& clock_;
  std::string name_;
  bool writable_ = true;
  std::string refused_why_;
  uint64_t commits_ = 0;

  std::map<DbKey, Guid2LidEntry> guid2lid_;
  std::map<DbKey, LftDigestEntry> lft_digests_;
  std::map<Guid, uint16_t> ar_group_ids_;
  std::map<int64_t, SweepRow> sweeps_;  // by id
  int64_t next_sweep_id_ = 1;
  std::map<int64_t, EventRow> events_;  // by id
  int64_t next_event_id_ = 1;
  std::map<std::string, std::string, std::less<>> values_;
  std::map<DbKey, PeerRow> peers_;
  std::map<ServiceOrder, ServiceRow> services_;
  std::vector<InformRow> informs_;  // in the order first stored
  McGroups groups_;
  std::map<std::string, SnapshotRow, std::less<>> snapshots_;
  // (sweep, node GUID as int64, port) -> row; the file's primary key.
  std::map<std::tuple<int64_t, DbKey, uint8_t>, PerfHistoryRow> perf_;
};

}  // namespace ibsm::ha
