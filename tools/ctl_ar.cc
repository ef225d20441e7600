#include "tools/ctl_ar.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "tools/ctl_commands.h"

namespace ibsm::tools {

using nlohmann::json;

namespace {

std::string Text(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? "-" : Cell(*it);
}

std::string Ports(const json& ports) {
  std::string out;
  for (const json& p : ports) out += (out.empty() ? "" : ",") + Cell(p);
  return out;
}

}  // namespace

Result<json> ArArgs(const std::vector<std::string>& words) {
  if (!words.empty()) return InvalidArgument("ar takes no arguments, not '" + words[0] + "'");
  return json::object();
}

// The summary line first (the answer to "is AR on, where, and why not"), then one row per
// switch, then one row per destination leaf with its group's members.
std::string FormatAr(const json& r) {
  std::string out = Text(r, "summary") + "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const json& s : r.value("switches", json::array())) {
    const bool enabled = s.value("enabled", false);
    rows.push_back({Text(s, "name"), Text(s, "guid"), s.value("capable", false) ? "yes" : "no",
                    enabled ? "yes" : "no",
                    enabled ? fmt::format("{:#06x}", s.value("sl_mask", 0)) : "-",
                    enabled ? Text(s, "mode") : "-", Text(s, "groups"),
                    s.value("why_not", json()).is_string() ? s["why_not"].get<std::string>() : ""});
  }
  out += AlignedTable({"SWITCH", "GUID", "CAPABLE", "ENABLED", "SLS", "MODE", "GROUPS", "WHY NOT"},
                      rows);
  const json& dests = r.value("destinations", json::array());
  if (dests.empty()) return out;
  rows.clear();
  for (const json& d : dests) {
    std::string members;
    size_t shown = 0;
    for (const json& m : d.value("members", json::array())) {
      if (shown++ == 4) {
        members += fmt::format("; +{} more", d["members"].size() - 4);
        break;
      }
      members += (members.empty() ? "" : "; ") + Text(m, "name") + " " + Ports(m["ports"]);
    }
    rows.push_back({Text(d, "name"), Text(d, "group"),
                    std::to_string(d.value("members", json::array()).size()), members});
  }
  out += "\n" + AlignedTable({"DESTINATION", "GROUP", "SWITCHES", "PORTS (switch ports)"}, rows);
  return out;
}

Result<json> TrafficArgs(const std::vector<std::string>& words) {
  json a = json::object();
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--pattern" && i + 1 < words.size()) {
      a["pattern"] = words[++i];
    } else if ((w == "--count" || w == "--seed") && i + 1 < words.size()) {
      char* end = nullptr;
      errno = 0;
      const std::string& v = words[i + 1];
      unsigned long long n = std::strtoull(v.c_str(), &end, 0);
      if (v.empty() || v[0] == '-' || *end != 0 || errno != 0)
        return InvalidArgument(w + " wants a number");
      a[w.substr(2)] = n;
      ++i;
    } else {
      return InvalidArgument(
          "traffic takes --pattern shift|random|alltoall, --count N and --seed S, not '" + w + "'");
    }
  }
  return a;
}

std::string FormatTraffic(const json& r) {
  std::string out = fmt::format("{} pattern, {} matrices over {} hosts (seed {}){}\n",
                                Text(r, "pattern"), Text(r, "matrices"), Text(r, "hosts"),
                                Text(r, "seed"),
                                r.value("ar_programmed", false)
                                    ? ""
                                    : "; AR is not programmed, so AR = static");
  std::vector<std::vector<std::string>> rows;
  for (const char* k : {"static", "ar"}) {
    const json& f = r.value(k, json::object());
    rows.push_back({k == std::string("ar") ? "AR" : "static",
                    fmt::format("{:.3f}", f.value("max_link_load", 0.0)),
                    fmt::format("{:.3f}", f.value("ebb", 0.0)), Text(f, "flows"),
                    Text(f, "unrouted")});
  }
  out += AlignedTable({"ROUTES", "MAX LINK LOAD", "EBB", "FLOWS", "UNROUTED"}, rows);
  out += "EBB: mean over flows of min(1, 1 / the largest load on a link the flow uses)\n";
  return out;
}

}  // namespace ibsm::tools
