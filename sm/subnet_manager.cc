#include "sm/subnet_manager.h"

#include <algorithm>
#include <iterator>
#include <unordered_set>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/log.h"
#include "base/log_limit.h"
#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/modifiers.h"
#include "mad/attr/notice.h"
#include "mad/attr/pkey_table.h"
#include "mad/attr/port_info.h"
#include "mad/attr/switch_info.h"
#include "routing/quality.h"
#include "routing/verify.h"
#include "conf/guid_file.h"
#include "conf/text_file.h"
#include "ha/state_store.h"
#include "sm/control_answers.h"
#include "sm/dumps.h"
#include "sm/multicast_state.h"
#include "sm/perf_manager.h"

namespace ibsm::sm {
namespace {

// LFT block `b` as a switch programmed from `t` holds it: entries past the table drop.
mad::LinearForwardingTable LftBlock(const routing::SwitchTable& t, size_t b) {
  mad::LinearForwardingTable blk;
  blk.port.fill(mad::kLftDropPort);
  for (size_t i = 0; i < 64; ++i)
    if (b * 64 + i < t.lft.size()) blk.port[i] = t.lft[b * 64 + i];
  return blk;
}

uint8_t ToWire(PortState s) { return static_cast<uint8_t>(s); }

bool PeerBeats(const mad::SmInfo& a, const mad::SmInfo& b) {
  return ha::IsBetterSm(a.priority, a.guid, b.priority, b.guid);
}

MulticastOptions McOptions(const SubnetManagerOptions& o) {
  MulticastOptions m;
  m.subnet_prefix = o.subnet_prefix;
  m.packet_life_time = o.subnet_timeout;
  return m;
}

SaServerOptions SaOptions(const SubnetManagerOptions& o) {
  SaServerOptions s;
  s.sa_key = o.sa_key;
  s.resp_time_value = RespTimeValueFor(o.send.timeout);  // transaction_timeout, as OpenSM
  s.inform.report = o.send;  // Reports time out and retry as OpenSM's transactions do
  return s;
}

}  // namespace

std::string HaCounterSummary(const SmCounters& c) {
  return fmt::format(
      "state changes {}, takeovers {}, handovers sent {} received {}, acknowledges sent {}, "
      "polls sent {} missed {}, SMInfo Sets refused {}, SMs seen {}, SMs ignored for sm_key "
      "{}, trap 144 sent {}, ClientReregister {}",
      c.state_changes, c.takeovers, c.handovers_sent, c.handovers_received,
      c.acknowledges_sent, c.polls_sent, c.polls_missed, c.sminfo_sets_refused,
      c.other_sms_seen, c.sm_key_mismatches, c.trap144_sent, c.client_reregisters);
}

SubnetManager::SubnetManager(boost::asio::io_context& io, mad::Transport& transport,
                             const Clock& clock, ha::StateStore* store,
                             SubnetManagerOptions options)
    : io_(io),
      transport_(transport),
      clock_(clock),
      store_(store),
      options_(std::move(options)),
      pipeline_(transport, options_.max_wire_smps, options_.send, options_.m_key),
      qos_pipeline_(transport, std::max<size_t>(1, options_.max_wire_smps / 2), options_.send,
                    options_.m_key),
      sa_(transport, SaOptions(options_), clock, store),
      mcast_(McOptions(options_)),
      light_timer_(io),
      poll_timer_(io),
      recovery_timer_(io) {
  pipeline_.set_fenced(true);  // nothing is written before the election says MASTER
  qos_pipeline_.set_fenced(true);
  // Optional tables: a device that does not answer costs one timed-out request, not two.
  qos_pipeline_.set_rounds(1);
  SharpOptions sharp = options_.sharp;
  sharp.send = options_.send;
  sharp_ = std::make_unique<SharpManager>(transport_, pipeline_, sharp);
  // Traps 66/67 for groups created and deleted go to the InformInfo subscribers.
  mcast_.set_on_event([this](uint16_t trap, const mad::Gid& mgid) {
    ReportMulticastGroup(trap == mad::trap::kMcastGroupCreated, mad::ToGidBytes(mgid));
  });
  sa_.set_on_services_dirty([this] { ScheduleStateFlush(); });
}

SubnetManager::~SubnetManager() {
  stopped_ = true;
  FlushState();  // what clients were told is in the file when the SM goes
  routing_pool_.join();
}

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

void SubnetManager::Start(std::function<void(const SweepStats&)> on_sweep) {
  on_sweep_ = std::move(on_sweep);
  transport_.SetUnsolicitedHandler([this](mad::MadMessage m) { OnUnsolicited(std::move(m)); });
  auto local = transport_.QueryLocalPort();
  if (local.ok()) {
    sm_port_guid_ = local->port_guid;
    sm_lid_ = local->lid;  // until the first sweep assigns it
  }
  WarnAboutDefaultKeys();
  LoadPersistedLids();
  // Whether this SM was the subnet's master when it stopped (read before this start
  // records DISCOVERING): only then are the registrations in its state file all there are.
  bool was_master = false;
  if (store_) {
    auto last = store_->GetValue("sm_state");
    was_master = last.ok() && last->has_value() && **last == ha::SmStateName(mad::SmState::kMaster);
  }
  bool restored = store_ != nullptr;
  if (Status st = sa_.LoadServices(); !st.ok()) {
    restored = false;
    Log(LogName::kSm).warn("SM-STATE-005 cannot read ServiceRecords from the state file: {}",
                           st.ToString());
  }
  if (Status st = sa_.inform().Load(); !st.ok()) {
    restored = false;
    Log(LogName::kSm).warn("SM-STATE-006 cannot read event subscriptions from the state file: {}",
                           st.ToString());
  }
  if (!LoadMulticastGroups()) restored = false;
  sa_state_complete_ = was_master && restored;
  mcast_.SetPartitionGroups(options_.partitions.config.get());
  mcast_.set_on_change([this] { OnMulticastChange(); });
  sa_.AttachMulticast(&mcast_);
  // NOTACTIVE -> DISCOVERING: the first heavy sweep looks for other SMs before it writes.
  SetSmState(ha::SmEvent::kEnable, "start");
}

// OpenSM's defaults (sm_key and sa_key 0x1) are public: compatibility keeps them, but the
// operator hears what they mean. With an M_Key configured they give it away: a requester
// presenting sa_key 1 is trusted and sees every port's M_Key in PortInfoRecords.
void SubnetManager::WarnAboutDefaultKeys() {
  const bool default_sa = options_.sa_key == 1, default_sm = options_.sm_key == 1;
  if (options_.m_key != 0 && (default_sa || default_sm)) {
    ++counters_.issues_by_id["CONF-103"];
    Log(LogName::kConf).error("CONF-103 m_key is set but {} still OpenSM's public default 0x1: "
                              "any host presenting it is trusted with every port's M_Key "
                              "(PortInfoRecord) and the SM's role; set {} to secrets",
                              default_sa && default_sm ? "sa_key and sm_key are"
                              : default_sa             ? "sa_key is"
                                                       : "sm_key is",
                              default_sa && default_sm ? "both" : default_sa ? "sa_key" : "sm_key");
  } else if (default_sa) {
    ++counters_.issues_by_id["CONF-102"];
    Log(LogName::kConf).warn("CONF-102 sa_key is OpenSM's public default 0x1: SA requesters "
                             "presenting it see SM_Key and ServiceKeys and pass partition "
                             "filters (as with OpenSM); set sa_key to a secret");
  }
}

void SubnetManager::Stop() {
  stopped_ = true;
  qos_reader_.Cancel();
  light_timer_.cancel();
  poll_timer_.cancel();
  recovery_timer_.cancel();
  FlushState();
}

void SubnetManager::Reconfigure(const SubnetManagerOptions& o) {
  options_.routing_engine = o.routing_engine;
  options_.routing = o.routing;
  options_.sweep_interval = o.sweep_interval;
  options_.force_heavy_sweep = o.force_heavy_sweep;
  options_.keep_sweeps = o.keep_sweeps;
  options_.keep_events = o.keep_events;
  options_.sweep_on_trap = o.sweep_on_trap;
  options_.babbling_port_policy = o.babbling_port_policy;
  options_.health_degraded_links = o.health_degraded_links;
  options_.subnet_timeout = o.subnet_timeout;
  options_.dump_dir = o.dump_dir;
  options_.dump_lfts = o.dump_lfts;
  options_.no_clients_rereg = o.no_clients_rereg;
  const bool partitions_changed = options_.partitions.config != o.partitions.config;
  options_.partitions = o.partitions;
  if (partitions_changed) mcast_.SetPartitionGroups(options_.partitions.config.get());
  options_.ar = o.ar;
  options_.sharp_enable = o.sharp_enable;
  options_.qos = o.qos;
  options_.qos_levels = o.qos_levels;
  options_.qos_policy = o.qos_policy;
  options_.suppress_sl2vl_mad_status_errors = o.suppress_sl2vl_mad_status_errors;
}

void SubnetManager::RequestHeavySweep(const std::string& reason) {
  if (stopped_) return;
  if (state() == mad::SmState::kStandby || state() == mad::SmState::kNotActive) {
    // Fencing: only DISCOVERING and MASTER sweep; the master owns the fabric.
    Log(LogName::kSm).debug("no heavy sweep in state {} ({})", ha::SmStateName(state()), reason);
    return;
  }
  if (sweep_posted_) {
    // The requested sweep has not begun: it will see this change too.
    Log(LogName::kSm).info("heavy sweep already pending ({}); also: {}", pending_reason_, reason);
    return;
  }
  if (sweeping_) {
    if (!sweep_again_) {
      Log(LogName::kSm).info("heavy sweep queued: {}", reason);
      queued_reason_ = reason;
    }
    sweep_again_ = true;
    return;
  }
  pending_reason_ = reason;
  boost::asio::post(io_, [this] { BeginHeavySweep(); });
  sweeping_ = true;
  sweep_posted_ = true;
}

void SubnetManager::NoteInternalError(const std::string& what) {
  ++counters_.internal_errors;
  ++counters_.issues_by_id["SM-EXC-001"];
  Log(LogName::kSm).error("SM-EXC-001 an io handler failed and was abandoned: {}; ibsmd goes on",
                          what);
  // The handler may have been a step of the running sweep, whose chain then never ends: once
  // nothing of it is in flight, that sweep is over and another one starts from scratch.
  recovery_timer_.expires_after(std::chrono::seconds(1));
  recovery_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_) return;
    if (sweeping_ && !sweep_posted_ && pipeline_.idle() && !routing_in_flight_) {
      Log(LogName::kSm).warn("SM-EXC-002 the heavy sweep that failed is abandoned; sweeping again");
      ++counters_.issues_by_id["SM-EXC-002"];
      sweeping_ = false;
      sweep_again_ = false;
    }
    RequestHeavySweep("recovery after an internal error");
  });
}

void SubnetManager::Issue(const std::string& id, const std::string& message) {
  ++issues_in_sweep_;
  ++counters_.issues_by_id[id];
  Log(LogName::kSm).warn("{} {}", id, message);
}

// --- heavy sweep ---------------------------------------------------------------------

std::optional<SubnetManager::SweepProgress> SubnetManager::sweep_in_progress() const {
  if (!sweeping_ || sweep_posted_ || current_.number == 0) return std::nullopt;
  const auto& c = pipeline_.counters();
  return SweepProgress{current_.number, current_.started, c.gets + c.sets - smps_at_start_,
                       current_.nodes};
}

void SubnetManager::BeginHeavySweep() {
  sweep_posted_ = false;
  if (stopped_) return;
  if (state() != mad::SmState::kDiscovering && state() != mad::SmState::kMaster) {
    sweeping_ = false;
    return;
  }
  sweeping_ = true;
  light_timer_.cancel();
  current_ = SweepStats{};
  current_.number = ++sweep_number_;
  current_.heavy = true;
  current_.started = clock_.Now();
  smps_at_start_ = pipeline_.counters().gets + pipeline_.counters().sets;
  failed_at_start_ = pipeline_.counters().failed;
  issues_in_sweep_ = 0;
  ++counters_.heavy_sweeps;
  Log(LogName::kSm).info("Entering heavy sweep {} ({})", current_.number, pending_reason_);
  discovery_ = std::make_unique<Discovery>(pipeline_);
  discovery_->Run([this](DiscoveryResult r) { OnDiscovered(std::move(r)); });
}

void SubnetManager::OnDiscovered(DiscoveryResult r) {
  if (stopped_) return;
  issues_in_sweep_ += r.issues.size();
  for (const auto& i: r.issues) ++counters_.issues_by_id[i.id];
  discovered_ = std::make_shared<DiscoveryResult>(std::move(r));
  const Fabric& f = discovered_->fabric;
  current_.nodes = f.node_count();
  current_.switches = f.switch_count();
  current_.cas = f.ca_count();
  current_.links = f.link_count();
  auto sm_port = f.FindPort(sm_port_guid_);
  if (!sm_port) {
    // Not even our own port answered: nothing to configure.
    Issue("SM-SWEEP-002", fmt::format("the SM's own port {} was not discovered; sweep "
                                      "abandoned",
                                      ToString(sm_port_guid_)));
    // Nothing of the previous sweep's port indices applies to this (empty) fabric.
    sm_port_ = kNoPort;
    FinishHeavySweep();
    return;
  }
  sm_port_ = *sm_port;
  // The election comes before any write: other SMs' SMInfo, then DecideRole.
  QueryOtherSms();
}

// --- partitions (OpenSM's order: P_Key tables before LIDs) ---------------------------

std::optional<std::pair<DrPath, uint8_t>> SubnetManager::PKeyTarget(PortId p) const {
  const Fabric& f = discovered_->fabric;
  const Port& port = f.port(p);
  const DiscoveredNode& dn = discovered_->nodes[port.node];
  if (f.node(port.node).is_switch()) return std::make_pair(dn.path, port.num.value());
  // A CA answers for the port the SMP came in through (the modifier's port is 0).
  if (dn.node_info.local_port_num == port.num.value()) return std::make_pair(dn.path, uint8_t{0});
  if (!port.connected()) return std::nullopt;
  const Port& peer = f.port(port.peer);
  if (!f.node(peer.node).is_switch()) return std::nullopt;
  DrPath path = discovered_->nodes[peer.node].path;
  path.push_back(peer.num.value());
  return std::make_pair(path, uint8_t{0});
}

