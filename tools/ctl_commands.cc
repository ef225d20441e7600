#include "tools/ctl_commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "base/json.h"
#include "base/text.h"
#include "base/version.h"
#include "ha/sm_state_machine.h"
#include "ha/state_store.h"
#include "sm/control_answers.h"
#include "tools/control_client.h"
#include "tools/ctl_ar.h"
#include "tools/ctl_topo.h"

namespace ibsm::tools {

using nlohmann::json;

// The commands CtlFromStateFile answers.
constexpr char kFromStateFile[] = "status, events, ha, nodes, links, health, topo";

namespace {

Result<json> NoArgs(const std::vector<std::string>& words) {
  if (!words.empty()) return InvalidArgument("unexpected argument '" + words[0] + "'");
  return json::object();
}

std::string Get(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? "-" : Cell(*it);
}

// Unix microseconds as UTC in strftime's `format`.
std::string UtcFormat(int64_t us, const char* format) {
  time_t secs = static_cast<time_t>(us / 1000000);
  char when[32];
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::strftime(when, sizeof when, format, &tm);
  return when;
}

// "2026-11-30 06:20:00" (UTC) of Unix microseconds.
std::string UtcTime(int64_t us) { return UtcFormat(us, "%Y-%m-%d %H:%M:%S"); }
// "06:20:00" (UTC).
std::string UtcClock(int64_t us) { return UtcFormat(us, "%H:%M:%S"); }

// The first line of an answer read from a state file: where from, and as of when.
std::string SnapshotLine(const json& r) {
  if (!r.contains("as_of_us")) return "";
  return fmt::format("from {} as of {} UTC (no daemon asked; what it last recorded)\n",
                     Get(r, "source"), UtcTime(r.value("as_of_us", int64_t{0})));
}

// A value the answer lacks or holds as null (a state file records less than the daemon
// knows) reads "not recorded", never "-" or an empty field.
std::string Recorded(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? "not recorded" : Cell(*it);
}

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
                                   Get(s, "number"), s.value("heavy", false) ? "heavy" : "light",
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

Result<json> EventsArgs(const std::vector<std::string>& words);

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

std::string End(const json& e) {
  return fmt::format("{} ({}) port {}", Get(e, "name"), Get(e, "guid"), Get(e, "port"));
}

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

std::string FormatLinks(const json& r) {
  const CtlTable t = LinksTable(r);
  return SnapshotLine(r) + AlignedTable(t.header, t.rows) + t.note + "\n";
}

// ---- health ---------------------------------------------------------------------------
// "HH:MM:SS" (UTC) of Unix microseconds, for first/last seen within a window.
std::string UtcClock(int64_t us);

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

// ---- route ----------------------------------------------------------------------------
Result<json> RouteArgs(const std::vector<std::string>& words) {
  if (words.size() != 2) return InvalidArgument(
        "route takes SRC DST (each a LID, GUID, node name, NodeDescription or unambiguous "
        "prefix of one)");
  return json{{"from", words[0]}, {"to", words[1]}};
}

std::string FormatRoute(const json& r) {
  std::string out = fmt::format("From {} to {} (DLID {}):\n", End(r["from"]), End(r["to"]),
                                Get(r, "dlid"));
  std::vector<std::vector<std::string>> rows;
  size_t i = 0;
  for (const auto& h : r.value("hops", json::array()))
    rows.push_back({std::to_string(i++), Get(h, "kind"), Get(h, "guid"), Get(h, "name"),
                    Get(h, "in_port"), Get(h, "out_port")});
  out += AlignedTable({"HOP", "KIND", "GUID", "NAME", "IN", "OUT"}, rows);
  if (r.value("complete", false)) {
    out += fmt::format("delivered in {} switch hops\n",
                       std::count_if(r["hops"].begin(), r["hops"].end(),
                                     [](const json& h) { return h.value("kind", "") == "SW"; }));
  } else {
    out += "NOT DELIVERED: " + Get(r, "problem") + "\n";
  }
  return out;
}

// ---- lft ------------------------------------------------------------------------------
Result<json> LftArgs(const std::vector<std::string>& words) {
  if (words.size() != 1) return InvalidArgument(
        "lft takes SWITCH (a LID, GUID, node name, NodeDescription or unambiguous prefix)");
  return json{{"switch", words[0]}};
}

std::string FormatLft(const json& r) {
  std::string out = fmt::format("Unicast LFT of {} (engine {}):\n", End(r["switch"]),
                                Get(r, "engine"));
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : r.value("entries", json::array()))
    rows.push_back({Get(e, "lid"), Get(e, "port"), Get(e, "dest")});
  return out + AlignedTable({"LID", "PORT", "DESTINATION"}, rows) +
         fmt::format("{} entries\n", rows.size());
}

// ---- check ----------------------------------------------------------------------------
Result<json> CheckArgs(const std::vector<std::string>& words) {
  json a = json::object();
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if ((w == "--permutations" || w == "--seed") && i + 1 < words.size()) {
      char* end = nullptr;
      errno = 0;
      unsigned long long n = std::strtoull(words[i + 1].c_str(), &end, 0);
      if (*end != 0 || errno != 0 || words[i + 1].empty())
        return InvalidArgument(w + " wants a number");
      a[w == "--seed" ? "seed" : "permutations"] = n;
      ++i;
    } else {
      return InvalidArgument("check takes --permutations N and --seed S, not '" + w + "'");
    }
  }
  return a;
}

