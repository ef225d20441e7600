// The JSON answers of the read-only control commands that describe the fabric (nodes,
// links, health) and the event log, built from the SM's data. One builder per answer, used
// by the control socket (sm/control_commands.h) and by the snapshots the daemon keeps in its
// state file (ha::kSnapshot*), so ibsmctl --state-db prints a stored answer exactly as it
// would print the live one. GUIDs are "0x%016x" strings, LIDs numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "fabric/fabric.h"
#include "ha/state_store.h"

namespace ibsm::sm {

struct DiscoveryResult;
class PerfManager;

// "0x0002c90300000011"
std::string GuidText(Guid g);
// "CA", "SW", "RT"
std::string_view KindName(NodeKind k);
// What operators call a node: its short name when the fabric has one (topology files), else
// its NodeDescription (what discovery reads), else its GUID.
std::string DisplayName(const Node& n);
// One end of a cable or route: {"guid", "name", "description", "port", "lid"}.
nlohmann::json EndJson(const Fabric& f, PortId p);

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
// LinksAnswer(f, d, perf).dump(), in pieces. Without `with_sweep`, the answer's
// "perfmgr_sweep" is left out (it changes every PerfMgr sweep even when no cable did).
void StreamLinksAnswer(const Fabric& f, const DiscoveryResult* d, const PerfManager* perf,
                       bool with_sweep, const AnswerSink& sink);
// How the one piece StreamLinksAnswer leaves out without `with_sweep` begins.
inline constexpr std::string_view kLinksSweepPiece = ",\"perfmgr_sweep\":";

// True when an error counter moved at either end of `link` (one cable of the `links` answer)
// within the health window: what `links --errors` keeps, and what the topo picture never
// draws "ok".
bool LinkErrorsMoved(const nlohmann::json& link);

// `links degraded errors`: keeps only the degraded links and/or those with errors; the
// "degraded" count stays that of every link. Unavailable for `only_errors` on an answer
// built without the PerfMgr.
Result<nlohmann::json> FilterLinks(nlohmann::json answer, bool only_degraded, bool only_errors);

// `health`: {"perfmgr", "healthy", "cables"}: the findings of the PerfMgr's last sweep
// grouped by cable, worst first; without `perf`, the degraded links of `d` (may be null).
// With the PerfMgr the findings are those of its health window; `since_us` (0: all) keeps
// those last seen at or after it (`health --window`).
nlohmann::json HealthAnswer(const DiscoveryResult* d, const PerfManager* perf,
                            int64_t since_us = 0);
// `health` answer (HealthAnswer's shape) keeping only findings last seen at or after
// `since_us`; cables left with none are dropped and "healthy" follows.
nlohmann::json HealthSince(nlohmann::json answer, int64_t since_us);
// Its "perfmgr" part: the PerfMgr's state and counters, or {"enabled": false}.
nlohmann::json HealthPerfmgrJson(const PerfManager* perf);
// HealthAnswer(d, perf).dump() with `perfmgr` in place of its "perfmgr" part, built one cable
// at a time (on ibsim, where every cable is degraded, the tree would be the whole fabric).
void StreamHealthAnswer(const DiscoveryResult* d, const PerfManager* perf,
                        const nlohmann::json& perfmgr, const AnswerSink& sink);

// One event row: {"id", "time_us", "kind", "severity", "message", "node_guid"?, "port"?}.
nlohmann::json EventJson(const ha::EventRow& e);

// `health history`: {"history": [event...]}: the PerfMgr's health findings from the event
// log (kind ha::kEventHealth), newest first, at most `limit`, none older than `since_us`.
Result<nlohmann::json> HealthHistory(ha::StateStore& store, int64_t since_us, size_t limit);

// The state-file key under which the SM keeps the other SMs that stopped answering SMInfo:
// {"0xGUID": {"since_us", "misses", "last_answer_us", "why"}}.
inline constexpr char kPeersNotAnsweringKey[] = "peers_not_answering";

// `ha` peers: [{"guid", "priority", "state", "last_seen_us", "sm_key_match"}] from the state
// file's peer rows; a peer in `not_answering` (kPeersNotAnsweringKey's value; null or not an
// object: none) has "state": "NOT ANSWERING", "last_state" (as it last answered),
// "not_answering_since_us", "missed" and "why", and "last_seen_us" the last answer.
nlohmann::json PeersJson(const std::vector<ha::PeerRow>& rows, const nlohmann::json& not_answering);

}  // namespace ibsm::sm
