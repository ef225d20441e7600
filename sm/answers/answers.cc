#include "sm/answers/answers.h"

#include <algorithm>

#include <fmt/format.h>

#include "ha/sm_state_machine.h"

namespace ibsm::sm {

using nlohmann::json;

std::string GuidText(Guid g) { return fmt::format("{:#018x}", g.value()); }

std::string_view KindName(NodeKind k) {
  switch (k) {
    case NodeKind::kCa: return "CA";
    case NodeKind::kSwitch: return "SW";
    case NodeKind::kRouter: return "RT";
  }
  return "?";
}

std::string DisplayName(const Node& n) {
  if (!n.name.empty()) return n.name;
  if (!n.description.empty()) return n.description;
  return fmt::format("{:#018x}", n.guid.value());
}

json EndJson(const Fabric& f, PortId p) {
  const Port& port = f.port(p);
  const Node& n = f.node(port.node);
  return json{{"guid", GuidText(n.guid)},
              {"name", DisplayName(n)},
              {"description", n.description},
              {"port", port.num.value()},
              {"lid", n.is_switch() ? f.port(n.first_port).lid.value() : port.lid.value()}};
}

bool LinkErrorsMoved(const json& link) {
  if (!link.is_object()) return false;
  auto errors = link.find("errors");
  if (errors == link.end() || !errors->is_object()) return false;
  for (const char* side : {"a", "b"}) {
    auto it = errors->find(side);
    if (it != errors->end() && it->is_object() && !it->empty()) return true;
  }
  return false;
}

Result<json> FilterLinks(json answer, bool only_degraded, bool only_errors) {
  if (only_errors && answer.value("perfmgr_sweep", json()).is_null())
    return Unavailable("the PerfMgr is off (perfmgr FALSE): no error counters are read");
  if (!only_degraded && !only_errors) return answer;
  json kept = json::array();
  for (json& l : answer["links"]) {
    if (only_degraded && !l.value("degraded", json(false)).is_string()) continue;
    if (only_errors && !LinkErrorsMoved(l)) continue;
    kept.push_back(std::move(l));
  }
  answer["links"] = std::move(kept);
  return answer;
}

json HealthSince(json answer, int64_t since_us) {
  json cables = json::array();
  for (json& c : answer.value("cables", json::array())) {
    json kept = json::array();
    for (json& f : c["findings"])
      if (!f.contains("last_seen_us") || f.value("last_seen_us", int64_t{0}) >= since_us)
        kept.push_back(std::move(f));
    if (kept.empty()) continue;
    c["findings"] = std::move(kept);
    cables.push_back(std::move(c));
  }
  answer["healthy"] = cables.empty();
  answer["cables"] = std::move(cables);
  return answer;
}

json EventJson(const ha::EventRow& e) {
  static constexpr const char* kSeverity[] = {"?", "info", "warning", "error", "critical"};
  auto sev = static_cast<size_t>(e.severity);
  json j{{"id", e.id},
         {"time_us", e.time_us},
         {"kind", e.kind},
         {"severity", sev < std::size(kSeverity) ? kSeverity[sev] : "?"},
         {"message", e.message}};
  if (e.node_guid) j["node_guid"] = GuidText(*e.node_guid);
  if (e.port_num) j["port"] = e.port_num->value();
  return j;
}

Result<json> HealthHistory(ha::HistoryRows& store, int64_t since_us, size_t limit) {
  IBSM_ASSIGN_OR_RETURN(std::vector<ha::EventRow> rows,
                        store.RecentEvents(limit, since_us, ha::kEventHealth));
  json history = json::array();
  for (const auto& e : rows) history.push_back(EventJson(e));
  return json{{"history", history}};
}

json PeersJson(const std::vector<ha::PeerRow>& rows, const json& not_answering) {
  json peers = json::array();
  for (const ha::PeerRow& p : rows) {
    const std::string state(ha::SmStateName(static_cast<mad::SmState>(std::min<uint8_t>(p.state, 3))));
    json j{{"guid", GuidText(p.guid)},
           {"priority", p.priority},
           {"state", state},
           {"last_seen_us", p.last_seen_us},
           {"sm_key_match", p.sm_key_match}};
    if (not_answering.is_object()) {
      auto it = not_answering.find(GuidText(p.guid));
      if (it != not_answering.end() && it->is_object()) {
        j["state"] = "NOT ANSWERING";
        j["last_state"] = state;
        j["not_answering_since_us"] = it->value("since_us", int64_t{0});
        j["missed"] = it->value("misses", uint64_t{0});
        j["why"] = it->value("why", std::string());
        j["last_seen_us"] = std::max(p.last_seen_us, it->value("last_answer_us", int64_t{0}));
      }
    }
    peers.push_back(std::move(j));
  }
  return peers;
}

}  // namespace ibsm::sm
