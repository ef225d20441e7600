#include "sm/answers/health.h"

#include <algorithm>
#include <array>
#include <functional>

#include <fmt/format.h>

namespace ibsm::sm {
namespace {

// Counter indexes are those of ha::kPerfCounterNames (FROZEN there).
constexpr std::array<HealthRuleInfo, kHealthRuleCount> kRules = {{
    {HealthRule::kSymbolErrors, "symbol_errors", "SM-PERF-001", "symbol errors", 0},
    {HealthRule::kLinkErrorRecovery, "link_error_recovery", "SM-PERF-002",
     "link error recoveries", 1},
    {HealthRule::kLinkDowned, "link_downed", "SM-PERF-003", "link downed", 2},
    {HealthRule::kPortRcvErrors, "port_rcv_errors", "SM-PERF-004", "receive errors", 3},
    {HealthRule::kExcessiveBufferOverruns, "excessive_buffer_overruns", "SM-PERF-005",
     "excessive buffer overruns", 10},
    {HealthRule::kVl15Dropped, "vl15_dropped", "SM-PERF-006", "VL15 drops", 11},
    {HealthRule::kDegradedLink, "degraded_link", "SM-PERF-007", "degraded link", -1},
}};

std::string EndText(const PortEnd& e) {
  return fmt::format("{} ({:#018x}) port {}", e.name, e.node_guid.value(), e.port.value());
}

// A cable's identity independent of which end a finding came from.
std::pair<std::pair<uint64_t, uint8_t>, std::pair<uint64_t, uint8_t>> CableKey(
    const HealthFinding& f) {
  std::pair<uint64_t, uint8_t> a{f.port.node_guid.value(), f.port.port.value()};
  if (!f.peer) return {a, {0, 0}};
  std::pair<uint64_t, uint8_t> b{f.peer->node_guid.value(), f.peer->port.value()};
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

}  // namespace

const HealthRuleInfo& RuleInfo(HealthRule r) { return kRules[static_cast<size_t>(r)]; }

uint64_t HealthThresholds::For(HealthRule r) const {
  switch (r) {
    case HealthRule::kSymbolErrors: return symbol_errors;
    case HealthRule::kLinkErrorRecovery: return link_error_recovery;
    case HealthRule::kLinkDowned: return link_downed;
    case HealthRule::kPortRcvErrors: return port_rcv_errors;
    case HealthRule::kExcessiveBufferOverruns: return excessive_buffer_overruns;
    case HealthRule::kVl15Dropped: return vl15_dropped;
    case HealthRule::kDegradedLink: return degraded_links ? 1 : 0;
    case HealthRule::kCount: break;
  }
  return 0;
}

double HealthFinding::score() const {
  if (rule == HealthRule::kDegradedLink || threshold == 0) return 1.0;
  return static_cast<double>(sweeps > 0 ? total_delta : delta) / static_cast<double>(threshold);
}

std::string HealthFinding::Message() const {
  const HealthRuleInfo& info = RuleInfo(rule);
  std::string where = EndText(port);
  std::string other = peer ? "; other end " + EndText(*peer) : "; no cable seen at the other end";
  if (rule == HealthRule::kDegradedLink)
    return fmt::format("{} degraded link: {} between {}{}", info.log_id, detail, where, other);
  return fmt::format("{} {} +{} in one PerfMgr sweep (counter now {}, threshold {}) on {}{}",
                     info.log_id, info.what, delta, value, threshold, where, other);
}

void ForEachCable(const std::vector<HealthFinding>& findings,
                  const std::function<void(const CableHealth&)>& visit) {
  // Sorted indexes, not copies: on a fabric where every cable is degraded (ibsim, or a
  // fabric-wide speed fault) this runs over one finding per cable, 24,576 at 3-tier k=32.
  std::vector<uint32_t> order(findings.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return CableKey(findings[x]) < CableKey(findings[y]);
  });
  struct Group {
    uint32_t begin = 0, end = 0;  // range of `order`
    double score = 0;
  };
  std::vector<Group> groups;
  for (uint32_t i = 0; i < order.size(); ++i) {
    if (i == 0 || CableKey(findings[order[i]]) != CableKey(findings[order[i - 1]]))
      groups.push_back({i, i, 0});
    groups.back().end = i + 1;
    groups.back().score += findings[order[i]].score();
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& x, const Group& y) { return x.score > y.score; });
  for (const Group& g : groups) {
    CableHealth c;
    // End A is the end with the lower (GUID, port), so a cable prints the same way
    // whichever end reported first.
    const HealthFinding& first = findings[order[g.begin]];
    c.a = first.port;
    c.b = first.peer;
    if (first.peer && std::make_pair(first.peer->node_guid.value(), first.peer->port.value()) <
                          std::make_pair(first.port.node_guid.value(), first.port.port.value())) {
      c.a = *first.peer;
      c.b = first.port;
    }
    for (uint32_t i = g.begin; i < g.end; ++i) c.findings.push_back(findings[order[i]]);
    std::stable_sort(c.findings.begin(), c.findings.end(),
                     [](const HealthFinding& x, const HealthFinding& y) {
                       return x.score() > y.score();
                     });
    c.score = g.score;
    visit(c);
  }
}

std::vector<CableHealth> GroupByCable(const std::vector<HealthFinding>& findings) {
  std::vector<CableHealth> out;
  ForEachCable(findings, [&](const CableHealth& c) { out.push_back(c); });
  return out;
}

nlohmann::json PortEndJson(const PortEnd& e) {
  return {{"guid", fmt::format("{:#018x}", e.node_guid.value())},
          {"name", e.name},
          {"description", e.description},
          {"port", e.port.value()},
          {"lid", e.lid.value()}};
}

nlohmann::json CableHealthJson(const CableHealth& c) {
  nlohmann::json findings = nlohmann::json::array();
  for (const HealthFinding& f : c.findings) {
    const HealthRuleInfo& info = RuleInfo(f.rule);
    nlohmann::json j{{"rule", info.name},
                     {"id", info.log_id},
                     {"at", PortEndJson(f.port)},
                     {"score", f.score()}};
    if (f.rule == HealthRule::kDegradedLink) {
      j["detail"] = f.detail;
    } else {
      j["delta"] = f.delta;
      j["value"] = f.value;
      j["threshold"] = f.threshold;
    }
    if (f.sweeps > 0) {
      j["first_seen_us"] = f.first_seen_us;
      j["last_seen_us"] = f.last_seen_us;
      j["sweeps"] = f.sweeps;
      if (f.rule != HealthRule::kDegradedLink) j["total_delta"] = f.total_delta;
    }
    findings.push_back(std::move(j));
  }
  return {{"a", PortEndJson(c.a)},
          {"b", c.b ? PortEndJson(*c.b) : nlohmann::json()},
          {"score", c.score},
          {"findings", findings}};
}

}  // namespace ibsm::sm
