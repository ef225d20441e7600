#include "ha/state_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "base/log.h"

namespace ibsm::ha {
namespace {

// FROZEN: every entry below has shipped (or will, with this file). Never edit or reorder;
// append a new Migration for any change. ha/state_store_test.cc keeps a copy of version 1
// and fails if it drifts.
constexpr std::array<Migration, 9> kMigrations = {{
    // Version 1: what the SM core needs: LIDs kept across restarts, sweep
    // history, SM state key/values.
    {1, R"sql(
CREATE TABLE guid2lid (
  port_guid  INTEGER PRIMARY KEY,  -- EUI-64 as two's-complement int64
  min_lid    INTEGER NOT NULL CHECK (min_lid BETWEEN 1 AND 49151),
  max_lid    INTEGER NOT NULL CHECK (max_lid BETWEEN min_lid AND 49151),
  updated_us INTEGER NOT NULL
);
CREATE TABLE sweeps (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  kind            INTEGER NOT NULL CHECK (kind IN (1, 2)),  -- SweepKind: 1 heavy, 2 light
  started_us      INTEGER NOT NULL,
  ended_us        INTEGER NOT NULL,
  smps_sent       INTEGER NOT NULL DEFAULT 0,
  smps_failed     INTEGER NOT NULL DEFAULT 0,
  nodes           INTEGER NOT NULL DEFAULT 0,
  switches        INTEGER NOT NULL DEFAULT 0,
  cas             INTEGER NOT NULL DEFAULT 0,
  links           INTEGER NOT NULL DEFAULT 0,
  lid_changes     INTEGER NOT NULL DEFAULT 0,
  lft_blocks_sent INTEGER NOT NULL DEFAULT 0,
  engine          TEXT NOT NULL DEFAULT '',
  outcome         TEXT NOT NULL,
  note            TEXT NOT NULL DEFAULT ''
);
CREATE TABLE sm_state (
  key        TEXT PRIMARY KEY,
  value      TEXT NOT NULL,
  updated_us INTEGER NOT NULL
) WITHOUT ROWID;
)sql"},
    // Version 2: high availability: events, peer SMs, per-switch LFT digests.
    {2, R"sql(
CREATE TABLE events (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  time_us   INTEGER NOT NULL,
  kind      TEXT NOT NULL,
  severity  INTEGER NOT NULL CHECK (severity BETWEEN 1 AND 4),  -- EventSeverity
  node_guid INTEGER,
  port_num  INTEGER CHECK (port_num IS NULL OR port_num BETWEEN 0 AND 255),
  message   TEXT NOT NULL
);
CREATE INDEX events_by_time ON events (time_us);
CREATE TABLE peers (
  guid         INTEGER PRIMARY KEY,
  priority     INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 15),
  state        INTEGER NOT NULL CHECK (state BETWEEN 0 AND 3),  -- SMInfo.SMState
  last_seen_us INTEGER NOT NULL,
  sm_key_match INTEGER NOT NULL CHECK (sm_key_match IN (0, 1))
);
CREATE TABLE lft_digest (
  switch_guid INTEGER PRIMARY KEY,
  digest      INTEGER NOT NULL,  -- uint64 as two's-complement int64
  max_lid     INTEGER NOT NULL CHECK (max_lid BETWEEN 0 AND 49151),
  updated_us  INTEGER NOT NULL
);
)sql"},
    // Version 3: ServiceRecords registered with the SA, so they outlive a restart.
    // `record` is the 176-byte wire image (IBA 15.2.5.14); the key columns repeat its
    // ServiceID, ServiceGID and ServiceP_Key. expires_us NULL: an infinite lease.
    {3, R"sql(
CREATE TABLE service_records (
  service_id  INTEGER NOT NULL,  -- uint64 as two's-complement int64
  service_gid BLOB    NOT NULL CHECK (length(service_gid) = 16),
  pkey        INTEGER NOT NULL CHECK (pkey BETWEEN 0 AND 65535),
  record      BLOB    NOT NULL CHECK (length(record) = 176),
  expires_us  INTEGER,
  PRIMARY KEY (service_id, service_gid, pkey)
);
)sql"},
    // Version 4: InformInfo event subscriptions, so they outlive a restart.
    // `key` is the subscription's identity as sm/inform.cc builds it; `record` the 60-byte
    // InformInfoRecord wire image (IBA 15.2.5.12); report_* the address Reports go to.
    {4, R"sql(
CREATE TABLE inform_subscriptions (
  key         BLOB    PRIMARY KEY NOT NULL,
  record      BLOB    NOT NULL CHECK (length(record) = 60),
  report_lid  INTEGER NOT NULL CHECK (report_lid BETWEEN 0 AND 65535),
  report_qpn  INTEGER NOT NULL CHECK (report_qpn BETWEEN 0 AND 16777215),
  report_qkey INTEGER NOT NULL CHECK (report_qkey BETWEEN 0 AND 4294967295),
  pkey_index  INTEGER NOT NULL CHECK (pkey_index BETWEEN 0 AND 65535),
  sl          INTEGER NOT NULL CHECK (sl BETWEEN 0 AND 15),
  trusted     INTEGER NOT NULL CHECK (trusted IN (0, 1))
);
)sql"},
    // Version 5: multicast groups the SA created and their members (sm/multicast.h). `record` is the
    // group's 52-byte MCMemberRecord image; a member row dies with its group.
    {5, R"sql(
CREATE TABLE mcast_groups (
  mgid      BLOB    PRIMARY KEY CHECK (length(mgid) = 16),
  mlid      INTEGER NOT NULL UNIQUE CHECK (mlid BETWEEN 49152 AND 65535),
  record    BLOB    NOT NULL CHECK (length(record) = 52),
  permanent INTEGER NOT NULL CHECK (permanent IN (0, 1))
);
CREATE TABLE mcast_members (
  mgid       BLOB    NOT NULL REFERENCES mcast_groups (mgid) ON DELETE CASCADE,
  port_guid  INTEGER NOT NULL,  -- uint64 as two's-complement int64
  port_gid   BLOB    NOT NULL CHECK (length(port_gid) = 16),
  join_state INTEGER NOT NULL CHECK (join_state BETWEEN 1 AND 15),
  proxy_join INTEGER NOT NULL CHECK (proxy_join IN (0, 1)),
  PRIMARY KEY (mgid, port_guid)
);
)sql"},
    // Version 6: PerfMgr port-counter history (sm/perf_manager.h): one row per port per
    // PerfMgr sweep in which some counter moved, holding that sweep's deltas (uint64 as
    // two's-complement int64; column order = kPerfCounterNames). `flags`: kPerfFlag* bits.
    {6, R"sql(
CREATE TABLE perf_history (
  sweep      INTEGER NOT NULL CHECK (sweep >= 1),
  time_us    INTEGER NOT NULL,
  node_guid  INTEGER NOT NULL,
  port_num   INTEGER NOT NULL CHECK (port_num BETWEEN 0 AND 255),
  flags      INTEGER NOT NULL DEFAULT 0,
  symbol_errors               INTEGER NOT NULL DEFAULT 0,
  link_error_recovery         INTEGER NOT NULL DEFAULT 0,
  link_downed                 INTEGER NOT NULL DEFAULT 0,
  rcv_errors                  INTEGER NOT NULL DEFAULT 0,
  rcv_remote_physical_errors  INTEGER NOT NULL DEFAULT 0,
  rcv_switch_relay_errors     INTEGER NOT NULL DEFAULT 0,
  xmit_discards               INTEGER NOT NULL DEFAULT 0,
  xmit_constraint_errors      INTEGER NOT NULL DEFAULT 0,
  rcv_constraint_errors       INTEGER NOT NULL DEFAULT 0,
  local_link_integrity_errors INTEGER NOT NULL DEFAULT 0,
  excessive_buffer_overruns   INTEGER NOT NULL DEFAULT 0,
  vl15_dropped                INTEGER NOT NULL DEFAULT 0,
  xmit_wait                   INTEGER NOT NULL DEFAULT 0,
  xmit_data                   INTEGER NOT NULL DEFAULT 0,
  rcv_data                    INTEGER NOT NULL DEFAULT 0,
  xmit_pkts                   INTEGER NOT NULL DEFAULT 0,
  rcv_pkts                    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sweep, node_guid, port_num)
) WITHOUT ROWID;
CREATE INDEX perf_history_by_port ON perf_history (node_guid, port_num, sweep);
)sql"},
    // Version 7: adaptive-routing group IDs (routing/ar_groups.h), one per destination leaf
    // switch, the same on every switch and kept across restarts.
    {7, R"sql(
CREATE TABLE ar_group_ids (
  leaf_guid INTEGER PRIMARY KEY,  -- uint64 as two's-complement int64
  group_id  INTEGER NOT NULL UNIQUE CHECK (group_id BETWEEN 0 AND 4095)
);
)sql"},
    // Version 8: the daemon's last answers to nodes, links and health, so that
    // ibsmctl --state-db answers them with no daemon running.
    {8, R"sql(
CREATE TABLE snapshots (
  name       TEXT PRIMARY KEY,   -- kSnapshotNodes, kSnapshotLinks, kSnapshotHealth
  written_us INTEGER NOT NULL,   -- Unix microseconds
  json       TEXT NOT NULL
);
)sql"},
    // A snapshot written in parts (SaveSnapshotStreamed): snapshots.json is then empty and
    // the text is the parts in order, so no writer or reader holds a large fabric's answer
    // twice.
    {9, R"sql(
CREATE TABLE snapshot_parts (
  name TEXT NOT NULL,
  part INTEGER NOT NULL CHECK (part >= 0),
  text TEXT NOT NULL,
  PRIMARY KEY (name, part)
) WITHOUT ROWID;
)sql"},
}};

