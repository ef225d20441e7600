#include "sm/ctl/ar_commands.h"

#include <fmt/format.h>

#include <map>

#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {

using nlohmann::json;

namespace {

std::string Hex(Guid g) { return fmt::format("{:#018x}", g.value()); }

std::string Name(const Node& n) {
  if (!n.name.empty()) return n.name;
  if (!n.description.empty()) return n.description;
  return Hex(n.guid);
}

}  // namespace

json ArReport(const ArSnapshot* snap) {
  json out{{"switches", json::array()}, {"destinations", json::array()}};
  if (!snap) {
    out["summary"] = "no sweep has completed yet";
    return out;
  }
  out["summary"] = snap->summary;
  out["engine"] = snap->engine;
  out["ar_mode"] = snap->config.mode;
  out["sl_mask"] = snap->config.sl_mask;
  out["mode"] = std::string(routing::ArLidModeName(snap->config.lid_mode));
  for (const ArSwitchStatus& s : snap->switches) {
    out["switches"].push_back({{"guid", Hex(s.guid)},
                               {"name", s.name},
                               {"capable", s.capable},
                               {"enabled", s.enabled},
                               {"sl_mask", s.sl_mask},
                               {"mode", s.enabled ? json(s.mode) : json()},
                               {"groups", s.groups},
                               {"why_not", s.why_not.empty() ? json() : json(s.why_not)}});
  }
  if (!snap->ar || !snap->fabric) return out;
  const Fabric& f = *snap->fabric;
  std::map<uint16_t, Guid> by_id;
  for (const auto& [leaf, id] : snap->ar->group_ids) by_id[id] = leaf;
  for (const auto& [id, leaf] : by_id) {
    auto ln = f.FindNode(leaf);
    json members = json::array();
    for (const routing::ArSwitchTable& t : snap->ar->switches) {
      if (id >= t.groups.size() || t.groups[id].empty()) continue;
      members.push_back({{"switch", Hex(f.node(t.node).guid)},
                         {"name", Name(f.node(t.node))},
                         {"ports", t.groups[id]}});
    }
    out["destinations"].push_back({{"leaf", Hex(leaf)},
                                   {"name", ln ? json(Name(f.node(*ln))) : json()},
                                   {"group", id},
                                   {"members", std::move(members)}});
  }
  return out;
}

json TrafficReportJson(const routing::TrafficReport& r, const routing::TrafficOptions& o,
                       bool ar_programmed) {
  auto fig = [](const routing::LoadFigures& f) {
    return json{{"max_link_load", f.max_link_load},
                {"ebb", f.ebb},
                {"flows", f.flows},
                {"unrouted", f.unrouted}};
  };
  return json{{"pattern", std::string(routing::TrafficPatternName(o.pattern))},
              {"count", o.count},
              {"seed", o.seed},
              {"hosts", r.hosts},
              {"matrices", r.matrices},
              {"ar_programmed", ar_programmed},
              {"static", fig(r.static_routes)},
              {"ar", fig(r.ar)}};
}

Result<routing::TrafficOptions> ParseTrafficArgs(const json& args) {
  routing::TrafficOptions o;
  if (!args.is_object() && !args.is_null()) return InvalidArgument("args must be an object");
  auto get_uint = [&](const char* key, uint64_t fallback) -> Result<uint64_t> {
    if (!args.is_object()) return fallback;
    auto it = args.find(key);
    if (it == args.end() || it->is_null()) return fallback;
    if (it->is_number_unsigned()) return it->get<uint64_t>();
    if (it->is_number_integer() && it->get<int64_t>() >= 0)
      return static_cast<uint64_t>(it->get<int64_t>());
    return InvalidArgument(fmt::format("argument \"{}\" must be a number >= 0", key));
  };
  std::string pattern = "random";
  if (args.is_object() && args.contains("pattern") && !args["pattern"].is_null()) {
    if (!args["pattern"].is_string()) return InvalidArgument("argument \"pattern\" must be text");
    pattern = args["pattern"].get<std::string>();
  }
  IBSM_ASSIGN_OR_RETURN(o.pattern, routing::ParseTrafficPattern(pattern));
  IBSM_ASSIGN_OR_RETURN(uint64_t count,
                        get_uint("count", o.pattern == routing::TrafficPattern::kRandom ? 100 : 1));
  if (count == 0 || count > 100000)
    return InvalidArgument(fmt::format("count {} is outside 1..100000", count));
  o.count = static_cast<uint32_t>(count);
  IBSM_ASSIGN_OR_RETURN(o.seed, get_uint("seed", 1));
  return o;
}

ArCommands::ArCommands(boost::asio::io_context& io, ControlServer& server,
                       const SubnetManager& sm)
    : io_(io), sm_(sm) {
  server.Register("ar", ControlAccess::kRead,
                  "adaptive routing per switch (capable, enabled, SLs, mode, groups) and per "
                  "destination leaf",
                  [this](const json&) -> Result<json> {
                    return ArReport(sm_.ar().snapshot().get());
                  });
  server.RegisterAsync("traffic", ControlAccess::kRead,
                       "traffic model on the live tables, static vs AR; args: pattern "
                       "(shift|random|alltoall), count, seed",
                       [this](const json& a, ControlServer::Reply r) { Traffic(a, std::move(r)); });
}

ArCommands::~ArCommands() {
  *alive_ = false;
  stopping_ = true;
  if (worker_.joinable()) worker_.join();
}

void ArCommands::Traffic(const json& args, ControlServer::Reply reply) {
  auto snap = sm_.ar().snapshot();
  if (!snap || !snap->fabric || !snap->lids || !snap->tables) {
    reply(Unavailable("no routing has been programmed yet"));
    return;
  }
  auto opts = ParseTrafficArgs(args);
  if (!opts.ok()) {
    reply(opts.status());
    return;
  }
  if (running_) {
    reply(Unavailable("a traffic run is already going; ask again when it has answered"));
    return;
  }
  if (worker_.joinable()) worker_.join();  // finished: its reply was posted
  running_ = true;
  routing::TrafficOptions o = *opts;
  o.cancel = &stopping_;  // the worker ends before this object does (the destructor joins)
  worker_ = std::thread([this, alive = alive_, snap, o, reply]() mutable {
    // An exception on this thread would end the daemon: it becomes the request's error.
    Result<json> result = Status(StatusCode::kInternal, "traffic model failed");
    try {
      routing::TrafficReport r =
          routing::RunTraffic(*snap->fabric, *snap->lids, *snap->tables, snap->ar.get(), o);
      result = TrafficReportJson(r, o, snap->ar != nullptr);
    } catch (const std::exception& e) {
      result = Status(StatusCode::kInternal, std::string("traffic model failed: ") + e.what());
    }
    boost::asio::post(io_, [this, alive, reply, result = std::move(result)]() mutable {
      if (!*alive) return;
      running_ = false;
      reply(std::move(result));
    });
  });
}

}  // namespace ibsm::sm
