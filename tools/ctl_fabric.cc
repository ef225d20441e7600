// ibsmctl status, nodes, links and health: their arguments, their tables (LinksTable and
// HealthTable, which the topo page shows too) and how each prints.
#include "tools/ctl_fabric.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/ctl_commands.h"
#include "tools/ctl_events.h"
#include "tools/ctl_internal.h"

namespace ibsm::tools {

using nlohmann::json;

namespace {

// "a: symbol_errors +5; b: link_downed +1" from a link's error deltas of the last PerfMgr
// sweep.
std::string ErrorText(const json& errors) {
  std::string out;
  if (!errors.is_object()) return out;
  for (const char* side : {"a", "b"}) {
    auto it = errors.find(side);
    if (it == errors.end() || !it->is_object()) continue;
    for (const auto& [name, v] : it->items())
      out += fmt::format("{}{}: {} +{}", out.empty() ? "" : "; ", side, name, Cell(v));
  }
  return out;
}

std::string FindingText(const json& f) {
  // Over the health window: in how many PerfMgr sweeps, first and last seen.
  std::string seen;
  if (f.contains("sweeps")) {
    const uint64_t sweeps = f.value("sweeps", uint64_t{0});
    seen = sweeps == 1 ? fmt::format("; seen once, {} UTC",
                                     UtcClock(f.value("last_seen_us", int64_t{0})))
                       : fmt::format("; seen in {} sweeps, first {} last {} UTC", sweeps,
                                     UtcClock(f.value("first_seen_us", int64_t{0})),
                                     UtcClock(f.value("last_seen_us", int64_t{0})));
  }
  if (f.contains("detail")) return Get(f, "rule") + ": " + Get(f, "detail") + seen;
  const json& at = f["at"];
  const std::string growth = f.contains("total_delta") ? Get(f, "total_delta") : Get(f, "delta");
  return fmt::format("{} +{} at {} port {} (now {}, threshold {}){}", Get(f, "rule"), growth,
                     Get(at, "name"), Get(at, "port"), Get(f, "value"), Get(f, "threshold"),
                     seen);
}

// "600", "10m", "2h", "1d" -> seconds; 0 when it is none of them.
uint64_t AgeSeconds(const std::string& v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || v[0] == '-') return 0;
  const std::string unit = end;
  const uint64_t mult = unit.empty() || unit == "s" ? 1
                        : unit == "m"               ? 60
                        : unit == "h"               ? 3600
                        : unit == "d"               ? 86400
                                                    : 0;
  return n > UINT64_MAX / 86400 ? 0 : n * mult;
}

// The health findings of the event log, newest first: when, both ends and the numbers (the
// message names them).
std::string FormatHealthHistory(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : r.value("history", json::array())) {
    std::string where = e.contains("node_guid") ? Cell(e["node_guid"]) : "-";
    if (e.contains("port")) where += "/" + Cell(e["port"]);
    rows.push_back({UtcTime(e.value("time_us", int64_t{0})), where, Get(e, "message")});
  }
  std::string out = r.contains("source") ? "from " + Get(r, "source") + " (no daemon asked)\n"
                                         : "";
  if (rows.empty()) return out + "no health findings recorded\n";
  return out + AlignedTable({"TIME (UTC)", "WHERE", "FINDING"}, rows) +
         fmt::format("{} health findings, newest first\n", rows.size());
}

}  // namespace

