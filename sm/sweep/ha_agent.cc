// The SMInfo protocol: answering SMInfo, the election, polling the master, handover and
// acknowledge, and the peers it knows (ARCHITECTURE.md section 2, "HA").
#include "sm/sweep/ha_agent.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/log.h"
#include "sm/record/control_answers.h"
#include "sm/answers/answers.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

bool PeerBeats(const mad::SmInfo& a, const mad::SmInfo& b) {
  return ha::IsBetterSm(a.priority, a.guid, b.priority, b.guid);
}

}  // namespace

HaAgent::HaAgent(boost::asio::io_context& io, mad::Transport& transport, SmpPipeline& pipeline,
                 const Clock& clock, ha::SmStateRows* store, ha::HistoryRows* events,
                 const SubnetManagerOptions& options, SmCounters& counters, Host& host)
    : transport_(transport),
      pipeline_(pipeline),
      clock_(clock),
      store_(store),
      events_(events),
      options_(options),
      counters_(counters),
      host_(host),
      poll_timer_(io) {}

void HaAgent::Stop() { poll_timer_.cancel(); }

mad::SmInfo HaAgent::OwnSmInfo(mad::SmState shown, bool with_key) const {
  mad::SmInfo info;
  info.guid = port_guid_.value();
  info.sm_key = with_key ? options_.sm_key: 0;
  info.act_count = act_count_;
  info.priority = options_.sm_priority;
  info.sm_state = shown;
  return info;
}

