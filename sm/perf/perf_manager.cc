#include "sm/perf/perf_manager.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/log.h"
#include "mad/attr/class_port_info.h"
#include "sm/net/metrics_server.h"
#include "sm/perf/link_health.h"

namespace ibsm::sm {
namespace {

// PerfMgt ClassPortInfo CapabilityMask bits (IBA 16.1.2, table 231).
constexpr uint16_t kCapExtendedWidth = 1u << 9;        // IsExtendedWidthSupported
constexpr uint16_t kCapExtendedWidthNoIetf = 1u << 10; // IsExtendedWidthSupportedNoIETF
constexpr uint16_t kCapXmitWait = 1u << 12;            // IsPortXmitWaitSupported

constexpr size_t kErrorCounters = 12;  // kPerfCounterNames[0..11] are the error counters
constexpr size_t kXmitWait = 12;

std::string EndName(const Node& n) {
  if (!n.name.empty()) return n.name;
  if (!n.description.empty()) return n.description;
  return fmt::format("{:#018x}", n.guid.value());
}

PortEnd MakeEnd(const Fabric& f, PortId p) {
  const Port& port = f.port(p);
  const Node& n = f.node(port.node);
  PortEnd e;
  e.node_guid = n.guid;
  e.name = EndName(n);
  e.description = n.description;
  e.port = port.num;
  e.lid = n.is_switch() ? f.port(n.first_port).lid : port.lid;
  e.is_switch = n.is_switch();
  return e;
}

mad::MadMessage PerfMad(uint8_t method, uint16_t attr_id, Lid lid) {
  mad::MadMessage m;
  m.bytes.assign(mad::kMadSize, 0);
  mad::MadHeader h;
  h.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kPerfMgt);
  h.class_version = 1;
  h.method = method;
  h.attr_id = attr_id;
  mad::EncodeTo(h, m.bytes);
  m.addr.lid = lid;
  return m;
}

template <typename S>
mad::MadMessage PerfMad(uint8_t method, const S& body, Lid lid) {
  mad::MadMessage m = PerfMad(method, S::kAttrId, lid);
  mad::EncodeTo(body, std::span<uint8_t>(m.bytes).subspan(mad::kPerfDataOffset));
  return m;
}

// The answer's body, or why there is none.
template <typename S>
Result<S> Answer(const Result<mad::MadMessage>& r) {
  if (!r.ok()) return r.status();
  auto h = r->header();
  if (!h.ok()) return h.status();
  if (!h->is_response() || h->mgmt_class != static_cast<uint8_t>(mad::MgmtClass::kPerfMgt))
    return InvalidArgument("not a PerfMgt response");
  if ((h->status & 0x7FFF) != 0)
    return InvalidArgument(fmt::format("MAD status {:#06x}", h->status));
  if (r->bytes.size() < mad::kPerfDataOffset + mad::Layout<S>::kSize)
    return InvalidArgument("short answer");
  S out;
  IBSM_RETURN_IF_ERROR(
      mad::DecodeFrom(std::span<const uint8_t>(r->bytes).subspan(mad::kPerfDataOffset), &out));
  return out;
}

}  // namespace

const std::array<uint8_t, ha::kPerfCounterCount>& PortCountersWidths() {
  static constexpr std::array<uint8_t, ha::kPerfCounterCount> kWidths = {
      16, 8, 8, 16, 16, 16, 16, 8, 8, 4, 4, 16, 32, 32, 32, 32, 32};
  return kWidths;
}

PerfCounters FromPortCounters(const mad::PortCounters& pc) {
  return {pc.symbol_error_counter,
          pc.link_error_recovery_counter,
          pc.link_downed_counter,
          pc.port_rcv_errors,
          pc.port_rcv_remote_physical_errors,
          pc.port_rcv_switch_relay_errors,
          pc.port_xmit_discards,
          pc.port_xmit_constraint_errors,
          pc.port_rcv_constraint_errors,
          pc.local_link_integrity_errors,
          pc.excessive_buffer_overrun_errors,
          pc.vl15_dropped,
          pc.port_xmit_wait,
          pc.port_xmit_data,
          pc.port_rcv_data,
          pc.port_xmit_pkts,
          pc.port_rcv_pkts};
}

