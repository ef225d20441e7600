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

// FROZEN: stored in sweeps.kind.
enum class SweepKind: int {
  kHeavy = 1,
  kLight = 2,
};

// FROZEN: stored in events.severity.
enum class EventSeverity: int {
  kInfo = 1,
  kWarning = 2,
  kError = 3,
  kCritical = 4,
};

// Event kinds are open-ended text; these are the ones the SM writes. FROZEN spellings.
inline constexpr std::string_view kEventTrap = "trap";
inline constexpr std::string_view kEventLinkChange = "link_change";
inline constexpr std::string_view kEventStateChange = "state_change";
inline constexpr std::string_view kEventLidChange = "lid_change";
inline constexpr std::string_view kEventError = "error";
inline constexpr std::string_view kEventHealth = "health";  // PerfMgr health findings
inline constexpr std::string_view kEventConfigReload = "config_reload";  // SIGHUP

// Snapshot names (snapshots.name), one per control command whose answer the daemon keeps
// in the state file. FROZEN spellings; the JSON is the command's answer, unfiltered.
inline constexpr std::string_view kSnapshotNodes = "nodes";
inline constexpr std::string_view kSnapshotLinks = "links";
inline constexpr std::string_view kSnapshotHealth = "health";

struct SnapshotRow {
  std::string name;
  int64_t written_us = 0;  // Unix microseconds, from the writer's Clock
  std::string json;

  bool operator==(const SnapshotRow&) const = default;
};

// The LIDs of one end port (or switch port 0): min_lid .. max_lid = min_lid + 2^LMC - 1.
struct Guid2LidEntry {
  Guid port_guid;
  Lid min_lid;
  Lid max_lid;
  int64_t updated_us = 0;  // set by the store from its Clock on write; ignored on input

  bool operator==(const Guid2LidEntry&) const = default;
};

struct SweepRow {
  int64_t id = 0;  // assigned by RecordSweep; ignored on input. Never reused after Prune.
  SweepKind kind = SweepKind::kHeavy;
  int64_t started_us = 0;  // Unix microseconds
  int64_t ended_us = 0;
  uint64_t smps_sent = 0;
  uint64_t smps_failed = 0;
  uint32_t nodes = 0;
  uint32_t switches = 0;
  uint32_t cas = 0;
  uint32_t links = 0;
  uint32_t lid_changes = 0;
  uint32_t lft_blocks_sent = 0;
  std::string engine;   // routing engine that produced the tables ("minhop", "ftree", ...)
  std::string outcome;  // "ok", "partial", "failed", ...
  std::string note;

  bool operator==(const SweepRow&) const = default;
};

struct EventRow {
  int64_t id = 0;       // assigned by RecordEvent; ignored on input
  int64_t time_us = 0;  // when it happened (Unix microseconds), as given by the caller
  std::string kind;     // kEventTrap, kEventLinkChange, ...
  EventSeverity severity = EventSeverity::kInfo;
  std::optional<Guid> node_guid;
  std::optional<PortNum> port_num;
  std::string message;

  bool operator==(const EventRow&) const = default;
};

// Another SM seen on the subnet (SMInfo).
struct PeerRow {
  Guid guid;
  uint8_t priority = 0;  // SMInfo.Priority, 0..15
  uint8_t state = 0;     // SMInfo.SMState as on the wire (IBA 14.4.1): 0 NOTACTIVE ..3 MASTER
  int64_t last_seen_us = 0;
  bool sm_key_match = false;

  bool operator==(const PeerRow&) const = default;
};

// What the SM last programmed into one switch's LFT.
struct LftDigestEntry {
  Guid switch_guid;
  uint64_t digest = 0;     // hash of LFT blocks 0..max_lid; the hash function is the router's
  Lid max_lid;             // LinearFDBTop it was computed up to
  int64_t updated_us = 0;  // set by the store from its Clock on write; ignored on input

  bool operator==(const LftDigestEntry&) const = default;
};

// A ServiceRecord registered with the SA (IBA 15.2.5.14), keyed as the SA keys it.
inline constexpr size_t kServiceRecordSize = 176;
struct ServiceKey {
  uint64_t service_id = 0;
  std::array<uint8_t, 16> service_gid{};
  uint16_t pkey = 0;

  bool operator==(const ServiceKey&) const = default;
};
struct ServiceRow {
  ServiceKey key;
  std::vector<uint8_t> record;       // the wire image, kServiceRecordSize bytes
  std::optional<int64_t> expires_us;  // Unix microseconds; nullopt: the lease is infinite

  bool operator==(const ServiceRow&) const = default;
};