// Reads the tables the cache does not know (first sweep, a link that restarted, a switch that
// rebooted), then sets the blocks that differ from the plan, then the switches' enforcement.
void SubnetManager::ProgramPKeys() {
  const Fabric& f = discovered_->fabric;
  std::vector<PortId> ports = PartitionEndPorts(*discovered_);
  if (options_.partitions.enforce != PartEnforce::kOff) {
    for (PortId p: EnforcingSwitchPorts(*discovered_)) ports.push_back(p);
  }
  for (PortId p: ports) {
    const Port& port = f.port(p);
    const Node& node = f.node(port.node);
    const DiscoveredNode& dn = discovered_->nodes[port.node];
    size_t cap = PKeyCapacity(*discovered_, p);
    if (cap == 0) continue;
    auto target = PKeyTarget(p);
    if (!target) continue;
    auto key = std::make_pair(node.guid, port.num.value());
    bool stale = port.num.value() != 0 && port.state != PortState::kActive;
    if (node.is_switch()) {
      auto sc = switch_cache_.find(node.guid);
      if (sc == switch_cache_.end() || sc->second.top != dn.switch_info.linear_fdb_top)
        stale = true;
    }
    size_t blocks = (cap + mad::kPKeyBlockSize - 1) / mad::kPKeyBlockSize;
    PKeyCache& cache = pkey_cache_[key];
    if (stale || cache.keys.size() != cap) {
      cache.keys.assign(cap, 0);
      cache.known.assign(blocks, false);
    }
    for (size_t b = 0; b < blocks; ++b) {
      if (cache.known[b]) continue;
      ++current_.pkey_blocks_read;
      pipeline_.Get(target->first, mad::attr::kPKeyTable,
                    mad::PKeyAttrMod(static_cast<uint32_t>(b), target->second),
                    [this, key, b](Result<mad::Smp> r) {
                      if (!r.ok()) return;  // stays unknown: the block will be written
                      auto blk = mad::Decode<mad::PKeyTable>(r->data);
                      auto it = pkey_cache_.find(key);
                      if (!blk.ok() || it == pkey_cache_.end()) return;
                      PKeyCache& c = it->second;
                      if (b >= c.known.size()) return;
                      for (size_t i = 0; i < mad::kPKeyBlockSize; ++i)
                        if (b * mad::kPKeyBlockSize + i < c.keys.size())
                          c.keys[b * mad::kPKeyBlockSize + i] = blk->pkey[i];
                      c.known[b] = true;
                    });
    }
  }
  pipeline_.WhenIdle([this] {
    if (!stopped_) SetPKeyTables();
  });
}

void SubnetManager::SetPKeyTables() {
  const Fabric& f = discovered_->fabric;
  auto current = [this, &f](PortId p) -> const std::vector<uint16_t>* {
    const Port& port = f.port(p);
    auto it = pkey_cache_.find({f.node(port.node).guid, port.num.value()});
    return it == pkey_cache_.end() ? nullptr: &it->second.keys;
  };
  auto plan = std::make_shared<PKeyPlan>(
      PlanPKeys(*discovered_, sm_port_, options_.partitions, current));
  // A partition set larger than a port's table is the configuration's problem, not the
  // fabric's: logged and counted, but the subnet still comes up (OpenSM does the same).
  for (const auto& i: plan->issues) {
    ++counters_.issues_by_id[i.id];
    Log(LogName::kSm).warn("{} {}", i.id, i.message);
  }
  pkey_plan_ = plan;
  for (const auto& [p, table] : plan->tables) {
    const Port& port = f.port(p);
    auto target = PKeyTarget(p);
    if (!target) continue;
    auto key = std::make_pair(f.node(port.node).guid, port.num.value());
    PKeyCache& cache = pkey_cache_[key];
    size_t blocks = (table.size() + mad::kPKeyBlockSize - 1) / mad::kPKeyBlockSize;
    if (cache.keys.size() != table.size()) {
      cache.keys.assign(table.size(), 0);
      cache.known.assign(blocks, false);
    }
    for (size_t b = 0; b < blocks; ++b) {
      mad::PKeyTable blk;
      for (size_t i = 0; i < mad::kPKeyBlockSize; ++i)
        if (b * mad::kPKeyBlockSize + i < table.size()) blk.pkey[i] = table[b * mad::kPKeyBlockSize + i];
      bool same = cache.known[b];
      for (size_t i = 0; same && i < mad::kPKeyBlockSize; ++i)
        if (b * mad::kPKeyBlockSize + i < table.size() &&
            cache.keys[b * mad::kPKeyBlockSize + i] != blk.pkey[i])
          same = false;
      if (same) continue;
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(blk, data);
      ++current_.pkey_blocks_sent;
      pipeline_.Set(target->first, mad::attr::kPKeyTable,
                    mad::PKeyAttrMod(static_cast<uint32_t>(b), target->second), data,
                    [this, key, b](Result<mad::Smp> r) {
                      auto it = pkey_cache_.find(key);
                      if (it == pkey_cache_.end() || b >= it->second.known.size()) return;
                      PKeyCache& c = it->second;
                      if (!r.ok()) {
                        c.known[b] = false;
                        Issue("SM-PKEY-002",
                              fmt::format("P_KeyTable block {} Set on {} port {} failed: {}", b,
                                          ToString(key.first), key.second,
                                          r.status().ToString()));
                        return;
                      }
                      auto got = mad::Decode<mad::PKeyTable>(r->data);
                      if (!got.ok()) {
                        c.known[b] = false;
                        return;
                      }
                      // What the port answered is what it holds (it may refuse entries).
                      for (size_t i = 0; i < mad::kPKeyBlockSize; ++i)
                        if (b * mad::kPKeyBlockSize + i < c.keys.size())
                          c.keys[b * mad::kPKeyBlockSize + i] = got->pkey[i];
                      c.known[b] = true;
                    });
    }
  }
  pipeline_.WhenIdle([this] {
    if (!stopped_) SetEnforcement();
  });
}

// PortInfo PartitionEnforcementInbound/Outbound on switch ports facing end ports
// (OpenSM pkey_mgr_enforce_partition), only where they differ.
void SubnetManager::SetEnforcement() {
  const Fabric& f = discovered_->fabric;
  for (const auto& [p, e] : pkey_plan_->enforcement) {
    const Port& port = f.port(p);
    const DiscoveredNode& dn = discovered_->nodes[port.node];
    uint8_t num = port.num.value();
    const mad::PortInfo& now = dn.port_info[num];
    if (now.partition_enforcement_inbound == e.inbound &&
        now.partition_enforcement_outbound == e.outbound)
      continue;
    mad::PortInfo want = DesiredPortInfo(p);
    want.partition_enforcement_inbound = e.inbound;
    want.partition_enforcement_outbound = e.outbound;
    std::array<uint8_t, 64> data{};
    mad::EncodeTo(want, data);
    ++current_.enforcement_sets;
    NodeId node = port.node;
    pipeline_.Set(dn.path, mad::attr::kPortInfo, num, data,
                  [this, node, num](Result<mad::Smp> r) {
                    if (!r.ok()) {
                      Issue("SM-PKEY-003",
                            fmt::format("PortInfo Set (partition enforcement) on {} port {} "
                                        "failed: {}",
                                        ToString(discovered_->fabric.node(node).guid), num,
                                        r.status().ToString()));
                      return;
                    }
                    auto pi = mad::Decode<mad::PortInfo>(r->data);
                    if (pi.ok()) MutableDiscovered().nodes[node].port_info[num] = *pi;
                  });
  }
  pipeline_.WhenIdle([this] {
    if (!stopped_) ConfigureLids();
  });
}

mad::PortInfo SubnetManager::DesiredPortInfo(PortId p) const {
  const Fabric& f = discovered_->fabric;
  const Port& port = f.port(p);
  const DiscoveredNode& dn = discovered_->nodes[port.node];
  const uint8_t num = port.num.value();
  const mad::PortInfo& now = dn.port_info[num];
  mad::PortInfo pi = now;
  pi.port_state = 0;       // no change
  pi.port_phys_state = 0;  // no change
  pi.link_down_default_state = 0;
  pi.link_speed_enabled = 0;
  pi.link_width_enabled = 0;
  pi.link_speed_ext_enabled = 0;
  pi.client_reregister = 0;
  const bool is_switch = f.node(port.node).is_switch();
  bool end_port = !is_switch || num == 0;
  if (end_port) {
    pi.lid = lids_.base[p];
    pi.lmc = lids_.lmc[p];
    pi.master_sm_base_lid = sm_lid_.value();
    pi.gid_prefix = options_.subnet_prefix;
    pi.m_key = options_.m_key;
    pi.m_key_lease_period = options_.m_key_lease_period;
    pi.m_key_protect_bits = options_.m_key_protection_level;
    pi.subnet_timeout = options_.subnet_timeout;
    pi.master_sm_sl = options_.sm_sl;
  } else if (port.connected()) {
    // A switch port facing a CA or router gets the leaf values (OpenSM's link manager).
    bool leaf = !f.node(f.port(port.peer).node).is_switch();
    pi.hoq_life = leaf ? options_.leaf_head_of_queue_lifetime: options_.head_of_queue_lifetime;
    pi.vl_stall_count = leaf ? options_.leaf_vl_stall_count: options_.vl_stall_count;
  }
  if (is_switch && num == 0) return pi;  // switch port 0 has no link
  // The link fields, as OpenSM's link manager sets them (docs/port-programming.md).
  pi.link_down_default_state = 2;  // Polling
  pi.local_phy_errors = options_.local_phy_errors_threshold;
  pi.overrun_errors = options_.overrun_errors_threshold;
  const uint8_t fw = options_.force_link_width;
  if (fw != 0 && (fw < 16 || (now.capability_mask2 & mad::port_cap2::kIsLinkWidth2xSupported)) &&
      (fw != 255 || now.link_width_enabled != now.link_width_supported)) {
    pi.link_width_enabled = fw;
  }
  const uint8_t fs = options_.force_link_speed;
  if (fs != 0 && (fs != 15 || now.link_speed_enabled != now.link_speed_supported)) {
    pi.link_speed_enabled = fs;
  }
  // A switch's external ports carry their capabilities in port 0's PortInfo.
  auto cap_mask = [&](NodeId n, uint8_t pn) -> uint32_t {
    const DiscoveredNode& d = discovered_->nodes[n];
    const uint8_t at = f.node(n).is_switch() ? 0 : pn;
    return at < d.port_info.size() && d.port_info_valid[at] ? d.port_info[at].capability_mask
                                                            : 0;
  };
  const mad::PortInfo* peer = nullptr;
  if (port.connected()) {
    const Port& pp = f.port(port.peer);
    const DiscoveredNode& pd = discovered_->nodes[pp.node];
    if (pd.port_info_valid[pp.num.value()]) peer = &pd.port_info[pp.num.value()];
    const uint8_t fse = options_.force_link_speed_ext;
    if (peer && fse != 0 &&
        (cap_mask(port.node, num) & mad::port_cap::kIsExtendedSpeedsSupported) &&
        (cap_mask(pp.node, pp.num.value()) & mad::port_cap::kIsExtendedSpeedsSupported) &&
        (fse != 31 || now.link_speed_ext_enabled != now.link_speed_ext_supported)) {
      pi.link_speed_ext_enabled = fse;
    }
  }
  // NeighborMTU and OperationalVLs: the smaller capability of the two ends (OperationalVLs
  // at most max_op_vls); a port whose neighbour did not answer keeps what it has.
  if (peer) {
    pi.neighbor_mtu = std::min(now.mtu_cap, peer->mtu_cap);
    pi.operational_vls = std::min(now.vl_cap, peer->vl_cap);
  }
  if (pi.neighbor_mtu == 0) pi.neighbor_mtu = 1;
  if (pi.operational_vls == 0) pi.operational_vls = 1;
  pi.operational_vls = std::min(pi.operational_vls, options_.max_op_vls);
  if (options_.qos) {
    if (auto hl = QosHighLimit(f, discovered_->nodes, p, options_.qos_levels)) pi.vl_high_limit = *hl;
  }
  return pi;
}

bool SubnetManager::LinkFieldsDiffer(PortId p, const mad::PortInfo& now,
                                     const mad::PortInfo& want) const {
  const Fabric& f = discovered_->fabric;
  const Port& port = f.port(p);
  auto echo = link_echo_.find({f.node(port.node).guid, port.num.value()});
  const mad::PortInfo* e = echo == link_echo_.end() ? nullptr : &echo->second;
  // A field is in sync when it holds what we want, or what the port answered last time.
#define IBSM_FIELD_DIFFERS(field) \
  (now.field != want.field && !(e != nullptr && e->field == now.field))
  bool differs = IBSM_FIELD_DIFFERS(hoq_life) || IBSM_FIELD_DIFFERS(vl_stall_count) ||
                 IBSM_FIELD_DIFFERS(master_sm_sl) || IBSM_FIELD_DIFFERS(vl_high_limit);
  if (!(f.node(port.node).is_switch() && port.num.value() == 0)) {
    differs = differs || IBSM_FIELD_DIFFERS(neighbor_mtu) ||
              IBSM_FIELD_DIFFERS(operational_vls) || IBSM_FIELD_DIFFERS(local_phy_errors) ||
              IBSM_FIELD_DIFFERS(overrun_errors) || IBSM_FIELD_DIFFERS(link_down_default_state);
    // The Enabled fields are set only when DesiredPortInfo asks for a change.
    differs = differs || (want.link_width_enabled != 0 && IBSM_FIELD_DIFFERS(link_width_enabled));
    differs = differs || (want.link_speed_enabled != 0 && IBSM_FIELD_DIFFERS(link_speed_enabled));
    differs = differs ||
              (want.link_speed_ext_enabled != 0 && IBSM_FIELD_DIFFERS(link_speed_ext_enabled));
  }
#undef IBSM_FIELD_DIFFERS
  return differs;
}

