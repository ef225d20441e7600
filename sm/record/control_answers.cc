#include "sm/record/control_answers.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "base/json.h"
#include "sm/answers/health.h"
#include "sm/perf/link_health.h"
#include "sm/perf/perf_manager.h"

namespace ibsm::sm {

using nlohmann::json;

namespace {

// One node of the `nodes` answer.
json NodeJson(const Fabric& f, NodeId n) {
  const Node& node = f.node(n);
  json lids = json::array();
  uint32_t cabled = 0;
  for (uint32_t p = node.is_switch() ? 0 : 1; p <= node.num_ports; ++p) {
    const Port& port = f.port(n, PortNum{static_cast<uint8_t>(p)});
    if (p > 0 && port.connected()) ++cabled;
    if ((node.is_switch() && p == 0) || (!node.is_switch() && port.lid.value() != 0))
      lids.push_back(port.lid.value());
  }
  return json{{"guid", GuidText(node.guid)},
              {"name", DisplayName(node)},
              {"description", node.description},
              {"kind", KindName(node.kind)},
              {"lids", lids},
              {"ports", node.num_ports},
              {"cabled_ports", cabled},
              {"vendor_id", node.vendor_id},
              {"device_id", node.device_id}};
}

// Calls `each` with every cable of the `links` answer once; returns how many are degraded.
template <typename Each>
size_t ForEachLinkJson(const Fabric& f, const DiscoveryResult* d, const PerfView* perf,
                       Each each) {
  // Error counters (kPerfCounterNames[0..11]) that moved at a port within the health window
  // (PerfManagerOptions::health_window), summed over its PerfMgr sweeps.
  auto errors_at = [&](PortId p) -> json {
    if (!perf) return json();
    const Port& port = f.port(p);
    auto it = perf->window_errors.find({f.node(port.node).guid, port.num.value()});
    if (it == perf->window_errors.end()) return json::object();
    const PerfCounters& sum = it->second;
    json e = json::object();
    for (size_t i = 0; i < kPerfErrorCounters; ++i)
      if (sum[i] != 0) e[std::string(ha::kPerfCounterNames[i])] = sum[i];
    return e;
  };
  static constexpr const char* kStates[] = {"NOCHANGE", "DOWN", "INIT", "ARMED", "ACTIVE"};
  size_t degraded = 0;
  for (PortId a = 0; a < f.port_count(); ++a) {
    if (!CableEnd(f, a)) continue;
    const Port& pa = f.port(a);
    const std::optional<std::string> reason = DegradedCable(f, d, a);
    if (reason) ++degraded;
    auto state = static_cast<size_t>(pa.state);
    each(json{{"a", EndJson(f, a)},
              {"b", EndJson(f, pa.peer)},
              {"width", std::string(LinkWidthName(pa.width))},
              {"speed", std::string(LinkSpeedName(pa.speed))},
              {"state", state < std::size(kStates) ? kStates[state] : "?"},
              {"degraded", reason ? json(*reason) : json(false)},
              {"errors", perf ? json{{"a", errors_at(a)}, {"b", errors_at(pa.peer)}} : json()}});
  }
  return degraded;
}

}  // namespace

std::shared_ptr<const PerfView> ViewOfPerf(const PerfManager* perf) {
  if (!perf) return nullptr;
  auto v = std::make_shared<PerfView>();
  v->sweep_number = perf->sweep_number();
  for (const auto& [key, pp] : perf->ports())
    if (!pp.error_window.empty()) v->window_errors.emplace(key, pp.WindowErrors());
  v->window_findings = perf->window_findings();
  v->perfmgr = HealthPerfmgrJson(perf);
  v->perfmgr.erase("last_sweep_age_s");
  if (perf->last_sweep_end_us()) v->perfmgr["last_sweep_end_us"] = *perf->last_sweep_end_us();
  return v;
}

json NodesAnswer(const Fabric& f) {
  json nodes = json::array();
  for (NodeId n = 0; n < f.node_count(); ++n) nodes.push_back(NodeJson(f, n));
  return json{{"nodes", nodes}};
}

// nlohmann::json orders an object's keys, so {"nodes": [...]} dumps as its array's elements
// in order between the fixed ends; one node at a time keeps only one node's tree alive.
void StreamNodesAnswer(const Fabric& f, const AnswerSink& sink) {
  sink("{\"nodes\":[");
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (n > 0) sink(",");
    sink(DumpJson(NodeJson(f, n)));
  }
  sink("]}");
}

json LinksAnswer(const Fabric& f, const DiscoveryResult* d, const PerfManager* perf) {
  return LinksAnswerOfView(f, d, ViewOfPerf(perf).get());
}