std::string FormatCheck(const json& r) {
  std::string out;
  const json& v = r["verify"];
  const json& c = r["credit_loops"];
  out += fmt::format("engine {} ({})\n", Get(r, "engine"),
                     r.value("accepted", false) ? "programmed" : "REFUSED, last good tables kept");
  out += fmt::format("completeness: {} (missing {}, loops {}, misrouted {}, unreachable pairs {})\n",
                     v.value("ok", false) ? "OK" : "FAILED", Get(v, "missing_entries"),
                     Get(v, "loops"), Get(v, "misrouted_entries"), Get(v, "unreachable_pairs"));
  for (const auto& p : v.value("problems", json::array())) out += "  " + Cell(p) + "\n";
  out += fmt::format("deadlock: {} ({} channels, {} dependencies)\n",
                     c.value("acyclic", false) ? "no credit loop" : "CREDIT LOOP",
                     Get(c, "channels"), Get(c, "dependencies"));
  if (!c.value("acyclic", true)) {
    std::string cycle;
    for (const auto& h : c.value("cycle", json::array())) cycle += (cycle.empty() ? "" : " -> ") + Cell(h);
    out += "  cycle: " + cycle + "\n";
  }
  if (r.contains("balance")) {
    const json& b = r["balance"];
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : b.value("routes_per_link", json::array()))
      rows.push_back({Get(t, "tier"), Get(t, "channels"), Get(t, "min_routes"),
                      Get(t, "max_routes"), fmt::format("{:.1f}", t.value("mean_routes", 0.0)),
                      fmt::format("{:.1f}", t.value("stddev_routes", 0.0))});
    out += fmt::format("balance over {} hosts (routes per directed link, by tier):\n",
                       Get(b, "hosts"));
    out += AlignedTable({"TIER", "LINKS", "MIN", "MAX", "MEAN", "STDDEV"}, rows);
    out += fmt::format("shift permutations: worst link shared by {} flows\n",
                       Get(b, "shift_max_sharing"));
    out += fmt::format("{} random permutations: worst link shared by {} flows, effective "
                       "bisection bandwidth {:.3f}\n",
                       Get(b, "random_permutations"), Get(b, "random_max_sharing"),
                       b.value("effective_bisection_bandwidth", 0.0));
    if (b.value("unrouted_flows", 0) > 0)
      out += fmt::format("UNROUTED host pairs: {}\n", Get(b, "unrouted_flows"));
  }
  return out;
}

// ---- events ---------------------------------------------------------------------------
Result<json> EventsArgs(const std::vector<std::string>& words) {
  json a = json::object();
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if ((w == "--since" || w == "--limit") && i + 1 < words.size()) {
      const std::string& v = words[++i];
      char* end = nullptr;
      errno = 0;
      unsigned long long n = std::strtoull(v.c_str(), &end, 0);
      if (v.empty() || errno != 0) return InvalidArgument(w + " wants a number");
      if (w == "--limit") {
        if (*end != 0) return InvalidArgument("--limit wants a number");
        a["limit"] = n;
        continue;
      }
      // --since: seconds ago ("600", "10m", "2h") as operators write it.
      uint64_t mult = *end == 0 || std::string(end) == "s" ? 1
                      : std::string(end) == "m"            ? 60
                      : std::string(end) == "h"            ? 3600
                      : std::string(end) == "d"            ? 86400
                                                           : 0;
      if (mult == 0) return InvalidArgument("--since wants an age like 600, 10m, 2h or 1d");
      auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
      a["since_us"] = std::max<int64_t>(0, now - static_cast<int64_t>(n * mult * 1000000));
    } else {
      return InvalidArgument("events takes --since AGE and --limit N, not '" + w + "'");
    }
  }
  return a;
}

