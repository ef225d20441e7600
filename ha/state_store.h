// The SM's persistent state: one SQLite file per SM instance (ARCHITECTURE.md).
//
// Holds guid2lid (so LIDs survive restarts), sweep history, events, SM state
// key/values, known peer SMs and the last routing result as one LFT digest per switch (so a
// restarted or newly promoted master can trust a matching digest), and the
// ServiceRecords and InformInfo subscriptions registered with the SA.
//
// Durability contract: every write method runs in one transaction; once it returns OK the
// rows survive a crash of the process at any later point, and (synchronous=FULL) a power
// loss or kernel crash too. A crash at any point never leaves the file unreadable.
//
// Threading: a StateStore is not thread-safe; one thread (the daemon's io_context) owns it.
// Other processes (tools) may read the same file concurrently through OpenReadOnly; WAL
// lets them read while the SM writes.
//
// On-disk numbers are FROZEN: the schema (StateStoreMigrations()), SweepKind and
// EventSeverity values, and the encoding of GUIDs (two's-complement int64 of the EUI-64)
// never change meaning. A schema change is a new migration appended to the list, with a test.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "base/types.h"
#include "ha/state_rows.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ibsm::ha {

// One step of the schema. FROZEN once shipped: never edit or renumber, only append.
struct Migration {
  int version;      // PRAGMA user_version after this step; 1, 2, 3, ... in order
  const char* sql;  // statements run in the migration's transaction
};

// Every migration, oldest first. The file's user_version says how many have been applied.
std::span<const Migration> StateStoreMigrations();

// The schema version this code writes (the last migration's version).
int StateStoreSchemaVersion();

// The rows of ha/state_rows.h in the SQLite file. Each method keeps the contract its
// interface states there; what follows is what the file adds.
class StateStore final: public StateFile {
 public:
  // Opens or creates the file at `path` (its directory must exist), switches it to WAL,
  // checks it (quick_check) and migrates an older schema in one transaction.
  // Errors: Corrupt for a file that is not a sound SQLite database; FailedPrecondition for a
  // file written by a newer ibsm; IoError when it cannot be opened or created.
  // `clock` must outlive the store.
  static Result<std::unique_ptr<StateStore>> Open(const std::string& path, const Clock& clock);

  // For tools: reads an existing file at the current schema version; never writes, never
  // migrates. Every write method returns FailedPrecondition. SQLite's quick_check skips
  // CHECK constraints on a read-only connection; the readers validate ranges themselves.
  static Result<std::unique_ptr<StateStore>> OpenReadOnly(const std::string& path);

  // For the SM when Open failed with an I/O error (`why`: a read-only directory, a full disk,
  // permissions), so it can still serve the fabric: the file's rows as they are (opened
  // immutable, since nothing can write it), or an empty store when the file is missing or
  // unreadable. Reads work; every write returns Unavailable until RetryWritable() succeeds.
  static Result<std::unique_ptr<StateStore>> OpenDegraded(const std::string& path,
                                                          const Clock& clock, const Status& why);
  // A degraded store tries Open again; OK when it now takes writes (migrated if needed).
  // The rows it read while degraded are dropped for the file's own.
  Status RetryWritable() override;
  bool degraded() const override { return !degraded_why_.empty(); }

  ~StateStore() override;
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  const std::string& path() const override { return path_; }
  bool read_only() const { return clock_ == nullptr; }
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

  // SnapshotRows. Streamed text is stored in parts of about 64 KiB, in one transaction.
  Status SaveSnapshot(std::string_view name, std::string_view json) override;
  Status SaveSnapshotStreamed(std::string_view name,
                              const std::function<void(const SnapshotSink&)>& produce) override;
  Result<std::optional<SnapshotRow>> LoadSnapshot(std::string_view name) override;

  // PerfRows.
  Status RecordPerfHistory(const std::vector<PerfHistoryRow>& rows, size_t keep_sweeps) override;
  Result<std::vector<PerfHistoryRow>> LoadPerfHistory(std::optional<Guid> node,
                                                      size_t limit) override;
  Result<int64_t> LastPerfSweep() override;

  // Full PRAGMA integrity_check; Corrupt with SQLite's first findings otherwise.
  Status CheckIntegrity();

  // PRAGMA user_version of the open file.
  Result<int> SchemaVersion();

 private:
  class Txn;

  StateStore(std::string path, sqlite3* db, const Clock* clock);

  // REQUIRES: `sql` outlives the store (a string literal); it keys the statement cache.
  Result<sqlite3_stmt*> Prepare(std::string_view sql);
  Status Exec(const char* sql);
  Status SqlError(std::string_view what) const;
  static Status CheckGroupRecords(const std::vector<McGroupRow>& groups);
  Status WriteMcGroup(sqlite3_stmt* group, sqlite3_stmt* member, const McGroupRow& g) const;
  Status CheckWritable() const;
  Status Migrate();

  Status UpsertGuid2LidLocked(const std::vector<Guid2LidEntry>& upserts, int64_t now);
  Status InsertEventLocked(const EventRow& row);

  std::string path_;
  sqlite3* db_;
  const Clock* clock_;  // null for a read-only store
  std::unordered_map<std::string_view, sqlite3_stmt*> stmts_;
  std::string degraded_why_;  // non-empty: opened by OpenDegraded, not yet writable
  uint64_t commits_ = 0;
};

}  // namespace ibsm::ha
