// The JSON answers of the read-only control commands that describe the fabric (nodes,
// links, health) and the event log, built from the SM's data. One builder per answer, used
// by the control socket (sm/ctl/control_commands.h) and by the snapshots the daemon keeps in its
// state file (ha::kSnapshot*), so ibsmctl --state-db prints a stored answer exactly as it
// would print the live one. GUIDs are "0x%016x" strings, LIDs numbers. What ibsmctl reads of
// these answers without the daemon (GUID text, the `links` and `health` filters, the answers
// built from state-file rows alone) is in sm/answers/answers.h, which this header includes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "fabric/fabric.h"
#include "ha/state_rows.h"
#include "sm/answers/answers.h"
#include "sm/perf/link_health.h"
#include "sm/perf/perf_manager.h"

namespace ibsm::sm {

struct DiscoveryResult;

// What the links and health answers read of the PerfMgr, copied on the thread that owns it
// (the io thread) so the state writer renders them on its own thread
// (sm/record/state_writer.h). Small: only ports whose error counters moved are kept.
struct PerfView {
  uint64_t sweep_number = 0;
  // Per (node GUID, port): the error counters summed over the health window; only ports whose
  // window holds a sweep (the links answer's "errors" is {} for the others).
  std::map<std::pair<Guid, uint8_t>, PerfCounters> window_errors;
  std::vector<HealthFinding> window_findings;
  // HealthPerfmgrJson, with "last_sweep_end_us" in place of "last_sweep_age_s" (the age is
  // relative to when it is read; the reader of a snapshot computes it).
  nlohmann::json perfmgr;
};
// Null for a null `perf`.
std::shared_ptr<const PerfView> ViewOfPerf(const PerfManager* perf);

// `nodes`: {"nodes": [{"guid", "name", "description", "kind", "lids", "ports",
// "cabled_ports", "vendor_id", "device_id"}]}.
nlohmann::json NodesAnswer(const Fabric& f);
// The answers' dumps handed out in pieces (one node or cable each), so the daemon's state-file
// snapshots never hold a large fabric's answer whole, neither as a JSON tree nor as text.
using AnswerSink = std::function<void(std::string_view piece)>;

// NodesAnswer(f).dump(), in pieces.
void StreamNodesAnswer(const Fabric& f, const AnswerSink& sink);

// `links`, every cable once: {"links": [{"a", "b", "width", "speed", "state", "degraded",
// "errors"}], "degraded": N, "perfmgr_sweep"}. `d` (for degraded) and `perf` (for the error
// counters that moved in its last sweep) may be null; without `perf`, "errors" and
// "perfmgr_sweep" are null.
nlohmann::json LinksAnswer(const Fabric& f, const DiscoveryResult* d, const PerfManager* perf);
// The same from a view of the PerfMgr taken before (any thread may render it).
nlohmann::json LinksAnswerOfView(const Fabric& f, const DiscoveryResult* d, const PerfView* perf);
// LinksAnswer(f, d, perf).dump(), in pieces. Without `with_sweep`, the answer's
// "perfmgr_sweep" is left out (it changes every PerfMgr sweep even when no cable did).
void StreamLinksAnswer(const Fabric& f, const DiscoveryResult* d, const PerfView* perf,
                       bool with_sweep, const AnswerSink& sink);
// How the one piece StreamLinksAnswer leaves out without `with_sweep` begins.
inline constexpr std::string_view kLinksSweepPiece = ",\"perfmgr_sweep\":";

// `health`: {"perfmgr", "healthy", "cables"}: the findings of the PerfMgr's last sweep
// grouped by cable, worst first; without `perf`, the degraded links of `d` (may be null).
// With the PerfMgr the findings are those of its health window; `since_us` (0: all) keeps
// those last seen at or after it (`health --window`).
nlohmann::json HealthAnswer(const DiscoveryResult* d, const PerfManager* perf,
                            int64_t since_us = 0);
// Its "perfmgr" part: the PerfMgr's state and counters, or {"enabled": false}.
nlohmann::json HealthPerfmgrJson(const PerfManager* perf);
// HealthAnswer(d, perf).dump() with `perf->perfmgr` (or {"enabled": false}) as its "perfmgr"
// part, built one cable at a time (on ibsim, where every cable is degraded, the tree would be
// the whole fabric).
void StreamHealthAnswer(const DiscoveryResult* d, const PerfView* perf, const AnswerSink& sink);

}  // namespace ibsm::sm
