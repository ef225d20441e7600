// The in-memory twin of the state file (ha/memory_state_store.h). Each write checks every
// row first (the file's constraints, ha/state_store_migrations.cc) and changes nothing when
// one is refused, as the file's transaction rolls back.
#include "ha/memory_state_store.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace ibsm::ha {
namespace {

int64_t AsDb(Guid g) { return std::bit_cast<int64_t>(g.value()); }

Status Refused(std::string_view table, std::string_view what) {
  return InvalidArgument(fmt::format("{}: constraint failed: {}", table, what));
}

bool LidsOk(Lid min, Lid max) {
  return min.value() >= 1 && max.value() >= min.value() && max.value() <= kMaxUnicastLid;
}

}  // namespace

MemoryStateStore::MemoryStateStore(const Clock& clock, std::string name)
    : clock_(clock), name_(std::move(name)) {}

void MemoryStateStore::RefuseWrites(std::string why) {
  writable_ = false;
  refused_why_ = std::move(why);
}

Status MemoryStateStore::RetryWritable() {
  if (!degraded()) return Status();
  if (!writable_) return Unavailable(fmt::format("{} still refuses writes ({})", name_, refused_why_));
  refused_why_.clear();
  return Status();
}

Status MemoryStateStore::Writable() const {
  if (degraded())
    return Unavailable(fmt::format("state store {} is not open for writing ({})", name_,
                                   refused_why_));
  return Status();
}

Status MemoryStateStore::Commit() {
  ++commits_;
  return Status();
}

// ---- routing ----

Result<std::vector<Guid2LidEntry>> MemoryStateStore::LoadGuid2Lid() {
  std::vector<Guid2LidEntry> out;
  out.reserve(guid2lid_.size());
  for (const auto& [key, e] : guid2lid_) out.push_back(e);
  return out;
}

Status MemoryStateStore::SaveGuid2Lid(const std::vector<Guid2LidEntry>& upserts,
                                      const std::vector<Guid>& removals) {
  IBSM_RETURN_IF_ERROR(Writable());
  for (const Guid2LidEntry& e : upserts)
    if (!LidsOk(e.min_lid, e.max_lid))
      return Refused("guid2lid", fmt::format("LIDs {}..{}", e.min_lid.value(), e.max_lid.value()));
  const int64_t now = Now();
  for (Guid2LidEntry e : upserts) {
    e.updated_us = now;
    guid2lid_[AsDb(e.port_guid)] = e;
  }
  for (Guid g : removals) guid2lid_.erase(AsDb(g));
  return Commit();
}

Status MemoryStateStore::ReplaceGuid2Lid(const std::vector<Guid2LidEntry>& all) {
  IBSM_RETURN_IF_ERROR(Writable());
  for (const Guid2LidEntry& e : all)
    if (!LidsOk(e.min_lid, e.max_lid))
      return Refused("guid2lid", fmt::format("LIDs {}..{}", e.min_lid.value(), e.max_lid.value()));
  guid2lid_.clear();
  const int64_t now = Now();
  for (Guid2LidEntry e : all) {
    e.updated_us = now;
    guid2lid_[AsDb(e.port_guid)] = e;
  }
  return Commit();
}

Status MemoryStateStore::SaveLftDigests(const std::vector<LftDigestEntry>& upserts,
                                        const std::vector<Guid>& removals) {
  IBSM_RETURN_IF_ERROR(Writable());
  for (const LftDigestEntry& e : upserts)
    if (e.max_lid.value() > kMaxUnicastLid)
      return Refused("lft_digest", fmt::format("max LID {}", e.max_lid.value()));
  const int64_t now = Now();
  for (LftDigestEntry e : upserts) {
    e.updated_us = now;
    lft_digests_[AsDb(e.switch_guid)] = e;
  }
  for (Guid g : removals) lft_digests_.erase(AsDb(g));
  return Commit();
}

Result<std::vector<LftDigestEntry>> MemoryStateStore::LoadLftDigests() {
  std::vector<LftDigestEntry> out;
  out.reserve(lft_digests_.size());
  for (const auto& [key, e] : lft_digests_) out.push_back(e);
  return out;
}

