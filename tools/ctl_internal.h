// Internal to the ibsmctl command files: reading a field of an answer as a cell, UTC times,
// the state-file line, "not recorded" and a link end, as every command's output writes them.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/ctl_commands.h"

namespace ibsm::tools {

using nlohmann::json;

namespace {

inline std::string Get(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? "-" : Cell(*it);
}

// Unix microseconds as UTC in strftime's `format`.
inline std::string UtcFormat(int64_t us, const char* format) {
  time_t secs = static_cast<time_t>(us / 1000000);
  char when[32];
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::strftime(when, sizeof when, format, &tm);
  return when;
}

// "2026-11-30 06:20:00" (UTC) of Unix microseconds.
inline std::string UtcTime(int64_t us) { return UtcFormat(us, "%Y-%m-%d %H:%M:%S"); }
// "06:20:00" (UTC).
inline std::string UtcClock(int64_t us) { return UtcFormat(us, "%H:%M:%S"); }

// The first line of an answer read from a state file: where from, and as of when.
inline std::string SnapshotLine(const json& r) {
  if (!r.contains("as_of_us")) return "";
  return fmt::format("from {} as of {} UTC (no daemon asked; what it last recorded)\n",
                     Get(r, "source"), UtcTime(r.value("as_of_us", int64_t{0})));
}

// A value the answer lacks or holds as null (a state file records less than the daemon
// knows) reads "not recorded", never "-" or an empty field.
inline std::string Recorded(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? "not recorded" : Cell(*it);
}

inline std::string End(const json& e) {
  return fmt::format("{} ({}) port {}", Get(e, "name"), Get(e, "guid"), Get(e, "port"));
}

}  // namespace
}  // namespace ibsm::tools
