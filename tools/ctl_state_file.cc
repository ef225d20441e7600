// ibsmctl --state-db: the answers of status, events, ha, nodes, links and health built
// from a state file, read-only, in the daemon's answer shapes.
#include "tools/ctl_commands.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "ha/state_store.h"
#include "sm/answers/answers.h"

namespace ibsm::tools {

using nlohmann::json;

// The commands CtlFromStateFile answers.
constexpr char kFromStateFile[] = "status, events, ha, nodes, links, health, topo";

namespace {

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

}  // namespace ibsm::tools