// ---- status ---------------------------------------------------------------------------
std::string FormatStatus(const json& r) {
  std::string out;
  auto line = [&](const std::string& k, const std::string& v) {
    out += fmt::format("{:<18} {}\n", k + ":", v);
  };
  // Keys the answer lacks (a state file knows less than the daemon) are left out.
  auto maybe = [&](const std::string& k, const char* key) {
    if (r.contains(key)) line(k, Get(r, key));
  };
  if (r.contains("source")) {
    line("from", Get(r, "source") +
                     (r.value("as_of_us", int64_t{0}) > 0
                          ? ", last written " + UtcTime(r.value("as_of_us", int64_t{0})) + " UTC"
                          : "") +
                     "; no daemon asked: what it last recorded, not whether it runs now");
    line("SM state", Recorded(r, "state") + " (as last recorded)");
  } else {
    maybe("SM state", "state");
  }
  maybe("SM port GUID", "guid");
  maybe("priority", "priority");
  maybe("SM LID", "sm_lid");
  if (r.contains("subnet_up")) line("subnet up", r.value("subnet_up", false) ? "yes" : "no");
  if (r.contains("engine_configured"))
    line("routing engine", Get(r, "engine") + " (configured: " + Get(r, "engine_configured") + ")");
  else
    maybe("routing engine", "engine");
  maybe("LMC", "lmc");
  if (r.contains("counts")) {
    const json& c = r["counts"];
    line("fabric", fmt::format("{} nodes: {} switches, {} CAs; {} links", Get(c, "nodes"),
                               Get(c, "switches"), Get(c, "cas"), Get(c, "links")));
  }
  if (r.contains("last_sweep")) {
    const json& s = r["last_sweep"];
    double age = s.value("age_s", 0.0), dur = s.value("duration_s", 0.0);
    line("last sweep", fmt::format("#{} {} {:.1f} s ago, took {:.3f} s, {} SMPs ({} failed), "
                                   "{} LFT blocks sent, {}",
                                   Get(s, "number"),
                                   s.value("repair", false) ? "repair"
                                   : s.value("heavy", false) ? "heavy"
                                                             : "light",
                                   age, dur, Get(s, "smps"), Get(s, "smps_failed"),
                                   Get(s, "lft_blocks_sent"),
                                   s.contains("outcome") ? "outcome " + Get(s, "outcome")
                                                         : Get(s, "issues") + " issues"));
  } else {
    line("last sweep", "none yet");
  }
  if (r.contains("counters")) {
    const json& c = r["counters"];
    line("sweeps", fmt::format("{} heavy, {} light", Get(c, "heavy_sweeps"), Get(c, "light_sweeps")));
    line("traps", fmt::format("{} received, {} malformed, {} ignored as repeats",
                              Get(c, "traps_received"), Get(c, "traps_malformed"),
                              c.contains("traps_suppressed") ? Get(c, "traps_suppressed") : "0"));
    if (c.value("state_write_failures", 0) > 0)
      line("state file", Get(c, "state_write_failures") + " writes failed (see SM-STATE-0xx)");
    if (c.value("dump_write_failures", 0) > 0)
      line("dump files", Get(c, "dump_write_failures") + " heavy sweeps could not write them (SM-DUMP-001)");
    if (c.value("internal_errors", 0) > 0)
      line("internal errors", Get(c, "internal_errors") +
                                  " handlers threw and were abandoned (SM-EXC-001: a bug, please "
                                  "report it with the log)");
    if (c.value("repair_sweeps", 0) > 0)
      line("repair sweeps", fmt::format("{} ({} fell back to a heavy sweep, {} begun again with "
                                        "switches that reported while they read)",
                                        Get(c, "repair_sweeps"), Get(c, "repair_fallbacks"),
                                        Get(c, "repair_restarts")));
  }
  if (r.contains("transport") && r["transport"].is_object()) {
    const json& t = r["transport"];
    line("MADs", fmt::format("{} sent, {} received, {} timeouts; {} in flight (most {}), {} "
                             "waiting to be written (most {}, {} dropped)",
                             Get(t, "sent"), Get(t, "received"), Get(t, "timeouts"),
                             Get(t, "in_flight"), Get(t, "in_flight_high_water"),
                             Get(t, "backlog"), Get(t, "backlog_high_water"),
                             Get(t, "backlog_dropped")));
  }
  if (r.contains("ar") && r["ar"].is_object()) {
    const json& a = r["ar"];
    if (!a.value("configured", false)) {
      line("adaptive routing", "off");
    } else if (a.contains("switches")) {
      line("adaptive routing", fmt::format("on {} of {} switches ({} capable)", Get(a, "enabled"),
                                           Get(a, "switches"), Get(a, "capable")));
    } else {
      line("adaptive routing", "configured, not programmed yet");
    }
  }
  if (r.contains("sharp") && r["sharp"].is_object()) {
    const json& s = r["sharp"];
    if (!s.value("configured", false)) {
      line("SHARP", "off");
    } else if (s.value("ran", false)) {
      line("SHARP", fmt::format("{} of {} trees programmed, {} of {} aggregation nodes usable, {} "
                                "of {} hosts in no tree",
                                Get(s, "programmed"), Get(s, "trees"), Get(s, "usable"),
                                Get(s, "aggregation_nodes"), Get(s, "hosts_not_covered"),
                                Get(s, "hosts")));
    } else {
      line("SHARP", "configured, no trees built yet");
    }
  }
  if (r.value("config_not_honoured", uint64_t{0}) > 0) {
    line("config", fmt::format("{} OpenSM key(s) set to values ibsm does not honour (CONF-030 "
                               "in the log)",
                               Get(r, "config_not_honoured")));
  }
  if (r.contains("last_reload") && r["last_reload"].is_object()) {
    const json& l = r["last_reload"];
    const std::string why = l.value("why", std::string());
    line("last reload", fmt::format("{} at {} UTC{}", Get(l, "outcome"),
                                    UtcTime(l.value("time_us", int64_t{0})),
                                    why.empty() ? "" : ": " + Cell(l["why"])));
  }
  if (r.contains("uptime_s")) line("uptime", Get(r, "uptime_s") + " s");
  return out;
}

// ---- nodes ----------------------------------------------------------------------------
std::string FormatNodes(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : r.value("nodes", json::array())) {
    std::string lids;
    for (const auto& l : n.value("lids", json::array())) lids += (lids.empty() ? "" : ",") + Cell(l);
    rows.push_back({Get(n, "kind"), Get(n, "guid"), lids.empty() ? "-" : lids,
                    Get(n, "cabled_ports") + "/" + Get(n, "ports"), Get(n, "name"),
                    Get(n, "description")});
  }
  return SnapshotLine(r) +
         AlignedTable({"KIND", "GUID", "LIDS", "PORTS", "NAME", "DESCRIPTION"}, rows) +
         fmt::format("{} nodes\n", rows.size());
}

