// The parts of the control answers that ibsmctl reads as well as ibsmd builds: how GUIDs,
// node kinds, names and cable ends are written, the filters `links` and `health` apply to a
// stored answer, and the answers built from state-file rows alone (events, health history,
// HA peers). ibsmctl --state-db (tools/ctl_state_file.cc) and the topology view use them
// without the daemon; the builders from the SM's live data are in sm/record/control_answers.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "fabric/fabric.h"
#include "ha/state_rows.h"

namespace ibsm::sm {

// "0x0002c90300000011"
std::string GuidText(Guid g);
// "CA", "SW", "RT"
std::string_view KindName(NodeKind k);
// What operators call a node: its short name when the fabric has one (topology files), else
// its NodeDescription (what discovery reads), else its GUID.
std::string DisplayName(const Node& n);
// One end of a cable or route: {"guid", "name", "description", "port", "lid"}.
nlohmann::json EndJson(const Fabric& f, PortId p);

// True when an error counter moved at either end of `link` (one cable of the `links` answer)
// within the health window: what `links --errors` keeps, and what the topo picture never
// draws "ok".
bool LinkErrorsMoved(const nlohmann::json& link);

// `links degraded errors`: keeps only the degraded links and/or those with errors; the
// "degraded" count stays that of every link. Unavailable for `only_errors` on an answer
// built without the PerfMgr.
Result<nlohmann::json> FilterLinks(nlohmann::json answer, bool only_degraded, bool only_errors);

// `health` answer (HealthAnswer's shape) keeping only findings last seen at or after
// `since_us`; cables left with none are dropped and "healthy" follows.
nlohmann::json HealthSince(nlohmann::json answer, int64_t since_us);

// One event row: {"id", "time_us", "kind", "severity", "message", "node_guid"?, "port"?}.
nlohmann::json EventJson(const ha::EventRow& e);

// `health history`: {"history": [event...]}: the PerfMgr's health findings from the event
// log (kind ha::kEventHealth), newest first, at most `limit`, none older than `since_us`.
Result<nlohmann::json> HealthHistory(ha::HistoryRows& store, int64_t since_us, size_t limit);

// The state-file key under which the SM keeps the other SMs that stopped answering SMInfo:
// {"0xGUID": {"since_us", "misses", "last_answer_us", "why"}}.
inline constexpr char kPeersNotAnsweringKey[] = "peers_not_answering";

// `ha` peers: [{"guid", "priority", "state", "last_seen_us", "sm_key_match"}] from the state
// file's peer rows; a peer in `not_answering` (kPeersNotAnsweringKey's value; null or not an
// object: none) has "state": "NOT ANSWERING", "last_state" (as it last answered),
// "not_answering_since_us", "missed" and "why", and "last_seen_us" the last answer.
nlohmann::json PeersJson(const std::vector<ha::PeerRow>& rows, const nlohmann::json& not_answering);

}  // namespace ibsm::sm