void TakeExtendedData(const mad::PortCountersExtended& x, PerfCounters* c) {
  (*c)[kPerfXmitData] = x.port_xmit_data;
  (*c)[kPerfXmitData + 1] = x.port_rcv_data;
  (*c)[kPerfXmitData + 2] = x.port_xmit_pkts;
  (*c)[kPerfXmitData + 3] = x.port_rcv_pkts;
}

PerfDelta ComputeDelta(const PerfCounters& before, const PerfCounters& now,
                       const std::array<uint8_t, ha::kPerfCounterCount>& widths) {
  PerfDelta d;
  bool reset = false;
  for (size_t i = 0; i < now.size(); ++i) {
    const uint64_t max = widths[i] >= 64 ? UINT64_MAX : (uint64_t{1} << widths[i]) - 1;
    if (now[i] < before[i]) reset = true;
    if (widths[i] < 64 && now[i] >= max) d.flags |= ha::kPerfFlagSaturated;
    // OpenSM's clearing point (osm_perfmgr.c counter_overflow_*): 3/4 of the maximum, 10
    // for the 4-bit counters.
    const uint64_t near = widths[i] == 4 ? 10 : max - max / 4;
    if (widths[i] < 64 && now[i] >= near) d.near_overflow = true;
  }
  if (reset) {
    // Counters never wrap (they saturate), so any counter going down means the port's
    // counters were reset since the last reading: count from zero.
    d.flags |= ha::kPerfFlagReset;
    d.delta = now;
    return d;
  }
  for (size_t i = 0; i < now.size(); ++i) d.delta[i] = now[i] - before[i];
  return d;
}

PerfManager::PerfManager(boost::asio::io_context& io, mad::Transport& transport,
                         const Clock& clock, ha::PerfRows* history, ha::HistoryRows* events,
                         PerfManagerOptions options)
    : io_(io),
      transport_(transport),
      clock_(clock),
      store_(history),
      events_(events),
      options_(std::move(options)),
      timer_(io) {
  if (options_.max_outstanding == 0) options_.max_outstanding = 1;
}

PerfManager::~PerfManager() { *alive_ = false; }

void PerfManager::Start() {
  started_ = true;
  stopped_ = false;
  if (store_) {
    // Sweep numbers continue across restarts so that retention by sweep stays right.
    if (auto last = store_->LastPerfSweep(); last.ok() && *last > 0)
      sweep_number_ = static_cast<uint64_t>(*last);
  }
  Log(LogName::kSm).info("PerfMgr enabled: every {} s, at most {} queries in flight",
                         options_.sweep_time.count(), options_.max_outstanding);
}

void PerfManager::OnSubnetUp() {
  if (!started_ || stopped_ || first_done_) return;
  first_done_ = true;
  SweepNow();
}

void PerfManager::SweepNow(std::function<void()> done) {
  if (done) waiters_.push_back(std::move(done));
  if (sweeping_) {
    again_ = true;
    return;
  }
  BeginSweep();
}

void PerfManager::Stop() {
  stopped_ = true;
  timer_.cancel();
  pending_ -= std::min(pending_, queue_.size());
  queue_.clear();
}

void PerfManager::Reconfigure(PerfManagerOptions options) {
  if (options.max_outstanding == 0) options.max_outstanding = 1;
  const bool new_period = options.sweep_time != options_.sweep_time;
  options_ = std::move(options);
  Log(LogName::kSm).info("PerfMgr settings re-read: every {} s, at most {} queries in flight",
                         options_.sweep_time.count(), options_.max_outstanding);
  if (new_period && first_done_ && !sweeping_) ScheduleNext();
}