uint32_t SubnetManager::PortInfoSetModifier(PortId p) const {
  const Fabric& f = discovered_->fabric;
  const Port& port = f.port(p);
  const DiscoveredNode& dn = discovered_->nodes[port.node];
  const uint8_t at = f.node(port.node).is_switch() ? 0 : port.num.value();
  const bool ext = at < dn.port_info.size() && dn.port_info_valid[at] &&
                   (dn.port_info[at].capability_mask & mad::port_cap::kIsExtendedSpeedsSupported);
  // Bit 31: SMSupportsExtendedSpeeds, as OpenSM's link manager sends it.
  return port.num.value() | (ext ? 0x80000000u : 0u);
}

void SubnetManager::NoteLinkEcho(PortId p, const mad::PortInfo& answered) {
  const Fabric& f = discovered_->fabric;
  const Port& port = f.port(p);
  link_echo_[{f.node(port.node).guid, port.num.value()}] = answered;
}

// HOQLife and VLStallCount of switch external ports that hold other values; ports still
// coming up get them with their ARMED Set (ActivateLinks).
void SubnetManager::ConfigureSwitchPorts() {
  const Fabric& f = discovered_->fabric;
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& port = f.port(p);
    if (port.num.value() == 0 || !port.connected() || !f.node(port.node).is_switch()) continue;
    if (port.state < PortState::kArmed) continue;
    const DiscoveredNode& dn = discovered_->nodes[port.node];
    const uint8_t num = port.num.value();
    if (!dn.port_info_valid[num]) continue;
    const mad::PortInfo& now = dn.port_info[num];
    mad::PortInfo want = DesiredPortInfo(p);
    if (!LinkFieldsDiffer(p, now, want)) continue;
    std::array<uint8_t, 64> data{};
    mad::EncodeTo(want, data);
    ++current_.portinfo_sets;
    NodeId node = port.node;
    pipeline_.Set(dn.path, mad::attr::kPortInfo, PortInfoSetModifier(p), data,
                  [this, node, num, p](Result<mad::Smp> r) {
                    if (!r.ok()) {
                      Issue("SM-LINK-002",
                            fmt::format("PortInfo Set (link fields) on {} port {} failed: {}",
                                        ToString(discovered_->fabric.node(node).guid), num,
                                        r.status().ToString()));
                      return;
                    }
                    auto pi = mad::Decode<mad::PortInfo>(r->data);
                    if (!pi.ok()) return;
                    MutableDiscovered().nodes[node].port_info[num] = *pi;
                    NoteLinkEcho(p, *pi);
                  });
  }
}

void SubnetManager::ConfigureLids() {
  const Fabric& f = discovered_->fabric;
  if (took_over_ && !options_.lids.reassign) {
    // Taking over from another master: the LIDs the ports hold now are the subnet's, so
    // they win over this SM's own (older) guid2lid rows. Clients keep their LIDs.
    size_t kept = 0;
    for (PortId p: EndPorts(f)) {
      const Port& port = f.port(p);
      if (port.lid.value() == 0) continue;
      uint16_t count = static_cast<uint16_t>(1u << port.lmc);
      guid2lid_[port.guid] = {port.lid.value(),
                              static_cast<uint16_t>(port.lid.value() + count - 1)};
      ++kept;
    }
    Log(LogName::kHa).info("takeover: keeping the {} LIDs the ports hold", kept);
  }
  lids_ = AssignLids(f, sm_port_, guid2lid_, options_.lids);
  for (const auto& i: lids_.issues) Issue(i.id, i.message);
  current_.lid_changes = lids_.changed;
  sm_lid_ = Lid{lids_.base[sm_port_]};

  std::unordered_map<Guid, bool> known;
  for (Guid g: known_ports_) known[g] = true;
  for (PortId p: lids_.end_ports) {
    if (lids_.base[p] == 0) continue;
    const Port& port = f.port(p);
    const DiscoveredNode& dn = discovered_->nodes[port.node];
    if (!dn.port_info_valid[port.num.value()]) continue;
    const mad::PortInfo& now = dn.port_info[port.num.value()];
    mad::PortInfo want = DesiredPortInfo(p);
    bool is_ca = !f.node(port.node).is_switch();
    // ClientReregister only where SA state was lost. A CA port's clients hold SA
    // registrations (ServiceRecords, multicast joins, InformInfo) with the master that
    // configured the port, and each SM keeps its own, in its own state file. So:
    // - on the first sweep as master (start, or takeover after another master served),
    //   the port keeps its registrations only if this SM holds all of them
    //   (sa_state_complete_: restored from its state file, master when it stopped, no
    //   other master since) AND the port still names this SM (MasterSMBaseLID = our LID):
    //   a port configured by another SM may have registered with that SM;
    // - on later sweeps, only ports this SM has not seen before (new or back from a link
    //   loss: their registrations were dropped when they left) lose anything.
    // OpenSM sets ClientReregister on every port on its first master sweep.
    bool lost = first_master_sweep_
                    ? !(sa_state_complete_ && !took_over_ &&
                        now.master_sm_base_lid == sm_lid_.value())
                    : !known.count(port.guid);
    bool rereg = is_ca && !options_.no_clients_rereg && lost;
    want.client_reregister = rereg ? 1 : 0;
    if (rereg) ++current_.client_reregisters, ++counters_.client_reregisters;
    // Some agents (ibsim's among them) do not keep SubnetTimeout or M_KeyLeasePeriod; what
    // they answered to our last Set counts as in sync, or every sweep would Set again.
    auto echo = echo_.find(port.guid);
    bool timeout_ok = now.subnet_timeout == want.subnet_timeout ||
                      (echo != echo_.end() && echo->second.subnet_timeout == now.subnet_timeout);
    bool lease_ok = now.m_key_lease_period == want.m_key_lease_period ||
                    (echo != echo_.end() && echo->second.m_key_lease == now.m_key_lease_period);
    bool differs = now.lid != want.lid || now.lmc != want.lmc ||
                   now.master_sm_base_lid != want.master_sm_base_lid ||
                   now.gid_prefix != want.gid_prefix || now.m_key != want.m_key || !timeout_ok ||
                   !lease_ok || now.m_key_protect_bits != want.m_key_protect_bits ||
                   LinkFieldsDiffer(p, now, want);
    if (!differs && !rereg) continue;
    std::array<uint8_t, 64> data{};
    mad::EncodeTo(want, data);
    ++current_.portinfo_sets;
    NodeId node = port.node;
    uint8_t num = port.num.value();
    pipeline_.Set(dn.path, mad::attr::kPortInfo, PortInfoSetModifier(p), data,
                  [this, node, num, p, want](Result<mad::Smp> r) {
                    if (!r.ok()) {
                      Issue("SM-LID-004",
                            fmt::format("PortInfo Set (LID {}) on {} port {} failed: {}",
                                        lids_.base[p],
                                        ToString(discovered_->fabric.node(node).guid), num,
                                        r.status().ToString()));
                      return;
                    }
                    auto pi = mad::Decode<mad::PortInfo>(r->data);
                    if (!pi.ok()) return;
                    NoteLinkEcho(p, *pi);
                    DiscoveryResult& d = MutableDiscovered();
                    d.nodes[node].port_info[num] = *pi;
                    Port& mp = d.fabric.mutable_port(p);
                    if (pi->subnet_timeout != want.subnet_timeout ||
                        pi->m_key_lease_period != want.m_key_lease_period) {
                      echo_[mp.guid] = {pi->subnet_timeout, pi->m_key_lease_period};
                    }
                    mp.lid = Lid{pi->lid};
                    mp.lmc = pi->lmc;
                  });
  }
  ConfigureSwitchPorts();
  pipeline_.WhenIdle([this] {
    if (stopped_) return;
    // The model holds the LIDs the ports accepted; ports whose Set failed keep theirs.
    MutableDiscovered().fabric.IndexLids();
    Route();
  });
}

void SubnetManager::Route() {
  auto snapshot = std::make_shared<const Fabric>(discovered_->fabric);
  std::string chain = options_.routing_engine.empty() ? std::string(routing::kDefaultChain)
                                                      : options_.routing_engine;
  // OpenSM falls back to minhop when the chain declines; ibsm tries updn first, which routes
  // any connected fabric without a credit loop, so minhop is reached only when updn declines
  // too (and its loops are then refused unless the operator named minhop).
  if (chain.find("no_fallback") == std::string::npos && !routing::ChainNamesMinHop(chain) &&
      chain.find("updn") == std::string::npos) {
    chain += ",updn";
  }
  routing::RoutingOptions ro = options_.routing;
  ro.lmc = options_.lids.lmc;
  // The io_context has nothing else to do while routing runs: keep it from returning.
  auto work = std::make_shared<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
      io_.get_executor());
  // Routing, verification and the deadlock proof all run off the io thread, on the snapshot.
  routing_in_flight_ = true;
  boost::asio::post(routing_pool_, [this, snapshot, chain, ro, work] {
    auto routed = std::make_shared<Routed>();
    auto t0 = std::chrono::steady_clock::now();
    // An exception here would end the process (the pool's thread has no handler): it
    // becomes a routing failure, and the last good tables stay.
    try {
    routed->lids = std::make_unique<routing::LidMap>(*snapshot);
    routed->result = routing::RouteChain(chain, *snapshot, *routed->lids, ro);
    auto t1 = std::chrono::steady_clock::now();
    routed->route_s = std::chrono::duration<double>(t1 - t0).count();
    if (routed->result.ok()) {
      routed->verify = routing::VerifyTables(*snapshot, *routed->lids, routed->result->tables,
                                            /*max_problems=*/20, ro.threads);
      auto t2 = std::chrono::steady_clock::now();
      routed->verify_s = std::chrono::duration<double>(t2 - t1).count();
      routed->loops = routing::CheckCreditLoops(*snapshot, *routed->lids,
                                                routed->result->tables, ro.threads);
      routed->loops_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count();
    }
    } catch (const std::exception& e) {
      routed->result = Status(StatusCode::kInternal, std::string("routing threw: ") + e.what());
    }
    boost::asio::post(io_, [this, work, routed]() mutable {
      work->reset();
      routing_in_flight_ = false;
      if (!stopped_) OnRouted(std::move(*routed));
    });
  });
}

void SubnetManager::OnRouted(Routed routed) {
  if (state() != mad::SmState::kMaster) return;  // stepped down while routing: no writes
  auto& result = routed.result;
  if (!result.ok()) {
    ++counters_.routing_failures;
    Issue("SM-ROUTE-001", "routing failed: " + result.status().ToString() +
                              (tables_ ? "; keeping the last good tables" : ""));
    ActivateLinks(0);
    return;
  }
  for (const auto& [name, why] : result->declined) {
    current_.declined.push_back(name + ": " + why.message());
    Log(LogName::kRouting).info("routing engine {} declined: {}", name, why.message());
  }
  const std::string& engine = result->tables.engine;
  const routing::VerifyReport& report = routed.verify;
  const routing::CreditLoopReport& loops = routed.loops;
  last_check_ = RoutingCheck{engine,          false,          report,        loops,
                             routed.route_s, routed.verify_s, routed.loops_s};
  // minhop promises shortest paths, not deadlock freedom (OpenSM's too): its credit loops are
  // reported when the operator chose minhop. Every other engine promises up*/down* routes, so
  // a cycle is a bug, and minhop reached only as the last resort after them must not program
  // a deadlock the operator did not ask for: refused, the last good tables stay.
  const bool minhop_chosen = routing::ChainNamesMinHop(options_.routing_engine);
  const bool loops_refused = !loops.acyclic && !(engine == "minhop" && minhop_chosen);
  if (!loops.acyclic) {
    std::string cycle;
    for (const auto& hop: loops.cycle) cycle += (cycle.empty() ? "" : " -> ") + hop;
    ++counters_.credit_loops_found;
    if (loops_refused) ++counters_.routing_failures;
    Log(LogName::kRouting)
        .warn("SM-ROUTE-005 {} routes have a credit loop (channel dependency cycle of {} "
              "channels){}: {}",
              engine, loops.cycle.size(),
              loops_refused ? (engine == "minhop" ? "; minhop was only the last resort: refused"
                                                  : "")
                            : "; minhop does not avoid them (use updn or ftree)",
              cycle);
    if (loops_refused) ++counters_.issues_by_id["SM-ROUTE-005"], ++issues_in_sweep_;
  }
  if (!report.ok || loops_refused) {
    if (!report.ok) {
      ++counters_.routing_failures;
      for (const auto& p: report.problems) Log(LogName::kRouting).warn("SM-ROUTE-003 {}", p);
    }
    Issue("SM-ROUTE-002",
          fmt::format("{} tables failed verification ({} missing entries, {} loops, {} "
                      "unreachable pairs, {}); {}",
                      engine, report.missing_entries, report.loops, report.unreachable_pairs,
                      loops.acyclic ? "no credit loop" : "a credit loop",
                      tables_ ? "keeping the last good tables"
                      : loops_refused ? "programming nothing"
                                      : "programming them anyway"));
    // Tables with a credit loop the operator did not accept are never programmed, not even
    // on the first sweep: a fabric that can deadlock is worse than one not yet routed.
    if (tables_ || loops_refused) {
      ActivateLinks(0);
      return;
    }
  }
  current_.engine = engine;
  last_check_->accepted = true;
  Log(LogName::kRouting)
      .info("{} tables configured: {} switches, max LID {}; routed in {:.3f} s, verified in "
            "{:.3f} s, credit loops checked in {:.3f} s ({} channels, {} dependencies, {})",
            engine, result->tables.switches.size(), routed.lids->max_lid(), routed.route_s,
            routed.verify_s, routed.loops_s, loops.channels, loops.dependencies,
            loops.acyclic ? "acyclic" : "CYCLE");
  tables_ = std::make_shared<const routing::RoutingTables>(std::move(result->tables));
  lid_map_ = std::move(routed.lids);
  ProgramSwitches();
}

