#include "sm/ctl/sm_metrics.h"

#include <map>

#include <fmt/format.h>

#include "ha/sm_state_machine.h"
#include "mad/attr/registry.h"
#include "mad/mad.h"
#include "sm/net/control_server.h"
#include "sm/net/metrics_server.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

// One counter family per run of rows with the same `family`, one sample per row (labelled
// when the row names a label); rows without a family are left out. For the counter tables
// of one shape: kSmCounterRows, kPipelineCounterRows.
template <typename Row, size_t N, typename Counters>
void CounterRows(MetricsText& m, const Row (&rows)[N], const Counters& c) {
  std::string_view family;
  for (const Row& row : rows) {
    if (row.family.empty()) continue;
    if (row.family != family) {
      family = row.family;
      m.Family(std::string(row.family), "counter", std::string(row.help));
    }
    if (row.label_name.empty()) {
      m.Sample(c.*row.member);
    } else {
      m.Sample(c.*row.member,
               MetricsText::Labels({{std::string(row.label_name), std::string(row.label_value)}}));
    }
  }
}

// The help line of each server counter family (the rows name the family, not its help).
std::string_view FamilyHelp(std::string_view family) {
  if (family == "ibsm_control_requests_total") return "control socket requests, by outcome";
  if (family == "ibsm_control_connections_total") return "control socket connections, by outcome";
  if (family == "ibsm_metrics_requests_total") return "metrics HTTP requests, by outcome";
  return "metrics connections not served, by outcome";
}

}  // namespace

