// Fabric health rules: which cables need an operator, judged from the PerfMgr's
// counter deltas of one sweep (sm/perf/perf_manager.h) and from the link widths and speeds
// discovery read (sm/perf/link_health.h). Pure: findings in, findings out; no MADs, no clock.
//
// A rule fires when a counter grew by at least its threshold within one PerfMgr sweep
// (threshold 0 turns the rule off). Each rule has a stable log ID.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/types.h"

namespace ibsm::sm {

// FROZEN order: counters and JSON index rules by it.
enum class HealthRule: uint8_t {
  kSymbolErrors = 0,
  kLinkErrorRecovery,
  kLinkDowned,
  kPortRcvErrors,
  kExcessiveBufferOverruns,
  kVl15Dropped,
  kDegradedLink,
  kCount,
};
inline constexpr size_t kHealthRuleCount = static_cast<size_t>(HealthRule::kCount);

struct HealthRuleInfo {
  HealthRule rule;
  std::string_view name;    // "symbol_errors": JSON, counters, config key stem
  std::string_view log_id;  // "SM-PERF-001"
  std::string_view what;    // "symbol errors", for log lines and tables
  int counter;              // index into ha::kPerfCounterNames; -1 for degraded links
};
const HealthRuleInfo& RuleInfo(HealthRule r);

// Thresholds per PerfMgr sweep (opensm.conf keys health_*_threshold); 0 = rule off.
struct HealthThresholds {
  uint64_t symbol_errors = 10;
  uint64_t link_error_recovery = 1;
  uint64_t link_downed = 1;
  uint64_t port_rcv_errors = 10;
  uint64_t excessive_buffer_overruns = 1;
  uint64_t vl15_dropped = 100;
  bool degraded_links = true;

  uint64_t For(HealthRule r) const;
};

// One end of a cable as operators name it.
struct PortEnd {
  Guid node_guid{0};
  std::string name;         // topology name, else NodeDescription, else GUID
  std::string description;  // NodeDescription
  PortNum port{0};
  Lid lid{0};               // the port's LID (a switch's port-0 LID)
  bool is_switch = false;
};

struct HealthFinding {
  HealthRule rule = HealthRule::kSymbolErrors;
  PortEnd port;                 // where the counter moved (for a degraded link: end A)
  std::optional<PortEnd> peer;  // the other end of the cable
  uint64_t delta = 0;           // growth in the sweep
  uint64_t value = 0;           // the counter as last read
  uint64_t threshold = 0;
  std::string detail;           // degraded links: "width 1x of 4x"
  // Over the health window (PerfManager::window_findings()): when the PerfMgr first and last
  // found it, in how many sweeps, and the growth summed over them. 0 outside the window.
  int64_t first_seen_us = 0;
  int64_t last_seen_us = 0;
  uint64_t sweeps = 0;
  uint64_t total_delta = 0;

  // How far past its threshold: the growth (over the window, when from it) / threshold
  // (degraded links count 1).
  double score() const;
  // "SM-PERF-001 symbol errors +500 (now 500, threshold 10) on leaf-1 (0x..) port 3; other
  // end node-1 HCA-1 (0x..) port 1"
  std::string Message() const;
};

// Findings of one cable (both ends' findings together), the worst cable first.
struct CableHealth {
  PortEnd a;
  std::optional<PortEnd> b;
  std::vector<HealthFinding> findings;
  double score = 0;  // sum of the findings' scores
};
std::vector<CableHealth> GroupByCable(const std::vector<HealthFinding>& findings);
// The same cables in the same order, built one at a time: holds one cable's findings, not
// a copy of them all.
void ForEachCable(const std::vector<HealthFinding>& findings,
                  const std::function<void(const CableHealth&)>& visit);

nlohmann::json PortEndJson(const PortEnd& e);
nlohmann::json CableHealthJson(const CableHealth& c);

}  // namespace ibsm::sm
