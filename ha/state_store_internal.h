// Internal to the StateStore files: the write transaction and the small SQLite helpers
// (binding, column reads, the int64 encoding of GUIDs) every row file shares.
#pragma once

#include <sqlite3.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "ha/state_store.h"

namespace ibsm::ha {

inline int64_t ToDb(Guid g) { return std::bit_cast<int64_t>(g.value()); }
inline Guid GuidFromDb(int64_t v) { return Guid{std::bit_cast<uint64_t>(v)}; }
inline int64_t ToDb(uint64_t v) { return std::bit_cast<int64_t>(v); }

inline int64_t Limit(size_t n) {
  return n > static_cast<size_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(n);
}

inline std::string ColText(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t == nullptr ? std::string()
                      : std::string(reinterpret_cast<const char*>(t),
                                    static_cast<size_t>(sqlite3_column_bytes(s, i)));
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
inline void Bind(sqlite3_stmt* s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
inline void Bind(sqlite3_stmt* s, int i, std::string_view v) {
  // A null data() would bind SQL NULL; an empty view is the empty string.
  sqlite3_bind_text(s, i, v.data() == nullptr ? "" : v.data(), static_cast<int>(v.size()),
                    SQLITE_TRANSIENT);
}
inline void BindNull(sqlite3_stmt* s, int i) { sqlite3_bind_null(s, i); }
inline void BindBlob(sqlite3_stmt* s, int i, std::span<const uint8_t> v) {
  sqlite3_bind_blob(s, i, v.empty() ? "" : static_cast<const void*>(v.data()),
                    static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
inline std::vector<uint8_t> ColBlob(sqlite3_stmt* s, int i) {
  const auto* b = static_cast<const uint8_t*>(sqlite3_column_blob(s, i));
  return b == nullptr ? std::vector<uint8_t>()
                      : std::vector<uint8_t>(b, b + sqlite3_column_bytes(s, i));
}

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

}  // namespace ibsm::ha