Status MemoryStateStore::SaveArGroupIds(const std::map<Guid, uint16_t>& ids) {
  IBSM_RETURN_IF_ERROR(Writable());
  std::set<uint16_t> seen;
  for (const auto& [g, id] : ids) {
    if (id > 4095)
      return InvalidArgument(fmt::format("AR group ID {} of {} is above 4095", id, ToString(g)));
    if (!seen.insert(id).second) return Refused("ar_group_ids", fmt::format("ID {} twice", id));
  }
  ar_group_ids_ = ids;
  return Commit();
}

Result<std::map<Guid, uint16_t>> MemoryStateStore::LoadArGroupIds() { return ar_group_ids_; }

// ---- history ----

Result<int64_t> MemoryStateStore::RecordSweep(const SweepRow& row) {
  IBSM_RETURN_IF_ERROR(Writable());
  if (row.kind != SweepKind::kHeavy && row.kind != SweepKind::kLight)
    return Refused("sweeps", fmt::format("kind {}", static_cast<int>(row.kind)));
  SweepRow r = row;
  r.id = next_sweep_id_++;
  sweeps_[r.id] = r;
  IBSM_RETURN_IF_ERROR(Commit());
  return r.id;
}

Result<std::vector<SweepRow>> MemoryStateStore::RecentSweeps(size_t n) {
  std::vector<SweepRow> out;
  for (auto it = sweeps_.rbegin(); it != sweeps_.rend() && out.size() < n; ++it)
    out.push_back(it->second);
  return out;
}

Status MemoryStateStore::RecordEvent(const EventRow& row) { return RecordEvents({row}); }

Status MemoryStateStore::RecordEvents(const std::vector<EventRow>& rows) {
  IBSM_RETURN_IF_ERROR(Writable());
  for (const EventRow& r : rows)
    if (r.severity < EventSeverity::kInfo || r.severity > EventSeverity::kCritical)
      return Refused("events", fmt::format("severity {}", static_cast<int>(r.severity)));
  for (EventRow r : rows) {
    r.id = next_event_id_++;
    events_[r.id] = std::move(r);
  }
  return Commit();
}

Result<std::vector<EventRow>> MemoryStateStore::RecentEvents(size_t n, int64_t since_us,
                                                             std::string_view kind) {
  std::vector<const EventRow*> hits;
  for (const auto& [id, e] : events_)
    if (e.time_us >= since_us && (kind.empty() || e.kind == kind)) hits.push_back(&e);
  std::sort(hits.begin(), hits.end(), [](const EventRow* a, const EventRow* b) {
    return std::pair(a->time_us, a->id) > std::pair(b->time_us, b->id);
  });
  std::vector<EventRow> out;
  for (size_t i = 0; i < hits.size() && i < n; ++i) out.push_back(*hits[i]);
  return out;
}

Result<uint64_t> MemoryStateStore::CountEvents(int64_t since_us) {
  return static_cast<uint64_t>(std::count_if(
      events_.begin(), events_.end(), [&](const auto& e) { return e.second.time_us >= since_us; }));
}

Status MemoryStateStore::Prune(size_t keep_sweeps, size_t keep_events) {
  IBSM_RETURN_IF_ERROR(Writable());
  auto keep_newest = [](auto& rows, size_t keep) {
    while (rows.size() > keep) rows.erase(rows.begin());
  };
  keep_newest(sweeps_, keep_sweeps);
  keep_newest(events_, keep_events);
  return Commit();
}

// ---- SM state ----

Status MemoryStateStore::SetValue(std::string_view key, std::string_view value) {
  IBSM_RETURN_IF_ERROR(Writable());
  values_.insert_or_assign(std::string(key), std::string(value));
  return Commit();
}

