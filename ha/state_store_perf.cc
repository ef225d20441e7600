// StateStore rows of PerfMgr port-counter history.
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <vector>

#include "ha/state_store.h"
#include "ha/state_store_internal.h"

namespace ibsm::ha {

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