void PerfManager::ScheduleNext() {
  if (!started_ || stopped_) return;
  timer_.expires_after(options_.sweep_time);
  timer_.async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive || stopped_) return;
    if (!sweeping_) BeginSweep();
  });
}

void PerfManager::BeginSweep() {
  timer_.cancel();
  const DiscoveryResult* d = model_.get();
  if (!d || stopped_) {
    Log(LogName::kSm).debug("PerfMgr sweep skipped: {}", stopped_ ? "stopped" : "no fabric (not master, or no sweep yet)");
    auto waiters = std::move(waiters_);
    waiters_.clear();
    for (auto& w : waiters) w();
    ScheduleNext();
    return;
  }
  sweeping_ = true;
  again_ = false;
  ++sweep_number_;
  ++counters_.sweeps;
  sweep_started_us_ = clock_.UnixMicros();
  sweep_timeouts_ = 0;
  sweep_ports_read_ = 0;
  findings_next_.clear();
  if (options_.thresholds.degraded_links) findings_next_ = DegradedLinkFindings(*d);

  // The targets, copied out of the discovery result: it may be replaced by the next heavy
  // sweep while the answers come in.
  const Fabric& f = d->fabric;
  std::map<Guid, std::vector<Target>> by_node;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    if (options_.ignore_cas && !node.is_switch()) continue;
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
      const Port& port = f.port(id);
      if (!port.connected()) continue;
      PortEnd end = MakeEnd(f, id);
      if (end.lid.value() == 0) continue;
      std::pair<Guid, uint8_t> key{node.guid, static_cast<uint8_t>(p)};
      PortPerf& pp = ports_[key];
      pp.end = end;
      pp.peer = MakeEnd(f, port.peer);
      by_node[node.guid].push_back({key, end.lid});
    }
  }
  // Ports no longer in the fabric are forgotten (OpenSM's perfmgr_rm_nodes): a port that
  // comes back starts from a fresh baseline.
  for (auto it = ports_.begin(); it != ports_.end();) {
    auto node = by_node.find(it->first.first);
    bool seen = node != by_node.end() &&
                std::any_of(node->second.begin(), node->second.end(),
                            [&](const Target& t) { return t.key == it->first; });
    it = seen ? std::next(it) : ports_.erase(it);
  }
  pending_ = 1;  // held until every node is queued
  for (auto& [guid, targets] : by_node) QueryNode(guid, std::move(targets));
  OpDone();
}

void PerfManager::QueryNode(Guid node, std::vector<Target> targets) {
  NodeCaps& caps = caps_[node];
  if (!options_.query_cpi) caps.known = true;
  if (caps.known) {
    for (const Target& t : targets) QueryPort(t, caps.extended);
    return;
  }
  Lid lid = targets.front().lid;
  Issue(PerfMad(mad::method::kGet, mad::attr::kClassPortInfo, lid),
        [this, node, targets = std::move(targets)](Result<mad::MadMessage> r) {
          auto cpi = Answer<mad::ClassPortInfo>(r);
          NodeCaps& caps = caps_[node];
          if (cpi.ok()) {
            caps.known = true;
            caps.extended =
                (cpi->capability_mask & (kCapExtendedWidth | kCapExtendedWidthNoIetf)) != 0;
            caps.xmit_wait = (cpi->capability_mask & kCapXmitWait) != 0;
          } else if (r.ok()) {
            // A PMA that does not answer ClassPortInfo still has PortCounters (mandatory).
            ++counters_.bad_answers;
            caps.known = true;
          } else if (r.status().code() == StatusCode::kTimeout) {
            // The node does not answer: its ports will each time out and be counted.
            ++counters_.timeouts;
            ++sweep_timeouts_;
          }
          for (const Target& t : targets) QueryPort(t, caps.extended);
        });
}