// FROZEN: PRAGMA application_id of an ibsm state file ("ibsm" in ASCII), so the SM never
// adds its tables to some other program's database.
constexpr int32_t kApplicationId = 0x6962736d;

// Writers wait this long for a lock held by another connection (a tool's read transaction
// never blocks a WAL writer; only a second writer or a checkpoint can).
constexpr int kBusyTimeoutMs = 5000;

int64_t ToDb(Guid g) { return std::bit_cast<int64_t>(g.value()); }
Guid GuidFromDb(int64_t v) { return Guid{std::bit_cast<uint64_t>(v)}; }
int64_t ToDb(uint64_t v) { return std::bit_cast<int64_t>(v); }

int64_t Limit(size_t n) {
  return n > static_cast<size_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(n);
}

std::string ColText(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t == nullptr ? std::string()
                      : std::string(reinterpret_cast<const char*>(t),
                                    static_cast<size_t>(sqlite3_column_bytes(s, i)));
}

StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
      return StatusCode::kCorrupt;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return StatusCode::kUnavailable;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return StatusCode::kPermissionDenied;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return StatusCode::kInvalidArgument;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return StatusCode::kResourceExhausted;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_NOLFS:
    case SQLITE_PROTOCOL:
      return StatusCode::kIoError;
    default:
      return StatusCode::kInternal;
  }
}

Status ErrorFrom(sqlite3* db, const std::string& path, std::string_view what) {
  int rc = db == nullptr ? SQLITE_NOMEM : sqlite3_extended_errcode(db);
  const char* msg = db == nullptr ? "out of memory" : sqlite3_errmsg(db);
  return Status(CodeFor(rc), fmt::format("state file {}: {}: {} (sqlite {})", path, what, msg, rc));
}

// Resets a cached statement and clears its bindings when the scope ends, on every path.
class StmtScope {
 public:
  explicit StmtScope(sqlite3_stmt* s): s_(s) {}
  ~StmtScope() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  StmtScope(const StmtScope&) = delete;
  StmtScope& operator=(const StmtScope&) = delete;

 private:
  sqlite3_stmt* s_;
};

// Bindings fail only on programming errors (bad index), which the step then reports.
void Bind(sqlite3_stmt* s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
void Bind(sqlite3_stmt* s, int i, std::string_view v) {
  // A null data() would bind SQL NULL; an empty view is the empty string.
  sqlite3_bind_text(s, i, v.data() == nullptr ? "" : v.data(), static_cast<int>(v.size()),
                    SQLITE_TRANSIENT);
}
void BindNull(sqlite3_stmt* s, int i) { sqlite3_bind_null(s, i); }
void BindBlob(sqlite3_stmt* s, int i, std::span<const uint8_t> v) {
  sqlite3_bind_blob(s, i, v.empty() ? "" : static_cast<const void*>(v.data()),
                    static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
std::vector<uint8_t> ColBlob(sqlite3_stmt* s, int i) {
  const auto* b = static_cast<const uint8_t*>(sqlite3_column_blob(s, i));
  return b == nullptr ? std::vector<uint8_t>()
                      : std::vector<uint8_t>(b, b + sqlite3_column_bytes(s, i));
}

// Runs a one-row PRAGMA read on a connection that is not yet wrapped in a StateStore.
Result<int64_t> PragmaInt(sqlite3* db, const std::string& path, const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
    return ErrorFrom(db, path, sql);
  }
  int rc = sqlite3_step(s);
  int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0): 0;
  Status st = rc == SQLITE_ROW || rc == SQLITE_DONE ? Status(): ErrorFrom(db, path, sql);
  sqlite3_finalize(s);
  if (!st.ok()) return st;
  return v;
}

Status QuickCheck(sqlite3* db, const std::string& path, const char* pragma) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, pragma, -1, &s, nullptr) != SQLITE_OK) {
    return ErrorFrom(db, path, pragma);
  }
  std::string findings;
  int rows = 0;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    std::string line = ColText(s, 0);
    if (line == "ok") continue;
    if (++rows <= 3) findings += (findings.empty() ? "" : "; ") + line;
  }
  Status st;
  if (rc != SQLITE_DONE) {
    st = ErrorFrom(db, path, pragma);
  } else if (rows > 0) {
    st = Corrupt(
        fmt::format("state file {}: {} found {} problem(s): {}", path, pragma, rows, findings));
  }
  sqlite3_finalize(s);
  return st;
}

// Checks the header fields every open reads before touching the schema.
Status CheckIdentity(sqlite3* db, const std::string& path, int64_t version) {
  IBSM_ASSIGN_OR_RETURN(int64_t app_id, PragmaInt(db, path, "PRAGMA application_id"));
  if (app_id != 0 && app_id != kApplicationId) {
    return FailedPrecondition(fmt::format(
        "state file {}: application_id {:#x} is not ibsm's; point state_db_file elsewhere", path,
        app_id));
  }
  if (version > StateStoreSchemaVersion()) {
    return FailedPrecondition(fmt::format(
        "state file {} has schema version {}, newer than the {} this ibsm knows; run a newer "
        "ibsm or use another state file",
        path, version, StateStoreSchemaVersion()));
  }
  // ibsm's schema has no trigger and no view. One in the file was put there by someone
  // else, and runs (a trigger on a write, a view on a read) with the SM's privileges.
  {
    sqlite3_stmt* s = nullptr;
    constexpr const char* kSql =
        "SELECT type, name FROM sqlite_schema WHERE type IN ('trigger', 'view') ORDER BY name";
    if (sqlite3_prepare_v2(db, kSql, -1, &s, nullptr) != SQLITE_OK) {
      return ErrorFrom(db, path, "read the schema");
    }
    std::string found;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      found += fmt::format("{}{} \"{}\"", found.empty() ? "" : ", ", ColText(s, 0),
                           ColText(s, 1));
    }
    Status st = rc == SQLITE_DONE ? Status() : ErrorFrom(db, path, "read the schema");
    sqlite3_finalize(s);
    IBSM_RETURN_IF_ERROR(st);
    if (!found.empty()) {
      return FailedPrecondition(fmt::format(
          "state file {} holds {}, which no ibsm writes: refused; move the file aside (ibsmd "
          "then starts a new one)",
          path, found));
    }
  }
  if (version == 0) {
    IBSM_ASSIGN_OR_RETURN(int64_t tables,
                          PragmaInt(db, path, "SELECT count(*) FROM sqlite_schema"));
    if (tables != 0) {
      return FailedPrecondition(fmt::format(
          "state file {} holds {} schema object(s) but no ibsm schema version; it belongs to "
          "another program",
          path, tables));
    }
  }
  return Status();
}