// An InformInfo subscription (IBA 13.4.8.3) as the SA keeps it: its identity, its
// InformInfoRecord and where Reports go.
inline constexpr size_t kInformInfoRecordSize = 60;
struct InformRow {
  std::vector<uint8_t> key;     // opaque identity, non-empty (sm/sa/inform.cc builds it)
  std::vector<uint8_t> record;  // the InformInfoRecord wire image, kInformInfoRecordSize bytes
  uint16_t report_lid = 0;
  uint32_t report_qpn = 0;  // 24 bits
  uint32_t report_qkey = 0;
  uint16_t pkey_index = 0;
  uint8_t sl = 0;  // 4 bits
  bool trusted = false;  // subscribed presenting the SA key (may see security traps)

  bool operator==(const InformRow&) const = default;
};

// A multicast group the SA created (IBA 15.2.5.17) and its members, so that a restarted SM
// keeps every group on its MLID. `record` is the group's MCMemberRecord wire image
// (kMcGroupRecordSize bytes: MGID, Q_Key, MLID, MTU, P_Key, rate, SL, ...; PortGID and
// JoinState zero).
inline constexpr size_t kMcGroupRecordSize = 52;
struct McMemberRow {
  uint64_t port_guid = 0;
  std::array<uint8_t, 16> port_gid{};
  uint8_t join_state = 0;
  bool proxy_join = false;

  bool operator==(const McMemberRow&) const = default;
};
struct McGroupRow {
  std::array<uint8_t, 16> mgid{};
  uint16_t mlid = 0;
  std::vector<uint8_t> record;
  bool permanent = false;
  std::vector<McMemberRow> members;  // by port GUID

  bool operator==(const McGroupRow&) const = default;
};

// Port counter deltas of one PerfMgr sweep (sm/perf/perf_manager.h). FROZEN: the order of
// kPerfCounterNames is the column order of perf_history and the index into `deltas`.
inline constexpr size_t kPerfCounterCount = 17;
inline constexpr std::array<std::string_view, kPerfCounterCount> kPerfCounterNames = {
    "symbol_errors",          "link_error_recovery",         "link_downed",
    "rcv_errors",             "rcv_remote_physical_errors",  "rcv_switch_relay_errors",
    "xmit_discards",          "xmit_constraint_errors",      "rcv_constraint_errors",
    "local_link_integrity_errors", "excessive_buffer_overruns", "vl15_dropped",
    "xmit_wait",              "xmit_data",                   "rcv_data",
    "xmit_pkts",              "rcv_pkts"};
// FROZEN: perf_history.flags bits.
inline constexpr uint32_t kPerfFlagReset = 1u << 0;      // a counter read lower than before
inline constexpr uint32_t kPerfFlagSaturated = 1u << 1;  // a counter stuck at its maximum
inline constexpr uint32_t kPerfFlagCleared = 1u << 2;    // the PerfMgr cleared the counters
struct PerfHistoryRow {
  int64_t sweep = 0;  // PerfMgr sweep number, >= 1, increasing across restarts
  int64_t time_us = 0;
  Guid node_guid{0};
  PortNum port_num{0};
  uint32_t flags = 0;
  std::array<uint64_t, kPerfCounterCount> deltas{};

  bool operator==(const PerfHistoryRow&) const = default;
};

class StateStore {
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
  Status RetryWritable();
  bool degraded() const { return !degraded_why_.empty(); }

  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  const std::string& path() const { return path_; }
  bool read_only() const { return clock_ == nullptr; }

  // guid2lid. Save applies upserts then removals in one transaction.
  Result<std::vector<Guid2LidEntry>> LoadGuid2Lid();
  Status SaveGuid2Lid(const std::vector<Guid2LidEntry>& upserts, const std::vector<Guid>& removals);
  Status ReplaceGuid2Lid(const std::vector<Guid2LidEntry>& all);

  // Sweep history. RecentSweeps returns the newest n, newest first.
  Result<int64_t> RecordSweep(const SweepRow& row);
  Result<std::vector<SweepRow>> RecentSweeps(size_t n);

  // Events. RecentEvents returns at most n events with time_us >= since_us (and of `kind`
  // unless it is empty), newest first.
  Status RecordEvent(const EventRow& row);
  Status RecordEvents(const std::vector<EventRow>& rows);  // one transaction for a burst
  Result<std::vector<EventRow>> RecentEvents(size_t n, int64_t since_us = 0,
                                             std::string_view kind = {});
  // How many events have time_us >= since_us (what RecentEvents could return without `n`).
  Result<uint64_t> CountEvents(int64_t since_us = 0);