void PerfManager::QueryPort(const Target& t, bool extended) {
  mad::PortCounters req;
  req.port_select = t.key.second;
  Issue(PerfMad(mad::method::kGet, req, t.lid), [this, t, extended](Result<mad::MadMessage> r) {
    OnPortCounters(t, extended, std::move(r));
  });
}

void PerfManager::OnPortCounters(const Target& t, bool extended, Result<mad::MadMessage> r) {
  PortPerf& pp = ports_[t.key];
  auto pc = Answer<mad::PortCounters>(r);
  if (!pc.ok()) {
    if (!r.ok() && r.status().code() == StatusCode::kTimeout) {
      ++counters_.timeouts;
      ++sweep_timeouts_;
      ++pp.timeouts;
      Log(LogName::kSm).debug("SM-PERF-010 no PortCounters answer from {} port {} (LID {})",
                              pp.end.name, t.key.second, t.lid.value());
    } else {
      ++counters_.bad_answers;
      Log(LogName::kSm).debug("SM-PERF-011 PortCounters of {} port {}: {}", pp.end.name,
                              t.key.second, pc.status().ToString());
    }
    return;
  }
  PerfCounters reading = FromPortCounters(*pc);
  if (!extended) {
    Record(t, reading, false);
    return;
  }
  mad::PortCountersExtended req;
  req.port_select = t.key.second;
  Issue(PerfMad(mad::method::kGet, req, t.lid),
        [this, t, reading](Result<mad::MadMessage> r) { OnExtended(t, reading, std::move(r)); });
}

void PerfManager::OnExtended(const Target& t, PerfCounters reading, Result<mad::MadMessage> r) {
  auto x = Answer<mad::PortCountersExtended>(r);
  if (!x.ok()) {
    if (!r.ok() && r.status().code() == StatusCode::kTimeout) {
      ++counters_.timeouts;
      ++sweep_timeouts_;
    } else {
      ++counters_.bad_answers;
    }
    // The error counters of PortCounters are still good; the data counters then are the
    // 32-bit ones.
    Record(t, reading, false);
    return;
  }
  TakeExtendedData(*x, &reading);
  Record(t, reading, true);
}

void PerfManager::Record(const Target& t, const PerfCounters& reading, bool extended) {
  PortPerf& pp = ports_[t.key];
  ++sweep_ports_read_;
  auto widths = PortCountersWidths();
  if (extended)
    for (size_t i = kPerfXmitData; i < widths.size(); ++i) widths[i] = 64;
  pp.flags = 0;
  pp.delta = {};
  if (pp.last && pp.extended == extended) {
    PerfDelta d = ComputeDelta(*pp.last, reading, widths);
    pp.delta = d.delta;
    pp.flags = d.flags;
    if (d.flags & ha::kPerfFlagReset) {
      ++counters_.resets_seen;
      Log(LogName::kSm).info("SM-PERF-012 counters of {} ({:#018x}) port {} went down since the "
                             "last PerfMgr sweep (cleared or rebooted); counting from zero",
                             pp.end.name, t.key.first.value(), t.key.second);
    }
    if (d.near_overflow && options_.clear_near_overflow) ClearCounters(t, extended);
  }
  // The first reading (or one from another attribute) is the baseline: no deltas yet.
  pp.delta_sweep = sweep_number_;
  pp.last = reading;
  pp.extended = extended;
}