// A state file is the SM's own: SQL in it (a trigger, a view's body, a function call in a
// CHECK) never runs with the SM's privileges beyond what the schema itself needs, and the
// connection cannot be talked into writing the file's pages directly (DEFENSIVE).
Status Harden(sqlite3* db, const std::string& path) {
  int on = -1;
  if (sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, &on) != SQLITE_OK || on != 1 ||
      sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, &on) != SQLITE_OK || on != 0) {
    return ErrorFrom(db, path, "cannot turn on SQLite's defensive mode");
  }
  if (sqlite3_exec(db, "PRAGMA trusted_schema=OFF", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return ErrorFrom(db, path, "PRAGMA trusted_schema=OFF");
  }
  return Status();
}

// The state file holds ServiceKeys and M_Key-protected registrations: owner only (0600),
// whatever the umask. SQLite creates a file 0644 less the umask, and its -wal, -shm and
// -journal files with the database file's mode, so the file is created 0600 here before
// SQLite opens it, and an existing one (or its companions) is narrowed. By path, never by
// an open-and-close: closing a descriptor drops every POSIX lock this process holds on the
// file, SQLite's included. A file that cannot be created here is left to SQLite, which
// reports why.
void RestrictMode(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      (void)::fchmod(fd, 0600);  // 0600 exactly, even under a umask that would take more
      ::close(fd);
    }
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string p = path + suffix;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) == 0)
      continue;
    const unsigned mode = st.st_mode & 07777, narrowed = st.st_mode & 0700;
    if (::chmod(p.c_str(), narrowed) == 0) {
      Log(LogName::kHa).warn("HA-DB-002 state file {} was mode {:04o}, open to other users; "
                             "narrowed to {:04o} (it holds ServiceKeys)",
                             p, mode, narrowed);
    } else {
      Log(LogName::kHa).warn("HA-DB-003 state file {} is mode {:04o}, open to other users, "
                             "and cannot be narrowed: {}",
                             p, mode, std::strerror(errno));
    }
  }
}

}  // namespace

std::span<const Migration> StateStoreMigrations() { return kMigrations; }

int StateStoreSchemaVersion() { return kMigrations.back().version; }

// One write transaction; rolls back unless Commit() succeeded.
class StateStore::Txn {
 public:
  explicit Txn(StateStore& store): store_(store) {}
  ~Txn() {
    if (active_) sqlite3_exec(store_.db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  // IMMEDIATE takes the write lock now, so a busy file fails here and not halfway through.
  Status Begin() {
    IBSM_RETURN_IF_ERROR(store_.CheckWritable());
    IBSM_RETURN_IF_ERROR(store_.Exec("BEGIN IMMEDIATE"));
    active_ = true;
    return Status();
  }
  Status Commit() {
    IBSM_RETURN_IF_ERROR(store_.Exec("COMMIT"));
    active_ = false;
    ++store_.commits_;
    return Status();
  }

 private:
  StateStore& store_;
  bool active_ = false;
};

StateStore::StateStore(std::string path, sqlite3* db, const Clock* clock)
    : path_(std::move(path)), db_(db), clock_(clock) {}

StateStore::~StateStore() {
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

Result<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path, const Clock& clock) {
  RestrictMode(path);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status st = ErrorFrom(db, path, "cannot open or create (does its directory exist?)");
    sqlite3_close_v2(db);
    return st;
  }
  auto store = std::unique_ptr<StateStore>(new StateStore(path, db, &clock));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  IBSM_RETURN_IF_ERROR(Harden(db, path));

  // The header is read first: a file that is not SQLite fails here as Corrupt, and a newer
  // or foreign file is refused before anything is written to it.
  IBSM_ASSIGN_OR_RETURN(int64_t version, PragmaInt(db, path, "PRAGMA user_version"));
  IBSM_RETURN_IF_ERROR(CheckIdentity(db, path, version));

  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * wal, store->Prepare("PRAGMA journal_mode=WAL"));
  {
    StmtScope scope(wal);
    if (sqlite3_step(wal) != SQLITE_ROW) return store->SqlError("PRAGMA journal_mode=WAL");
    if (ColText(wal, 0) != "wal") {
      return IoError(fmt::format("state file {}: cannot switch to WAL (journal_mode is {})", path,
                                 ColText(wal, 0)));
    }
  }
  // WAL with synchronous=FULL fsyncs the WAL at every COMMIT, so a committed row survives
  // a power loss or kernel crash as well as a process crash. NORMAL would survive only the
  // latter: it syncs at checkpoints, and the last commits before a power cut can roll back.
  // Commits here are few (one per sweep, one per burst of events), so the fsync is cheap.
  IBSM_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  IBSM_RETURN_IF_ERROR(store->Exec("PRAGMA foreign_keys=ON"));
  IBSM_RETURN_IF_ERROR(QuickCheck(db, path, "PRAGMA quick_check"));
  IBSM_RETURN_IF_ERROR(store->Migrate());
  return store;
}

Result<std::unique_ptr<StateStore>> StateStore::OpenReadOnly(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status st = ErrorFrom(db, path, "cannot open read-only (does it exist?)");
    sqlite3_close_v2(db);
    return st;
  }
  auto store = std::unique_ptr<StateStore>(new StateStore(path, db, nullptr));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  IBSM_RETURN_IF_ERROR(Harden(db, path));
  IBSM_RETURN_IF_ERROR(store->Exec("PRAGMA query_only=ON"));
  IBSM_ASSIGN_OR_RETURN(int64_t version, PragmaInt(db, path, "PRAGMA user_version"));
  IBSM_RETURN_IF_ERROR(CheckIdentity(db, path, version));
  if (version < StateStoreSchemaVersion()) {
    return FailedPrecondition(fmt::format(
        "state file {} has schema version {}, older than {}; open it once with ibsmd to "
        "migrate it",
        path, version, StateStoreSchemaVersion()));
  }
  IBSM_RETURN_IF_ERROR(QuickCheck(db, path, "PRAGMA quick_check"));
  return store;
}

namespace {

// SQLite URI for `path` (RFC 3986 percent-encoding of what a URI path cannot hold).
std::string FileUri(const std::string& path, std::string_view query) {
  std::string uri = "file:";
  for (unsigned char c: path) {
    if (std::isalnum(c) || std::strchr("/-._~", c) != nullptr) {
      uri += static_cast<char>(c);
    } else {
      uri += fmt::format("%{:02X}", c);
    }
  }
  return uri + "?" + std::string(query);
}

}  // namespace

Result<std::unique_ptr<StateStore>> StateStore::OpenDegraded(const std::string& path,
                                                             const Clock& clock,
                                                             const Status& why) {
  // The file as it is: immutable, because WAL needs its -shm file to read otherwise, and a
  // read-only directory cannot hold one. Nothing else writes the SM's own file meanwhile.
  sqlite3* db = nullptr;
  std::unique_ptr<StateStore> store;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) &&
      sqlite3_open_v2(FileUri(path, "mode=ro&immutable=1").c_str(), &db,
                      SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                      nullptr) == SQLITE_OK) {
    store.reset(new StateStore(path, db, &clock));
    sqlite3_extended_result_codes(db, 1);
    auto version = PragmaInt(db, path, "PRAGMA user_version");
    if (!Harden(db, path).ok() || !version.ok() || *version != StateStoreSchemaVersion() ||
        !CheckIdentity(db, path, *version).ok() ||
        !QuickCheck(db, path, "PRAGMA quick_check").ok()) {
      store.reset();  // an older or unsound file: start empty rather than guess
    }
  } else if (db != nullptr) {
    sqlite3_close_v2(db);
  }
  if (!store) {
    // Nothing readable: an empty store with the schema, in memory.
    db = nullptr;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
      Status st = ErrorFrom(db, path, "cannot open an empty in-memory store");
      sqlite3_close_v2(db);
      return st;
    }
    store.reset(new StateStore(path, db, &clock));
    sqlite3_extended_result_codes(db, 1);
    IBSM_RETURN_IF_ERROR(store->Migrate());
  }
  store->degraded_why_ = why.message().empty() ? "cannot be opened" : why.message();
  return store;
}

Status StateStore::RetryWritable() {
  if (!degraded()) return Status();
  IBSM_ASSIGN_OR_RETURN(auto fresh, Open(path_, *clock_));
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  stmts_ = std::move(fresh->stmts_);  // prepared on fresh->db_, which this store now owns
  fresh->stmts_.clear();
  sqlite3_close_v2(db_);
  db_ = std::exchange(fresh->db_, nullptr);
  degraded_why_.clear();
  return Status();
}