std::string FormatEvents(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : r.value("events", json::array())) {
    const std::string when = UtcTime(e.value("time_us", int64_t{0}));
    std::string where = e.contains("node_guid") ? Cell(e["node_guid"]) : "";
    if (e.contains("port")) where += "/" + Cell(e["port"]);
    rows.push_back({when, Get(e, "severity"), Get(e, "kind"), where.empty() ? "-" : where,
                    Get(e, "message")});
  }
  const uint64_t more = r.value("more", uint64_t{0});
  return AlignedTable({"TIME (UTC)", "SEVERITY", "KIND", "WHERE", "MESSAGE"}, rows) +
         (more == 0 ? fmt::format("{} events\n", rows.size())
                    : fmt::format("{} events, newest first; {} more not shown (--limit N, --since "
                                  "AGE)\n",
                                  rows.size(), more));
}

// ---- ha -------------------------------------------------------------------------------
std::string FormatHa(const json& r) {
  std::string out;
  if (r.contains("source"))
    out += fmt::format("from {}{} (no daemon asked: what it last recorded, not whether it runs "
                       "now)\n",
                       Get(r, "source"),
                       r.contains("as_of_us")
                           ? ", last written " + UtcTime(r.value("as_of_us", int64_t{0})) + " UTC"
                           : "");
  out += fmt::format("this SM: {}, port GUID {}, priority {}\n", Recorded(r, "state"),
                     Recorded(r, "guid"), Recorded(r, "priority"));
  if (!r.value("polled_master", json()).is_null())
    out += "polling master " + Get(r, "polled_master") + "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : r.value("peers", json::array())) {
    std::string state = Get(p, "state");
    if (p.contains("not_answering_since_us"))
      state = fmt::format("NOT ANSWERING since {} UTC ({} missed; was {})",
                          UtcTime(p.value("not_answering_since_us", int64_t{0})), Get(p, "missed"),
                          Get(p, "last_state"));
    const int64_t seen = p.value("last_seen_us", int64_t{0});
    rows.push_back({Get(p, "guid"), state, Get(p, "priority"),
                    seen > 0 ? UtcTime(seen) : "not recorded",
                    p.value("sm_key_match", false) ? "yes" : "NO (ignored)"});
  }
  if (!rows.empty())
    out += AlignedTable({"PEER SM", "STATE", "PRIORITY", "LAST SEEN (UTC)", "SM_KEY MATCH"}, rows);
  else
    out += "no other SM seen\n";
  std::string counters;
  const json counter_map = r.value("counters", json());
  if (counter_map.is_object())
    for (const auto& [k, v] : counter_map.items())
      counters += fmt::format("{}{} {}", counters.empty() ? "" : ", ", k, Cell(v));
  return out + "counters: " + (counters.empty() ? "not recorded" : counters) + "\n";
}

// ---- sharp ----------------------------------------------------------------------------
std::string FormatSharp(const json& r) {
  if (!r.value("enabled", false)) return "SHARP is off (sharp_enable 0)\n";
  std::string out = fmt::format(
      "SHARP: {} aggregation nodes ({} enabled, {} usable), {} switch tiers, {} hosts\n",
      Get(r, "aggregation_nodes"), Get(r, "enabled_nodes"), Get(r, "usable_nodes"),
      Get(r, "switch_tiers"), Get(r, "hosts"));
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : r.value("trees", json::array()))
    rows.push_back({Get(t, "id"), Get(t, "root"), Get(t, "root_name"), Get(t, "depth"),
                    Get(t, "hosts"), Get(t, "switches"), t.value("programmed", false) ? "yes" : "NO"});
  if (!rows.empty())
    out += AlignedTable({"TREE", "ROOT", "ROOT NAME", "DEPTH", "HOSTS", "SWITCHES", "PROGRAMMED"}, rows);
  const auto never = r.value("never_covered", json::array());
  const auto some = r.value("uncovered", json::array());
  if (rows.empty()) {
    out += "no trees\n";
  } else if (some.empty()) {
    out += fmt::format("coverage: every tree reaches all {} hosts\n", Get(r, "hosts"));
  } else {
    out += fmt::format("coverage: {} hosts missing from some tree, {} in none\n", some.size(),
                       never.size());
    for (const auto& h : some) out += "  missing: " + Cell(h) + "\n";
  }
  for (const auto& n : r.value("notes", json::array())) out += "note: " + Cell(n) + "\n";
  return out;
}