// SwitchInfo first (LinearFDBTop, and clearing PortStateChange), then LFT blocks; blocks are
// compared with what each switch is known to hold, read back once if unknown.
void SubnetManager::ProgramSwitches() {
  if (state() != mad::SmState::kMaster) return;
  const Fabric& f = discovered_->fabric;
  uint16_t top = lid_map_->max_lid();
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch() || !tables_->table(n)) continue;
    const DiscoveredNode& dn = discovered_->nodes[n];
    SwitchCache& cache = switch_cache_[f.node(n).guid];
    // A switch whose top is not what we set (rebooted, or programmed by another SM) holds
    // tables we do not know.
    if (cache.top != dn.switch_info.linear_fdb_top) {
      cache.Clear();
      mft_.Forget(f.node(n).guid);
    }
    if (cache.empty() && dn.switch_info.linear_fdb_top != 0) {
      // Read what it holds, compared with what it should hold: a block that matches needs
      // no Set (a second SM, or a restart, on a programmed fabric writes nothing).
      size_t blocks = std::min<size_t>(dn.switch_info.linear_fdb_top, top) / 64 + 1;
      cache.source = tables_;
      cache.source_table = tables_->table(n);
      cache.held.assign(blocks, false);
      for (size_t b = 0; b < blocks; ++b) {
        ++current_.lft_blocks_read;
        Guid g = f.node(n).guid;
        pipeline_.Get(dn.path, mad::attr::kLinearForwardingTable, static_cast<uint32_t>(b),
                      [this, g, b](Result<mad::Smp> r) {
                        if (!r.ok()) return;  // stays unknown: the block will be written
                        auto blk = mad::Decode<mad::LinearForwardingTable>(r->data);
                        auto it = switch_cache_.find(g);
                        if (!blk.ok() || it == switch_cache_.end()) return;
                        SwitchCache& c = it->second;
                        if (b >= c.held.size() || !c.source_table) return;
                        c.held[b] = blk->port == LftBlock(*c.source_table, b).port;
                      });
      }
    }
    // LinearFDBTop, and LifeTimeValue from packet_life_time as OpenSM's unicast manager
    // writes it.
    if (dn.switch_info.linear_fdb_top != top || dn.switch_info.port_state_change ||
        dn.switch_info.life_time_value != options_.packet_life_time) {
      mad::SwitchInfo si = dn.switch_info;
      si.linear_fdb_top = top;
      si.life_time_value = options_.packet_life_time;
      // PortStateChange is write-1-to-clear (IBA 14.2.5.4): clear it now that we swept.
      si.port_state_change = dn.switch_info.port_state_change;
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(si, data);
      ++current_.switchinfo_sets;
      pipeline_.Set(dn.path, mad::attr::kSwitchInfo, 0, data, [this, n, top](Result<mad::Smp> r) {
        if (!r.ok()) {
          Issue("SM-LFT-001", fmt::format("SwitchInfo Set (LinearFDBTop {}) on {} failed: {}",
                                          top, ToString(discovered_->fabric.node(n).guid),
                                          r.status().ToString()));
          return;
        }
        auto si = mad::Decode<mad::SwitchInfo>(r->data);
        if (si.ok()) MutableDiscovered().nodes[n].switch_info = *si;
      });
    }
  }
  pipeline_.WhenIdle([this] {
    if (!stopped_) PushLfts();
  });
}

void SubnetManager::PushLfts() {
  if (state() != mad::SmState::kMaster) return;
  const Fabric& f = discovered_->fabric;
  uint16_t top = lid_map_->max_lid();
  struct Cursor {
    std::vector<NodeId> switches;
    size_t blocks = 0;
    size_t b = 0;  // block-major across switches, as OpenSM does, so every switch gets its
    size_t i = 0;  // first blocks early
  };
  auto c = std::make_shared<Cursor>();
  c->blocks = top / 64 + 1;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).is_switch() && tables_->table(n)) c->switches.push_back(n);
  for (NodeId n: c->switches) {
    SwitchCache& cache = switch_cache_[f.node(n).guid];
    cache.top = top;
    // Rebase on the new tables: a block the switch holds of the old ones stays held only
    // where the new tables have the same entries.
    const routing::SwitchTable* now = tables_->table(n);
    std::vector<bool> held(c->blocks, false);
    for (size_t b = 0; b < held.size() && b < cache.held.size(); ++b)
      held[b] = cache.held[b] && cache.source_table &&
                LftBlock(*cache.source_table, b).port == LftBlock(*now, b).port;
    cache.source = tables_;
    cache.source_table = now;
    cache.held = std::move(held);
  }
  // A switch this sweep did not route (gone, or unreachable) must not keep old tables
  // alive: it forgets what it held, and is read again if it comes back with our top.
  for (auto& [guid, cache] : switch_cache_)
    if (cache.source && cache.source != tables_) cache.Clear();
  if (c->switches.empty()) c->b = c->blocks;
  // Blocks are produced as the SMP window frees up: at 3-tier k=32 there are 190,000.
  pipeline_.Feed([this, c]() -> bool {
    const Fabric& f = discovered_->fabric;
    while (c->b < c->blocks) {
      NodeId n = c->switches[c->i];
      size_t b = c->b;
      if (++c->i == c->switches.size()) {
        c->i = 0;
        ++c->b;
      }
      Guid g = f.node(n).guid;
      SwitchCache& cache = switch_cache_[g];
      if (b < cache.held.size() && cache.held[b]) continue;
      const mad::LinearForwardingTable blk = LftBlock(*tables_->table(n), b);
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(blk, data);
      ++current_.lft_blocks_sent;
      pipeline_.Set(discovered_->nodes[n].path, mad::attr::kLinearForwardingTable,
                    static_cast<uint32_t>(b), data, [this, g, b](Result<mad::Smp> r) {
                      auto& cache = switch_cache_[g];
                      if (b >= cache.held.size() || !cache.source_table) return;
                      if (!r.ok()) {
                        Issue("SM-LFT-002",
                              fmt::format("LFT block {} Set on {} failed: {}", b, ToString(g),
                                          r.status().ToString()));
                        cache.held[b] = false;
                        return;
                      }
                      // What the switch answered is what it holds (it may refuse entries).
                      auto blk = mad::Decode<mad::LinearForwardingTable>(r->data);
                      cache.held[b] = blk.ok() &&
                                      blk->port == LftBlock(*cache.source_table, b).port;
                    });
      return true;
    }
    return false;
  });
  pipeline_.WhenIdle([this] {
    if (stopped_) return;
    // Adaptive routing after the plain LFT (an LFT Set turns AR off), before multicast.
    ar_.Run(discovered_->fabric, discovered_->nodes,
            std::make_shared<const routing::LidMap>(*lid_map_), tables_, options_.ar, [this] {
              if (!stopped_) PushMfts([this] { ActivateLinks(0); });
            });
  });
}

// Multicast (OpenSM: after unicast, before the link manager): members whose port
// this sweep did not find leave their groups, then MFT blocks go out by difference.
void SubnetManager::PushMfts(std::function<void()> then) {
  const Fabric& f = discovered_->fabric;
  mcast_dirty_ = false;
  uint32_t cap = 0;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    uint32_t c = discovered_->nodes[n].switch_info.multicast_fdb_cap;
    if (c != 0 && (cap == 0 || c < cap)) cap = c;
  }
  if (cap != 0) {
    mcast_.set_max_mlid(static_cast<uint16_t>(
        std::min<uint32_t>(0xFFFE, uint32_t{mad::kMulticastLidBase} + cap - 1)));
  }
  mcast_.Prune([&f](Guid g) {
    auto p = f.FindPort(g);
    return p && (f.node(f.port(*p).node).is_switch() || f.port(*p).connected());
  });
  mcast_dirty_ = false;  // the prune's own change is planned below
  MftPlan plan = PlanMfts(f, mcast_.groups());
  size_t queued = mft_.Push(f, discovered_->nodes, plan,
                            [this](Guid g, uint32_t pos, uint32_t block, const Status& st) {
                              Issue("SM-MFT-001",
                                    fmt::format("MFT block {} position {} Set on {} failed: {}",
                                                block, pos, ToString(g), st.ToString()));
                            });
  if (queued) {
    Log(LogName::kSm).info("{} MFT blocks queued for {} multicast trees", queued,
                           plan.trees.size());
  }
  if (then) {
    pipeline_.WhenIdle([this, then] {
      if (!stopped_) then();
    });
  }
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

void SubnetManager::OnMulticastChange() {
  // Saved by the flush timer, not here: a storm of joins costs one transaction per
  // kStateFlushInterval, and only the groups that changed are written.
  if (store_) {
    mcast_save_pending_ = true;
    ScheduleStateFlush();
  }
  if (sweeping_ || !discovered_ || stopped_) {
    mcast_dirty_ = true;
    return;
  }
  if (mcast_dirty_) return;  // a push is already posted
  mcast_dirty_ = true;
  boost::asio::post(io_, [this] {
    if (stopped_ || !mcast_dirty_) return;
    if (sweeping_ || !discovered_) return;  // the sweep (or its end) plans it
    if (state() != mad::SmState::kMaster) return;  // only the master writes MFTs
    PushMfts({});
  });
}

// Link manager: ports whose link is up at both ends go INIT -> ARMED (pass 0), then
// ARMED -> ACTIVE (pass 1). Switch port 0 has no link.
void SubnetManager::ActivateLinks(int pass) {
  PortState from = pass == 0 ? PortState::kInit: PortState::kArmed;
  PortState to = pass == 0 ? PortState::kArmed: PortState::kActive;
  if (state() != mad::SmState::kMaster) return;
  auto next = std::make_shared<PortId>(0);
  pipeline_.Feed([this, next, from, to]() -> bool {
    const Fabric& f = discovered_->fabric;
    while (*next < f.port_count()) {
      PortId p = (*next)++;
      const Port& port = f.port(p);
      if (port.num.value() == 0 || !port.connected() || port.state != from) continue;
      const DiscoveredNode& dn = discovered_->nodes[port.node];
      if (!dn.port_info_valid[port.num.value()]) continue;
      if (f.port(port.peer).state < PortState::kInit) continue;
      mad::PortInfo want = DesiredPortInfo(p);
      want.port_state = ToWire(to);
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(want, data);
      uint8_t num = port.num.value();
      NodeId node = port.node;
      pipeline_.Set(dn.path, mad::attr::kPortInfo, PortInfoSetModifier(p), data,
                    [this, p, node, num, to, path = dn.path](Result<mad::Smp> r) {
                      if (r.ok()) {
                        if (auto pi = mad::Decode<mad::PortInfo>(r->data); pi.ok())
                          OnPortStateSet(p, node, num, to, *pi);
                        return;
                      }
                      // A port state transition is not idempotent: when the reply of the
                      // Set that took effect is lost, its retry meets the new state and is
                      // refused (status 7, as ibsim and the spec have it). Reading the port
                      // tells whether it got there.
                      ++current_.port_state_readbacks;
                      pipeline_.Get(path, mad::attr::kPortInfo, num,
                                    [this, p, node, num, to, failed = r.status()](
                                        Result<mad::Smp> g) {
                                      auto pi = g.ok() ? mad::Decode<mad::PortInfo>(g->data)
                                                       : Result<mad::PortInfo>(g.status());
                                      if (pi.ok() && pi->port_state == ToWire(to)) {
                                        ++counters_.sets_confirmed_by_readback;
                                        OnPortStateSet(p, node, num, to, *pi);
                                        return;
                                      }
                                      Issue("SM-LINK-001",
                                            fmt::format("PortInfo Set (state {}) on {} port {} "
                                                        "failed: {}",
                                                        ToWire(to),
                                                        ToString(discovered_->fabric.node(node).guid),
                                                        num, failed.ToString()));
                                    });
                    });
      return true;
    }
    return false;
  });
  pipeline_.WhenIdle([this, pass] {
    if (stopped_) return;
    if (pass == 0) {
      ActivateLinks(1);
    } else if (options_.sharp_enable && discovered_ && state() == mad::SmState::kMaster) {
      // SHARP needs ACTIVE links (class 0x0B MADs are GMPs); it never delays SUBNET UP's
      // verdict: its problems are its own log lines.
      sharp_->Run(discovered_, [this] {
        if (!stopped_) FinishHeavySweep();
      });
    } else {
      FinishHeavySweep();
    }
  });
}

// What a port answered once it reached `to` (ARMED or ACTIVE): the model follows it.
void SubnetManager::OnPortStateSet(PortId p, NodeId node, uint8_t num, PortState to,
                                   const mad::PortInfo& pi) {
  NoteLinkEcho(p, pi);
  DiscoveryResult& d = MutableDiscovered();
  d.nodes[node].port_info[num] = pi;
  d.fabric.mutable_port(p).state = static_cast<PortState>(pi.port_state <= 4 ? pi.port_state: 0);
  if (to == PortState::kArmed) {
    ++current_.ports_armed;
  } else {
    ++current_.ports_activated;
  }
}