Result<sqlite3_stmt*> StateStore::Prepare(std::string_view sql) {
  auto it = stmts_.find(sql);
  if (it != stmts_.end()) return it->second;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                         &s, nullptr) != SQLITE_OK) {
    return SqlError(fmt::format("prepare \"{}\"", sql));
  }
  stmts_.emplace(sql, s);
  return s;
}

Status StateStore::Exec(const char* sql) {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(sql));
  StmtScope scope(s);
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
  }
  if (rc != SQLITE_DONE) return SqlError(sql);
  return Status();
}

Status StateStore::SqlError(std::string_view what) const { return ErrorFrom(db_, path_, what); }

Status StateStore::CheckWritable() const {
  if (read_only()) {
    return FailedPrecondition(fmt::format("state file {} was opened read-only", path_));
  }
  if (degraded()) {
    return Unavailable(
        fmt::format("state file {} is not open for writing ({})", path_, degraded_why_));
  }
  return Status();
}

Status StateStore::Migrate() {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  // Read again under the write lock: another process may have migrated meanwhile.
  IBSM_ASSIGN_OR_RETURN(int64_t from, PragmaInt(db_, path_, "PRAGMA user_version"));
  IBSM_RETURN_IF_ERROR(CheckIdentity(db_, path_, from));
  if (from == StateStoreSchemaVersion()) return txn.Commit();
  for (const Migration& m: kMigrations) {
    if (m.version <= from) continue;
    char* err = nullptr;
    if (sqlite3_exec(db_, m.sql, nullptr, nullptr, &err) != SQLITE_OK) {
      Status st = Status(CodeFor(sqlite3_extended_errcode(db_)),
                         fmt::format("state file {}: migration to schema version {} failed: {}",
                                     path_, m.version, err == nullptr ? "?" : err));
      sqlite3_free(err);
      return st;
    }
  }
  // PRAGMA arguments cannot be bound; both values are our own integers.
  std::string stamp = fmt::format("PRAGMA user_version={}; PRAGMA application_id={};",
                                  StateStoreSchemaVersion(), kApplicationId);
  if (sqlite3_exec(db_, stamp.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError("stamp schema version");
  }
  IBSM_RETURN_IF_ERROR(txn.Commit());
  Log(LogName::kHa)
      .info("HA-DB-001 state file {} {} schema version {}", path_,
            from == 0 ? "created at" : fmt::format("migrated from {} to", from),
            StateStoreSchemaVersion());
  return Status();
}

Result<int> StateStore::SchemaVersion() {
  IBSM_ASSIGN_OR_RETURN(int64_t v, PragmaInt(db_, path_, "PRAGMA user_version"));
  return static_cast<int>(v);
}

Status StateStore::CheckIntegrity() { return QuickCheck(db_, path_, "PRAGMA integrity_check"); }

// ---- guid2lid ----

Result<std::vector<Guid2LidEntry>> StateStore::LoadGuid2Lid() {
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT port_guid, min_lid, max_lid, updated_us FROM guid2lid ORDER BY port_guid"));
  StmtScope scope(s);
  std::vector<Guid2LidEntry> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    int64_t min_lid = sqlite3_column_int64(s, 1);
    int64_t max_lid = sqlite3_column_int64(s, 2);
    Guid guid = GuidFromDb(sqlite3_column_int64(s, 0));
    // The CHECK constraints hold for rows we wrote; a hand-edited file may not.
    if (min_lid < 1 || max_lid < min_lid || max_lid > kMaxUnicastLid) {
      return Corrupt(fmt::format("state file {}: guid2lid row {} has LIDs {}..{}", path_,
                                 ToString(guid), min_lid, max_lid));
    }
    out.push_back({guid, Lid{static_cast<uint16_t>(min_lid)}, Lid{static_cast<uint16_t>(max_lid)},
                   sqlite3_column_int64(s, 3)});
  }
  if (rc != SQLITE_DONE) return SqlError("load guid2lid");
  return out;
}

Status StateStore::UpsertGuid2LidLocked(const std::vector<Guid2LidEntry>& upserts, int64_t now) {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("INSERT INTO guid2lid (port_guid, min_lid, max_lid, updated_us) "
                                "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (port_guid) DO UPDATE SET "
                                "min_lid = excluded.min_lid, max_lid = excluded.max_lid, "
                                "updated_us = excluded.updated_us"));
  for (const Guid2LidEntry& e: upserts) {
    StmtScope scope(s);
    Bind(s, 1, ToDb(e.port_guid));
    Bind(s, 2, e.min_lid.value());
    Bind(s, 3, e.max_lid.value());
    Bind(s, 4, now);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return SqlError(fmt::format("save guid2lid {} -> {}..{}", ToString(e.port_guid),
                                  e.min_lid.value(), e.max_lid.value()));
    }
  }
  return Status();
}

Status StateStore::SaveGuid2Lid(const std::vector<Guid2LidEntry>& upserts,
                                const std::vector<Guid>& removals) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_RETURN_IF_ERROR(UpsertGuid2LidLocked(upserts, clock_->UnixMicros()));
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * del, Prepare("DELETE FROM guid2lid WHERE port_guid = ?1"));
  for (Guid g: removals) {
    StmtScope scope(del);
    Bind(del, 1, ToDb(g));
    if (sqlite3_step(del) != SQLITE_DONE) {
      return SqlError(fmt::format("remove guid2lid {}", ToString(g)));
    }
  }
  return txn.Commit();
}

Status StateStore::ReplaceGuid2Lid(const std::vector<Guid2LidEntry>& all) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_RETURN_IF_ERROR(Exec("DELETE FROM guid2lid"));
  IBSM_RETURN_IF_ERROR(UpsertGuid2LidLocked(all, clock_->UnixMicros()));
  return txn.Commit();
}

// ---- sweeps ----

Result<int64_t> StateStore::RecordSweep(const SweepRow& row) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT INTO sweeps (kind, started_us, ended_us, smps_sent, smps_failed, nodes, "
              "switches, cas, links, lid_changes, lft_blocks_sent, engine, outcome, note) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
  {
    StmtScope scope(s);
    Bind(s, 1, static_cast<int64_t>(row.kind));
    Bind(s, 2, row.started_us);
    Bind(s, 3, row.ended_us);
    Bind(s, 4, ToDb(row.smps_sent));
    Bind(s, 5, ToDb(row.smps_failed));
    Bind(s, 6, row.nodes);
    Bind(s, 7, row.switches);
    Bind(s, 8, row.cas);
    Bind(s, 9, row.links);
    Bind(s, 10, row.lid_changes);
    Bind(s, 11, row.lft_blocks_sent);
    Bind(s, 12, row.engine);
    Bind(s, 13, row.outcome);
    Bind(s, 14, row.note);
    if (sqlite3_step(s) != SQLITE_DONE) return SqlError("record sweep");
  }
  int64_t id = sqlite3_last_insert_rowid(db_);
  IBSM_RETURN_IF_ERROR(txn.Commit());
  return id;
}

Result<std::vector<SweepRow>> StateStore::RecentSweeps(size_t n) {
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT id, kind, started_us, ended_us, smps_sent, smps_failed, nodes, switches, "
              "cas, links, lid_changes, lft_blocks_sent, engine, outcome, note FROM sweeps "
              "ORDER BY id DESC LIMIT ?1"));
  StmtScope scope(s);
  Bind(s, 1, Limit(n));
  std::vector<SweepRow> out;
  int rc;
  auto u32 = [s](int i) { return static_cast<uint32_t>(sqlite3_column_int64(s, i)); };
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    SweepRow r;
    r.id = sqlite3_column_int64(s, 0);
    int64_t kind = sqlite3_column_int64(s, 1);
    if (kind != static_cast<int64_t>(SweepKind::kHeavy) &&
        kind != static_cast<int64_t>(SweepKind::kLight)) {
      return Corrupt(fmt::format("state file {}: sweep {} has unknown kind {}", path_, r.id, kind));
    }
    r.kind = static_cast<SweepKind>(kind);
    r.started_us = sqlite3_column_int64(s, 2);
    r.ended_us = sqlite3_column_int64(s, 3);
    r.smps_sent = std::bit_cast<uint64_t>(sqlite3_column_int64(s, 4));
    r.smps_failed = std::bit_cast<uint64_t>(sqlite3_column_int64(s, 5));
    r.nodes = u32(6);
    r.switches = u32(7);
    r.cas = u32(8);
    r.links = u32(9);
    r.lid_changes = u32(10);
    r.lft_blocks_sent = u32(11);
    r.engine = ColText(s, 12);
    r.outcome = ColText(s, 13);
    r.note = ColText(s, 14);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return SqlError("read sweeps");
  return out;
}