// ---- resweep / log-level / help --------------------------------------------------------
std::string FormatQueued(const json&) { return "heavy sweep queued\n"; }

Result<json> LevelArgs(const std::vector<std::string>& words) {
  if (words.size() != 1) return InvalidArgument("log-level takes one of trace debug info warn error off");
  return json{{"level", words[0]}};
}
std::string FormatLevel(const json& r) { return "log level " + Get(r, "level") + "\n"; }

std::string FormatHelp(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : r.value("commands", json::array()))
    rows.push_back({Get(c, "cmd"), Get(c, "access"), Get(c, "summary")});
  return AlignedTable({"COMMAND", "ACCESS", "WHAT"}, rows);
}

bool IsNumber(const std::string& s) {
  if (s.empty()) return false;
  size_t i = s[0] == '-' ? 1 : 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '.' && !dot) {
      dot = true;
    } else if (s[i] < '0' || s[i] > '9') {
      return false;
    }
  }
  return s != "-";
}

Result<json> ResweepArgs(const std::vector<std::string>& words) {
  json a = json::object();
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] != "--wait")
      return InvalidArgument("resweep takes [--wait [SECONDS]], not '" + words[i] + "'");
    double s = 600;
    if (i + 1 < words.size() && IsNumber(words[i + 1])) s = std::stod(words[++i]);
    if (!(s > 0)) return InvalidArgument("--wait takes seconds above 0");
    a["wait_s"] = s;
  }
  return a;
}

// Without a daemon: what the state file holds, in the daemon's answer shapes, for the
// commands that can be answered from it.

// The snapshot `name` of the state file as the daemon answered it then, with where and when.
// When the state file was last written (its -wal holds the newest writes), Unix microseconds;
// 0 if neither can be read.
int64_t FileWrittenUs(const std::string& path) {
  int64_t newest = 0;
  for (const std::string& p : {path, path + "-wal"}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0)
      newest = std::max<int64_t>(newest, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 +
                                             st.st_mtim.tv_nsec / 1000);
  }
  return newest;
}

Result<json> LoadAnswer(ha::StateStore& store, const std::string& path, std::string_view name) {
  IBSM_ASSIGN_OR_RETURN(std::optional<ha::SnapshotRow> row, store.LoadSnapshot(name));
  if (!row)
    return FailedPrecondition(fmt::format("no {} snapshot in {}: written by an older ibsmd or "
                                          "before its first sweep; ask the daemon (--socket)",
                                          name, path));
  json j = json::parse(row->json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object())
    return Corrupt(fmt::format("the {} snapshot in {} is not a JSON object", name, path));
  j["as_of_us"] = row->written_us;
  j["source"] = "state file " + path;
  return j;
}

}  // namespace

