// StateStore rows of SA registrations: ServiceRecords, InformInfo subscriptions and
// multicast groups with their members.
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <bit>
#include <vector>

#include "ha/state_store.h"
#include "ha/state_store_internal.h"

namespace ibsm::ha {

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

}  // namespace ibsm::ha