// ---- events ----

Status StateStore::InsertEventLocked(const EventRow& row) {
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT INTO events (time_us, kind, severity, node_guid, port_num, message) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  StmtScope scope(s);
  Bind(s, 1, row.time_us);
  Bind(s, 2, row.kind);
  Bind(s, 3, static_cast<int64_t>(row.severity));
  if (row.node_guid) {
    Bind(s, 4, ToDb(*row.node_guid));
  } else {
    BindNull(s, 4);
  }
  if (row.port_num) {
    Bind(s, 5, row.port_num->value());
  } else {
    BindNull(s, 5);
  }
  Bind(s, 6, row.message);
  if (sqlite3_step(s) != SQLITE_DONE) return SqlError("record event");
  return Status();
}

Status StateStore::RecordEvent(const EventRow& row) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_RETURN_IF_ERROR(InsertEventLocked(row));
  return txn.Commit();
}

Status StateStore::RecordEvents(const std::vector<EventRow>& rows) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  for (const EventRow& row: rows) IBSM_RETURN_IF_ERROR(InsertEventLocked(row));
  return txn.Commit();
}

Result<uint64_t> StateStore::CountEvents(int64_t since_us) {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("SELECT count(*) FROM events WHERE time_us >= ?1"));
  StmtScope scope(s);
  Bind(s, 1, since_us);
  if (sqlite3_step(s) != SQLITE_ROW) return SqlError("count events");
  return static_cast<uint64_t>(sqlite3_column_int64(s, 0));
}

Result<std::vector<EventRow>> StateStore::RecentEvents(size_t n, int64_t since_us,
                                                       std::string_view kind) {
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT id, time_us, kind, severity, node_guid, port_num, message FROM events "
              "WHERE time_us >= ?1 AND (?3 IS NULL OR kind = ?3) "
              "ORDER BY time_us DESC, id DESC LIMIT ?2"));
  StmtScope scope(s);
  Bind(s, 1, since_us);
  Bind(s, 2, Limit(n));
  if (kind.empty()) {
    BindNull(s, 3);
  } else {
    Bind(s, 3, kind);
  }
  std::vector<EventRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    EventRow r;
    r.id = sqlite3_column_int64(s, 0);
    r.time_us = sqlite3_column_int64(s, 1);
    r.kind = ColText(s, 2);
    int64_t sev = sqlite3_column_int64(s, 3);
    if (sev < static_cast<int64_t>(EventSeverity::kInfo) ||
        sev > static_cast<int64_t>(EventSeverity::kCritical)) {
      return Corrupt(
          fmt::format("state file {}: event {} has unknown severity {}", path_, r.id, sev));
    }
    r.severity = static_cast<EventSeverity>(sev);
    if (sqlite3_column_type(s, 4) != SQLITE_NULL) {
      r.node_guid = GuidFromDb(sqlite3_column_int64(s, 4));
    }
    if (sqlite3_column_type(s, 5) != SQLITE_NULL) {
      int64_t port = sqlite3_column_int64(s, 5);
      if (port < 0 || port > 255) {
        return Corrupt(fmt::format("state file {}: event {} has port {}", path_, r.id, port));
      }
      r.port_num = PortNum{static_cast<uint8_t>(port)};
    }
    r.message = ColText(s, 6);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return SqlError("read events");
  return out;
}

// ---- snapshots ----

Status StateStore::SaveSnapshot(std::string_view name, std::string_view json) {
  return SaveSnapshotStreamed(name, [json](const SnapshotSink& sink) { sink(json); });
}

Status StateStore::SaveSnapshotStreamed(
    std::string_view name, const std::function<void(const SnapshotSink&)>& produce) {
  if (name.empty()) return InvalidArgument("a snapshot needs a name");
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * row,
      Prepare("INSERT INTO snapshots (name, written_us, json) VALUES (?1, ?2, '') "
              "ON CONFLICT (name) DO UPDATE SET written_us = excluded.written_us, json = ''"));
  {
    StmtScope scope(row);
    Bind(row, 1, name);
    Bind(row, 2, clock_->UnixMicros());
    if (sqlite3_step(row) != SQLITE_DONE) return SqlError(fmt::format("save snapshot {}", name));
  }
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * drop,
                        Prepare("DELETE FROM snapshot_parts WHERE name = ?1"));
  {
    StmtScope scope(drop);
    Bind(drop, 1, name);
    if (sqlite3_step(drop) != SQLITE_DONE) return SqlError(fmt::format("save snapshot {}", name));
  }
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert,
      Prepare("INSERT INTO snapshot_parts (name, part, text) VALUES (?1, ?2, ?3)"));
  constexpr size_t kPartBytes = 64 * 1024;
  std::string buffer;
  int64_t part = 0;
  Status failed;
  auto flush = [&] {
    if (!failed.ok() || buffer.empty()) return;
    StmtScope scope(insert);
    Bind(insert, 1, name);
    Bind(insert, 2, part);
    sqlite3_bind_text(insert, 3, buffer.data(), static_cast<int>(buffer.size()), SQLITE_STATIC);
    if (sqlite3_step(insert) != SQLITE_DONE) {
      failed = SqlError(fmt::format("save snapshot {} part {}", name, part));
      return;
    }
    ++part;
    buffer.clear();
  };
  buffer.reserve(kPartBytes + 4096);
  produce([&](std::string_view piece) {
    buffer.append(piece);
    if (buffer.size() >= kPartBytes) flush();
  });
  flush();
  IBSM_RETURN_IF_ERROR(failed);
  return txn.Commit();
}

Result<std::optional<SnapshotRow>> StateStore::LoadSnapshot(std::string_view name) {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("SELECT written_us, json FROM snapshots WHERE name = ?1"));
  SnapshotRow r;
  {
    StmtScope scope(s);
    Bind(s, 1, name);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return std::optional<SnapshotRow>();
    if (rc != SQLITE_ROW) return SqlError(fmt::format("load snapshot {}", name));
    r.name = std::string(name);
    r.written_us = sqlite3_column_int64(s, 0);
    r.json = ColText(s, 1);  // a version-8 snapshot; empty when written in parts
  }
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * p,
      Prepare("SELECT text FROM snapshot_parts WHERE name = ?1 ORDER BY part"));
  StmtScope scope(p);
  Bind(p, 1, name);
  int rc;
  while ((rc = sqlite3_step(p)) == SQLITE_ROW)
    r.json.append(reinterpret_cast<const char*>(sqlite3_column_text(p, 0)),
                  static_cast<size_t>(sqlite3_column_bytes(p, 0)));
  if (rc != SQLITE_DONE) return SqlError(fmt::format("load snapshot {}", name));
  return std::optional<SnapshotRow>(std::move(r));
}

// ---- sm_state ----

Status StateStore::SetValue(std::string_view key, std::string_view value) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("INSERT INTO sm_state (key, value, updated_us) VALUES (?1, ?2, ?3) "
                                "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
                                "updated_us = excluded.updated_us"));
  {
    StmtScope scope(s);
    Bind(s, 1, key);
    Bind(s, 2, value);
    Bind(s, 3, clock_->UnixMicros());
    if (sqlite3_step(s) != SQLITE_DONE) return SqlError(fmt::format("set {}", key));
  }
  return txn.Commit();
}

Result<std::optional<std::string>> StateStore::GetValue(std::string_view key) {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare("SELECT value FROM sm_state WHERE key = ?1"));
  StmtScope scope(s);
  Bind(s, 1, key);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return SqlError(fmt::format("get {}", key));
  return std::optional<std::string>(ColText(s, 0));
}

// ---- peers ----