Result<json> CtlFromStateFile(const std::string& path, const std::string& cmd, const json& args) {
  IBSM_ASSIGN_OR_RETURN(auto store, ha::StateStore::OpenReadOnly(path));
  if (cmd == "nodes") return LoadAnswer(*store, path, ha::kSnapshotNodes);
  if (cmd == "links") {
    IBSM_ASSIGN_OR_RETURN(json links, LoadAnswer(*store, path, ha::kSnapshotLinks));
    // ibsmd skips rewriting links when no cable and no error count changed, so the stored
    // "perfmgr_sweep" can be older than the PerfMgr sweep the health snapshot (written after
    // every one) names; the errors are those of that later sweep too.
    if (links["perfmgr_sweep"].is_number_unsigned()) {
      IBSM_ASSIGN_OR_RETURN(auto health, store->LoadSnapshot(ha::kSnapshotHealth));
      if (health) {
        json h = json::parse(health->json, nullptr, /*allow_exceptions=*/false);
        const json sweep = h.is_object() && h["perfmgr"].is_object()
                               ? h["perfmgr"].value("sweep", json())
                               : json();
        if (sweep.is_number_unsigned() &&
            sweep.get<uint64_t>() > links["perfmgr_sweep"].get<uint64_t>())
          links["perfmgr_sweep"] = sweep;
      }
    }
    return sm::FilterLinks(std::move(links), args.value("degraded", false),
                           args.value("errors", false));
  }
  if (cmd == "health") {
    if (args.value("history", false)) {
      IBSM_ASSIGN_OR_RETURN(json h, sm::HealthHistory(*store, args.value("since_us", int64_t{0}),
                                                      args.value("limit", size_t{1000})));
      h["source"] = "state file " + path;
      return h;
    }
    IBSM_ASSIGN_OR_RETURN(json h, LoadAnswer(*store, path, ha::kSnapshotHealth));
    // The daemon stored when its PerfMgr sweep ended; the age is counted from now.
    json& pm = h["perfmgr"];
    if (pm.is_object() && pm.contains("last_sweep_end_us")) {
      const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      pm["last_sweep_age_s"] =
          static_cast<double>(now - pm.value("last_sweep_end_us", int64_t{0})) / 1e6;
      pm.erase("last_sweep_end_us");
    }
    if (uint64_t window_s = args.value("window_s", uint64_t{0}); window_s > 0) {
      const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      h = sm::HealthSince(std::move(h),
                          now - static_cast<int64_t>(std::min<uint64_t>(window_s, 1ull << 40)) *
                                    1000000);
      h["window_s"] = window_s;
    }
    return h;
  }
  IBSM_ASSIGN_OR_RETURN(auto state, store->GetValue("sm_state"));
  if (cmd == "status") {
    json j{{"state", state ? json(*state) : json()},
           {"source", "state file " + path},
           {"as_of_us", FileWrittenUs(path)}};
    IBSM_ASSIGN_OR_RETURN(auto sweeps, store->RecentSweeps(1));
    if (!sweeps.empty()) {
      const ha::SweepRow& s = sweeps.front();
      auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count();
      j["engine"] = s.engine;
      j["last_sweep"] = {{"number", s.id},
                         {"heavy", s.kind == ha::SweepKind::kHeavy},
                         {"age_s", static_cast<double>(now - s.ended_us) / 1e6},
                         {"duration_s", static_cast<double>(s.ended_us - s.started_us) / 1e6},
                         {"smps", s.smps_sent},
                         {"smps_failed", s.smps_failed},
                         {"lft_blocks_sent", s.lft_blocks_sent},
                         {"outcome", s.outcome}};
      j["counts"] = {{"nodes", s.nodes}, {"switches", s.switches}, {"cas", s.cas},
                     {"links", s.links}};
    }
    return j;
  }
  if (cmd == "events") {
    int64_t since = args.value("since_us", int64_t{0});
    size_t limit = args.value("limit", size_t{100});
    IBSM_ASSIGN_OR_RETURN(auto rows, store->RecentEvents(limit, since));
    json events = json::array();
    for (const auto& e : rows) events.push_back(sm::EventJson(e));
    IBSM_ASSIGN_OR_RETURN(uint64_t total, store->CountEvents(since));
    return json{{"events", events}, {"more", total > rows.size() ? total - rows.size() : 0}};
  }
  if (cmd == "ha") {
    IBSM_ASSIGN_OR_RETURN(auto peers, store->Peers());
    IBSM_ASSIGN_OR_RETURN(auto missing, store->GetValue(sm::kPeersNotAnsweringKey));
    json not_answering = missing ? json::parse(*missing, nullptr, /*allow_exceptions=*/false)
                                 : json();
    // The file keeps neither this SM's GUID and priority nor its HA counters: null, which
    // reads "not recorded".
    return json{{"state", state ? json(*state) : json()},
                {"guid", json()},
                {"priority", json()},
                {"source", "state file " + path},
                {"as_of_us", FileWrittenUs(path)},
                {"peers", sm::PeersJson(peers, not_answering)},
                {"counters", json()}};
  }
  return FailedPrecondition(fmt::format("'{}' needs a running daemon (--socket); from a state "
                                        "file: {}",
                                        cmd, kFromStateFile));
}