void SubnetManager::FinishHeavySweep() {
  // SUBNET UP means the SA answers everything, the SL2VL and VLArb records included: their
  // reads, running beside the sweep since discovery, end first.
  if (qos_reader_.running() && !stopped_ && state() == mad::SmState::kMaster) {
    finish_waits_for_qos_ = true;
    return;
  }
  // With qos TRUE the tables are written once the reads are in (by difference with them).
  if (options_.qos && !qos_programmed_ && !stopped_ && state() == mad::SmState::kMaster &&
      discovered_ && tables_) {
    qos_programmed_ = true;
    ProgramQos([this] {
      if (!stopped_) FinishHeavySweep();
    });
    return;
  }
  qos_programmed_ = false;
  const PipelineCounters& c = pipeline_.counters();
  current_.smps = c.gets + c.sets - smps_at_start_;
  current_.smps_failed = c.failed - failed_at_start_;
  current_.duration = std::chrono::duration_cast<std::chrono::microseconds>(clock_.Now() -
                                                                            current_.started);
  current_.issues = issues_in_sweep_;
  current_.subnet_up = discovered_ && sm_port_ != kNoPort && tables_ && issues_in_sweep_ == 0;
  const std::vector<Guid> ports_before = known_ports_;  // traps 64/65 below
  if (discovered_ && sm_port_ != kNoPort) {
    // Remember what this sweep assigned so a restart and the next sweep keep it.
    for (PortId p: lids_.end_ports) {
      const Port& port = discovered_->fabric.port(p);
      if (port.lid.value() == 0) continue;
      uint16_t count = static_cast<uint16_t>(1u << port.lmc);
      guid2lid_[port.guid] = {port.lid.value(),
                              static_cast<uint16_t>(port.lid.value() + count - 1)};
    }
    known_ports_.clear();
    for (PortId p: lids_.end_ports) known_ports_.push_back(discovered_->fabric.port(p).guid);
  }
  Log(LogName::kSm)
      .info("heavy sweep {} done in {:.3f} s: {} nodes ({} switches, {} CAs), {} links; {} "
            "SMPs ({} failed); {} LID changes, {} PortInfo Sets ({} ClientReregister), {} LFT "
            "blocks sent ({} read), "
            "{} P_Key blocks sent ({} read), {} ports armed, {} activated ({} port state Sets "
            "read back); engine {}",
            current_.number, current_.duration.count() / 1e6, current_.nodes,
            current_.switches, current_.cas, current_.links, current_.smps,
            current_.smps_failed, current_.lid_changes, current_.portinfo_sets,
            current_.client_reregisters,
            current_.lft_blocks_sent, current_.lft_blocks_read, current_.pkey_blocks_sent,
            current_.pkey_blocks_read, current_.ports_armed,
            current_.ports_activated, current_.port_state_readbacks,
            current_.engine.empty() ? "-" : current_.engine);
  if (current_.subnet_up) {
    if (first_master_sweep_) {
      Log(LogName::kHa).info("first master sweep: ClientReregister on {} CA ports ({})",
                             current_.client_reregisters,
                             sa_state_complete_ && !took_over_
                                 ? "this SM's state file holds the SA registrations of the "
                                   "ports that still name it master"
                                 : "this SM does not hold the SA registrations clients made "
                                   "with the last master");
    }
    failed_sweeps_in_a_row_ = 0;
    first_master_sweep_ = false;
    took_over_ = false;
    // Clients told to re-register now register here: from now on this SM holds them all.
    if (state() == mad::SmState::kMaster) sa_state_complete_ = true;
  } else {
    Log(LogName::kSm).warn("SM-SWEEP-001 sweep {} finished with {} issues; the subnet is not "
                           "up yet",
                           current_.number, current_.issues);
  }
  // After the fabric is programmed: files never delay the fabric. The SA answers from this
  // sweep and the dump files hold it by the time SUBNET UP is logged (as OpenSM writes its
  // dumps before it), so a script that waits for the line reads this sweep's files.
  if (discovered_ && sm_port_ != kNoPort) {
    PublishSaSnapshot();
    ReportPortChanges(ports_before);
    WriteDumps();
  }
  if (current_.subnet_up) Log(LogName::kSm).info("SUBNET UP");
  if (discovered_ && sm_port_ != kNoPort) {
    PersistState();
    if (current_.subnet_up) SaveLftDigests();
  }
  // Joins and leaves during the sweep.
  if (mcast_dirty_ && discovered_ && !stopped_ && state() == mad::SmState::kMaster) PushMfts({});
  last_ = current_;
  sweeping_ = false;
  if (on_sweep_) on_sweep_(last_);
  if (stopped_ || options_.once) return;
  if (sweep_again_ || !current_.subnet_up) {
    sweep_again_ = false;
    if (!current_.subnet_up) {
      // Retry after a pause rather than at once, doubling up to a minute while sweeps keep
      // failing, so a dead HCA or a fabric that cannot be routed does not spin the SM.
      const int doublings = std::min(failed_sweeps_in_a_row_, 6);
      ++failed_sweeps_in_a_row_;
      light_timer_.expires_after(std::min(std::chrono::seconds(1 << doublings),
                                          std::chrono::seconds(60)));
      light_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) RequestHeavySweep("previous sweep had errors");
      });
      return;
    }
    RequestHeavySweep("change during the last sweep");
    return;
  }
  ScheduleLightSweep();
}

// The SL2VL and VLArb tables of nodes not read yet, on the optional reads' own pipeline
// (sm/qos_tables.h): started right after the election, beside the rest of the sweep.
void SubnetManager::StartQosReads() {
  if (!discovered_ || stopped_) return;
  if (qos_reader_.running()) {
    qos_rerun_ = true;  // this sweep's new nodes once the reads in flight end
    return;
  }
  const Fabric& f = discovered_->fabric;
  // A device that left is read afresh, and probed again, when it comes back.
  std::unordered_set<Guid> present;
  for (const Node& n: f.nodes()) present.insert(n.guid);
  std::erase_if(qos_support_, [&](const auto& e) { return !present.count(e.first); });
  if (std::any_of(qos_->begin(), qos_->end(), [&](const auto& e) { return !present.count(e.first); })) {
    auto kept = std::make_shared<QosMap>(*qos_);
    std::erase_if(*kept, [&](const auto& e) { return !present.count(e.first); });
    qos_ = std::move(kept);
  }
  qos_rerun_ = false;
  qos_reader_.Run(f, discovered_->nodes, *qos_, &qos_support_,
                  [this](QosMap fresh, QosReadStats stats) {
                    if (stopped_) return;
                    if (!fresh.empty()) {
                      auto merged = std::make_shared<QosMap>(*qos_);
                      for (auto& [guid, q] : fresh) (*merged)[guid] = std::move(q);
                      qos_ = std::move(merged);
                      Log(LogName::kSm)
                          .info("read SL2VL and VLArb tables of {} new nodes: {} SMPs, {} "
                                "without an answer, {} device tables absent ({} reads not sent)",
                                stats.nodes, stats.smps, stats.failed, stats.probes_failed,
                                stats.skipped);
                    }
                    if (qos_rerun_) {
                      StartQosReads();
                      return;
                    }
                    if (finish_waits_for_qos_) {
                      finish_waits_for_qos_ = false;
                      FinishHeavySweep();
                    } else if (!fresh.empty() && sa_.snapshot() && !sweeping_) {
                      PublishSaSnapshot();
                    }
                  });
}

void SubnetManager::ProgramQos(std::function<void()> then) {
  const Fabric& f = discovered_->fabric;
  std::vector<QosTableSet> sets =
      PlanQosSets(f, discovered_->nodes, *qos_, qos_support_, options_.qos_levels);
  if (sets.empty()) {
    then();
    return;
  }
  qos_programmer_.Run(f, discovered_->nodes, *qos_, std::move(sets),
                      [this, then = std::move(then)](QosProgrammer::Outcome out) {
    if (stopped_) return;
    auto merged = std::make_shared<QosMap>(*qos_);
    for (auto& [guid, q] : out.written) (*merged)[guid] = std::move(q);
    qos_ = std::move(merged);
    for (const auto& [node, text] : out.failures) {
      const Guid g = discovered_->fabric.node(node).guid;
      if (!options_.suppress_sl2vl_mad_status_errors) {
        Issue("SM-QOS-001", fmt::format("{}: {}", ToString(g), text));
      } else if (qos_set_failed_.insert(g).second) {
        Log(LogName::kSm).warn("SM-QOS-001 {}: {} (suppress_sl2vl_mad_status_errors: the "
                               "sweep goes on)", ToString(g), text);
      }
    }
    Log(LogName::kSm).info("QoS: {} SL2VL and VLArb Sets, {} failed", out.stats.sets,
                           out.stats.failed);
    current_.qos_sets += out.stats.sets;
    current_.qos_sets_failed += out.stats.failed;
    then();
  });
}

// --- light sweep ---------------------------------------------------------------------

void SubnetManager::ScheduleLightSweep() {
  if (options_.sweep_interval.count() == 0 || stopped_) return;
  light_timer_.expires_after(options_.sweep_interval);
  light_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || sweeping_) return;
    // OpenSM's force_heavy_sweep: every sweep_interval a heavy sweep instead of a light one.
    if (options_.force_heavy_sweep) {
      RequestHeavySweep("force_heavy_sweep");
    } else {
      LightSweep();
    }
  });
}

// SwitchInfo of every switch: PortStateChange set, a LinearFDBTop that is not ours (a
// reboot), or no answer -> heavy sweep. Costs one SMP per switch.
void SubnetManager::LightSweep() {
  if (!discovered_ || stopped_) return;
  ++counters_.light_sweeps;
  sa_.ExpireServices();  // leases run out even when nobody asks for ServiceRecords
  auto change = std::make_shared<std::string>();
  const Fabric& f = discovered_->fabric;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    Guid g = f.node(n).guid;
    pipeline_.Get(discovered_->nodes[n].path, mad::attr::kSwitchInfo, 0,
                  [this, g, change](Result<mad::Smp> r) {
                    if (!change->empty()) return;
                    if (!r.ok()) {
                      *change = fmt::format("switch {} did not answer", ToString(g));
                      return;
                    }
                    auto si = mad::Decode<mad::SwitchInfo>(r->data);
                    if (!si.ok()) return;
                    if (si->port_state_change) {
                      *change = fmt::format("port state change on switch {}", ToString(g));
                    } else if (si->linear_fdb_top != switch_cache_[g].top) {
                      *change = fmt::format("switch {} LinearFDBTop {} is not ours ({})",
                                            ToString(g), si->linear_fdb_top,
                                            switch_cache_[g].top);
                    }
                  });
  }
  // Known SMs, as OpenSM's light sweep does: a better one that came up, or another master
  // (two subnets joined), needs the heavy sweep that hands over.
  for (const auto& [guid, peer] : peers_) {
    Guid pg = guid;
    pipeline_.Get(peer.path, mad::attr::kSmInfo, 0, [this, pg, change](Result<mad::Smp> r) {
      auto known = peers_.find(pg);
      auto info = r.ok() ? mad::Decode<mad::SmInfo>(r->data): Result<mad::SmInfo>(r.status());
      bool valid = info.ok() && info->guid == pg.value() &&
                   (options_.sm_key == 0 || info->sm_key == options_.sm_key) &&
                   info->sm_state != mad::SmState::kNotActive;
      // The SA's SMInfoRecords follow what the known SMs answer now: a state that changed is
      // shown, an SM that stopped answering (or went NOTACTIVE) is no longer listed.
      if (!r.ok()) {
        NotePeerMissed(pg, r.status().ToString());
      } else if (info.ok() && info->guid == pg.value()) {
        NotePeerAnswered(pg);
        if (info->sm_state == mad::SmState::kNotActive)
          RecordPeer(*info, options_.sm_key == 0 || info->sm_key == options_.sm_key);
      }
      if (known != peers_.end()) {
        if (!valid) {
          Log(LogName::kHa).info("SM {} no longer answers as an active SM: {}", ToString(pg),
                                 info.ok() ? ha::SmStateName(info->sm_state)
                                           : std::string_view(info.status().message()));
          peers_.erase(known);
          PublishKnownSms();
        } else if (known->second.info.sm_state != info->sm_state ||
                   known->second.info.priority != info->priority ||
                   known->second.info.act_count != info->act_count) {
          known->second.info = *info;
          PublishKnownSms();
        }
      }
      if (!change->empty() || !valid) return;
      bool better = PeerBeats(*info, OwnSmInfo(state(), false));
      if (info->sm_state == mad::SmState::kMaster ||
          (better && info->sm_state == mad::SmState::kStandby)) {
        *change = fmt::format("SM {} is {}{}", ToString(pg), ha::SmStateName(info->sm_state),
                              better ? " and better than this SM" : "");
      }
    });
  }
  pipeline_.WhenIdle([this, change] {
    if (stopped_) return;
    if (!change->empty()) {
      RequestHeavySweep(*change);
    } else {
      ScheduleLightSweep();
    }
  });
}

// --- unsolicited MADs ----------------------------------------------------------------

void SubnetManager::OnUnsolicited(mad::MadMessage msg) {
  auto hdr = msg.header();
  if (!hdr.ok()) return;
  bool smp = hdr->mgmt_class == static_cast<uint8_t>(mad::MgmtClass::kSubnLid) ||
             hdr->mgmt_class == static_cast<uint8_t>(mad::MgmtClass::kSubnDirected);
  if (hdr->mgmt_class == static_cast<uint8_t>(mad::MgmtClass::kSubnAdm)) {
    sa_.OnRequest(msg);
    return;
  }
  if (!smp) {
    ++counters_.unsolicited_ignored;
    return;
  }
  mad::Smp req;
  if (!mad::DecodeFrom(msg.bytes, &req).ok()) return;
  if (req.attr_id == mad::attr::kSmInfo &&
      (req.method == mad::method::kGet || req.method == mad::method::kSet)) {
    AnswerSmInfo(req, msg);
  } else if (req.method == mad::method::kTrap && req.attr_id == mad::attr::kNotice) {
    HandleTrap(req, msg);
  } else {
    ++counters_.unsolicited_ignored;
  }
}

mad::SmInfo SubnetManager::OwnSmInfo(mad::SmState shown, bool with_key) const {
  mad::SmInfo info;
  info.guid = sm_port_guid_.value();
  info.sm_key = with_key ? options_.sm_key: 0;
  info.act_count = act_count_;
  info.priority = options_.sm_priority;
  info.sm_state = shown;
  return info;
}

