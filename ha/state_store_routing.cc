// StateStore rows of what the SM assigned and programmed: guid2lid (LIDs kept across
// restarts), per-switch LFT digests and adaptive-routing group IDs.
#include <fmt/format.h>
#include <sqlite3.h>

#include <map>
#include <vector>

#include "ha/state_store.h"
#include "ha/state_store_internal.h"

namespace ibsm::ha {

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

}  // namespace ibsm::ha
