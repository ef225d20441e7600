// ibsmctl events and ha: the event log's arguments (--since, --limit; health --history
// takes them too) and table, and the SM's HA view with its peers.
#include "tools/ctl_events.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/ctl_commands.h"
#include "tools/ctl_internal.h"

namespace ibsm::tools {

using nlohmann::json;

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
  if (const json m = r.value("standby_model", json()); m.is_object()) {
    out += fmt::format("standby model: {} nodes, {} links, refreshed {:.1f} s ago; ",
                       Get(m, "nodes"), Get(m, "links"), m.value("age_s", 0.0));
    if (m.value("tables_read", false))
      out += fmt::format("LFT blocks and P_Key tables read {:.1f} s ago; ",
                         m.value("tables_age_s", 0.0));
    else
      out += "LFT blocks not read yet (the fabric was still changing); ";
    out += m.value("takeover_starts_from_it", false)
               ? "a takeover starts from it\n"
               : "a takeover would discover the fabric\n";
  }
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

}  // namespace ibsm::tools
