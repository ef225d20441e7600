// StateStore rows of the daemon's last answers to control commands (snapshots, whole or
// in parts).
#include <fmt/format.h>
#include <sqlite3.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ha/state_store.h"
#include "ha/state_store_internal.h"

namespace ibsm::ha {

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

}  // namespace ibsm::ha