namespace {

constexpr char kGlobalUsage[] =
    "usage: ibsmctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS]\n"
    "       ibsmctl --version\n"
    "       ibsmctl --state-db PATH [--json] COMMAND [ARGS]   (no daemon: read its state file;\n"
    "               status events ha nodes links health topo, as the daemon last recorded them)\n"
    "       ibsmctl [port options] sa TABLE ...   (ask the SA; see ibsmctl sa --help)\n";

}  // namespace

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

const std::vector<CtlGlobalFlag>& CtlGlobalFlags() {
  static const std::vector<CtlGlobalFlag> kFlags = {
      {"--socket", "PATH", "ibsmd's control socket (default /run/ibsm/ibsmd.sock, or $IBSM_SOCKET)"},
      {"--json", "", "print the daemon's JSON answer instead of a table"},
      {"--timeout", "MS", "how long to wait for the daemon's answer (default 30000)"},
      {"--state-db", "PATH",
       "no daemon: answer from its state file (status events ha nodes links health topo)"},
      {"--version", "", "print the version and the commit"},
      {"--help", "", "print the commands and flags and exit"},
  };
  return kFlags;
}

const char* CtlSaUsage() {
  return "usage: ibsmctl [--ca NAME] [--port N] [--port-guid G] [--sa-lid L] [--timeout MS]\n"
         "               [--retries N] [--sa-key K] sa TABLE [--lid L] [--guid G]\n"
         "               [--slid L] [--dlid L] [--count] [--repeat N] [--json]\n"
         "       ibsmctl [port options] sa register-service --service-id ID --name NAME\n"
         "               [--lease SECONDS] [--pkey P] [--gid-prefix X]\n"
         "       ibsmctl [port options] sa delete-service --service-id ID [--pkey P]\n"
         "               [--gid-prefix X]\n"
         "services: --service-id ID and --name NAME select; register/delete act on this port's GID\n"
         "--repeat N: send the query N times, one at a time, and print queries per second and\n"
         "            latency percentiles (a load probe) instead of the records\n"
         "TABLE: nodes ports links switches lfts sminfo guids paths services\n";
}

const std::vector<CtlCommand>& CtlCommands() {
  static const std::vector<CtlCommand> kCommands = {
      {"status", "", "SM state, GUID, priority, last sweep, counts, engine, LMC", NoArgs,
       FormatStatus},
      {"nodes", "", "every node with its GUID, kind, LIDs and ports", NoArgs, FormatNodes},
      {"links", "[--degraded] [--errors]",
       "every cable with both ends; --degraded: only those below what both ends support; "
       "--errors: only those whose error counters moved within the health window",
       LinksArgs, FormatLinks},
      {"health", "[--window AGE] | --history [--since AGE] [--limit N]",
       "cables with health findings (PerfMgr counters, degraded links) within the health window "
       "(health_window_s, default 1h; --window: a shorter one), worst first, both ends named, "
       "each with when first and last seen; --history: every finding as it appeared, newest "
       "first",
       HealthArgs, FormatHealth},
      {"route", "SRC DST",
       "the hop-by-hop path from the tables; a node is a LID, a GUID (0x optional), a node "
       "name, a NodeDescription or an unambiguous prefix of one",
       RouteArgs, FormatRoute},
      {"lft", "SWITCH", "one switch's unicast forwarding table (named as for route)", LftArgs,
       FormatLft},
      {"check", "[--permutations N] [--seed S]",
       "completeness, deadlock proof and balance of the programmed routes", CheckArgs,
       FormatCheck},
      {"ar", "", "adaptive routing per switch (capable, enabled, SLs, mode, groups, why not) "
                 "and per destination leaf", ArArgs, FormatAr},
      {"traffic", "--pattern shift|random|alltoall [--count N] [--seed S]",
       "traffic model on the live tables: max link load and EBB, static vs AR", TrafficArgs,
       FormatTraffic},
      {"events", "[--since AGE] [--limit N]", "the event log (AGE: 600, 10m, 2h, 1d)",
       EventsArgs, FormatEvents},
      {"ha", "", "SM state, master, peer SMs and HA counters", NoArgs, FormatHa},
      {"sharp", "", "SHARP trees: roots, depth, hosts reached, coverage", NoArgs, FormatSharp},
      {"resweep", "[--wait [SECONDS]]",
       "queue a heavy sweep (root only); --wait: until it is done, with progress on a terminal",
       ResweepArgs, FormatQueued},
      {"log-level", "LEVEL", "set the daemon's log level (root only)", LevelArgs, FormatLevel},
      {"topo", "[--format json|dot|svg|html] [--view auto|full|aggregate]",
       "the fabric drawn by switch tier, names on the boxes, cables coloured as links and "
       "health judge them; html: the picture (pan, zoom) beside the health and links tables; "
       "aggregate (auto above 600 nodes): groups per pod and tier, unhealthy cables one by one",
       TopoArgs, FormatTopo},
      {"help", "", "the commands the running daemon serves", NoArgs, FormatHelp},
  };
  return kCommands;
}

