#include "sm/sweep/subnet_manager.h"

#include <algorithm>
#include <iterator>
#include <unordered_set>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/log.h"

namespace ibsm::sm {
namespace {

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
                             const Clock& clock, ha::StateFile* store,
                             SubnetManagerOptions options)
    : io_(io),
      transport_(transport),
      clock_(clock),
      store_(store),
      options_(std::move(options)),
      pipeline_(transport, options_.max_wire_smps, options_.send, options_.m_key),
      standby_pipeline_(transport, std::max<size_t>(1, options_.max_wire_smps / 4),
                        options_.send, options_.m_key),
      qos_pipeline_(transport, std::max<size_t>(1, options_.max_wire_smps / 2), options_.send,
                    options_.m_key),
      sa_(transport, SaOptions(options_), clock, store),
      mcast_(McOptions(options_)),
      light_timer_(io),
      damper_(options_.link_damping),
      damping_timer_(io),
      recovery_timer_(io) {
  pipeline_.set_fenced(true);  // nothing is written before the election says MASTER
  qos_pipeline_.set_fenced(true);
  standby_pipeline_.set_fenced(true);  // Gets only, ever
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
  route_worker_.Join();
}

void SubnetManager::Start(std::function<void(const SweepStats&)> on_sweep) {
  on_sweep_ = std::move(on_sweep);
  transport_.SetUnsolicitedHandler([this](mad::MadMessage m) { OnUnsolicited(std::move(m)); });
  auto local = transport_.QueryLocalPort();
  if (local.ok()) {
    sm_port_guid_ = local->port_guid;
    ha_.set_port_guid(sm_port_guid_);
  }
  WarnAboutDefaultKeys();
  // The SM port's LID until the first sweep assigns it.
  lids_and_ports_.Start(local.ok() ? local->lid : Lid{0},
                        options_.lids.reassign ? std::unordered_map<Guid, PersistedLid>{}
                                               : writer_.LoadLids(options_.guid2lid_file));
  if (options_.state_writer_thread) {
    writer_.StartThread([this](std::function<void()> change) {
      boost::asio::post(io_, std::move(change));
    });
  }
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
  rereg_.set_state_complete(was_master && restored);
  mcast_.SetPartitionGroups(options_.partitions.config.get());
  mcast_.set_on_change([this] { OnMulticastChange(); });
  sa_.AttachMulticast(&mcast_);
  // NOTACTIVE -> DISCOVERING: the first heavy sweep looks for other SMs before it writes.
  ha_.SetSmState(ha::SmEvent::kEnable, "start");
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
  qos_.Stop();
  qos_pipeline_.set_held(false);  // its feeder ends (cancelled) and quiescent() can hold
  light_timer_.cancel();
  damping_timer_.cancel();
  standby_timer_.cancel();
  ha_.Stop();
  recovery_timer_.cancel();
  FlushState();
  writer_.Drain();  // the last sweep's files, before the daemon exits
}

void SubnetManager::Reconfigure(const SubnetManagerOptions& o) {
  options_.routing_engine = o.routing_engine;
  options_.routing = o.routing;
  engine_tables_.reset();  // made under the old routing options
  options_.sweep_interval = o.sweep_interval;
  options_.force_heavy_sweep = o.force_heavy_sweep;
  options_.keep_sweeps = o.keep_sweeps;
  options_.keep_events = o.keep_events;
  options_.sweep_on_trap = o.sweep_on_trap;
  options_.incremental_repair = o.incremental_repair;
  options_.incremental_reroute = o.incremental_reroute;
  options_.link_damping = o.link_damping;
  damper_.set_options(o.link_damping);
  options_.babbling_port_policy = o.babbling_port_policy;
  options_.health_degraded_links = o.health_degraded_links;
  options_.subnet_timeout = o.subnet_timeout;
  options_.dump_dir = o.dump_dir;
  options_.dump_lfts = o.dump_lfts;
  writer_.set_options(WriterOptions(options_));
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
  ++sweep_.issues;
  ++counters_.issues_by_id[id];
  Log(LogName::kSm).warn("{} {}", id, message);
}

// --- heavy sweep ---------------------------------------------------------------------

std::optional<SubnetManager::SweepProgress> SubnetManager::sweep_in_progress() const {
  if (!sweeping_ || sweep_posted_ || current_.number == 0) return std::nullopt;
  const auto& c = pipeline_.counters();
  return SweepProgress{current_.number, current_.started, c.gets + c.sets - sweep_.smps_at_start,
                       current_.nodes};
}

void SubnetManager::BeginHeavySweep() {
  sweep_posted_ = false;
  qos_pipeline_.set_held(false);  // a repair that fell back to this sweep held them
  if (stopped_) return;
  if (state() != mad::SmState::kDiscovering && state() != mad::SmState::kMaster) {
    sweeping_ = false;
    return;
  }
  sweeping_ = true;
  if (ha_.took_over() && first_master_sweep_ && state() == mad::SmState::kDiscovering &&
      !warm_takeover_ && WarmUsable()) {
    BeginWarmTakeover();
    return;
  }
  warm_takeover_ = false;  // a warm takeover that fell back to this sweep
  warm_lfts_.clear();
  repair_pending_.clear();  // the rediscovery sees what they reported
  StartSweepStats(/*repair=*/false);
  ++counters_.heavy_sweeps;
  Log(LogName::kSm).info("Entering heavy sweep {} ({})", current_.number, pending_reason_);
  discovery_ = std::make_unique<Discovery>(pipeline_);
  discovery_->Run([this](DiscoveryResult r) {
    // Cables the last model had and this discovery did not find went down (flap damping);
    // damped cables stay out of the model even where their ports came up again.
    if (discovered_ && !stopped_ && damper_.options().threshold != 0) {
      const Fabric& was = discovered_->fabric;
      const Fabric& now = r.fabric;
      for (PortId p = 0; p < was.port_count(); ++p) {
        const Port& a = was.port(p);
        if (!a.connected() || a.peer < p) continue;
        const Port& b = was.port(a.peer);
        auto n = now.FindNode(was.node(a.node).guid);
        bool kept = false;
        if (n && a.num.value() <= now.node(*n).num_ports) {
          const Port& x = now.port(now.port_id(*n, a.num));
          kept = x.connected() && now.node(now.port(x.peer).node).guid == was.node(b.node).guid &&
                 now.port(x.peer).num == b.num;
        }
        if (!kept) NoteCableDown(was, p);
      }
    }
    TakeOutDampedCables(r);
    OnDiscovered(std::move(r));
  });
}

// A new sweep's context, numbered; the SMP counters it is measured against.
void SubnetManager::StartSweepStats(bool repair) {
  light_timer_.cancel();
  engine_.Begin(++sweep_number_, repair, repair ? "re-reads" : "");
  qos_pipeline_.set_held(repair);  // a repair's re-reads first (StageRows)
  current_.in_place_of_heavy = repair && repair_follows_cut_short_;
  lfts_.BeginSweep();
  if (!repair) repair_follows_cut_short_ = false, handed_over_.reset();
  sweep_.smps_at_start = pipeline_.counters().gets + pipeline_.counters().sets;
  sweep_.failed_at_start = pipeline_.counters().failed;
}

void SubnetManager::OnDiscovered(DiscoveryResult r) {
  if (stopped_) return;
  sweep_.issues += r.issues.size();
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
    JumpTo(Stage::kFinish);
    return;
  }
  sm_port_ = *sm_port;
  NextStage();
}