// PortCounters Set with CounterSelect (16.1.3.5): clears the error counters, and the 32-bit
// data counters when those are the ones we read (OpenSM: 0x0fff with 64-bit counters, else
// 0xffff; CounterSelect2 bit 0 for PortXmitWait).
void PerfManager::ClearCounters(const Target& t, bool extended) {
  mad::PortCounters req;
  req.port_select = t.key.second;
  req.counter_select = extended ? 0x0FFF : 0xFFFF;
  req.counter_select2 = caps_[t.key.first].xmit_wait ? 1 : 0;
  Issue(PerfMad(mad::method::kSet, req, t.lid), [this, t, req](Result<mad::MadMessage> r) {
    PortPerf& pp = ports_[t.key];
    auto answer = Answer<mad::PortCounters>(r);
    if (!answer.ok()) {
      ++counters_.bad_answers;
      Log(LogName::kSm).warn("SM-PERF-013 clearing the counters of {} port {} failed: {}",
                             pp.end.name, t.key.second, answer.status().ToString());
      return;
    }
    ++counters_.clears_sent;
    pp.flags |= ha::kPerfFlagCleared;
    if (pp.last) {
      for (size_t i = 0; i < kErrorCounters; ++i) (*pp.last)[i] = 0;
      if (req.counter_select2 & 1) (*pp.last)[kXmitWait] = 0;
      if (req.counter_select & mad::pc_select::kPortXmitData)
        for (size_t i = kPerfXmitData; i < pp.last->size(); ++i) (*pp.last)[i] = 0;
    }
    Log(LogName::kSm).info("SM-PERF-013 counters of {} ({:#018x}) port {} near their maximum: "
                           "cleared",
                           pp.end.name, t.key.first.value(), t.key.second);
  });
}

void PerfManager::Issue(mad::MadMessage msg, std::function<void(Result<mad::MadMessage>)> cb) {
  ++pending_;
  queue_.emplace_back(std::move(msg), std::move(cb));
  Pump();
}

void PerfManager::Pump() {
  while (!stopped_ && in_flight_ < options_.max_outstanding && !queue_.empty()) {
    auto [msg, cb] = std::move(queue_.front());
    queue_.pop_front();
    ++in_flight_;
    ++counters_.queries_sent;
    transport_.Send(std::move(msg), options_.send,
                    [this, alive = alive_, cb = std::move(cb)](Result<mad::MadMessage> r) {
                      if (!*alive) return;
                      --in_flight_;
                      if (!stopped_) cb(std::move(r));
                      OpDone();
                    });
  }
}

void PerfManager::OpDone() {
  if (pending_ > 0) --pending_;
  Pump();
  if (pending_ == 0 && sweeping_) FinishSweep();
}

namespace {

// Each cable discovery read both ends of whose link is degraded, once, as (end A's PortId,
// reason): end A is the end with the lower PortId.
template <typename Visit>
void EachDegradedLink(const DiscoveryResult& d, Visit&& visit) {
  for (PortId a = 0; a < d.fabric.port_count(); ++a) {
    if (!CableEnd(d.fabric, a)) continue;
    if (auto reason = DegradedCable(d.fabric, &d, a)) visit(a, *reason);
  }
}

HealthFinding DegradedFinding(const Fabric& f, PortId a, const std::string& reason) {
  HealthFinding h;
  h.rule = HealthRule::kDegradedLink;
  h.port = MakeEnd(f, a);
  h.peer = MakeEnd(f, f.port(a).peer);
  h.threshold = 1;
  h.detail = reason;
  return h;
}

}  // namespace

bool CableEnd(const Fabric& f, PortId a) {
  const Port& pa = f.port(a);
  return pa.connected() && pa.num.value() != 0 && pa.peer > a;
}

std::optional<std::string> DegradedCable(const Fabric& f, const DiscoveryResult* d, PortId a) {
  auto info = [&](PortId p) -> const mad::PortInfo* {
    const Port& port = f.port(p);
    if (!d || port.node >= d->nodes.size()) return nullptr;
    return d->nodes[port.node].known_port_info(port.num.value());
  };
  const mad::PortInfo* ia = info(a);
  const mad::PortInfo* ib = info(f.port(a).peer);
  if (!ia || !ib) return std::nullopt;
  return DegradedReason(*ia, *ib);
}

std::vector<HealthFinding> DegradedLinkFindings(const DiscoveryResult& d) {
  // Counted first so the findings are allocated once (every cable on ibsim: 24,576 at
  // 3-tier k=32).
  size_t count = 0;
  EachDegradedLink(d, [&](PortId, const std::string&) { ++count; });
  std::vector<HealthFinding> out;
  out.reserve(count);
  EachDegradedLink(d, [&](PortId a, const std::string& reason) {
    out.push_back(DegradedFinding(d.fabric, a, reason));
  });
  return out;
}