const CtlCommand* FindCtlCommand(const std::string& name) {
  for (const auto& c : CtlCommands())
    if (name == c.name) return &c;
  return nullptr;
}

std::string Cell(const json& v) {
  if (v.is_null()) return "-";
  // Strings come from the fabric (NodeDescriptions a host's root chose): an escape sequence
  // or a line break must reach the operator's terminal as text, \x1B, never as a command.
  if (v.is_string()) return EscapeControls(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_float()) return fmt::format("{:.3f}", v.get<double>());
  return DumpJson(v);
}

std::string AlignedTable(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  std::vector<bool> numeric(header.size(), true);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size() && c < header.size(); ++c) {
      width[c] = std::max(width[c], r[c].size());
      if (!IsNumber(r[c]) && r[c] != "-") numeric[c] = false;
    }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const bool last = c + 1 == header.size();
      if (numeric[c] && !rows.empty()) {
        out += std::string(width[c] - cell.size(), ' ') + cell;
      } else {
        out += cell + (last ? "" : std::string(width[c] - cell.size(), ' '));
      }
      if (!last) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string SweepProgressLine(const json& status) {
  if (!status.contains("sweep_running") || !status["sweep_running"].is_object())
    return "waiting for the heavy sweep to start";
  const json& r = status["sweep_running"];
  std::string line = fmt::format("heavy sweep {}: {:.1f} s, {} SMPs", Get(r, "number"),
                                 r.value("elapsed_s", 0.0), Get(r, "smps"));
  if (r.value("nodes", 0) > 0) line += fmt::format(", {} nodes", Get(r, "nodes"));
  return line;
}