json LinksAnswerOfView(const Fabric& f, const DiscoveryResult* d, const PerfView* perf) {
  json links = json::array();
  const size_t degraded =
      ForEachLinkJson(f, d, perf, [&](json link) { links.push_back(std::move(link)); });
  return json{{"links", links},
              {"degraded", degraded},
              {"perfmgr_sweep", perf ? json(perf->sweep_number) : json()}};
}

void StreamLinksAnswer(const Fabric& f, const DiscoveryResult* d, const PerfView* perf,
                       bool with_sweep, const AnswerSink& sink) {
  // Keys in order: degraded, links, perfmgr_sweep. The count comes first, so a light pass
  // counts; then the cables go out one by one.
  size_t degraded = 0;
  for (PortId a = 0; a < f.port_count(); ++a)
    if (CableEnd(f, a) && DegradedCable(f, d, a)) ++degraded;
  sink("{\"degraded\":" + std::to_string(degraded) + ",\"links\":[");
  bool first = true;
  ForEachLinkJson(f, d, perf, [&](const json& link) {
    if (!first) sink(",");
    first = false;
    sink(DumpJson(link));
  });
  sink("]");
  if (with_sweep)
    sink(std::string(kLinksSweepPiece) + (perf ? std::to_string(perf->sweep_number) : "null"));
  sink("}");
}

json HealthPerfmgrJson(const PerfManager* perf) {
  json pj;
  if (perf) {
    const PerfManager& pm = *perf;
    const PerfCountersStats& c = pm.counters();
    json by_rule = json::object();
    for (size_t r = 0; r < kHealthRuleCount; ++r)
      by_rule[std::string(RuleInfo(static_cast<HealthRule>(r)).name)] = c.findings_by_rule[r];
    pj = {{"enabled", true},
          {"sweep", pm.sweep_number()},
          {"window_s", pm.options().health_window.count()},
          {"sweep_time_s", pm.options().sweep_time.count()},
          {"ports", pm.ports().size()},
          {"counters",
           {{"sweeps", c.sweeps},
            {"queries_sent", c.queries_sent},
            {"timeouts", c.timeouts},
            {"bad_answers", c.bad_answers},
            {"resets_seen", c.resets_seen},
            {"clears_sent", c.clears_sent},
            {"history_errors", c.history_errors}}},
          {"findings_by_rule", by_rule}};
    if (auto end = pm.last_sweep_end_us())
      pj["last_sweep_age_s"] = static_cast<double>(pm.clock().UnixMicros() - *end) / 1e6;
  } else {
    pj = {{"enabled", false}};
  }
  return pj;
}

namespace {
// The cables `health` reports: those of the PerfMgr's health window (`findings`, not
// copied), or without the PerfMgr the degraded links.
void ForEachHealthCable(const DiscoveryResult* d, const std::vector<HealthFinding>* findings,
                        const std::function<void(const CableHealth&)>& visit) {
  if (findings) return ForEachCable(*findings, visit);
  if (d) ForEachDegradedCable(*d, visit);
}
}  // namespace

json HealthAnswer(const DiscoveryResult* d, const PerfManager* perf, int64_t since_us) {
  json cables = json::array();
  if (perf && since_us > 0) {
    std::vector<HealthFinding> kept;
    for (const HealthFinding& h : perf->window_findings())
      if (h.last_seen_us >= since_us) kept.push_back(h);
    ForEachCable(kept, [&](const CableHealth& c) { cables.push_back(CableHealthJson(c)); });
  } else {
    ForEachHealthCable(d, perf ? &perf->window_findings() : nullptr,
                       [&](const CableHealth& c) { cables.push_back(CableHealthJson(c)); });
  }
  return json{{"perfmgr", HealthPerfmgrJson(perf)}, {"healthy", cables.empty()}, {"cables", cables}};
}

void StreamHealthAnswer(const DiscoveryResult* d, const PerfView* perf, const AnswerSink& sink) {
  // Keys in order: cables, healthy, perfmgr.
  sink("{\"cables\":[");
  bool any = false;
  ForEachHealthCable(d, perf ? &perf->window_findings : nullptr, [&](const CableHealth& c) {
    if (any) sink(",");
    sink(DumpJson(CableHealthJson(c)));
    any = true;
  });
  sink(any ? "],\"healthy\":false,\"perfmgr\":" : "],\"healthy\":true,\"perfmgr\":");
  sink(perf ? DumpJson(perf->perfmgr) : DumpJson(HealthPerfmgrJson(nullptr)));
  sink("}");
}

}  // namespace ibsm::sm