void SubnetManager::AnswerSmInfo(const mad::Smp& req, const mad::MadMessage& msg) {
  ++counters_.sminfo_requests;
  auto in = mad::Decode<mad::SmInfo>(req.data);
  // The key goes only to a requester that passes the M_Key check or presents the key
  // itself (IBA 14.4.1; OpenSM's smi_rcv_process_get_request). With m_key 0 every
  // requester passes, as with OpenSM, which needs the key to accept us as a peer.
  bool authorised = options_.m_key == 0 || req.m_key == options_.m_key ||
                    (in.ok() && in->sm_key == options_.sm_key);
  mad::SmState shown = state();  // a Set is answered with the state it found (OpenSM)
  uint16_t status = 0;
  ha::SmTransition t;
  std::string from = in.ok() ? ToString(Guid{in->guid}): std::string("?");
  if (req.method == mad::method::kSet) {
    if (!in.ok()) {
      status = ha::kSmInfoStatusInvalidField;
    } else if (options_.ignore_other_sm) {
      status = ha::kSmInfoStatusInvalidField;
      Log(LogName::kHa).info("SMInfo Set {} from SM {} not obeyed: ignore_other_sm is set",
                             req.attr_mod, from);
    } else if (options_.sm_key != 0 && in->sm_key != options_.sm_key) {
      status = ha::kSmInfoStatusInvalidField;
      ++counters_.sm_key_mismatches;
      // Never our own key: anyone can send one Set to have it logged.
      Log(LogName::kHa).warn("SM-HA-003 SMInfo Set {} from SM {} carries another SM_Key: "
                             "ignored (SMs cooperate only with the same sm_key)",
                             req.attr_mod, from);
    } else {
      status = fsm_.HandleSet(req.attr_mod, in->sm_state, &t);
      if (status != 0) {
        ++counters_.sminfo_sets_refused;
        Log(LogName::kHa).warn("SM-HA-006 SMInfo Set {} from SM {} (state {}) refused in "
                               "state {}: status 7",
                               req.attr_mod, from, ha::SmStateName(in->sm_state),
                               ha::SmStateName(shown));
      }
    }
  }
  mad::Smp resp = req;
  resp.method = mad::method::kGetResp;
  resp.status = status;
  resp.data.fill(0);
  mad::EncodeTo(OwnSmInfo(shown, authorised), resp.data);
  if (req.is_directed()) {
    resp.direction = 1;
  }
  mad::MadMessage out = mad::ToMessage(resp, msg.addr.lid);
  out.addr = msg.addr;
  (void)transport_.Post(std::move(out));
  if (!t.legal) return;

  // A legal Set: the answer is out; now act on it.
  pipeline_.set_fenced(state() != mad::SmState::kMaster);
  qos_pipeline_.set_fenced(state() != mad::SmState::kMaster);
  std::string why = fmt::format("SMInfo Set {} from SM {}", req.attr_mod, from);
  if (req.attr_mod == mad::sminfo_mod::kHandover) ++counters_.handovers_received;
  if (shown == mad::SmState::kStandby && state() == mad::SmState::kMaster) {
    ++counters_.takeovers;
    ++act_count_;
    took_over_ = true;
  }
  if (shown != state()) {
    Log(LogName::kSm).info("Entering {} state ({})", ha::SmStateName(state()), why);
    RecordStateChange(shown, why);
    if (shown == mad::SmState::kMaster) sa_state_complete_ = false;  // another SM serves
  } else {
    Log(LogName::kHa).info("{} in state {}", why, ha::SmStateName(state()));
  }
  if (shown == mad::SmState::kStandby && state() == mad::SmState::kDiscovering) took_over_ = true;
  if (t.actions & ha::sm_action::kSendAcknowledge) SendAcknowledge(Guid{in->guid});
  ApplyActions(t.actions, why);
  if (t.actions & ha::sm_action::kStartPolling) {
    // NOTACTIVE told to stand by: the sender is the master to poll.
    auto path = PathToPort(Guid{in->guid});
    if (path) {
      EnterStandby(PeerSm{Guid{in->guid}, *path, *in});
    } else {
      Log(LogName::kHa).warn("SM-HA-007 no path to master SM {} (not discovered yet): not "
                             "polling it",
                             from);
    }
  }
}

// --- HA: election, handover, polling -------------------------------------------------

void SubnetManager::SetSmState(ha::SmEvent event, const std::string& why) {
  mad::SmState before = state();
  ha::SmTransition t = fsm_.Handle(event);
  if (!t.legal) {
    Log(LogName::kHa).debug("event {} ignored in state {}", ha::SmEventName(event),
                            ha::SmStateName(before));
    return;
  }
  pipeline_.set_fenced(state() != mad::SmState::kMaster);
  qos_pipeline_.set_fenced(state() != mad::SmState::kMaster);
  if (state() == mad::SmState::kMaster && before != mad::SmState::kMaster) {
    ++act_count_;
    if (took_over_) ++counters_.takeovers;
  }
  if (before != state()) {
    Log(LogName::kSm).info("Entering {} state ({})", ha::SmStateName(state()), why);
    // Registrations a client was told about are in the file before another role begins
    // (a standby that takes over, or a master that hands over, may stop soon after).
    FlushState();
    RecordStateChange(before, why);
    if (before == mad::SmState::kMaster) sa_state_complete_ = false;  // another SM serves
  }
  if (before == mad::SmState::kStandby && state() == mad::SmState::kDiscovering) took_over_ = true;
  ApplyActions(t.actions, why);
}

void SubnetManager::RecordStateChange(mad::SmState before, const std::string& why) {
  ++counters_.state_changes;
  Log(LogName::kHa).info("SM-HA-010 {} -> {}; HA counters: {}", ha::SmStateName(before),
                         ha::SmStateName(state()), HaCounterSummary(counters_));
  if (!store_) return;
  Status s = store_->SetValue("sm_state", ha::SmStateName(state()));
  ha::EventRow e;
  e.time_us = clock_.UnixMicros();
  e.kind = std::string(ha::kEventStateChange);
  e.node_guid = sm_port_guid_;
  e.message = fmt::format("{} -> {}: {}", ha::SmStateName(before), ha::SmStateName(state()), why);
  if (s.ok()) s = store_->RecordEvent(e);
  NoteStateWrite("SM-STATE-010", s, "SM state");
}

void SubnetManager::RecordPeer(const mad::SmInfo& info, bool key_match) {
  if (!store_) return;
  ha::PeerRow row;
  row.guid = Guid{info.guid};
  row.priority = info.priority;
  row.state = static_cast<uint8_t>(info.sm_state);
  row.last_seen_us = clock_.UnixMicros();
  row.sm_key_match = key_match;
  NoteStateWrite("SM-STATE-007", store_->UpsertPeer(row), "peer SM");
}

void SubnetManager::NotePeerAnswered(Guid guid) {
  PeerLiveness& l = peer_liveness_[guid];
  const bool was_missing = l.first_miss_us != 0;
  l.last_answer_us = clock_.UnixMicros();
  l.first_miss_us = 0;
  l.misses = 0;
  l.why.clear();
  if (was_missing) {
    Log(LogName::kHa).info("SM {} answers SMInfo again", ToString(guid));
    SavePeerLiveness();
  }
}

void SubnetManager::NotePeerMissed(Guid guid, const std::string& why) {
  auto it = peer_liveness_.find(guid);
  if (it == peer_liveness_.end()) {
    bool known = false;
    if (store_) {
      if (auto rows = store_->Peers(); rows.ok())
        for (const ha::PeerRow& r : *rows) known |= r.guid == guid;
    }
    if (!known) return;
    it = peer_liveness_.emplace(guid, PeerLiveness{}).first;
  }
  PeerLiveness& l = it->second;
  if (l.first_miss_us == 0) l.first_miss_us = clock_.UnixMicros();
  ++l.misses;
  l.why = why;
  SavePeerLiveness();
}

nlohmann::json PeersNotAnsweringJson(const std::map<Guid, SubnetManager::PeerLiveness>& peers) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [g, l] : peers) {
    if (l.first_miss_us == 0) continue;
    out[GuidText(g)] = {{"since_us", l.first_miss_us},
                        {"misses", l.misses},
                        {"last_answer_us", l.last_answer_us},
                        {"why", l.why}};
  }
  return out;
}

void SubnetManager::SavePeerLiveness() {
  if (!store_) return;
  NoteStateWrite("SM-STATE-007",
                 store_->SetValue(kPeersNotAnsweringKey, PeersNotAnsweringJson(peer_liveness_).dump()),
                 "peer SM");
}

// What this master programmed, per switch (FNV-1a over the LFT up to LinearFDBTop), so the
// state file tells which tables the fabric should hold after this sweep.
void SubnetManager::SaveLftDigests() {
  if (!store_ || !tables_ || !lid_map_ || !discovered_) return;
  const Fabric& f = discovered_->fabric;
  std::vector<ha::LftDigestEntry> rows;
  uint16_t top = lid_map_->max_lid();
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch() || !tables_->table(n)) continue;
    const auto& lft = tables_->table(n)->lft;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i <= top; ++i) {
      h ^= i < lft.size() ? lft[i] : mad::kLftDropPort;
      h *= 0x100000001b3ull;
    }
    rows.push_back({f.node(n).guid, h, Lid{top}, 0});
  }
  NoteStateWrite("SM-STATE-011", store_->SaveLftDigests(rows, {}), "LFT digests");
}

void SubnetManager::ApplyActions(uint32_t actions, const std::string& why) {
  if (actions & ha::sm_action::kStopPolling) {
    poll_timer_.cancel();
    polled_.reset();
    poll_misses_ = 0;
  }
  if (actions & ha::sm_action::kFence) {
    // Another SM writes the switches from now on: what we knew of them is stale.
    switch_cache_.clear();
    mft_.ForgetAll();
    light_timer_.cancel();
    sweeping_ = false;
    sweep_again_ = false;
  }
  if (actions & ha::sm_action::kFirstMasterSweep) first_master_sweep_ = true;
  if (actions & ha::sm_action::kHeavySweep) RequestHeavySweep(why);
}

std::optional<DrPath> SubnetManager::PathToPort(Guid port_guid) const {
  if (!discovered_) return std::nullopt;
  const Fabric& f = discovered_->fabric;
  auto p = f.FindPort(port_guid);
  if (!p) return std::nullopt;
  const Port& port = f.port(*p);
  if (f.node(port.node).is_switch()) return discovered_->nodes[port.node].path;
  if (!port.connected()) return std::nullopt;
  // Out of the neighbour through the cable that ends at this port.
  const Port& peer = f.port(port.peer);
  DrPath path = discovered_->nodes[peer.node].path;
  if (path.size() >= mad::kMaxDrHops) return std::nullopt;
  path.push_back(peer.num.value());
  return path;
}

// SMInfo Get to every port that claims IsSM (OpenSM: "SMInfo Get to ports with
// the IsSM capability bit"). Answers are judged in DecideRole once all are in.
void SubnetManager::QueryOtherSms() {
  peers_.clear();
  if (options_.ignore_other_sm) {
    DecideRole();
    return;
  }
  const Fabric& f = discovered_->fabric;
  for (PortId p: EndPorts(f)) {
    const Port& port = f.port(p);
    if (port.guid == sm_port_guid_) continue;
    const DiscoveredNode& dn = discovered_->nodes[port.node];
    uint8_t num = port.num.value();
    if (num >= dn.port_info_valid.size() || !dn.port_info_valid[num]) continue;
    if (!(dn.port_info[num].capability_mask & mad::port_cap::kIsSm)) continue;
    auto path = PathToPort(port.guid);
    if (!path) continue;
    Guid g = port.guid;
    pipeline_.Get(*path, mad::attr::kSmInfo, 0, [this, g, path = *path](Result<mad::Smp> r) {
      if (!r.ok()) {
        // A dead SM keeps IsSM on ibsim, and an SM may be starting: not an error.
        Log(LogName::kHa).info("port {} claims IsSM but did not answer SMInfo: {}",
                               ToString(g), r.status().ToString());
        NotePeerMissed(g, r.status().ToString());
        return;
      }
      auto info = mad::Decode<mad::SmInfo>(r->data);
      if (!info.ok()) return;
      if (info->guid != g.value()) {
        Log(LogName::kHa).warn("SM-HA-002 SMInfo from port {} names port {}: ignored",
                               ToString(g), ToString(Guid{info->guid}));
        return;
      }
      ++counters_.other_sms_seen;
      if (options_.sm_key != 0 && info->sm_key != options_.sm_key) {
        RecordPeer(*info, false);
        NotePeerAnswered(g);
        ++counters_.sm_key_mismatches;
        Log(LogName::kHa).warn("SM-HA-003 SM {} (path {}) has another SM_Key: ignored (SMs "
                               "cooperate only with the same sm_key)",
                               ToString(g), PathString(path));
        return;
      }
      if (info->sm_state == mad::SmState::kNotActive) return;
      Log(LogName::kHa).info("found SM {} priority {} state {}", ToString(g), info->priority,
                             ha::SmStateName(info->sm_state));
      peers_[g] = PeerSm{g, path, *info};
      RecordPeer(*info, true);
      NotePeerAnswered(g);
    });
  }
  pipeline_.WhenIdle([this] {
    if (!stopped_) DecideRole();
  });
}

void SubnetManager::PublishKnownSms() {
  std::vector<mad::SmInfoRecord> records;
  for (const auto& [g, p] : peers_) {
    mad::SmInfoRecord r;
    if (discovered_) {
      if (auto port = discovered_->fabric.FindPort(g))
        r.lid = discovered_->fabric.port(*port).lid.value();
    }
    r.sm_info = p.info;
    records.push_back(r);
  }
  sa_.SetOtherSms(std::move(records));
}

void SubnetManager::DecideRole() {
  PublishKnownSms();
  const mad::SmInfo me = OwnSmInfo(state(), false);
  const PeerSm* master = nullptr;  // the best SM claiming MASTER
  const PeerSm* better = nullptr;  // the best SM better than us, any state
  const PeerSm* handover_to = nullptr;  // the best better SM that can take a HANDOVER
  for (const auto& [g, p] : peers_) {
    if (p.info.sm_state == mad::SmState::kMaster && (!master || PeerBeats(p.info, master->info)))
      master = &p;
    if (!PeerBeats(p.info, me)) continue;
    if (!better || PeerBeats(p.info, better->info)) better = &p;
    bool can_take = p.info.sm_state == mad::SmState::kStandby ||
                    p.info.sm_state == mad::SmState::kMaster;
    if (can_take && (!handover_to || PeerBeats(p.info, handover_to->info))) handover_to = &p;
  }
  if (state() == mad::SmState::kDiscovering) {
    if (master || better) {
      const PeerSm target = master ? *master: *better;
      SetSmState(ha::SmEvent::kDiscoveryFoundMaster,
                 fmt::format("{} SM {} priority {}", master ? "master" : "better",
                             ToString(target.guid), target.info.priority));
      EnterStandby(target);
      return;
    }
    SetSmState(ha::SmEvent::kDiscoveryNoMaster, "no master and no better SM found");
    StartQosReads();
    ProgramPKeys();
    return;
  }
  if (state() == mad::SmState::kMaster) {
    if (handover_to) {
      SendHandover(*handover_to);
      return;
    }
    StartQosReads();
    ProgramPKeys();
    return;
  }
  // A Set made us NOTACTIVE or STANDBY meanwhile: this sweep ends without writing.
  sweeping_ = false;
}

