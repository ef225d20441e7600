// SubnetManager, its side of the state file: SA and multicast changes flushed between sweeps,
// the SA snapshot, and the record of each sweep handed to the state writer
// (sm/record/state_writer.h; ARCHITECTURE.md section 5).
#include "sm/sweep/subnet_manager.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/log.h"
#include "sm/record/multicast_state.h"

namespace ibsm::sm {

void SubnetManager::ScheduleStateFlush() {
  if (!store_) return;
  if (stopped_) {
    FlushState();
    return;
  }
  if (state_flush_armed_) return;  // the armed flush takes this change too
  state_flush_armed_ = true;
  state_flush_timer_.expires_after(kStateFlushInterval);
  state_flush_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: FlushState ran already
    state_flush_armed_ = false;
    FlushState();
  });
}

void SubnetManager::FlushState() {
  if (state_flush_armed_) {
    state_flush_armed_ = false;
    state_flush_timer_.cancel();
  }
  if (!store_) return;
  // A failed write is counted and logged by the SA (SA-SR-001) and kept: the next change's
  // flush or the next heavy sweep (PersistState) writes it, as with the multicast groups.
  if (sa_.services_dirty()) (void)sa_.FlushServices();
  if (mcast_save_pending_) {
    mcast_save_pending_ =
        !NoteStateWrite("SM-STATE-009", SaveMulticastChanges(), "multicast groups");
  }
}

Status SubnetManager::SaveMulticastChanges() {
  std::map<std::array<uint8_t, 16>, ha::McGroupRow> now;
  for (ha::McGroupRow& r : ToRows(mcast_.groups())) {
    auto key = r.mgid;
    now.emplace(key, std::move(r));
  }
  std::vector<ha::McGroupRow> upserts;
  std::vector<std::array<uint8_t, 16>> removals;
  for (const auto& [mgid, row] : now) {
    auto was = saved_mcast_.find(mgid);
    if (was == saved_mcast_.end() || !(was->second == row)) upserts.push_back(row);
  }
  for (const auto& [mgid, row] : saved_mcast_)
    if (!now.count(mgid)) removals.push_back(mgid);
  if (!mcast_saved_whole_) {
    // The first save of this run writes every group: what the file holds may not be what
    // was read from it (a read that failed, a store that was degraded, groups skipped at
    // restore), and a row-level save can only correct what it knows.
    std::vector<ha::McGroupRow> all;
    for (const auto& [mgid, row] : now) all.push_back(row);
    IBSM_RETURN_IF_ERROR(store_->SaveMulticastGroups(all));
    mcast_saved_whole_ = true;
  } else if (!upserts.empty() || !removals.empty()) {
    IBSM_RETURN_IF_ERROR(store_->SaveMulticastChanges(upserts, removals));
  }
  saved_mcast_ = std::move(now);
  return Status();
}

bool SubnetManager::LoadMulticastGroups() {
  if (!store_) return true;
  auto rows = store_->LoadMulticastGroups();
  Result<std::vector<McGroup>> groups =
      rows.ok() ? FromRows(*rows): Result<std::vector<McGroup>>(rows.status());
  if (!groups.ok()) {
    Log(LogName::kSm).warn("SM-STATE-008 cannot read multicast groups from the state file: {}",
                           groups.status().ToString());
    return false;
  }
  size_t skipped = mcast_.Restore(std::move(*groups));
  Log(LogName::kSm).info("{} multicast group(s) restored from the state file{}",
                         mcast_.groups().size(),
                         skipped ? fmt::format(", {} skipped (MLID clash or out of range)", skipped)
                                 : std::string());
  return true;
}

DiscoveryResult& SubnetManager::MutableDiscovered() {
  // Every DiscoveryResult here is made non-const (make_shared<DiscoveryResult>), so casting
  // the constness away from the only owner is sound.
  if (discovered_.use_count() > 1) discovered_ = std::make_shared<DiscoveryResult>(*discovered_);
  ++model_version_;
  return const_cast<DiscoveryResult&>(*discovered_);
}

// The last good tables kept after a routing failure are for the model they were routed on;
// where a node came or went since, they are indexed by the current model's NodeIds, so each
// switch's records (SA, state file, ibsmctl) show the table it holds.
std::shared_ptr<const routing::RoutingTables> SubnetManager::TablesOfModel() const {
  if (!tables_ || !tables_fabric_ || !discovered_ ||
      routing::SameNodeIds(*tables_fabric_, discovered_->fabric))
    return tables_;
  return std::make_shared<const routing::RoutingTables>(
      routing::TablesForNodeIds(*tables_, *tables_fabric_, discovered_->fabric));
}

// What this sweep left for the state writer: the snapshot it just published (the writer
// writes a digest per switch of its tables, FNV-1a over the LFT up to LinearFDBTop, so the
// state file tells which tables the fabric should hold after this sweep) and its figures.
SweepRecord SubnetManager::RecordOfSweep() const {
  SweepRecord r;
  r.snapshot = sa_.snapshot();
  if (lid_map_) r.max_lid = lid_map_->max_lid();
  r.duration = current_.duration;
  r.smps = current_.smps;
  r.smps_failed = current_.smps_failed;
  r.nodes = current_.nodes;
  r.switches = current_.switches;
  r.cas = current_.cas;
  r.links = current_.links;
  r.lid_changes = current_.lid_changes;
  r.lft_blocks_sent = current_.lft_blocks_sent;
  r.engine = current_.engine;
  r.subnet_up = current_.subnet_up;
  r.issues = current_.issues;
  return r;
}

// Shares discovered_: a later change to it copies it first (MutableDiscovered), so the SA
// keeps answering from the fabric as this sweep left it.
void SubnetManager::PublishSaSnapshot() {
  auto s = std::make_shared<SaSnapshot>();
  s->sweep = current_.number;
  s->discovery = discovered_;
  ar_.ShareFabric(std::shared_ptr<const Fabric>(discovered_, &discovered_->fabric));
  s->tables = TablesOfModel();
  // Indexed from the snapshot's own fabric rather than shared with lid_map_: when routing
  // failed and the last good tables are kept, lid_map_ belongs to an earlier fabric whose
  // PortIds need not match this one.
  // Both derive from the discovery alone, which is not changed while shared: a republish of
  // the same one (the optional reads' records, the end of a sweep that published before
  // waiting for them) keeps them.
  const std::shared_ptr<const SaSnapshot> prev = sa_.snapshot();
  if (prev && prev->discovery == discovered_ && prev->lids) {
    s->lids = prev->lids;
    s->port_mtu = prev->port_mtu;
  } else {
    s->lids = std::make_shared<const routing::LidMap>(s->fabric());
    s->port_mtu = LinkMtus(s->fabric(), s->nodes());
  }
  s->qos = qos_.tables();
  if (options_.qos) s->qos_policy = options_.qos_policy;
  s->qos_enabled = options_.qos;
  s->subnet_prefix = options_.subnet_prefix;
  s->sm_lid = lids_and_ports_.sm_lid();
  s->sm_port_guid = sm_port_guid_;
  s->sm_key = options_.sm_key;
  s->act_count = ha_.act_count();
  s->sm_priority = options_.sm_priority;
  s->sm_state = state();
  s->pkeys = partitions_.plan();
  s->partitioned = options_.partitions.config != nullptr;
  published_ = s;
  sa_.Publish(std::move(s));
  ha_.PublishKnownSms();  // their LIDs as this sweep left them
  const bool master = state() == mad::SmState::kMaster;
  for (const auto& o : model_observers_) o(master ? discovered_ : nullptr);
}

}  // namespace ibsm::sm