// The election comes before any write: other SMs' SMInfo, then DecideRole, which ends in
// HaContinueSweep (the next stage), standing by, or the end of the sweep.
void SubnetManager::Elect() { ha_.QueryOtherSms(); }

// --- partitions (OpenSM's order: P_Key tables before LIDs) ---------------------------

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

// SwitchInfo of every switch: no answer -> heavy sweep; a LinearFDBTop that is not ours (a
// reboot, or another SM wrote it) or PortStateChange set -> a repair sweep of those switches
// (sm/sweep/subnet_manager_repair.cc: it finds what a rebooted switch forgot and reads its
// neighbours behind the links that trained again). Costs one SMP per switch.
void SubnetManager::LightSweep() {
  if (!discovered_ || stopped_) return;
  ++counters_.light_sweeps;
  sa_.ExpireServices();  // leases run out even when nobody asks for ServiceRecords
  auto change = std::make_shared<std::string>();
  auto port_changes = std::make_shared<std::vector<Guid>>();
  const Fabric& f = discovered_->fabric;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    Guid g = f.node(n).guid;
    pipeline_.Get(discovered_->nodes[n].path, mad::attr::kSwitchInfo, 0,
                  [this, g, change, port_changes](Result<mad::Smp> r) {
                    if (!change->empty()) return;
                    if (!r.ok()) {
                      *change = fmt::format("switch {} did not answer", ToString(g));
                      return;
                    }
                    auto si = mad::Decode<mad::SwitchInfo>(r->data);
                    if (!si.ok()) return;
                    const uint16_t ours = lfts_.top(g).value_or(0);
                    if (si->linear_fdb_top != ours) {
                      Log(LogName::kSm).info("switch {} LinearFDBTop {} is not ours ({})",
                                             ToString(g), si->linear_fdb_top, ours);
                      port_changes->push_back(g);
                    } else if (si->port_state_change) {
                      port_changes->push_back(g);
                    }
                  });
  }
  ha_.CheckKnownSms(change);
  pipeline_.WhenIdle([this, change, port_changes] {
    if (stopped_) return;
    if (!change->empty()) {
      RequestHeavySweep(*change);
    } else if (!port_changes->empty()) {
      for (Guid g : *port_changes)
        RequestRepair(g, fmt::format("light sweep: switch {} changed", ToString(g)));
    } else {
      ScheduleLightSweep();
    }
  });
}