// Pre-emption (and split brain): the better SM gets the subnet before we write again.
void SubnetManager::SendHandover(const PeerSm& to) {
  Log(LogName::kHa).info("handing over to SM {} (priority {}, state {})", ToString(to.guid),
                         to.info.priority, ha::SmStateName(to.info.sm_state));
  std::array<uint8_t, 64> data{};
  mad::EncodeTo(OwnSmInfo(mad::SmState::kMaster, true), data);
  pipeline_.Set(to.path, mad::attr::kSmInfo, mad::sminfo_mod::kHandover, data,
                [this, to](Result<mad::Smp> r) {
                  if (stopped_ || state() != mad::SmState::kMaster) return;
                  if (!r.ok()) {
                    Log(LogName::kHa).warn("SM-HA-004 HANDOVER to SM {} failed: {}; staying "
                                           "MASTER",
                                           ToString(to.guid), r.status().ToString());
                    ProgramPKeys();
                    return;
                  }
                  ++counters_.handovers_sent;
                  SetSmState(ha::SmEvent::kHandoverSent,
                             fmt::format("handed over to SM {}", ToString(to.guid)));
                  PeerSm polled = to;
                  polled.info.sm_state = mad::SmState::kMaster;
                  EnterStandby(polled);
                });
}

void SubnetManager::EnterStandby(const PeerSm& master) {
  polled_ = master;
  poll_misses_ = 0;
  poll_in_flight_ = false;
  switch_cache_.clear();
  sweeping_ = false;
  sweep_again_ = false;
  light_timer_.cancel();
  Log(LogName::kHa).info("polling master SM {} (priority {}) every {} ms, lost after {} misses",
                         ToString(master.guid), master.info.priority,
                         options_.sminfo_polling_timeout.count(), options_.polling_retry_number);
  SchedulePoll();
}

void SubnetManager::SchedulePoll() {
  if (stopped_) return;
  poll_timer_.expires_after(options_.sminfo_polling_timeout);
  poll_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Poll();
  });
}

void SubnetManager::Poll() {
  if (stopped_ || state() != mad::SmState::kStandby || !polled_) return;
  SchedulePoll();
  if (poll_in_flight_) return;  // the last poll is still out: it counts when it ends
  poll_in_flight_ = true;
  ++counters_.polls_sent;
  // One poll must end before the next is due, or misses would pile up late.
  mad::SendOptions so = options_.send;
  if (so.timeout * (so.retries + 1) > options_.sminfo_polling_timeout) {
    so.retries = 0;
    so.timeout = std::min(so.timeout * 2, options_.sminfo_polling_timeout);
  }
  Guid g = polled_->guid;
  mad::Smp smp = mad::MakeDrSmp(mad::method::kGet, mad::attr::kSmInfo, 0, polled_->path,
                                options_.m_key);
  transport_.Send(mad::ToMessage(smp), so, [this, g](Result<mad::MadMessage> r) {
    poll_in_flight_ = false;
    if (stopped_ || state() != mad::SmState::kStandby || !polled_ || polled_->guid != g) return;
    Result<mad::SmInfo> info = [&]() -> Result<mad::SmInfo> {
      if (!r.ok()) return r.status();
      mad::Smp resp;
      IBSM_RETURN_IF_ERROR(mad::DecodeFrom(r->bytes, &resp));
      if (resp.status != 0) return FailedPrecondition(fmt::format("MAD status {:#x}", resp.status));
      return mad::Decode<mad::SmInfo>(resp.data);
    }();
    const mad::SmInfo me = OwnSmInfo(mad::SmState::kStandby, false);
    std::string why;
    if (!info.ok()) {
      why = info.status().ToString();
    } else if (info->guid != g.value()) {
      why = fmt::format("answered as {}", ToString(Guid{info->guid}));
    } else if (info->sm_state == mad::SmState::kMaster) {
      polled_->info = *info;
      poll_misses_ = 0;
      NotePeerAnswered(g);
      // We are the better SM: ask the master to sweep and hand over (OpenSM does the same).
      if (PeerBeats(me, *info)) SendTrap144(*polled_);
      return;
    } else if (info->sm_state == mad::SmState::kStandby && PeerBeats(*info, me)) {
      poll_misses_ = 0;  // a better SM, itself waiting: still the one to follow
      NotePeerAnswered(g);
      return;
    } else {
      why = fmt::format("is {}, not MASTER", ha::SmStateName(info->sm_state));
    }
    ++counters_.polls_missed;
    ++poll_misses_;
    NotePeerMissed(g, why);
    Log(LogName::kHa).warn("SM-HA-005 master SM {} poll {} of {} failed: {}", ToString(g),
                           poll_misses_, options_.polling_retry_number, why);
    if (poll_misses_ >= options_.polling_retry_number) {
      SetSmState(ha::SmEvent::kPollingTimeout, fmt::format("master SM {} lost", ToString(g)));
    }
  });
}

// Trap 144 with the SM-priority-change flag, LID-routed to the master (IBA 14.4.1.2).
void SubnetManager::SendTrap144(const PeerSm& master) {
  if (!discovered_) return;
  auto mp = discovered_->fabric.FindPort(master.guid);
  auto own = discovered_->fabric.FindPort(sm_port_guid_);
  if (!mp || !own) return;
  uint16_t master_lid = discovered_->fabric.port(*mp).lid.value();
  auto local = transport_.QueryLocalPort();
  uint16_t my_lid = local.ok() ? local->lid.value(): 0;
  if (master_lid == 0 || my_lid == 0) return;
  mad::Trap144Details d;
  d.lid = my_lid;
  d.change_flags = mad::trap144_flag::kSmPriorityChange;
  const DiscoveredNode& dn = discovered_->nodes[discovered_->fabric.port(*own).node];
  uint8_t num = discovered_->fabric.port(*own).num.value();
  if (num < dn.port_info.size()) d.capability_mask = dn.port_info[num].capability_mask;
  mad::Notice n = mad::MakeTrap144(mad::producer::kCa, my_lid, d);
  mad::Smp smp = mad::MakeLidSmp(mad::method::kTrap, mad::attr::kNotice, 0, options_.m_key);
  mad::EncodeSmpNotice(n, smp.data);
  ++counters_.trap144_sent;
  Log(LogName::kHa).info("trap 144 (SM priority) to master SM {} at LID {}: we are the better "
                         "SM",
                         ToString(master.guid), master_lid);
  (void)transport_.Post(mad::ToMessage(smp, Lid{master_lid}));
}

// The new master acknowledges a HANDOVER (IBA 14.4.1; OpenSM never does and does not
// need it). The payload shows the state we were in when handed over: STANDBY.
void SubnetManager::SendAcknowledge(Guid to) {
  auto path = PathToPort(to);
  if (!path) return;
  std::array<uint8_t, 64> data{};
  mad::EncodeTo(OwnSmInfo(mad::SmState::kStandby, true), data);
  ++counters_.acknowledges_sent;
  pipeline_.Set(*path, mad::attr::kSmInfo, mad::sminfo_mod::kAcknowledge, data,
                [to](Result<mad::Smp> r) {
                  if (!r.ok())
                    Log(LogName::kHa).info("ACKNOWLEDGE to SM {} not taken: {}", ToString(to),
                                           r.status().ToString());
                });
}

void SubnetManager::HandleTrap(const mad::Smp& req, const mad::MadMessage& msg) {
  ++counters_.traps_received;
  mad::Notice notice_value;
  mad::Notice* notice = &notice_value;
  if (!mad::DecodeSmpNotice(req.data, notice).ok()) {
    ++counters_.traps_malformed;
    return;
  }
  // TrapRepress: same TID, back to the issuer (IBA 13.4.9).
  mad::Smp repress = req;
  repress.method = mad::method::kTrapRepress;
  mad::MadMessage out = mad::ToMessage(repress, msg.addr.lid);
  out.addr = msg.addr;
  (void)transport_.Post(std::move(out));
  uint16_t trap = notice->trap_number_or_device_id;
  // Who sent it is the LID the MAD came from, which the sender's HCA sets; IssuerLID and the
  // details are bytes the sender chose. A trap whose IssuerLID names another port is taken as
  // the source's own (OpenSM uses the source LID as well).
  const uint16_t source = msg.addr.lid.value();
  if (notice->issuer_lid != source) {
    ++counters_.traps_issuer_mismatch;
    Log(LogName::kSm).debug("trap {} from LID {} claims IssuerLID {}", trap, source,
                            notice->issuer_lid);
    notice->issuer_lid = source;
  }
  // A trap repeated within seconds says nothing new: after the 10th it is ignored until it
  // pauses, so a flapping port cannot keep the SM sweeping or flood subscribers.
  const bool port_health = notice->is_generic && TrapTracker::IsPortHealthTrap(trap);
  const TrapKey key = TrapTracker::KeyOf(source, trap, notice->data_details);
  const TrapVerdict v = trap_tracker_.Record(key, port_health, clock_.Now());
  if (v.disable_port && options_.babbling_port_policy) {
    // Only a port of the sender itself: the details' LIDADDR must be the source LID, or any
    // host could have the SM disable any port by naming it.
    const uint16_t named = TrapTracker::DetailsLid(trap, notice->data_details);
    auto same_port = [this](uint16_t x, uint16_t y) {
      if (x == y) return true;
      if (!discovered_) return false;
      auto px = discovered_->fabric.FindPortByLid(Lid{x});
      auto py = discovered_->fabric.FindPortByLid(Lid{y});
      return px && py && *px == *py;  // two LIDs of one LMC range
    };
    if (same_port(named, source)) {
      DisableBabblingPort(key, v.consecutive);
    } else {
      const uint64_t n = ++counters_.issues_by_id["SM-TRAP-004"];
      if (ShouldLogOccurrence(n)) {
        Log(LogName::kSm).warn("SM-TRAP-004 trap {} from LID {} names LID {} port {}: a port "
                               "of another node is not disabled (babbling_port_policy; {} so "
                               "far)",
                               trap, source, TrapTracker::DetailsLid(trap, notice->data_details),
                               key.port, n);
      }
    }
  }
  if (v.suppressed) {
    ++counters_.traps_suppressed;
    if (v.first_suppressed) {
      ++counters_.issues_by_id["SM-TRAP-001"];
      Log(LogName::kSm).warn("SM-TRAP-001 trap {} from LID {} (port {}) repeated {} times within "
                             "{} s: ignored until it pauses that long",
                             trap, key.lid, key.port, v.consecutive - 1, port_health ? 60 : 5);
    }
    Log(LogName::kSm).debug("trap {} from LID {} suppressed ({} in a row)", trap, source,
                            v.consecutive);
    return;
  }
  // The first of a run at info, its repeats at debug: a sender cannot flood the log.
  if (v.consecutive == 1) {
    Log(LogName::kSm).info("trap {} from LID {}", trap, source);
  } else {
    Log(LogName::kSm).debug("trap {} from LID {} ({} in a row)", trap, source, v.consecutive);
  }
  bool sweep_trap = trap == mad::trap::kLinkStateChanged || trap == mad::trap::kLocalChanges ||
                    trap == mad::trap::kGidInService || trap == mad::trap::kGidOutOfService;
  // Our own port reports the IsSM capability bit we set when claiming the SM role: nothing
  // on the fabric changed, so no sweep (ibsim sends it on every start).
  if (trap == mad::trap::kLocalChanges && sm_lid_.value() != 0 && source == sm_lid_.value()) {
    ++counters_.own_traps_ignored;
    sweep_trap = false;
  }
  if (sweep_trap && options_.sweep_on_trap) {
    RequestHeavySweep(fmt::format("trap {} from LID {}", trap, source));
  }
  // Subscribers get the trap as a Report from the master, its issuer GID filled in (an SMP
  // Trap has none). Traps 64-67 are the SM's own to issue (ReportPortChanges,
  // ReportMulticastGroup).
  if (state() != mad::SmState::kMaster) return;
  if (notice->is_generic && trap >= mad::trap::kGidInService &&
      trap <= mad::trap::kMcastGroupDeleted)
    return;
  if (discovered_) {
    if (auto p = discovered_->fabric.FindPortByLid(Lid{source}))
      notice->issuer_gid = PortGid(discovered_->fabric.port(*p).guid);
  }
  sa_.inform().Publish(*notice);
}

// babbling_port_policy: the port a health trap keeps naming is disabled (OpenSM's
// shutup_noisy_port); the link goes down, so the next heavy sweep routes around it.
void SubnetManager::DisableBabblingPort(const TrapKey& key, uint32_t count) {
  if (state() != mad::SmState::kMaster || !discovered_) return;
  const Fabric& f = discovered_->fabric;
  auto owner = f.FindPortByLid(Lid{key.lid});
  if (!owner) return;
  const NodeId node = f.port(*owner).node;
  const Node& n = f.node(node);
  if (key.port > n.num_ports || (key.port == 0 && n.is_switch())) return;
  PortId p = n.is_switch() ? f.port_id(node, PortNum{key.port}): *owner;
  // A CA's port is disabled from the switch end of its cable: disabling it at the CA would
  // take down the link the answer comes back on (and the host could bring it up again).
  if (!n.is_switch() && f.port(p).connected() && f.node(f.port(f.port(p).peer).node).is_switch())
    p = f.port(p).peer;
  const NodeId at = f.port(p).node;
  const DiscoveredNode& dn = discovered_->nodes[at];
  const uint8_t num = f.port(p).num.value();
  if (num >= dn.port_info_valid.size() || !dn.port_info_valid[num]) return;
  mad::PortInfo want = dn.port_info[num];
  want.port_state = 0;       // no change
  want.port_phys_state = 3;  // Disabled
  std::array<uint8_t, 64> data{};
  mad::EncodeTo(want, data);
  const Node& an = f.node(at);
  const std::string what =
      at == node ? fmt::format("{} ({}) port {}", an.description, ToString(an.guid), num)
                 : fmt::format("{} ({}) port {}, the cable of {} ({})", an.description,
                               ToString(an.guid), num, n.description, ToString(n.guid));
  pipeline_.Set(dn.path, mad::attr::kPortInfo, num, data,
                [this, what, count](Result<mad::Smp> r) {
                  if (!r.ok()) {
                    ++counters_.issues_by_id["SM-TRAP-003"];
                    Log(LogName::kSm).warn("SM-TRAP-003 disabling babbling {} failed: {}", what,
                                           r.status().ToString());
                    return;
                  }
                  ++counters_.babbling_ports_disabled;
                  ++counters_.issues_by_id["SM-TRAP-002"];
                  Log(LogName::kSm).warn("SM-TRAP-002 {} disabled: its health trap came {} "
                                         "times without a pause (babbling_port_policy)",
                                         what, count);
                });
}

