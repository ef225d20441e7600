// StateStore rows of the SM itself: state key/values (sm_state) and the peer SMs seen.
#include <fmt/format.h>
#include <sqlite3.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ha/state_store.h"
#include "ha/state_store_internal.h"

namespace ibsm::ha {

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

}  // namespace ibsm::ha