Result<std::optional<std::string>> MemoryStateStore::GetValue(std::string_view key) {
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Status MemoryStateStore::UpsertPeer(const PeerRow& peer) {
  IBSM_RETURN_IF_ERROR(Writable());
  if (peer.priority > 15 || peer.state > 3)
    return Refused("peers", fmt::format("priority {} state {}", peer.priority, peer.state));
  peers_[AsDb(peer.guid)] = peer;
  return Commit();
}

Status MemoryStateStore::RemovePeer(Guid guid) {
  IBSM_RETURN_IF_ERROR(Writable());
  peers_.erase(AsDb(guid));
  return Commit();
}

Result<std::vector<PeerRow>> MemoryStateStore::Peers() {
  std::vector<PeerRow> out;
  for (const auto& [key, p] : peers_) out.push_back(p);
  return out;
}

// ---- SA ----

Status MemoryStateStore::SaveServiceRecords(const std::vector<ServiceRow>& upserts,
                                            const std::vector<ServiceKey>& removals) {
  IBSM_RETURN_IF_ERROR(Writable());
  for (const ServiceRow& r : upserts)
    if (r.record.size() != kServiceRecordSize)
      return InvalidArgument(fmt::format("service record of {} bytes, not {}", r.record.size(),
                                         kServiceRecordSize));
  auto order = [](const ServiceKey& k) {
    return ServiceOrder(std::bit_cast<int64_t>(k.service_id), k.service_gid, k.pkey);
  };
  for (const ServiceRow& r : upserts) services_[order(r.key)] = r;
  for (const ServiceKey& k : removals) services_.erase(order(k));
  return Commit();
}

Result<std::vector<ServiceRow>> MemoryStateStore::LoadServiceRecords() {
  std::vector<ServiceRow> out;
  for (const auto& [key, r] : services_) out.push_back(r);
  return out;
}

Status MemoryStateStore::SaveInformSubscriptions(
    const std::vector<InformRow>& upserts, const std::vector<std::vector<uint8_t>>& removals) {
  IBSM_RETURN_IF_ERROR(Writable());
  for (const InformRow& r : upserts) {
    if (r.record.size() != kInformInfoRecordSize || r.key.empty() || r.report_qpn > 0xFFFFFF ||
        r.sl > 15) {
      return InvalidArgument(fmt::format(
          "inform subscription: record of {} bytes (not {}), key of {}, QPN {:#x}, SL {}",
          r.record.size(), kInformInfoRecordSize, r.key.size(), r.report_qpn, r.sl));
    }
  }
  // An upsert of a known key keeps its place (the file's rowid), a new one goes last.
  for (const InformRow& r : upserts) {
    auto it = std::find_if(informs_.begin(), informs_.end(),
                           [&](const InformRow& o) { return o.key == r.key; });
    if (it != informs_.end()) {
      *it = r;
    } else {
      informs_.push_back(r);
    }
  }
  for (const auto& k : removals)
    std::erase_if(informs_, [&](const InformRow& o) { return o.key == k; });
  return Commit();
}

Result<std::vector<InformRow>> MemoryStateStore::LoadInformSubscriptions() { return informs_; }

// The file's constraints on groups: a 52-byte record, an MLID in the multicast range and
// used once, a member once per group with a JoinState of 1..15.
Status MemoryStateStore::CheckGroups(const McGroups& groups) {
  std::set<uint16_t> mlids;
  for (const auto& [mgid, g] : groups) {
    if (g.record.size() != kMcGroupRecordSize)
      return InvalidArgument(fmt::format("multicast group record of {} bytes, not {}",
                                         g.record.size(), kMcGroupRecordSize));
    if (g.mlid < 0xC000 || !mlids.insert(g.mlid).second)
      return Refused("mcast_groups", fmt::format("MLID {:#x}", g.mlid));
    std::set<uint64_t> ports;
    for (const McMemberRow& m : g.members)
      if (m.join_state < 1 || m.join_state > 15 || !ports.insert(m.port_guid).second)
        return Refused("mcast_members", fmt::format("member {:#x} of MLID {:#x}", m.port_guid,
                                                    g.mlid));
  }
  return Status();
}

namespace {
// Members as the file returns them: by port GUID as the int64 it is stored as.
McGroupRow Sorted(McGroupRow g) {
  std::sort(g.members.begin(), g.members.end(), [](const McMemberRow& a, const McMemberRow& b) {
    return std::bit_cast<int64_t>(a.port_guid) < std::bit_cast<int64_t>(b.port_guid);
  });
  return g;
}
}  // namespace

Status MemoryStateStore::SaveMulticastGroups(const std::vector<McGroupRow>& groups) {
  IBSM_RETURN_IF_ERROR(Writable());
  McGroups next;
  for (const McGroupRow& g : groups) {
    if (!next.emplace(g.mgid, Sorted(g)).second)
      return Refused("mcast_groups", "an MGID twice");
  }
  IBSM_RETURN_IF_ERROR(CheckGroups(next));
  groups_ = std::move(next);
  return Commit();
}

Status MemoryStateStore::SaveMulticastChanges(
    const std::vector<McGroupRow>& upserts, const std::vector<std::array<uint8_t, 16>>& removals) {
  IBSM_RETURN_IF_ERROR(Writable());
  McGroups next = groups_;
  for (const auto& mgid : removals) next.erase(mgid);
  for (const McGroupRow& g : upserts) next[g.mgid] = Sorted(g);
  IBSM_RETURN_IF_ERROR(CheckGroups(next));
  groups_ = std::move(next);
  return Commit();
}

Result<std::vector<McGroupRow>> MemoryStateStore::LoadMulticastGroups() {
  std::vector<McGroupRow> out;
  for (const auto& [mgid, g] : groups_) out.push_back(g);
  std::sort(out.begin(), out.end(),
            [](const McGroupRow& a, const McGroupRow& b) { return a.mlid < b.mlid; });
  return out;
}

// ---- snapshots ----

Status MemoryStateStore::SaveSnapshot(std::string_view name, std::string_view json) {
  return SaveSnapshotStreamed(name, [json](const SnapshotSink& sink) { sink(json); });
}

Status MemoryStateStore::SaveSnapshotStreamed(
    std::string_view name, const std::function<void(const SnapshotSink&)>& produce) {
  if (name.empty()) return InvalidArgument("a snapshot needs a name");
  IBSM_RETURN_IF_ERROR(Writable());
  SnapshotRow row{std::string(name), Now(), {}};
  produce([&](std::string_view piece) { row.json.append(piece); });
  snapshots_.insert_or_assign(std::string(name), std::move(row));
  return Commit();
}

Result<std::optional<SnapshotRow>> MemoryStateStore::LoadSnapshot(std::string_view name) {
  auto it = snapshots_.find(name);
  if (it == snapshots_.end()) return std::optional<SnapshotRow>();
  return std::optional<SnapshotRow>(it->second);
}

// ---- PerfMgr history ----

Status MemoryStateStore::RecordPerfHistory(const std::vector<PerfHistoryRow>& rows,
                                           size_t keep_sweeps) {
  IBSM_RETURN_IF_ERROR(Writable());
  for (const PerfHistoryRow& r : rows)
    if (r.sweep < 1) return Refused("perf_history", fmt::format("sweep {}", r.sweep));
  int64_t newest = 0;
  for (const PerfHistoryRow& r : rows) {
    perf_[{r.sweep, AsDb(r.node_guid), r.port_num.value()}] = r;
    newest = std::max(newest, r.sweep);
  }
  if (newest > 0) {
    const int64_t keep = keep_sweeps > static_cast<size_t>(std::numeric_limits<int64_t>::max())
                             ? std::numeric_limits<int64_t>::max()
                             : static_cast<int64_t>(keep_sweeps);
    std::erase_if(perf_, [&](const auto& e) { return std::get<0>(e.first) <= newest - keep; });
  }
  return Commit();
}

Result<std::vector<PerfHistoryRow>> MemoryStateStore::LoadPerfHistory(std::optional<Guid> node,
                                                                      size_t limit) {
  std::vector<PerfHistoryRow> out;
  // Newest sweep first; within a sweep by node GUID (as int64) and port, the map's order.
  auto it = perf_.end();
  while (it != perf_.begin() && out.size() < limit) {
    // Step back to the first row of the previous sweep, then walk that sweep forwards.
    auto last = it;
    const int64_t sweep = std::get<0>(std::prev(last)->first);
    auto first = perf_.lower_bound({sweep, std::numeric_limits<int64_t>::min(), 0});
    for (auto r = first; r != last && out.size() < limit; ++r)
      if (!node || r->second.node_guid == *node) out.push_back(r->second);
    it = first;
  }
  return out;
}

Result<int64_t> MemoryStateStore::LastPerfSweep() {
  return perf_.empty() ? int64_t{0} : std::get<0>(perf_.rbegin()->first);
}

}  // namespace ibsm::ha