// --- what the SMInfo protocol asks of the sweeps (sm/sweep/ha_agent.h) -------------------

void SubnetManager::HaFence(bool fenced) {
  pipeline_.set_fenced(fenced);
  qos_pipeline_.set_fenced(fenced);
}

void SubnetManager::HaApplyActions(uint32_t actions, const std::string& why) {
  if (actions & ha::sm_action::kFence) {
    // Another SM writes the switches from now on: what we knew of them is stale.
    lfts_.ForgetAll();
    mft_.ForgetAll();
    qos_pipeline_.set_held(false);  // no repair of ours runs now
    light_timer_.cancel();
    sweeping_ = false;
    sweep_again_ = false;
  }
  if (actions & ha::sm_action::kFirstMasterSweep) {
    first_master_sweep_ = true;
    rereg_.BeginMastership();
  }
  if (actions & ha::sm_action::kHeavySweep) RequestHeavySweep(why);
}

void SubnetManager::HaStandby() {
  lfts_.ForgetAll();
  qos_pipeline_.set_held(false);
  sweeping_ = false;
  sweep_again_ = false;
  light_timer_.cancel();
  // The model of the discovery that found the master is the first warm model.
  warm_.reset();
  ScheduleStandbyRefresh();
}

void SubnetManager::HaContinueSweep(bool qos_reads) {
  if (qos_reads) qos_.StartReads();
  NextStage();
}

void SubnetManager::HaPublishOtherSms(std::vector<mad::SmInfoRecord> records) {
  sa_.SetOtherSms(std::move(records));
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
    ha_.AnswerSmInfo(req, msg);
  } else if (req.method == mad::method::kTrap && req.attr_id == mad::attr::kNotice) {
    traps_.HandleTrap(req, msg);
  } else {
    ++counters_.unsolicited_ignored;
  }
}

}  // namespace ibsm::sm