int RunResweepWait(const CtlCall& call, double wait_s, bool progress, bool as_json) {
  auto before = call("status", json::object());
  if (!before.ok()) {
    std::fprintf(stderr, "ibsmctl resweep: %s\n", before.status().message().c_str());
    return 2;
  }
  // Ours is the sweep after the one running now, or the next one when none runs.
  uint64_t target = 1;
  if (before->contains("sweep_running")) {
    target = (*before)["sweep_running"].value("number", uint64_t{0}) + 1;
  } else if (before->contains("last_sweep")) {
    target = (*before)["last_sweep"].value("number", uint64_t{0}) + 1;
  }
  auto queued = call("resweep", json::object());
  if (!queued.ok()) {
    std::fprintf(stderr, "ibsmctl resweep: %s\n", queued.status().message().c_str());
    return 2;
  }
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(wait_s));
  for (;;) {
    auto st = call("status", json::object());
    if (!st.ok()) {
      if (progress) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "ibsmctl resweep: %s\n", st.status().message().c_str());
      return 2;
    }
    const json last = st->value("last_sweep", json::object());
    if (last.value("number", uint64_t{0}) >= target) {
      if (progress) std::fprintf(stderr, "%-70s\r", "");
      if (as_json) {
        std::fputs((DumpJson(last, 2) + "\n").c_str(), stdout);
      } else {
        const json counts = st->value("counts", json::object());
        std::printf("heavy sweep %s done in %.3f s: %s nodes, %s SMPs (%s failed), %s LFT "
                    "blocks sent; %s\n",
                    Get(last, "number").c_str(), last.value("duration_s", 0.0),
                    Get(counts, "nodes").c_str(), Get(last, "smps").c_str(),
                    Get(last, "smps_failed").c_str(), Get(last, "lft_blocks_sent").c_str(),
                    st->value("subnet_up", false) ? "subnet up" : "subnet NOT up");
      }
      return st->value("subnet_up", false) ? 0 : 3;
    }
    if (std::chrono::steady_clock::now() >= end) {
      if (progress) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "ibsmctl resweep: heavy sweep %llu not done after %g s\n",
                   static_cast<unsigned long long>(target), wait_s);
      return 3;
    }
    if (progress) std::fprintf(stderr, "%-70s\r", SweepProgressLine(*st).c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int RunCtl(const std::vector<std::string>& argv) {
  std::string socket;
  if (const char* env = std::getenv("IBSM_SOCKET"); env && *env) socket = env;
  if (socket.empty()) socket = kDefaultControlSocket;
  bool as_json = false;
  std::string state_db;
  std::chrono::milliseconds timeout(30000);
  size_t i = 0;
  auto usage = [] {
    std::string u = kGlobalUsage;
    for (const auto& f : CtlGlobalFlags())
      u += fmt::format("{:<20} {}\n", fmt::format("{} {}", f.name, f.metavar), f.help);
    u += "commands:\n";
    for (const auto& c : CtlCommands())
      u += fmt::format("  {:<40} {}\n", std::string(c.name) + " " + c.usage, c.help);
    return u;
  };
  for (; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    if (f == "--json") {
      as_json = true;
    } else if ((f == "--socket" || f == "--timeout" || f == "--state-db") && i + 1 < argv.size()) {
      const std::string& v = argv[++i];
      if (f == "--socket") {
        socket = v;
      } else if (f == "--state-db") {
        state_db = v;
      } else {
        char* end = nullptr;
        unsigned long long ms = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || *end != 0 || ms == 0 || ms > 3600000) {
          std::fprintf(stderr, "ibsmctl: --timeout wants milliseconds (1..3600000)\n");
          return 1;
        }
        timeout = std::chrono::milliseconds(ms);
      }
    } else if (f == "-h" || f == "--help") {
      std::fputs(usage().c_str(), stdout);
      return 0;
    } else if (f == "--version") {
      std::printf("%s\n", VersionLine("ibsmctl").c_str());
      return 0;
    } else {
      break;
    }
  }
  if (i >= argv.size()) {
    std::fprintf(stderr, "ibsmctl: which command?\n%s", usage().c_str());
    return 1;
  }
  const CtlCommand* cmd = FindCtlCommand(argv[i]);
  if (!cmd) {
    std::fprintf(stderr, "ibsmctl: no command '%s'\n%s", argv[i].c_str(), usage().c_str());
    return 1;
  }
  std::vector<std::string> words(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
  // --json may also follow the command, as operators type it.
  if (auto it = std::find(words.begin(), words.end(), "--json"); it != words.end()) {
    as_json = true;
    words.erase(it);
  }
  auto args = cmd->make_args(words);
  if (!args.ok()) {
    std::fprintf(stderr, "ibsmctl %s: %s\nusage: ibsmctl %s %s\n", cmd->name,
                 args.status().message().c_str(), cmd->name, cmd->usage);
    return 1;
  }
  if (std::string(cmd->name) == "topo") {
    return RunTopo(
        [&](const char* what) -> Result<json> {
          return state_db.empty() ? CallControl(socket, what, json::object(), timeout)
                                  : CtlFromStateFile(state_db, what, json::object());
        },
        *args);
  }
  const bool tty = isatty(STDERR_FILENO) && timeout > std::chrono::seconds(2);
  if (std::string(cmd->name) == "resweep" && args->contains("wait_s") && state_db.empty()) {
    return RunResweepWait(
        [&](const char* what, const json& a) { return CallControl(socket, what, a, timeout); },
        (*args)["wait_s"].get<double>(), isatty(STDERR_FILENO), as_json);
  }
  if (tty && std::string(cmd->name) == "check")
    std::fprintf(stderr, "ibsmctl: checking the routes (the daemon measures balance)...\r");
  auto result = state_db.empty() ? CallControl(socket, cmd->name, *args, timeout)
                                 : CtlFromStateFile(state_db, cmd->name, *args);
  if (tty && std::string(cmd->name) == "check") std::fprintf(stderr, "%60s\r", "");
  if (!result.ok()) {
    std::fprintf(stderr, "ibsmctl %s: %s\n", cmd->name, result.status().message().c_str());
    return 2;
  }
  std::string out;
  try {
    out = as_json ? result->dump(2) + "\n" : cmd->format(*result);
  } catch (const json::exception& e) {
    // A daemon of another version (or something else on the socket) answered in a shape
    // this ibsmctl does not know.
    std::fprintf(stderr, "ibsmctl %s: unexpected answer (%s); try --json\n", cmd->name, e.what());
    return 2;
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace ibsm::tools
