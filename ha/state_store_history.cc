// StateStore rows of what happened: sweep history, events, and their retention (Prune).
#include <fmt/format.h>
#include <sqlite3.h>

#include <bit>
#include <optional>
#include <string_view>
#include <vector>

#include "ha/state_store.h"
#include "ha/state_store_internal.h"

namespace ibsm::ha {

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

}  // namespace ibsm::ha