void ForEachDegradedCable(const DiscoveryResult& d,
                          const std::function<void(const CableHealth&)>& visit) {
  const Fabric& f = d.fabric;
  // One finding per cable, all of score 1: ForEachCable's order is the cables' order by
  // (lower end, higher end), each end as (node GUID, port).
  auto end_key = [&](PortId p) {
    return std::make_pair(f.node(f.port(p).node).guid.value(), f.port(p).num.value());
  };
  auto cable_key = [&](PortId a) {
    auto x = end_key(a), y = end_key(f.port(a).peer);
    return x < y ? std::make_pair(x, y) : std::make_pair(y, x);
  };
  std::vector<PortId> cables;
  EachDegradedLink(d, [&](PortId a, const std::string&) { cables.push_back(a); });
  std::stable_sort(cables.begin(), cables.end(),
                   [&](PortId x, PortId y) { return cable_key(x) < cable_key(y); });
  for (PortId a : cables) {
    PortId b = f.port(a).peer;
    CableHealth c;
    c.findings.push_back(DegradedFinding(f, a, DegradedCable(f, &d, a).value_or("")));
    const HealthFinding& h = c.findings.front();
    bool swap = end_key(b) < end_key(a);
    c.a = swap ? *h.peer : h.port;
    c.b = swap ? h.port : *h.peer;
    c.score = h.score();
    visit(c);
  }
}