Status StateStore::UpsertPeer(const PeerRow& peer) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT INTO peers (guid, priority, state, last_seen_us, sm_key_match) "
              "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (guid) DO UPDATE SET "
              "priority = excluded.priority, state = excluded.state, "
              "last_seen_us = excluded.last_seen_us, sm_key_match = excluded.sm_key_match"));
  {
    StmtScope scope(s);
    Bind(s, 1, ToDb(peer.guid));
    Bind(s, 2, peer.priority);
    Bind(s, 3, peer.state);
    Bind(s, 4, peer.last_seen_us);
    Bind(s, 5, peer.sm_key_match ? 1 : 0);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return SqlError(fmt::format("save peer {}", ToString(peer.guid)));
    }
  }
  return txn.Commit();
}

Status StateStore::RemovePeer(Guid guid) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare("DELETE FROM peers WHERE guid = ?1"));
  {
    StmtScope scope(s);
    Bind(s, 1, ToDb(guid));
    if (sqlite3_step(s) != SQLITE_DONE) {
      return SqlError(fmt::format("remove peer {}", ToString(guid)));
    }
  }
  return txn.Commit();
}

Result<std::vector<PeerRow>> StateStore::Peers() {
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT guid, priority, state, last_seen_us, sm_key_match FROM peers "
              "ORDER BY guid"));
  StmtScope scope(s);
  std::vector<PeerRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    PeerRow p;
    p.guid = GuidFromDb(sqlite3_column_int64(s, 0));
    int64_t priority = sqlite3_column_int64(s, 1);
    int64_t state = sqlite3_column_int64(s, 2);
    if (priority < 0 || priority > 15 || state < 0 || state > 3) {
      return Corrupt(fmt::format("state file {}: peer {} has priority {} state {}", path_,
                                 ToString(p.guid), priority, state));
    }
    p.priority = static_cast<uint8_t>(priority);
    p.state = static_cast<uint8_t>(state);
    p.last_seen_us = sqlite3_column_int64(s, 3);
    p.sm_key_match = sqlite3_column_int64(s, 4) != 0;
    out.push_back(p);
  }
  if (rc != SQLITE_DONE) return SqlError("read peers");
  return out;
}

// ---- lft_digest ----

Status StateStore::SaveLftDigests(const std::vector<LftDigestEntry>& upserts,
                                  const std::vector<Guid>& removals) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("INSERT INTO lft_digest (switch_guid, digest, max_lid, updated_us) "
                                "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (switch_guid) DO UPDATE SET "
                                "digest = excluded.digest, max_lid = excluded.max_lid, "
                                "updated_us = excluded.updated_us"));
  int64_t now = clock_->UnixMicros();
  for (const LftDigestEntry& e: upserts) {
    StmtScope scope(s);
    Bind(s, 1, ToDb(e.switch_guid));
    Bind(s, 2, ToDb(e.digest));
    Bind(s, 3, e.max_lid.value());
    Bind(s, 4, now);
    if (sqlite3_step(s) != SQLITE_DONE) {
      return SqlError(fmt::format("save LFT digest of {}", ToString(e.switch_guid)));
    }
  }
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * del,
                        Prepare("DELETE FROM lft_digest WHERE switch_guid = ?1"));
  for (Guid g: removals) {
    StmtScope scope(del);
    Bind(del, 1, ToDb(g));
    if (sqlite3_step(del) != SQLITE_DONE) {
      return SqlError(fmt::format("remove LFT digest of {}", ToString(g)));
    }
  }
  return txn.Commit();
}

Result<std::vector<LftDigestEntry>> StateStore::LoadLftDigests() {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("SELECT switch_guid, digest, max_lid, updated_us FROM lft_digest "
                                "ORDER BY switch_guid"));
  StmtScope scope(s);
  std::vector<LftDigestEntry> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    LftDigestEntry e;
    e.switch_guid = GuidFromDb(sqlite3_column_int64(s, 0));
    e.digest = std::bit_cast<uint64_t>(sqlite3_column_int64(s, 1));
    int64_t max_lid = sqlite3_column_int64(s, 2);
    if (max_lid < 0 || max_lid > kMaxUnicastLid) {
      return Corrupt(fmt::format("state file {}: LFT digest of {} has max LID {}", path_,
                                 ToString(e.switch_guid), max_lid));
    }
    e.max_lid = Lid{static_cast<uint16_t>(max_lid)};
    e.updated_us = sqlite3_column_int64(s, 3);
    out.push_back(e);
  }
  if (rc != SQLITE_DONE) return SqlError("read LFT digests");
  return out;
}

// ---- service records ----

Status StateStore::SaveServiceRecords(const std::vector<ServiceRow>& upserts,
                                      const std::vector<ServiceKey>& removals) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  for (const ServiceRow& r: upserts) {
    if (r.record.size() != kServiceRecordSize) {
      return InvalidArgument(fmt::format("service record of {} bytes, not {}", r.record.size(),
                                         kServiceRecordSize));
    }
  }
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT INTO service_records (service_id, service_gid, pkey, record, expires_us) "
              "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (service_id, service_gid, pkey) DO UPDATE "
              "SET record = excluded.record, expires_us = excluded.expires_us"));
  for (const ServiceRow& r: upserts) {
    StmtScope scope(s);
    Bind(s, 1, ToDb(r.key.service_id));
    BindBlob(s, 2, r.key.service_gid);
    Bind(s, 3, int64_t{r.key.pkey});
    BindBlob(s, 4, r.record);
    if (r.expires_us) {
      Bind(s, 5, *r.expires_us);
    } else {
      BindNull(s, 5);
    }
    if (sqlite3_step(s) != SQLITE_DONE) {
      return SqlError(fmt::format("save service record {:#x}", r.key.service_id));
    }
  }
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * del,
      Prepare("DELETE FROM service_records WHERE service_id = ?1 AND service_gid = ?2 AND "
              "pkey = ?3"));
  for (const ServiceKey& k: removals) {
    StmtScope scope(del);
    Bind(del, 1, ToDb(k.service_id));
    BindBlob(del, 2, k.service_gid);
    Bind(del, 3, int64_t{k.pkey});
    if (sqlite3_step(del) != SQLITE_DONE) {
      return SqlError(fmt::format("remove service record {:#x}", k.service_id));
    }
  }
  return txn.Commit();
}

Result<std::vector<ServiceRow>> StateStore::LoadServiceRecords() {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("SELECT service_id, service_gid, pkey, record, expires_us FROM "
                                "service_records ORDER BY service_id, service_gid, pkey"));
  StmtScope scope(s);
  std::vector<ServiceRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    ServiceRow r;
    r.key.service_id = std::bit_cast<uint64_t>(sqlite3_column_int64(s, 0));
    std::vector<uint8_t> gid = ColBlob(s, 1);
    int64_t pkey = sqlite3_column_int64(s, 2);
    r.record = ColBlob(s, 3);
    if (gid.size() != r.key.service_gid.size() || pkey < 0 || pkey > 0xffff ||
        r.record.size() != kServiceRecordSize) {
      return Corrupt(fmt::format("state file {}: malformed service record {:#x}", path_,
                                 r.key.service_id));
    }
    std::copy(gid.begin(), gid.end(), r.key.service_gid.begin());
    r.key.pkey = static_cast<uint16_t>(pkey);
    if (sqlite3_column_type(s, 4) != SQLITE_NULL) r.expires_us = sqlite3_column_int64(s, 4);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return SqlError("read service records");
  return out;
}

// ---- inform subscriptions ----

