// What ibsmd exports to Prometheus (sm/net/metrics_server.h), from the running SubnetManager:
// sweeps and their durations, SMPs sent and failed, nodes and ports by state, SA requests by
// attribute, traps, issues by log ID, HA state and counters, control socket use.
#pragma once

#include <string>

namespace ibsm::sm {

class SubnetManager;
class ControlServer;
struct MetricsServerCounters;

// `control` and `metrics` may be null (not running).
std::string RenderSmMetrics(const SubnetManager& sm, const ControlServer* control,
                            const MetricsServerCounters* metrics);

}  // namespace ibsm::sm