void PerfManager::FinishSweep() {
  sweeping_ = false;
  std::vector<HealthFinding> findings = std::move(findings_next_);
  findings_next_.clear();
  std::vector<ha::PerfHistoryRow> rows;
  for (const auto& [key, pp] : ports_) {
    if (pp.delta_sweep != sweep_number_) continue;
    bool moved = pp.flags != 0;
    for (uint64_t v : pp.delta) moved = moved || v != 0;
    if (moved) {
      ha::PerfHistoryRow row;
      row.sweep = static_cast<int64_t>(sweep_number_);
      row.time_us = sweep_started_us_;
      row.node_guid = key.first;
      row.port_num = PortNum{key.second};
      row.flags = pp.flags;
      row.deltas = pp.delta;
      rows.push_back(row);
    }
    for (size_t r = 0; r < kHealthRuleCount; ++r) {
      const HealthRuleInfo& info = RuleInfo(static_cast<HealthRule>(r));
      if (info.counter < 0) continue;
      const uint64_t threshold = options_.thresholds.For(info.rule);
      const uint64_t delta = pp.delta[static_cast<size_t>(info.counter)];
      if (threshold == 0 || delta < threshold) continue;
      HealthFinding h;
      h.rule = info.rule;
      h.port = pp.end;
      h.peer = pp.peer;
      h.delta = delta;
      h.value = pp.last ? (*pp.last)[static_cast<size_t>(info.counter)] : 0;
      h.threshold = threshold;
      findings.push_back(std::move(h));
    }
  }
  // A finding the last sweep reported too (same port, same rule) is the same fault going
  // on: logged again, but not a new event.
  std::set<std::tuple<uint64_t, uint8_t, HealthRule>> before;
  for (const HealthFinding& h : findings_)
    before.emplace(h.port.node_guid.value(), h.port.port.value(), h.rule);
  std::vector<ha::EventRow> events;
  // Degraded links hold on many cables at once (on ibsim every cable): past a few, one
  // summary line and at most one event per sweep, and `ibsmctl links --degraded` has the
  // list (README "Logs", SM-PERF-007).
  const size_t degraded = static_cast<size_t>(
      std::count_if(findings.begin(), findings.end(),
                    [](const HealthFinding& h) { return h.rule == HealthRule::kDegradedLink; }));
  const bool summarise = degraded > kDegradedLinksLoggedOneByOne;
  size_t degraded_new = 0;
  std::string degraded_first;
  for (const HealthFinding& h : findings) {
    ++counters_.findings_by_rule[static_cast<size_t>(h.rule)];
    const bool seen = before.contains({h.port.node_guid.value(), h.port.port.value(), h.rule});
    if (summarise && h.rule == HealthRule::kDegradedLink) {
      if (degraded_first.empty()) degraded_first = h.Message();
      degraded_new += !seen;
      continue;
    }
    std::string msg = h.Message();
    Log(LogName::kSm).warn("{}", msg);
    if (seen) continue;
    ha::EventRow e;
    e.time_us = clock_.UnixMicros();
    e.kind = std::string(ha::kEventHealth);
    e.severity = ha::EventSeverity::kWarning;
    e.node_guid = h.port.node_guid;
    e.port_num = h.port.port;
    e.message = std::move(msg);
    events.push_back(std::move(e));
  }
  if (summarise) {
    const std::string msg = fmt::format(
        "SM-PERF-007 {} cables run below what both ends support ({} new since the last PerfMgr "
        "sweep; `ibsmctl links --degraded` lists them; health_degraded_links FALSE turns the "
        "rule off); the first: {}",
        degraded, degraded_new, degraded_first.substr(degraded_first.find(' ') + 1));
    Log(LogName::kSm).warn("{}", msg);
    if (degraded_new > 0) {
      ha::EventRow e;
      e.time_us = clock_.UnixMicros();
      e.kind = std::string(ha::kEventHealth);
      e.severity = ha::EventSeverity::kWarning;
      e.message = msg;
      events.push_back(std::move(e));
    }
  }
  const size_t moving = rows.size();
  if (store_ || events_) {
    // Counted and logged where the counters live (the io thread).
    auto note = [this, alive = alive_, sweep = sweep_number_](const Status& st) {
      if (!*alive || st.ok()) return;
      ++counters_.history_errors;
      Log(LogName::kSm).warn("SM-PERF-014 PerfMgr sweep {} not stored: {}", sweep,
                             st.ToString());
    };
    auto write = [store = store_, event_store = events_, keep = options_.history_sweeps,
                  rows = std::move(rows), events = std::move(events)]() {
      Status st = rows.empty() || !store ? Status() : store->RecordPerfHistory(rows, keep);
      if (st.ok() && !events.empty() && event_store) st = event_store->RecordEvents(events);
      return st;
    };
    if (!store_runner_) {
      note(write());
    } else {
      store_runner_([write = std::move(write), note = std::move(note), &io = io_]() {
        Status st = write();
        if (!st.ok()) boost::asio::post(io, [note, st] { note(st); });
      });
    }
  }
  findings_ = std::move(findings);
  UpdateWindow();
  last_end_us_ = clock_.UnixMicros();
  Log(LogName::kSm).info("PerfMgr sweep {} done: {} ports read, {} without an answer, {} with "
                         "moving counters, {} health findings",
                         sweep_number_, sweep_ports_read_, sweep_timeouts_, moving,
                         findings_.size());
  if (on_sweep_) on_sweep_();
  auto waiters = std::move(waiters_);
  waiters_.clear();
  if (again_ && !stopped_) {
    again_ = false;
    waiters_ = std::move(waiters);
    BeginSweep();
    return;
  }
  ScheduleNext();
  for (auto& w : waiters) w();
}

PerfCounters PortPerf::WindowErrors() const {
  PerfCounters sum{};
  for (const auto& [when, d] : error_window)
    for (size_t i = 0; i < kPerfErrorCounters; ++i) sum[i] += d[i];
  return sum;
}