// --- notices the SM issues (IBA 13.4.8.2 traps 64-67) --------------------------------

std::array<uint8_t, 16> SubnetManager::PortGid(Guid port_guid) const {
  std::array<uint8_t, 16> gid{};
  for (size_t i = 0; i < 8; ++i) {
    gid[i] = static_cast<uint8_t>(options_.subnet_prefix >> (56 - 8 * i));
    gid[8 + i] = static_cast<uint8_t>(port_guid.value() >> (56 - 8 * i));
  }
  return gid;
}

void SubnetManager::PublishSmNotice(uint16_t trap, const std::array<uint8_t, 16>& gid) {
  if (state() != mad::SmState::kMaster) return;  // only the master reports
  mad::Notice n = mad::MakeTrap64(trap, gid, sm_lid_.value());
  n.issuer_gid = PortGid(sm_port_guid_);
  sa_.inform().Publish(n);
}

// Trap 64 for every end port this sweep found that the last one did not, 65 for every one
// it lost (as OpenSM reports new ports and dropped ones after a heavy sweep).
void SubnetManager::ReportPortChanges(const std::vector<Guid>& before) {
  std::vector<Guid> now = known_ports_, old = before;
  std::sort(now.begin(), now.end());
  std::sort(old.begin(), old.end());
  std::vector<Guid> added, removed;
  std::set_difference(now.begin(), now.end(), old.begin(), old.end(), std::back_inserter(added));
  std::set_difference(old.begin(), old.end(), now.begin(), now.end(),
                      std::back_inserter(removed));
  for (Guid g: removed) PublishSmNotice(mad::trap::kGidOutOfService, PortGid(g));
  for (Guid g: added) PublishSmNotice(mad::trap::kGidInService, PortGid(g));
}

void SubnetManager::ReportMulticastGroup(bool created, const std::array<uint8_t, 16>& mgid) {
  PublishSmNotice(created ? mad::trap::kMcastGroupCreated: mad::trap::kMcastGroupDeleted, mgid);
}

// --- outputs -------------------------------------------------------------------------

DiscoveryResult& SubnetManager::MutableDiscovered() {
  // Every DiscoveryResult here is made non-const (make_shared<DiscoveryResult>), so casting
  // the constness away from the only owner is sound.
  if (discovered_.use_count() > 1) discovered_ = std::make_shared<DiscoveryResult>(*discovered_);
  return const_cast<DiscoveryResult&>(*discovered_);
}

// Shares discovered_: a later change to it copies it first (MutableDiscovered), so the SA
// keeps answering from the fabric as this sweep left it.
void SubnetManager::PublishSaSnapshot() {
  auto s = std::make_shared<SaSnapshot>();
  s->sweep = current_.number;
  s->discovery = discovered_;
  ar_.ShareFabric(std::shared_ptr<const Fabric>(discovered_, &discovered_->fabric));
  s->tables = tables_;
  // Indexed from the snapshot's own fabric rather than shared with lid_map_: when routing
  // failed and the last good tables are kept, lid_map_ belongs to an earlier fabric whose
  // PortIds need not match this one.
  s->lids = std::make_shared<const routing::LidMap>(s->fabric());
  s->port_mtu = LinkMtus(s->fabric(), s->nodes());
  s->qos = qos_;
  if (options_.qos) s->qos_policy = options_.qos_policy;
  s->subnet_prefix = options_.subnet_prefix;
  s->sm_lid = sm_lid_;
  s->sm_port_guid = sm_port_guid_;
  s->sm_key = options_.sm_key;
  s->act_count = act_count_;
  s->sm_priority = options_.sm_priority;
  s->sm_state = state();
  s->pkeys = pkey_plan_;
  s->partitioned = options_.partitions.config != nullptr;
  sa_.Publish(std::move(s));
  PublishKnownSms();  // their LIDs as this sweep left them
}

void SubnetManager::WriteDumps() {
  if (options_.dump_dir.empty()) return;
  const Fabric& f = discovered_->fabric;
  Status s = WriteDumpFile(options_.dump_dir + "/opensm-subnet.lst",
                           [&](std::FILE* out) { WriteSubnetLst(f, sm_lid_, out); });
  if (s.ok() && tables_ && options_.dump_lfts) {
    s = WriteDumpFile(options_.dump_dir + "/opensm-lfts.dump",
                      [&](std::FILE* out) { WriteLftsDump(f, *tables_, out); });
    // What `opensm -D 0x43` writes for ibdmchk: routes with hop counts, multicast routes.
    if (s.ok())
      s = WriteDumpFile(options_.dump_dir + "/opensm.fdbs",
                        [&](std::FILE* out) { WriteFdbsDump(f, *tables_, out); });
    if (s.ok())
      s = WriteDumpFile(options_.dump_dir + "/opensm.mcfdbs",
                        [&](std::FILE* out) {
                          WriteMcfdbsDump(f, PlanMfts(f, mcast_.groups()), out);
                        });
  }
  // Like the state file: one warning per outage (a full disk fails every sweep), a line
  // when the dumps are written again.
  if (!s.ok()) {
    ++counters_.dump_write_failures;
    if (!dump_write_failing_) {
      Log(LogName::kSm).warn("SM-DUMP-001 {}; dumps are tried again each heavy sweep", s.ToString());
    } else {
      Log(LogName::kSm).debug("SM-DUMP-001 {}", s.ToString());
    }
  } else if (dump_write_failing_) {
    Log(LogName::kSm).info("SM-DUMP-002 dump files are written again in {}", options_.dump_dir);
  }
  dump_write_failing_ = !s.ok();
}

void SubnetManager::LoadPersistedLids() {
  if (options_.lids.reassign) return;
  if (store_) {
    auto rows = store_->LoadGuid2Lid();
    if (!rows.ok()) {
      Log(LogName::kSm).warn("SM-STATE-001 cannot read guid2lid from the state file: {}",
                             rows.status().ToString());
    } else {
      for (const auto& r: *rows) guid2lid_[r.port_guid] = {r.min_lid.value(), r.max_lid.value()};
    }
  }
  // Migration from OpenSM: its guid2lid file fills what the state file does not have.
  if (!options_.guid2lid_file.empty()) {
    auto file = conf::LoadGuid2LidFile(options_.guid2lid_file);
    if (file.ok()) {
      for (const auto& w: file->warnings) Log(LogName::kConf).warn("{}", w.ToString());
      size_t added = 0;
      for (const auto& e: file->entries) {
        if (guid2lid_.emplace(e.guid, PersistedLid{e.min_lid.value(), e.max_lid.value()}).second)
          ++added;
      }
      if (added) {
        Log(LogName::kSm).info("{} LIDs taken from guid2lid file {}", added,
                               options_.guid2lid_file);
      }
    }
  }
  saved_guid2lid_ = guid2lid_;
}

bool SubnetManager::NoteStateWrite(const char* id, const Status& s, std::string_view what) {
  if (s.ok()) {
    if (state_write_failing_) {
      state_write_failing_ = false;
      Log(LogName::kSm).info("SM-STATE-012 the state file takes writes again ({}); what was "
                             "not saved meanwhile is being written now",
                             what);
    }
    return true;
  }
  ++counters_.state_write_failures;
  ++counters_.issues_by_id[id];
  if (!state_write_failing_) {
    state_write_failing_ = true;
    Log(LogName::kSm).error("{} {} not saved: {}; the fabric is still served from memory, and "
                            "guid2lid and multicast groups are written again each sweep until "
                            "the state file takes writes",
                            id, what, s.ToString());
  } else {
    Log(LogName::kSm).debug("{} {} not saved: {}", id, what, s.ToString());
  }
  return false;
}

void SubnetManager::PersistState() {
  if (store_ && store_->degraded()) {
    // Started on a state directory that took no writes (SM-STATE-015): try it again.
    Status reopened = store_->RetryWritable();
    if (reopened.ok()) {
      Log(LogName::kSm).info("SM-STATE-016 state file {} is open for writing; what this SM "
                             "holds in memory is written now",
                             store_->path());
      NoteStateWrite("SM-STATE-010", store_->SetValue("sm_state", ha::SmStateName(state())),
                     "SM state");
    } else {
      Log(LogName::kSm).debug("SM-STATE-015 state file still not writable: {}",
                              reopened.ToString());
    }
  }
  std::vector<ha::Guid2LidEntry> upserts;
  for (const auto& [guid, r] : guid2lid_) {
    auto it = saved_guid2lid_.find(guid);
    if (it != saved_guid2lid_.end() && it->second.min_lid == r.min_lid &&
        it->second.max_lid == r.max_lid)
      continue;
    upserts.push_back({guid, Lid{r.min_lid}, Lid{r.max_lid}});
  }
  bool guid2lid_saved = true;
  if (store_) {
    if (!upserts.empty()) {
      guid2lid_saved = NoteStateWrite("SM-STATE-002", store_->SaveGuid2Lid(upserts, {}),
                                      fmt::format("guid2lid ({} rows)", upserts.size()));
    }
    FlushState();  // and what a failed flush left
    ha::SweepRow row;
    row.kind = ha::SweepKind::kHeavy;
    row.ended_us = clock_.UnixMicros();
    row.started_us = row.ended_us - current_.duration.count();
    row.smps_sent = current_.smps;
    row.smps_failed = current_.smps_failed;
    row.nodes = static_cast<uint32_t>(current_.nodes);
    row.switches = static_cast<uint32_t>(current_.switches);
    row.cas = static_cast<uint32_t>(current_.cas);
    row.links = static_cast<uint32_t>(current_.links);
    row.lid_changes = current_.lid_changes;
    row.lft_blocks_sent = static_cast<uint32_t>(current_.lft_blocks_sent);
    row.engine = current_.engine;
    row.outcome = current_.subnet_up ? "ok" : "partial";
    row.note = fmt::format("{} issues", current_.issues);
    auto id = store_->RecordSweep(row);
    if (NoteStateWrite("SM-STATE-003", id.status(), "sweep row"))
      NoteStateWrite("SM-STATE-017", store_->Prune(options_.keep_sweeps, options_.keep_events),
                     "history pruning");
    SaveSnapshots(/*topology=*/true);
  }
  // OpenSM's format beside the other dumps, so a switch back to OpenSM keeps every LID.
  if (!upserts.empty() && !options_.dump_dir.empty()) {
    std::vector<conf::Guid2LidEntry> all;
    all.reserve(guid2lid_.size());
    for (const auto& [guid, r] : guid2lid_) all.push_back({guid, Lid{r.min_lid}, Lid{r.max_lid}});
    std::sort(all.begin(), all.end(),
              [](const auto& a, const auto& b) { return a.min_lid < b.min_lid; });
    Status s = conf::SaveGuid2LidFile(options_.dump_dir + "/guid2lid", all);
    if (!s.ok()) Log(LogName::kSm).warn("SM-STATE-004 guid2lid file not written: {}", s.ToString());
  }
  // Rows the state file refused stay unsaved, so the next sweep writes them again.
  if (guid2lid_saved) saved_guid2lid_ = guid2lid_;
}

void SubnetManager::SaveSnapshots(bool topology) {
  const Fabric* f = fabric();
  if (!store_ || !f) return;
  if (topology) {
    SaveSnapshot(ha::kSnapshotNodes,
                 [f](const AnswerSink& sink, bool) { StreamNodesAnswer(*f, sink); });
  }
  // The PerfMgr sweep number changes every sweep; the links answer counts as changed only
  // when a cable or its error counters did, so a quiet fabric costs no write. The stored
  // "perfmgr_sweep" is then that of the last write.
  // Without the degraded-link rule no cable is judged degraded (discovery's PortInfo unused).
  const DiscoveryResult* judged = options_.health_degraded_links ? discovered() : nullptr;
  SaveSnapshot(ha::kSnapshotLinks, [&](const AnswerSink& sink, bool for_digest) {
    StreamLinksAnswer(*f, judged, perf_, /*with_sweep=*/!for_digest, sink);
  });
  // The age of the PerfMgr sweep is relative to now: the snapshot holds when it ended
  // instead, and the reader computes the age from that.
  nlohmann::json perfmgr = HealthPerfmgrJson(perf_);
  perfmgr.erase("last_sweep_age_s");
  if (perf_ && perf_->last_sweep_end())
    perfmgr["last_sweep_end_us"] = std::chrono::duration_cast<std::chrono::microseconds>(
                                       perf_->last_sweep_end()->time_since_epoch())
                                       .count();
  SaveSnapshot(ha::kSnapshotHealth, [&](const AnswerSink& sink, bool) {
    StreamHealthAnswer(judged, perf_, perfmgr, sink);
  });
}

// The answer goes to the state file in parts, never held whole. After the first write it is
// first produced into a digest (FNV-1a) alone, and written only when that changed.
void SubnetManager::SaveSnapshot(std::string_view name, const SnapshotProducer& produce) {
  uint64_t digest = 0xcbf29ce484222325ull;
  auto into_digest = [&digest](std::string_view piece) {
    for (unsigned char c: piece) digest = (digest ^ c) * 0x100000001b3ull;
  };
  auto it = snapshot_hashes_.find(name);
  if (it == snapshot_hashes_.end()) {
    // The first write: one pass (the io thread answers nothing meanwhile), digesting on the
    // way all but the piece a digest pass leaves out.
    Status s = store_->SaveSnapshotStreamed(name, [&](const ha::StateStore::SnapshotSink& sink) {
      produce(
          [&](std::string_view piece) {
            if (!piece.starts_with(kLinksSweepPiece)) into_digest(piece);
            sink(piece);
          },
          false);
    });
    if (NoteStateWrite("SM-STATE-013", s, fmt::format("{} snapshot", name)))
      snapshot_hashes_.insert_or_assign(std::string(name), digest);
    return;
  }
  produce(into_digest, /*for_digest=*/true);
  if (it->second == digest) return;
  // A failed write keeps the old digest, so the next sweep tries again.
  Status s = store_->SaveSnapshotStreamed(
      name, [&](const ha::StateStore::SnapshotSink& sink) { produce(sink, false); });
  if (NoteStateWrite("SM-STATE-013", s, fmt::format("{} snapshot", name)))
    snapshot_hashes_.insert_or_assign(std::string(name), digest);
}

}  // namespace ibsm::sm