Status StateStore::SaveInformSubscriptions(const std::vector<InformRow>& upserts,
                                           const std::vector<std::vector<uint8_t>>& removals) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  for (const InformRow& r: upserts) {
    if (r.record.size() != kInformInfoRecordSize || r.key.empty() || r.report_qpn > 0xFFFFFF ||
        r.sl > 15) {
      return InvalidArgument(fmt::format(
          "inform subscription: record of {} bytes (not {}), key of {}, QPN {:#x}, SL {}",
          r.record.size(), kInformInfoRecordSize, r.key.size(), r.report_qpn, r.sl));
    }
  }
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT INTO inform_subscriptions (key, record, report_lid, report_qpn, "
              "report_qkey, pkey_index, sl, trusted) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
              "ON CONFLICT (key) DO UPDATE SET record = excluded.record, "
              "report_lid = excluded.report_lid, report_qpn = excluded.report_qpn, "
              "report_qkey = excluded.report_qkey, pkey_index = excluded.pkey_index, "
              "sl = excluded.sl, trusted = excluded.trusted"));
  for (const InformRow& r: upserts) {
    StmtScope scope(s);
    BindBlob(s, 1, r.key);
    BindBlob(s, 2, r.record);
    Bind(s, 3, int64_t{r.report_lid});
    Bind(s, 4, int64_t{r.report_qpn});
    Bind(s, 5, int64_t{r.report_qkey});
    Bind(s, 6, int64_t{r.pkey_index});
    Bind(s, 7, int64_t{r.sl});
    Bind(s, 8, int64_t{r.trusted ? 1 : 0});
    if (sqlite3_step(s) != SQLITE_DONE) return SqlError("save inform subscription");
  }
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * del,
                        Prepare("DELETE FROM inform_subscriptions WHERE key = ?1"));
  for (const std::vector<uint8_t>& k: removals) {
    StmtScope scope(del);
    BindBlob(del, 1, k);
    if (sqlite3_step(del) != SQLITE_DONE) return SqlError("remove inform subscription");
  }
  return txn.Commit();
}

// ---- multicast groups ----

Status StateStore::CheckGroupRecords(const std::vector<McGroupRow>& groups) {
  for (const McGroupRow& g : groups) {
    if (g.record.size() != kMcGroupRecordSize) {
      return InvalidArgument(fmt::format("multicast group record of {} bytes, not {}",
                                         g.record.size(), kMcGroupRecordSize));
    }
  }
  return Status::Ok();
}

// One group row through `group` (an INSERT or an upsert of mgid, mlid, record, permanent)
// and its members through `member`.
Status StateStore::WriteMcGroup(sqlite3_stmt* group, sqlite3_stmt* member,
                                const McGroupRow& g) const {
  {
    StmtScope scope(group);
    BindBlob(group, 1, g.mgid);
    Bind(group, 2, int64_t{g.mlid});
    BindBlob(group, 3, g.record);
    Bind(group, 4, int64_t{g.permanent ? 1 : 0});
    if (sqlite3_step(group) != SQLITE_DONE) {
      return SqlError(fmt::format("save multicast group MLID {:#x}", g.mlid));
    }
  }
  for (const McMemberRow& m : g.members) {
    StmtScope scope(member);
    BindBlob(member, 1, g.mgid);
    Bind(member, 2, ToDb(m.port_guid));
    BindBlob(member, 3, m.port_gid);
    Bind(member, 4, int64_t{m.join_state});
    Bind(member, 5, int64_t{m.proxy_join ? 1 : 0});
    if (sqlite3_step(member) != SQLITE_DONE) {
      return SqlError(fmt::format("save member {:#x} of MLID {:#x}", m.port_guid, g.mlid));
    }
  }
  return Status::Ok();
}

Status StateStore::SaveMulticastGroups(const std::vector<McGroupRow>& groups) {
  IBSM_RETURN_IF_ERROR(CheckGroupRecords(groups));
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * clear_members, Prepare("DELETE FROM mcast_members"));
  {
    StmtScope scope(clear_members);
    if (sqlite3_step(clear_members) != SQLITE_DONE) return SqlError("clear multicast members");
  }
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * clear_groups, Prepare("DELETE FROM mcast_groups"));
  {
    StmtScope scope(clear_groups);
    if (sqlite3_step(clear_groups) != SQLITE_DONE) return SqlError("clear multicast groups");
  }
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * g_ins,
                        Prepare("INSERT INTO mcast_groups (mgid, mlid, record, permanent) "
                                "VALUES (?1, ?2, ?3, ?4)"));
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * m_ins,
                        Prepare("INSERT INTO mcast_members (mgid, port_guid, port_gid, "
                                "join_state, proxy_join) VALUES (?1, ?2, ?3, ?4, ?5)"));
  for (const McGroupRow& g: groups) IBSM_RETURN_IF_ERROR(WriteMcGroup(g_ins, m_ins, g));
  return txn.Commit();
}

Status StateStore::SaveMulticastChanges(const std::vector<McGroupRow>& upserts,
                                        const std::vector<std::array<uint8_t, 16>>& removals) {
  IBSM_RETURN_IF_ERROR(CheckGroupRecords(upserts));
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  // Removals first: a group created in the same batch may take a deleted group's MLID.
  // Members go with their group (ON DELETE CASCADE).
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * g_del, Prepare("DELETE FROM mcast_groups WHERE mgid = ?1"));
  for (const auto& mgid : removals) {
    StmtScope scope(g_del);
    BindBlob(g_del, 1, mgid);
    if (sqlite3_step(g_del) != SQLITE_DONE) return SqlError("remove multicast group");
  }
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * g_up,
      Prepare("INSERT INTO mcast_groups (mgid, mlid, record, permanent) VALUES (?1, ?2, ?3, ?4) "
              "ON CONFLICT (mgid) DO UPDATE SET mlid = excluded.mlid, record = excluded.record, "
              "permanent = excluded.permanent"));
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * m_clear,
                        Prepare("DELETE FROM mcast_members WHERE mgid = ?1"));
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * m_ins,
                        Prepare("INSERT INTO mcast_members (mgid, port_guid, port_gid, "
                                "join_state, proxy_join) VALUES (?1, ?2, ?3, ?4, ?5)"));
  for (const McGroupRow& g : upserts) {
    {
      StmtScope scope(m_clear);
      BindBlob(m_clear, 1, g.mgid);
      if (sqlite3_step(m_clear) != SQLITE_DONE) return SqlError("clear multicast members");
    }
    IBSM_RETURN_IF_ERROR(WriteMcGroup(g_up, m_ins, g));
  }
  return txn.Commit();
}

Result<std::vector<InformRow>> StateStore::LoadInformSubscriptions() {
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT key, record, report_lid, report_qpn, report_qkey, pkey_index, sl, trusted "
              "FROM inform_subscriptions ORDER BY rowid"));
  StmtScope scope(s);
  std::vector<InformRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    InformRow r;
    r.key = ColBlob(s, 0);
    r.record = ColBlob(s, 1);
    int64_t lid = sqlite3_column_int64(s, 2), qpn = sqlite3_column_int64(s, 3),
            qkey = sqlite3_column_int64(s, 4), pkix = sqlite3_column_int64(s, 5),
            sl = sqlite3_column_int64(s, 6), trusted = sqlite3_column_int64(s, 7);
    // A read-only connection skips CHECK constraints; validate here (see OpenReadOnly).
    if (r.key.empty() || r.record.size() != kInformInfoRecordSize || lid < 0 || lid > 0xffff ||
        qpn < 0 || qpn > 0xffffff || qkey < 0 || qkey > 0xffffffffll || pkix < 0 ||
        pkix > 0xffff || sl < 0 || sl > 15 || (trusted != 0 && trusted != 1)) {
      return Corrupt(fmt::format("state file {}: malformed inform subscription", path_));
    }
    r.report_lid = static_cast<uint16_t>(lid);
    r.report_qpn = static_cast<uint32_t>(qpn);
    r.report_qkey = static_cast<uint32_t>(qkey);
    r.pkey_index = static_cast<uint16_t>(pkix);
    r.sl = static_cast<uint8_t>(sl);
    r.trusted = trusted == 1;
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return SqlError("read inform subscriptions");
  return out;
}

Status StateStore::SaveArGroupIds(const std::map<Guid, uint16_t>& ids) {
  for (const auto& [g, id] : ids) {
    if (id > 4095) return InvalidArgument(fmt::format("AR group ID {} of {} is above 4095", id, ToString(g)));
  }
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * clear, Prepare("DELETE FROM ar_group_ids"));
  {
    StmtScope scope(clear);
    if (sqlite3_step(clear) != SQLITE_DONE) return SqlError("clear AR group IDs");
  }
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * ins,
                        Prepare("INSERT INTO ar_group_ids (leaf_guid, group_id) VALUES (?1, ?2)"));
  for (const auto& [g, id] : ids) {
    StmtScope scope(ins);
    Bind(ins, 1, ToDb(g));
    Bind(ins, 2, int64_t{id});
    if (sqlite3_step(ins) != SQLITE_DONE) {
      return SqlError(fmt::format("save AR group ID of {}", ToString(g)));
    }
  }
  return txn.Commit();
}

