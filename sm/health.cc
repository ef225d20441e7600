#include "sm/health.h"

#include <algorithm>
#include <array>
#include <map>

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
  return static_cast<double>(delta) / static_cast<double>(threshold);
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

std::vector<CableHealth> GroupByCable(const std::vector<HealthFinding>& findings) {
  std::map<decltype(CableKey(findings.front())), CableHealth> cables;
  for (const HealthFinding& f : findings) {
    auto [it, fresh] = cables.try_emplace(CableKey(f));
    CableHealth& c = it->second;
    if (fresh) {
      // End A is the end with the lower (GUID, port), so a cable prints the same way
      // whichever end reported first.
      c.a = f.port;
      c.b = f.peer;
      if (f.peer && std::make_pair(f.peer->node_guid.value(), f.peer->port.value()) <
                        std::make_pair(f.port.node_guid.value(), f.port.port.value())) {
        c.a = *f.peer;
        c.b = f.port;
      }
    }
    c.findings.push_back(f);
    c.score += f.score();
  }
  std::vector<CableHealth> out;
  out.reserve(cables.size());
  for (auto& [key, c] : cables) {
    std::sort(c.findings.begin(), c.findings.end(),
              [](const HealthFinding& x, const HealthFinding& y) { return x.score() > y.score(); });
    out.push_back(std::move(c));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const CableHealth& x, const CableHealth& y) { return x.score > y.score; });
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
    findings.push_back(std::move(j));
  }
  return {{"a", PortEndJson(c.a)},
          {"b", c.b ? PortEndJson(*c.b) : nlohmann::json()},
          {"score", c.score},
          {"findings", findings}};
}

}  // namespace ibsm::sm