void HaAgent::AnswerSmInfo(const mad::Smp& req, const mad::MadMessage& msg) {
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
  host_.HaFence(state() != mad::SmState::kMaster);
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
    if (shown == mad::SmState::kMaster) host_.HaLeftMaster();
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

void HaAgent::SetSmState(ha::SmEvent event, const std::string& why) {
  mad::SmState before = state();
  ha::SmTransition t = fsm_.Handle(event);
  if (!t.legal) {
    Log(LogName::kHa).debug("event {} ignored in state {}", ha::SmEventName(event),
                            ha::SmStateName(before));
    return;
  }
  host_.HaFence(state() != mad::SmState::kMaster);
  if (state() == mad::SmState::kMaster && before != mad::SmState::kMaster) {
    ++act_count_;
    if (took_over_) ++counters_.takeovers;
  }
  if (before != state()) {
    Log(LogName::kSm).info("Entering {} state ({})", ha::SmStateName(state()), why);
    // Registrations a client was told about are in the file before another role begins
    // (a standby that takes over, or a master that hands over, may stop soon after).
    host_.HaFlushState();
    RecordStateChange(before, why);
    if (before == mad::SmState::kMaster) host_.HaLeftMaster();
  }
  if (before == mad::SmState::kStandby && state() == mad::SmState::kDiscovering) took_over_ = true;
  ApplyActions(t.actions, why);
}

void HaAgent::RecordStateChange(mad::SmState before, const std::string& why) {
  ++counters_.state_changes;
  Log(LogName::kHa).info("SM-HA-010 {} -> {}; HA counters: {}", ha::SmStateName(before),
                         ha::SmStateName(state()), HaCounterSummary(counters_));
  if (!store_) return;
  Status s = store_->SetValue("sm_state", ha::SmStateName(state()));
  ha::EventRow e;
  e.time_us = clock_.UnixMicros();
  e.kind = std::string(ha::kEventStateChange);
  e.node_guid = port_guid_;
  e.message = fmt::format("{} -> {}: {}", ha::SmStateName(before), ha::SmStateName(state()), why);
  if (s.ok() && events_) s = events_->RecordEvent(e);
  host_.HaNoteStateWrite("SM-STATE-010", s, "SM state");
}

void HaAgent::RecordPeer(const mad::SmInfo& info, bool key_match) {
  if (!store_) return;
  ha::PeerRow row;
  row.guid = Guid{info.guid};
  row.priority = info.priority;
  row.state = static_cast<uint8_t>(info.sm_state);
  row.last_seen_us = clock_.UnixMicros();
  row.sm_key_match = key_match;
  host_.HaNoteStateWrite("SM-STATE-007", store_->UpsertPeer(row), "peer SM");
}

void HaAgent::NotePeerAnswered(Guid guid) {
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

void HaAgent::NotePeerMissed(Guid guid, const std::string& why) {
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

void HaAgent::SavePeerLiveness() {
  if (!store_) return;
  host_.HaNoteStateWrite(
      "SM-STATE-007",
      store_->SetValue(kPeersNotAnsweringKey, PeersNotAnsweringJson(peer_liveness_).dump()),
      "peer SM");
}

nlohmann::json PeersNotAnsweringJson(const std::map<Guid, PeerLiveness>& peers) {
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

void HaAgent::ApplyActions(uint32_t actions, const std::string& why) {
  if (actions & ha::sm_action::kStopPolling) {
    poll_timer_.cancel();
    polled_.reset();
    poll_misses_ = 0;
  }
  host_.HaApplyActions(actions & ~uint32_t{ha::sm_action::kStopPolling}, why);
}

std::optional<DrPath> HaAgent::PathToPort(Guid port_guid) const {
  const DiscoveryResult* d = host_.HaDiscovered();
  if (!d) return std::nullopt;
  auto p = d->fabric.FindPort(port_guid);
  if (!p) return std::nullopt;
  return sm::PathToPort(d->fabric, d->nodes, *p);
}

// SMInfo Get to every port that claims IsSM (OpenSM: "SMInfo Get to ports with
// the IsSM capability bit"). Answers are judged in DecideRole once all are in.
void HaAgent::QueryOtherSms() {
  peers_.clear();
  if (options_.ignore_other_sm) {
    DecideRole();
    return;
  }
  const DiscoveryResult& d = *host_.HaDiscovered();
  const Fabric& f = d.fabric;
  for (PortId p: EndPorts(f)) {
    const Port& port = f.port(p);
    if (port.guid == port_guid_) continue;
    const DiscoveredNode& dn = d.nodes[port.node];
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
    if (!host_.HaStopped()) DecideRole();
  });
}

void HaAgent::PublishKnownSms() {
  std::vector<mad::SmInfoRecord> records;
  for (const auto& [g, p] : peers_) {
    mad::SmInfoRecord r;
    if (const DiscoveryResult* d = host_.HaDiscovered()) {
      if (auto port = d->fabric.FindPort(g)) r.lid = d->fabric.port(*port).lid.value();
    }
    r.sm_info = p.info;
    records.push_back(r);
  }
  host_.HaPublishOtherSms(std::move(records));
}

// Known SMs, as OpenSM's light sweep does: a better one that came up, or another master
// (two subnets joined), needs the heavy sweep that hands over.
void HaAgent::CheckKnownSms(const std::shared_ptr<std::string>& change) {
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
}

void HaAgent::DecideRole() {
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
    host_.HaContinueSweep(/*qos_reads=*/true);
    return;
  }
  if (state() == mad::SmState::kMaster) {
    if (handover_to) {
      SendHandover(*handover_to);
      return;
    }
    host_.HaContinueSweep(/*qos_reads=*/true);
    return;
  }
  // A Set made us NOTACTIVE or STANDBY meanwhile: this sweep ends without writing.
  host_.HaEndSweep();
}

// Pre-emption (and split brain): the better SM gets the subnet before we write again.
void HaAgent::SendHandover(const PeerSm& to) {
  Log(LogName::kHa).info("handing over to SM {} (priority {}, state {})", ToString(to.guid),
                         to.info.priority, ha::SmStateName(to.info.sm_state));
  std::array<uint8_t, 64> data{};
  mad::EncodeTo(OwnSmInfo(mad::SmState::kMaster, true), data);
  pipeline_.Set(to.path, mad::attr::kSmInfo, mad::sminfo_mod::kHandover, data,
                [this, to](Result<mad::Smp> r) {
                  if (host_.HaStopped() || state() != mad::SmState::kMaster) return;
                  if (!r.ok()) {
                    Log(LogName::kHa).warn("SM-HA-004 HANDOVER to SM {} failed: {}; staying "
                                           "MASTER",
                                           ToString(to.guid), r.status().ToString());
                    host_.HaContinueSweep(/*qos_reads=*/false);
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

void HaAgent::EnterStandby(const PeerSm& master) {
  polled_ = master;
  poll_misses_ = 0;
  poll_in_flight_ = false;
  host_.HaStandby();
  Log(LogName::kHa).info("polling master SM {} (priority {}) every {} ms, lost after {} misses",
                         ToString(master.guid), master.info.priority,
                         options_.sminfo_polling_timeout.count(), options_.polling_retry_number);
  SchedulePoll();
}

void HaAgent::SchedulePoll() {
  if (host_.HaStopped()) return;
  poll_timer_.expires_after(options_.sminfo_polling_timeout);
  poll_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Poll();
  });
}

void HaAgent::Poll() {
  if (host_.HaStopped() || state() != mad::SmState::kStandby || !polled_) return;
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
    if (host_.HaStopped() || state() != mad::SmState::kStandby || !polled_ || polled_->guid != g)
      return;
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
void HaAgent::SendTrap144(const PeerSm& master) {
  const DiscoveryResult* disc = host_.HaDiscovered();
  if (!disc) return;
  auto mp = disc->fabric.FindPort(master.guid);
  auto own = disc->fabric.FindPort(port_guid_);
  if (!mp || !own) return;
  uint16_t master_lid = disc->fabric.port(*mp).lid.value();
  auto local = transport_.QueryLocalPort();
  uint16_t my_lid = local.ok() ? local->lid.value(): 0;
  if (master_lid == 0 || my_lid == 0) return;
  mad::Trap144Details d;
  d.lid = my_lid;
  d.change_flags = mad::trap144_flag::kSmPriorityChange;
  const DiscoveredNode& dn = disc->nodes[disc->fabric.port(*own).node];
  uint8_t num = disc->fabric.port(*own).num.value();
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
void HaAgent::SendAcknowledge(Guid to) {
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

}  // namespace ibsm::sm