Result<std::map<Guid, uint16_t>> StateStore::LoadArGroupIds() {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("SELECT leaf_guid, group_id FROM ar_group_ids ORDER BY leaf_guid"));
  StmtScope scope(s);
  std::map<Guid, uint16_t> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    const Guid g = GuidFromDb(sqlite3_column_int64(s, 0));
    const int64_t id = sqlite3_column_int64(s, 1);
    if (id < 0 || id > 4095) {
      return Corrupt(fmt::format("state file {}: AR group ID {} of {}", path_, id, ToString(g)));
    }
    out[g] = static_cast<uint16_t>(id);
  }
  if (rc != SQLITE_DONE) return SqlError("read AR group IDs");
  return out;
}

Result<std::vector<McGroupRow>> StateStore::LoadMulticastGroups() {
  std::vector<McGroupRow> out;
  {
    IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                          Prepare("SELECT mgid, mlid, record, permanent FROM mcast_groups "
                                  "ORDER BY mlid"));
    StmtScope scope(s);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      McGroupRow g;
      std::vector<uint8_t> mgid = ColBlob(s, 0);
      int64_t mlid = sqlite3_column_int64(s, 1);
      g.record = ColBlob(s, 2);
      g.permanent = sqlite3_column_int64(s, 3) != 0;
      if (mgid.size() != g.mgid.size() || mlid < 0xC000 || mlid > 0xFFFF ||
          g.record.size() != kMcGroupRecordSize) {
        return Corrupt(fmt::format("state file {}: malformed multicast group row", path_));
      }
      std::copy(mgid.begin(), mgid.end(), g.mgid.begin());
      g.mlid = static_cast<uint16_t>(mlid);
      out.push_back(std::move(g));
    }
    if (rc != SQLITE_DONE) return SqlError("read multicast groups");
  }
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                        Prepare("SELECT mgid, port_guid, port_gid, join_state, proxy_join FROM "
                                "mcast_members ORDER BY mgid, port_guid"));
  StmtScope scope(s);
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    std::vector<uint8_t> mgid = ColBlob(s, 0);
    McMemberRow m;
    m.port_guid = std::bit_cast<uint64_t>(sqlite3_column_int64(s, 1));
    std::vector<uint8_t> gid = ColBlob(s, 2);
    int64_t js = sqlite3_column_int64(s, 3);
    m.proxy_join = sqlite3_column_int64(s, 4) != 0;
    auto g = std::find_if(out.begin(), out.end(), [&](const McGroupRow& r) {
      return mgid.size() == r.mgid.size() && std::equal(mgid.begin(), mgid.end(), r.mgid.begin());
    });
    if (g == out.end() || gid.size() != m.port_gid.size() || js < 1 || js > 15) {
      return Corrupt(fmt::format("state file {}: malformed multicast member row", path_));
    }
    std::copy(gid.begin(), gid.end(), m.port_gid.begin());
    m.join_state = static_cast<uint8_t>(js);
    g->members.push_back(m);
  }
  if (rc != SQLITE_DONE) return SqlError("read multicast members");
  return out;
}

// ---- retention ----

Status StateStore::Prune(size_t keep_sweeps, size_t keep_events) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  // The subquery yields the newest id to drop, or NULL (drop nothing) when there are fewer
  // rows than `keep`.
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * sweeps,
                        Prepare("DELETE FROM sweeps WHERE id <= "
                                "(SELECT id FROM sweeps ORDER BY id DESC LIMIT 1 OFFSET ?1)"));
  {
    StmtScope scope(sweeps);
    Bind(sweeps, 1, Limit(keep_sweeps));
    if (sqlite3_step(sweeps) != SQLITE_DONE) return SqlError("prune sweeps");
  }
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * events,
                        Prepare("DELETE FROM events WHERE id <= "
                                "(SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?1)"));
  {
    StmtScope scope(events);
    Bind(events, 1, Limit(keep_events));
    if (sqlite3_step(events) != SQLITE_DONE) return SqlError("prune events");
  }
  return txn.Commit();
}

// --- PerfMgr history -------------------------------------------------------------------

Status StateStore::RecordPerfHistory(const std::vector<PerfHistoryRow>& rows,
                                     size_t keep_sweeps) {
  Txn txn(*this);
  IBSM_RETURN_IF_ERROR(txn.Begin());
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT OR REPLACE INTO perf_history (sweep, time_us, node_guid, port_num, flags, "
              "symbol_errors, link_error_recovery, link_downed, rcv_errors, "
              "rcv_remote_physical_errors, rcv_switch_relay_errors, xmit_discards, "
              "xmit_constraint_errors, rcv_constraint_errors, local_link_integrity_errors, "
              "excessive_buffer_overruns, vl15_dropped, xmit_wait, xmit_data, rcv_data, "
              "xmit_pkts, rcv_pkts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
              "?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"));
  int64_t newest = 0;
  for (const PerfHistoryRow& r: rows) {
    StmtScope scope(s);
    Bind(s, 1, r.sweep);
    Bind(s, 2, r.time_us);
    Bind(s, 3, ToDb(r.node_guid));
    Bind(s, 4, r.port_num.value());
    Bind(s, 5, static_cast<int64_t>(r.flags));
    for (size_t i = 0; i < kPerfCounterCount; ++i) Bind(s, static_cast<int>(6 + i), ToDb(r.deltas[i]));
    if (sqlite3_step(s) != SQLITE_DONE) return SqlError("record perf history");
    newest = std::max(newest, r.sweep);
  }
  if (newest > 0) {
    IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * prune,
                          Prepare("DELETE FROM perf_history WHERE sweep <= ?1"));
    StmtScope scope(prune);
    Bind(prune, 1, newest - Limit(keep_sweeps));
    if (sqlite3_step(prune) != SQLITE_DONE) return SqlError("prune perf history");
  }
  return txn.Commit();
}

Result<std::vector<PerfHistoryRow>> StateStore::LoadPerfHistory(std::optional<Guid> node,
                                                                size_t limit) {
  IBSM_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT sweep, time_us, node_guid, port_num, flags, symbol_errors, "
              "link_error_recovery, link_downed, rcv_errors, rcv_remote_physical_errors, "
              "rcv_switch_relay_errors, xmit_discards, xmit_constraint_errors, "
              "rcv_constraint_errors, local_link_integrity_errors, excessive_buffer_overruns, "
              "vl15_dropped, xmit_wait, xmit_data, rcv_data, xmit_pkts, rcv_pkts "
              "FROM perf_history WHERE (?1 IS NULL OR node_guid = ?1) "
              "ORDER BY sweep DESC, node_guid, port_num LIMIT ?2"));
  StmtScope scope(s);
  if (node) {
    Bind(s, 1, ToDb(*node));
  } else {
    BindNull(s, 1);
  }
  Bind(s, 2, Limit(limit));
  std::vector<PerfHistoryRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    PerfHistoryRow r;
    r.sweep = sqlite3_column_int64(s, 0);
    r.time_us = sqlite3_column_int64(s, 1);
    r.node_guid = GuidFromDb(sqlite3_column_int64(s, 2));
    int64_t port = sqlite3_column_int64(s, 3);
    if (port < 0 || port > 255)
      return Corrupt(fmt::format("state file {}: perf_history port {} out of range", path_, port));
    r.port_num = PortNum{static_cast<uint8_t>(port)};
    r.flags = static_cast<uint32_t>(sqlite3_column_int64(s, 4));
    for (size_t i = 0; i < kPerfCounterCount; ++i)
      r.deltas[i] = std::bit_cast<uint64_t>(sqlite3_column_int64(s, static_cast<int>(5 + i)));
    out.push_back(r);
  }
  if (rc != SQLITE_DONE) return SqlError("read perf history");
  return out;
}

Result<int64_t> StateStore::LastPerfSweep() {
  IBSM_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare("SELECT COALESCE(MAX(sweep), 0) FROM perf_history"));
  StmtScope scope(s);
  if (sqlite3_step(s) != SQLITE_ROW) return SqlError("read last perf sweep");
  return sqlite3_column_int64(s, 0);
}

}  // namespace ibsm::ha