// The sweep's findings merged into the window (same port and rule: one finding), then
// what the window no longer covers dropped: findings last seen, and error counts of sweeps
// started, more than health_window before this sweep began; findings of a rule now off.
void PerfManager::UpdateWindow() {
  const int64_t now = sweep_started_us_;
  const int64_t oldest =
      now - std::chrono::duration_cast<std::chrono::microseconds>(options_.health_window).count();
  using Key = std::tuple<uint64_t, uint8_t, HealthRule>;
  std::map<Key, size_t> at;
  std::vector<HealthFinding> window;
  for (HealthFinding& w : window_findings_) {
    if (w.last_seen_us < oldest || options_.thresholds.For(w.rule) == 0) continue;
    at[{w.port.node_guid.value(), w.port.port.value(), w.rule}] = window.size();
    window.push_back(std::move(w));
  }
  for (const HealthFinding& h : findings_) {
    auto [it, fresh] = at.try_emplace({h.port.node_guid.value(), h.port.port.value(), h.rule},
                                      window.size());
    if (fresh) {
      window.push_back(h);
      window.back().first_seen_us = now;
      window.back().sweeps = 0;
      window.back().total_delta = 0;
    }
    HealthFinding& w = window[it->second];
    const int64_t first = w.first_seen_us;
    const uint64_t sweeps = w.sweeps, total = w.total_delta;
    w = h;
    w.first_seen_us = first;
    w.last_seen_us = now;
    w.sweeps = sweeps + 1;
    w.total_delta = total + h.delta;
  }
  window_findings_ = std::move(window);
  for (auto& [key, pp] : ports_) {
    while (!pp.error_window.empty() && pp.error_window.front().first < oldest)
      pp.error_window.pop_front();
    if (pp.delta_sweep != sweep_number_) continue;
    bool moved = false;
    for (size_t i = 0; i < kPerfErrorCounters; ++i) moved = moved || pp.delta[i] != 0;
    if (moved) pp.error_window.emplace_back(now, pp.delta);
  }
}

std::string RenderPerfMetrics(const PerfManager& pm) {
  MetricsText m;
  using L = MetricsText;
  const PerfCountersStats& c = pm.counters();
  m.Family("ibsm_perfmgr_sweeps_total", "counter", "PerfMgr sweeps run");
  m.Sample(c.sweeps);
  m.Family("ibsm_perfmgr_ports", "gauge", "ports the PerfMgr polls");
  m.Sample(uint64_t{pm.ports().size()});
  m.Family("ibsm_perfmgr_queries_total", "counter", "PerfMgt queries sent (Gets and clears)");
  m.Sample(c.queries_sent);
  m.Family("ibsm_perfmgr_timeouts_total", "counter", "PerfMgt queries with no answer");
  m.Sample(c.timeouts);
  m.Family("ibsm_perfmgr_bad_answers_total", "counter",
           "PerfMgt answers with an error status or that did not decode");
  m.Sample(c.bad_answers);
  m.Family("ibsm_perfmgr_counter_resets_total", "counter",
           "ports whose counters went down between sweeps (cleared elsewhere, rebooted)");
  m.Sample(c.resets_seen);
  m.Family("ibsm_perfmgr_counter_clears_total", "counter",
           "PortCounters cleared by the PerfMgr near their maximum");
  m.Sample(c.clears_sent);
  std::array<uint64_t, kHealthRuleCount> now{};
  for (const HealthFinding& h : pm.findings()) ++now[static_cast<size_t>(h.rule)];
  m.Family("ibsm_health_findings_total", "counter", "health findings, by kind");
  for (size_t r = 0; r < kHealthRuleCount; ++r)
    m.Sample(c.findings_by_rule[r],
             L::Labels({{"kind", std::string(RuleInfo(static_cast<HealthRule>(r)).name)}}));
  m.Family("ibsm_health_findings", "gauge", "health findings of the last PerfMgr sweep, by kind");
  for (size_t r = 0; r < kHealthRuleCount; ++r)
    m.Sample(now[r], L::Labels({{"kind", std::string(RuleInfo(static_cast<HealthRule>(r)).name)}}));
  return m.text();
}

}  // namespace ibsm::sm