std::string RenderSmMetrics(const SubnetManager& sm, const ControlServer* control,
                            const MetricsServerCounters* metrics) {
  MetricsText m;
  using L = MetricsText;
  m.Family("ibsm_sm_state", "gauge", "1 for the SM's current state (SMInfo.SMState)");
  for (auto s : {mad::SmState::kNotActive, mad::SmState::kDiscovering, mad::SmState::kStandby,
                 mad::SmState::kMaster})
    m.Sample(uint64_t{sm.state() == s ? 1u : 0u},
             L::Labels({{"state", std::string(ha::SmStateName(s))}}));
  m.Family("ibsm_sm_priority", "gauge", "SMInfo priority of this SM");
  m.Sample(uint64_t{sm.options().sm_priority});
  const SweepStats& last = sm.last_sweep();
  m.Family("ibsm_subnet_up", "gauge", "1 when the last heavy sweep brought the subnet up");
  m.Sample(uint64_t{last.subnet_up ? 1u : 0u});

  const SmCounters& c = sm.counters();
  CounterRows(m, kSmCounterRows, c);  // every SmCounters field, as kSmCounterRows names it
  if (last.number > 0) {
    m.Family("ibsm_last_sweep_duration_seconds", "gauge", "duration of the last heavy sweep");
    m.Sample(std::chrono::duration<double>(last.duration).count());
    m.Family("ibsm_last_sweep_smps", "gauge", "SMPs the last heavy sweep sent");
    m.Sample(last.smps);
    m.Family("ibsm_last_sweep_lft_blocks_sent", "gauge", "LFT blocks the last heavy sweep set");
    m.Sample(last.lft_blocks_sent);
  }
  CounterRows(m, kPipelineCounterRows, sm.smp_counters());

  // The MAD transport every sender shares (README "MAD transport: backpressure").
  const mad::TransportCounters& t = sm.transport_counters();
  m.Family("ibsm_mad_transport_total", "counter", "MAD transport events, by event");
  for (const mad::TransportCounterRow& row : mad::kTransportCounterRows)
    if (!row.gauge) m.Sample(t.*row.member, L::Labels({{"event", std::string(row.metric)}}));
  for (const mad::TransportCounterRow& row : mad::kTransportCounterRows) {
    if (!row.gauge) continue;
    m.Family(std::string(row.metric), "gauge", std::string(row.help));
    m.Sample(t.*row.member);
  }

  // The fabric as the SM last published it (a standby: its latest refresh), as `ibsmctl
  // nodes`.
  const std::shared_ptr<const SubnetSnapshot> published = sm.published();
  if (const Fabric* f = published && published->discovery ? &published->fabric() : nullptr) {
    m.Family("ibsm_nodes", "gauge", "nodes in the fabric, by kind");
    m.Sample(uint64_t{f->switch_count()}, L::Labels({{"kind", "switch"}}));
    m.Sample(uint64_t{f->ca_count()}, L::Labels({{"kind", "ca"}}));
    m.Family("ibsm_links", "gauge", "cables in the fabric");
    m.Sample(uint64_t{f->link_count()});
    static constexpr const char* kStates[] = {"nochange", "down", "init", "armed", "active"};
    std::map<std::string, uint64_t> by_state;
    for (auto s : kStates) by_state[s] = 0;
    for (PortId id = 0; id < f->port_count(); ++id) {
      const Port& port = f->port(id);
      if (port.num.value() == 0 || !port.connected()) continue;
      auto s = static_cast<size_t>(port.state);
      if (s < std::size(kStates)) ++by_state[kStates[s]];
    }
    m.Family("ibsm_ports", "gauge", "cabled ports, by port state");
    for (const auto& [state, n] : by_state) m.Sample(n, L::Labels({{"state", state}}));
  }

  m.Family("ibsm_issues_total", "counter", "problems a sweep reported and went on past, by log ID");
  for (const auto& [id, n] : c.issues_by_id) m.Sample(n, L::Labels({{"id", id}}));

  const SaCounters& sa = sm.sa().counters();
  m.Family("ibsm_sa_requests_total", "counter", "SA requests, by attribute");
  for (const auto& [attr, n] : sa.by_attribute) {
    std::string name(mad::AttributeName(static_cast<uint8_t>(mad::MgmtClass::kSubnAdm), attr));
    m.Sample(n, L::Labels({{"attribute", name.empty() ? fmt::format("{:#06x}", attr) : name}}));
  }
  m.Family("ibsm_sa_errors_total", "counter", "SA answers with a non-zero status, by status");
  for (const auto& [status, n] : sa.by_error)
    m.Sample(n, L::Labels({{"status", fmt::format("{:#06x}", status)}}));
  for (const SaCounterRow& row : kSaCounterRows) {
    if (row.family.empty()) continue;
    m.Family(std::string(row.family), "counter", std::string(row.help));
    m.Sample(sa.*row.member);
  }


  if (auto ar = sm.ar().snapshot()) {
    size_t capable = 0, enabled = 0;
    for (const ArSwitchStatus& sw : ar->switches) {
      capable += sw.capable;
      enabled += sw.enabled;
    }
    m.Family("ibsm_ar_switches", "gauge", "switches by adaptive-routing state");
    m.Sample(ar->switches.size(), L::Labels({{"state", "all"}}));
    m.Sample(capable, L::Labels({{"state", "capable"}}));
    m.Sample(enabled, L::Labels({{"state", "enabled"}}));
  }
  if (const SharpSummary& sh = sm.sharp().summary(); sh.ran) {
    size_t programmed = 0;
    for (const SharpTreeSummary& t : sh.trees) programmed += t.programmed;
    m.Family("ibsm_sharp_trees", "gauge", "SHARP reduction trees, built and programmed");
    m.Sample(sh.trees.size(), L::Labels({{"state", "built"}}));
    m.Sample(programmed, L::Labels({{"state", "programmed"}}));
    m.Family("ibsm_sharp_hosts_uncovered", "gauge", "hosts in no SHARP tree");
    m.Sample(sh.never_covered.size());
  }

  // The two servers' own counters, from their tables (sm/net/control_server.h,
  // sm/net/metrics_server.h): a family's header before its first row.
  auto server_rows = [&](const auto& rows, const auto& counters) {
    std::string_view family;
    for (const auto& row : rows) {
      if (row.family != family) {
        family = row.family;
        m.Family(std::string(family), "counter", std::string(FamilyHelp(family)));
      }
      m.Sample(row.get(counters), L::Labels({{"outcome", std::string(row.outcome)}}));
    }
  };
  if (control) server_rows(kControlCounterRows, control->counters());
  if (metrics) server_rows(kMetricsServerCounterRows, *metrics);
  return m.text();
}

}  // namespace ibsm::sm
