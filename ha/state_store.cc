// The StateStore database core: open (read-write, read-only, degraded), pragmas, hardening,
// the statement cache, transactions, migration and the integrity checks.
#include "ha/state_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/log.h"
#include "ha/state_store_internal.h"

namespace ibsm::ha {
namespace {

// FROZEN: PRAGMA application_id of an ibsm state file ("ibsm" in ASCII), so the SM never
// adds its tables to some other program's database.
constexpr int32_t kApplicationId = 0x6962736d;

// Writers wait this long for a lock held by another connection (a tool's read transaction
// never blocks a WAL writer; only a second writer or a checkpoint can).
constexpr int kBusyTimeoutMs = 5000;

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
  for (const Migration& m: StateStoreMigrations()) {
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
}  // namespace ibsm::ha