  // The daemon's last answer to a control command (kSnapshot*), replaced whole; written_us
  // is set from the store's Clock. LoadSnapshot: nullopt when none was ever written.
  Status SaveSnapshot(std::string_view name, std::string_view json);
  // The same, with the text handed over in pieces: `produce` calls its sink with each piece
  // in order. Stored in parts of about 64 KiB, in one transaction, so a large fabric's answer
  // is never held whole.
  using SnapshotSink = std::function<void(std::string_view piece)>;
  Status SaveSnapshotStreamed(std::string_view name,
                              const std::function<void(const SnapshotSink&)>& produce);
  Result<std::optional<SnapshotRow>> LoadSnapshot(std::string_view name);

  // SM state key/values ("sm_state", "act_count", "priority", ...).
  Status SetValue(std::string_view key, std::string_view value);
  Result<std::optional<std::string>> GetValue(std::string_view key);

  // Peer SMs, ordered by GUID.
  Status UpsertPeer(const PeerRow& peer);
  Status RemovePeer(Guid guid);
  Result<std::vector<PeerRow>> Peers();

  // Per-switch LFT digests; upserts then removals in one transaction.
  Status SaveLftDigests(const std::vector<LftDigestEntry>& upserts,
                        const std::vector<Guid>& removals);
  Result<std::vector<LftDigestEntry>> LoadLftDigests();

  // ServiceRecords; upserts (by key) then removals in one transaction. InvalidArgument for
  // a record that is not kServiceRecordSize bytes (nothing is written then).
  Status SaveServiceRecords(const std::vector<ServiceRow>& upserts,
                            const std::vector<ServiceKey>& removals);
  // Ordered by key (IDs as the int64 they are stored as). Corrupt for a row whose sizes or P_Key are out of range.
  Result<std::vector<ServiceRow>> LoadServiceRecords();

  // InformInfo subscriptions; upserts (by key) then removals in one transaction.
  // InvalidArgument for a row out of range (nothing is written then).
  Status SaveInformSubscriptions(const std::vector<InformRow>& upserts,
                                 const std::vector<std::vector<uint8_t>>& removals);
  // In the order they were first stored. Corrupt for a row whose sizes or ranges are off.
  Result<std::vector<InformRow>> LoadInformSubscriptions();
  // Replaces every multicast group and member with `groups`, in one transaction.
  // InvalidArgument for a record that is not kMcGroupRecordSize bytes (nothing written).
  Status SaveMulticastGroups(const std::vector<McGroupRow>& groups);
  // Row by row: deletes the groups in `removals` (their members with them), then writes each
  // group of `upserts` and replaces its members, in one transaction. What neither names is
  // left as it is. InvalidArgument as SaveMulticastGroups.
  Status SaveMulticastChanges(const std::vector<McGroupRow>& upserts,
                              const std::vector<std::array<uint8_t, 16>>& removals);
  // Ordered by MLID, members by port GUID. Corrupt for a malformed row.
  Result<std::vector<McGroupRow>> LoadMulticastGroups();

  // Write transactions committed through this store since it was opened (tests, and what a
  // burst of SA changes costs in fsyncs).
  uint64_t transactions() const { return commits_; }

  // Adaptive-routing group IDs by destination leaf switch GUID (routing/ar_groups.h):
  // replaces the whole map in one transaction. InvalidArgument for an ID above 4095.
  Status SaveArGroupIds(const std::map<Guid, uint16_t>& ids);
  Result<std::map<Guid, uint16_t>> LoadArGroupIds();

  // Keeps the newest keep_sweeps sweeps and keep_events events, in one transaction.
  Status Prune(size_t keep_sweeps, size_t keep_events);

  // Full PRAGMA integrity_check; Corrupt with SQLite's first findings otherwise.
  Status CheckIntegrity();

  // PRAGMA user_version of the open file.
  Result<int> SchemaVersion();

  // PerfMgr history: inserts the rows (one sweep's, usually) and drops every row older than
  // the newest `keep_sweeps` sweeps, in one transaction.
  Status RecordPerfHistory(const std::vector<PerfHistoryRow>& rows, size_t keep_sweeps);
  // Newest sweep first, then by node GUID (as the int64 it is stored as) and port; `node`: only that node's ports.
  Result<std::vector<PerfHistoryRow>> LoadPerfHistory(std::optional<Guid> node, size_t limit);
  // The highest sweep number stored, 0 for none (sweep numbers continue after a restart).
  Result<int64_t> LastPerfSweep();

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
