// ibsmctl route, lft and check: the path and the forwarding table from the programmed
// tables, and the completeness, deadlock and balance check of them.
#include "tools/ctl_routes.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/ctl_commands.h"
#include "tools/ctl_internal.h"

namespace ibsm::tools {

using nlohmann::json;

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
  if (c.value("by", std::string()) == "up*/down* proof") {
    // A repair's re-route, checked from the LIDs it changed (ARCHITECTURE.md "Repair sweep").
    out += fmt::format("deadlock: no credit loop (up*/down* proof renewed from the {} LIDs "
                       "the repair changed; {} turns, none closing a loop)\n",
                       Get(v, "lids_verified"), Get(c, "turns"));
  } else {
    out += fmt::format("deadlock: {} ({} channels, {} dependencies)\n",
                       c.value("acyclic", false) ? "no credit loop" : "CREDIT LOOP",
                       Get(c, "channels"), Get(c, "dependencies"));
  }
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

}  // namespace ibsm::tools