// ---- links ----------------------------------------------------------------------------
Result<json> LinksArgs(const std::vector<std::string>& words) {
  json a = json::object();
  for (const auto& w : words) {
    if (w == "--degraded") {
      a["degraded"] = true;
    } else if (w == "--errors") {
      a["errors"] = true;
    } else {
      return InvalidArgument("links takes --degraded and --errors, not '" + w + "'");
    }
  }
  return a;
}

std::string FormatLinks(const json& r) {
  const CtlTable t = LinksTable(r);
  return SnapshotLine(r) + AlignedTable(t.header, t.rows) + t.note + "\n";
}

// ---- health ---------------------------------------------------------------------------

Result<json> HealthArgs(const std::vector<std::string>& words) {
  json a = json::object();
  std::vector<std::string> rest;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--history") {
      a["history"] = true;
    } else if (w == "--window" && i + 1 < words.size() && !a.contains("history")) {
      const uint64_t s = AgeSeconds(words[++i]);
      if (s == 0) return InvalidArgument("--window wants an age like 600, 10m, 2h or 1d");
      a["window_s"] = s;
    } else {
      rest.push_back(w);
    }
  }
  if (a.contains("history") && a.contains("window_s"))
    return InvalidArgument("--window is for the findings of now; --history takes --since");
  if (rest.empty()) return a;
  if (!a.contains("history"))
    return InvalidArgument("health takes [--window AGE] or --history [--since AGE] [--limit N], "
                           "not '" + rest[0] + "'");
  // --since and --limit read as the event log's.
  IBSM_ASSIGN_OR_RETURN(json more, EventsArgs(rest));
  a.update(more);
  return a;
}

std::string FormatHealth(const json& r) {
  if (r.contains("history")) return FormatHealthHistory(r);
  const json& pm = r["perfmgr"];
  std::string out = SnapshotLine(r);
  if (pm.value("enabled", false)) {
    const json& c = pm["counters"];
    out += fmt::format("PerfMgr sweep {} ({} ports, every {} s; {} queries, {} timeouts, {} bad "
                       "answers, {} resets seen)\n",
                       Get(pm, "sweep"), Get(pm, "ports"), Get(pm, "sweep_time_s"),
                       Get(c, "queries_sent"), Get(c, "timeouts"), Get(c, "bad_answers"),
                       Get(c, "resets_seen"));
    if (r.contains("window_s") || pm.contains("window_s"))
      out += fmt::format("findings of the last {} s of PerfMgr sweeps\n",
                         r.contains("window_s") ? Get(r, "window_s") : Get(pm, "window_s"));
  } else {
    out += "PerfMgr off (perfmgr FALSE): degraded links only\n";
  }
  const CtlTable t = HealthTable(r);
  if (t.rows.empty()) return out + t.note + "\n";
  return out + AlignedTable(t.header, t.rows) + t.note + "\n";
}

CtlTable LinksTable(const json& r) {
  CtlTable t{{"END A", "END B", "WIDTH", "SPEED", "STATE", "HEALTH"}, {}, ""};
  size_t with_errors = 0;
  for (const auto& l : r.value("links", json::array())) {
    const json& d = l["degraded"];
    std::string health = d.is_string() ? "DEGRADED: " + d.get<std::string>() : "";
    std::string errors = ErrorText(l.value("errors", json()));
    if (!errors.empty()) {
      ++with_errors;
      health += (health.empty() ? "ERRORS: " : "; ERRORS: ") + errors;
    }
    t.rows.push_back({End(l["a"]), End(l["b"]), Get(l, "width"), Get(l, "speed"),
                      Get(l, "state"), health});
  }
  t.note = r.value("perfmgr_sweep", json()).is_null()
               ? fmt::format("{} links, {} degraded", t.rows.size(), Get(r, "degraded"))
               : fmt::format("{} links, {} degraded, {} with errors in the health window up "
                             "to PerfMgr sweep {}",
                             t.rows.size(), Get(r, "degraded"), with_errors,
                             Get(r, "perfmgr_sweep"));
  return t;
}

CtlTable HealthTable(const json& r) {
  CtlTable t{{"#", "END A", "END B", "FINDING"}, {}, ""};
  size_t rank = 0;
  for (const auto& c : r.value("cables", json::array())) {
    const auto& findings = c.value("findings", json::array());
    for (size_t i = 0; i < findings.size(); ++i) {
      t.rows.push_back({i == 0 ? std::to_string(++rank) : "",
                        i == 0 ? End(c["a"]) : "",
                        i == 0 && !c["b"].is_null() ? End(c["b"]) : "",
                        FindingText(findings[i])});
    }
  }
  const json pm = r.value("perfmgr", json::object());
  const bool perfmgr = pm.is_object() && pm.value("enabled", false);
  t.note = !t.rows.empty() ? fmt::format("{} cables with findings, worst first", rank)
           : perfmgr       ? "healthy: no findings in the window"
                           : "healthy: no findings";
  return t;
}

}  // namespace ibsm::tools
