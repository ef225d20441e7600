#include "sm/ctl/control_commands.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/json.h"
#include "base/log.h"
#include "base/text.h"
#include "ha/sm_state_machine.h"
#include "ha/state_rows.h"
#include "routing/quality.h"
#include "routing/verify.h"
#include "sm/answers/health.h"
#include "sm/perf/link_health.h"
#include "sm/perf/perf_manager.h"
#include "sm/vendor/sharp_view.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {

using nlohmann::json;

namespace {

// A counter table's values by control-answer key: {"key": value, ...}.
template <typename Row, size_t N, typename Counters>
json RowsJson(const Row (&rows)[N], const Counters& c) {
  json j = json::object();
  for (const Row& row : rows) j[std::string(row.key)] = c.*row.member;
  return j;
}

// The counters of one section of the control answer, named as kSmCounterRows names them.
json CountersJson(const SmCounters& c, CounterSection section) {
  json out = json::object();
  for (const SmCounterRow& row : kSmCounterRows)
    if (row.section == section) out[std::string(row.key)] = c.*row.member;
  return out;
}

constexpr unsigned kMaxRouteHops = 64;

// Typed access to the request's args: absent is the default, a wrong type an error.
template <typename T>
Result<T> Arg(const json& args, const char* key, T fallback) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    if (it->is_boolean()) return it->get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number_unsigned()) return std::to_string(it->get<uint64_t>());
  } else {
    if (it->is_number_unsigned()) return static_cast<T>(it->get<uint64_t>());
    if (it->is_number_integer() && it->get<int64_t>() >= 0)
      return static_cast<T>(it->get<int64_t>());
  }
  return InvalidArgument(fmt::format("argument \"{}\" has the wrong type", key));
}

// The model nodes, links and health answer from: the one the SM last published (a sweep's
// end, or a standby's refresh), immutable and shared, never the model a running sweep is
// changing (SubnetManager::published()).
std::shared_ptr<const DiscoveryResult> PublishedModel(const SubnetManager& sm, Status* why) {
  auto s = sm.published();
  if (!s || !s->discovery) {
    *why = Unavailable("no sweep has completed yet");
    return nullptr;
  }
  return s->discovery;
}

// The discovery result cables are judged degraded from (`model`, or null when
// health_degraded_links is FALSE), so links, topo and health agree that the rule is off.
const DiscoveryResult* Judged(const SubnetManager& sm, const DiscoveryResult* model) {
  return sm.options().health_degraded_links ? model : nullptr;
}

// What the SM last published for the SA: one sweep's model with the tables its switches
// hold, indexed by that model's NodeIds (even when routing failed and older tables stayed).
// Routes and tables are read from it, never from the engine's model in the middle of a sweep.
std::shared_ptr<const SaSnapshot> Programmed(const SubnetManager& sm, Status* why) {
  auto s = sm.sa().snapshot();
  if (!s || !s->discovery || !s->tables) {
    *why = Unavailable("no routing has been programmed yet");
    return nullptr;
  }
  return s;
}

}  // namespace

namespace {

// Every name an operator may type for a node: the topology file's name (the daemon on the
// simulator knows the file), the discovered name and the NodeDescription.
std::vector<std::string> NamesOf(const Fabric& f, NodeId n, const Fabric* topology) {
  std::vector<std::string> names;
  const Node& node = f.node(n);
  if (topology) {
    if (auto t = topology->FindNode(node.guid); t && !topology->node(*t).name.empty())
      names.push_back(topology->node(*t).name);
  }
  if (!node.name.empty()) names.push_back(node.name);
  if (!node.description.empty()) names.push_back(node.description);
  return names;
}

bool IsHex(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c); });
}

// "node-0001/hca1 (0x0002c90300000010), ..." for an ambiguous name: at most 10, then a count.
std::string Candidates(const Fabric& f, const std::vector<NodeId>& nodes, const Fabric* topology) {
  constexpr size_t kShown = 10;
  std::string out;
  for (size_t i = 0; i < nodes.size() && i < kShown; ++i) {
    auto names = NamesOf(f, nodes[i], topology);
    out += fmt::format("{}{} ({})", i ? ", " : "",
                       EscapeControls(names.empty() ? std::string("-") : names.front()),
                       GuidText(f.node(nodes[i]).guid));
  }
  if (nodes.size() > kShown) out += fmt::format(" and {} more", nodes.size() - kShown);
  return out;
}

}  // namespace

Result<PortId> ResolveEndpoint(const Fabric& f, const std::string& what, const Fabric* topology) {
  if (what.empty()) return InvalidArgument("an empty endpoint");
  auto node_port = [&](NodeId n) -> Result<PortId> {
    const Node& node = f.node(n);
    if (node.is_switch()) return f.port_id(n, PortNum{0});
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
      if (f.port(id).connected()) return id;
    }
    return NotFound(fmt::format("'{}' has no cabled port", EscapeControls(what)));
  };
  auto by_guid = [&](uint64_t v) -> std::optional<Result<PortId>> {
    if (auto p = f.FindPort(Guid{v})) return Result<PortId>(*p);
    if (auto n = f.FindNode(Guid{v})) return node_port(*n);
    return std::nullopt;
  };
  const bool hex = what.size() > 2 && what[0] == '0' && (what[1] == 'x' || what[1] == 'X') &&
                   IsHex(std::string_view(what).substr(2)) && what.size() <= 18;
  const bool digits =
      std::all_of(what.begin(), what.end(), [](unsigned char c) { return std::isdigit(c); });
  // Decimal up to 5 digits or a short 0x number is a LID; a longer 0x number a GUID.
  if ((digits && what.size() <= 5) || (hex && what.size() <= 6)) {
    uint64_t v = std::strtoull(what.c_str(), nullptr, digits ? 10 : 16);
    if (v == 0 || v > 0xBFFF) return InvalidArgument(fmt::format("LID {} is not unicast", what));
    if (auto p = f.FindPortByLid(Lid{static_cast<uint16_t>(v)})) return *p;
    return NotFound(fmt::format("no port has LID {}", v));
  }
  if (hex) {
    if (auto r = by_guid(std::strtoull(what.c_str(), nullptr, 16))) return *r;
    return NotFound(fmt::format("no port or node has GUID {}", what));
  }
  // A GUID without 0x as ibnetdiscover prints it ("2c90300000011", "0002c90300000011");
  // a name made of hex digits that is no GUID of the fabric is looked up as a name below.
  if (IsHex(what) && what.size() >= 7 && what.size() <= 16) {
    if (auto r = by_guid(std::strtoull(what.c_str(), nullptr, 16))) return *r;
  }
  // Names: exact first (a description shared by many nodes is ambiguous), then a prefix.
  std::vector<NodeId> exact, prefix;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    bool is_exact = false, is_prefix = false;
    for (const std::string& name : NamesOf(f, n, topology)) {
      is_exact |= name == what;
      is_prefix |= name.compare(0, what.size(), what) == 0;
    }
    if (is_exact) exact.push_back(n);
    if (is_prefix) prefix.push_back(n);
  }
  for (const auto* found : {&exact, &prefix}) {
    if (found->size() == 1) return node_port(found->front());
    if (found->size() > 1)
      return InvalidArgument(fmt::format("'{}' is ambiguous: {} nodes match: {}",
                                         EscapeControls(what), found->size(),
                                         Candidates(f, *found, topology)));
  }
  return NotFound(fmt::format("'{}' is no LID, GUID, node name or description in the fabric",
                              EscapeControls(what)));
}

json TraceRoute(const Fabric& f, const routing::RoutingTables& tables, PortId from, PortId to) {
  const Port& dst = f.port(to);
  const Node& dst_node = f.node(dst.node);
  const uint16_t dlid = dst_node.is_switch() ? f.port(dst_node.first_port).lid.value()
                                             : dst.lid.value();
  json hops = json::array();
  json out{{"dlid", dlid}, {"complete", false}};
  auto hop = [&](NodeId n, int in_port, int out_port) {
    const Node& node = f.node(n);
    json h{{"guid", GuidText(node.guid)}, {"name", DisplayName(node)}, {"kind", KindName(node.kind)}};
    h["in_port"] = in_port < 0 ? json() : json(in_port);
    h["out_port"] = out_port < 0 ? json() : json(out_port);
    hops.push_back(std::move(h));
  };
  auto finish = [&](std::string problem) {
    out["hops"] = std::move(hops);
    if (problem.empty()) {
      out["complete"] = true;
    } else {
      out["problem"] = std::move(problem);
    }
    return out;
  };
  if (dlid == 0) return finish("the destination has no LID");

  PortId at = from;  // the port a packet enters (or, at the start, leaves from)
  const Port& src = f.port(from);
  if (!f.node(src.node).is_switch()) {
    if (from == to) {
      hop(src.node, -1, -1);
      return finish("");
    }
    hop(src.node, -1, src.num.value());
    if (!src.connected()) return finish("the source port has no cable");
    at = src.peer;
  }
  int in_port = f.node(f.port(at).node).is_switch() && at != from ? f.port(at).num.value() : -1;
  for (unsigned i = 0; i < kMaxRouteHops; ++i) {
    NodeId n = f.port(at).node;
    const Node& node = f.node(n);
    if (!node.is_switch()) {
      hop(n, f.port(at).num.value(), -1);
      return finish(at == to ? "" : fmt::format("delivered to {} port {}, which does not own LID {}",
                                                DisplayName(node), f.port(at).num.value(), dlid));
    }
    const routing::SwitchTable* t = tables.table(n);
    if (!t || dlid >= t->lft.size() || t->lft[dlid] == routing::kDropPort) {
      hop(n, in_port, -1);
      return finish(fmt::format("switch {} has no route to LID {}", DisplayName(node), dlid));
    }
    const uint8_t out_port = t->lft[dlid];
    if (out_port == 0) {
      hop(n, in_port, 0);
      return finish(f.port_id(n, PortNum{0}) == to
                        ? ""
                        : fmt::format("switch {} takes LID {} as its own", DisplayName(node), dlid));
    }
    hop(n, in_port, out_port);
    if (out_port > node.num_ports) return finish(fmt::format("port {} is out of range", out_port));
    const Port& egress = f.port(n, PortNum{out_port});
    if (!egress.connected())
      return finish(fmt::format("switch {} port {} has no cable", DisplayName(node), out_port));
    at = egress.peer;
    in_port = f.port(at).num.value();
  }
  return finish(fmt::format("no delivery within {} switches (a loop?)", kMaxRouteHops));
}

ControlCommands::ControlCommands(boost::asio::io_context& io, ControlServer& server,
                                 ControlContext context)
    : io_(io), server_(server), ctx_(std::move(context)) {
  if (!ctx_.set_log_level) ctx_.set_log_level = [](spdlog::level::level_enum l) { SetLogLevel(l); };
  using A = ControlAccess;
  server.Register("status", A::kRead, "SM state, identity, last sweep, counts, counters",
                  [this](const json& a) { return Status(a); });
  server.RegisterAsyncText("nodes", A::kRead, "every node with its GUID, kind, LIDs and ports",
                           [this](const json& a, ControlServer::TextReply r) {
                             Nodes(a, std::move(r));
                           });
  server.RegisterAsyncText("links", A::kRead,
                           "every cable with both ends; args: degraded (bool), errors (bool)",
                           [this](const json& a, ControlServer::TextReply r) {
                             Links(a, std::move(r));
                           });
  server.Register("health", A::kRead,
                  "cables with PerfMgr or link findings of the health window, worst first, "
                  "with both ends; args: window_s (a shorter window), history (bool: the "
                  "findings of the event log instead), since_us, limit",
                  [this](const json& a) { return Health(a); });
  server.Register("route", A::kRead, "hop-by-hop path; args: from, to (LID, GUID, name, description or a prefix)",
                  [this](const json& a) { return Route(a); });
  server.Register("lft", A::kRead, "one switch's unicast table; args: switch",
                  [this](const json& a) { return Lft(a); });
  server.Register("events", A::kRead, "the event log; args: since_us, limit",
                  [this](const json& a) { return Events(a); });
  server.Register("ha", A::kRead, "SM state, master, peers and HA counters",
                  [this](const json& a) { return Ha(a); });
  server.Register("sharp", A::kRead, "SHARP trees: roots, depth, hosts reached, coverage",
                  [this](const json&) -> Result<json> {
                    return SharpTreesJson(ctx_.sm->sharp().summary());
                  });
  server.RegisterAsync("check", A::kRead,
                       "route verification, deadlock proof, balance; args: permutations, seed",
                       [this](const json& a, ControlServer::Reply r) { Check(a, std::move(r)); });
  server.Register("resweep", A::kChange, "queue a heavy sweep", [this](const json&) -> Result<json> {
    Log(LogName::kSm).info("heavy sweep requested on the control socket");
    ctx_.sm->RequestHeavySweep("control socket request");
    return json{{"queued", true}};
  });
  server.Register("log-level", A::kChange, "set the log level; args: level",
                  [this](const json& a) -> Result<json> {
                    IBSM_ASSIGN_OR_RETURN(std::string name, Arg<std::string>(a, "level", ""));
                    auto level = spdlog::level::from_str(name);
                    // from_str answers "off" for anything it does not know.
                    if (name != "off" && level == spdlog::level::off)
                      return InvalidArgument(fmt::format(
                          "level '{}' is none of trace, debug, info, warn, error, critical, off",
                          name));
                    ctx_.set_log_level(level);
                    Log(LogName::kSm).info("log level set to {} on the control socket", name);
                    return json{{"level", name}};
                  });
}

ControlCommands::~ControlCommands() {
  *alive_ = false;
  stopping_ = true;
  if (check_worker_.joinable()) check_worker_.join();
  answers_.join();
}

Result<json> ControlCommands::Status(const json&) const {
  const SubnetManager& sm = *ctx_.sm;
  const SweepStats& s = sm.last_sweep();
  const SmCounters& c = sm.counters();
  auto now = std::chrono::system_clock::now();
  json j{{"state", std::string(ha::SmStateName(sm.state()))},
         {"guid", GuidText(sm.port_guid())},
         {"priority", sm.options().sm_priority},
         {"sm_lid", sm.sm_lid().value()},
         {"lmc", sm.options().lids.lmc},
         {"engine", s.engine.empty() ? json() : json(s.engine)},
         {"engine_configured", sm.options().routing_engine.empty()
                                   ? std::string(routing::kDefaultChain)
                                   : sm.options().routing_engine},
         {"subnet_up", s.subnet_up},
         {"uptime_s", std::chrono::duration_cast<std::chrono::seconds>(now - ctx_.started).count()},
         {"config_file", ctx_.config_file}};
  if (ctx_.config_not_honoured) j["config_not_honoured"] = *ctx_.config_not_honoured;
  if (ctx_.last_reload && ctx_.last_reload->time_us > 0) {
    j["last_reload"] = {{"time_us", ctx_.last_reload->time_us},
                        {"outcome", ctx_.last_reload->outcome},
                        {"why", ctx_.last_reload->why}};
  }
  if (s.number > 0) {
    auto age = sm.clock().Now() - s.started;
    j["last_sweep"] = {
        {"number", s.number},
        {"heavy", s.heavy},
        {"repair", s.repair},
        {"age_s", std::chrono::duration<double>(age).count()},
        {"duration_s", std::chrono::duration<double>(s.duration).count()},
        {"smps", s.smps},
        {"smps_failed", s.smps_failed},
        {"lid_changes", s.lid_changes},
        {"lft_blocks_sent", s.lft_blocks_sent},
        {"issues", s.issues},
        {"declined", s.declined}};
    j["counts"] = {{"nodes", s.nodes}, {"switches", s.switches}, {"cas", s.cas}, {"links", s.links}};
  }
  if (auto p = sm.sweep_in_progress()) {
    j["sweep_running"] = {
        {"number", p->number},
        {"elapsed_s", std::chrono::duration<double>(sm.clock().Now() - p->started).count()},
        {"smps", p->smps},
        {"nodes", p->nodes}};
  }
  // Adaptive routing and SHARP in one line each (ibsmctl ar / sharp have the details).
  {
    const ArConfig& ar = sm.options().ar;
    json a{{"configured", ar.on()}};
    if (auto snap = sm.ar().snapshot()) {
      size_t capable = 0, enabled = 0;
      for (const ArSwitchStatus& sw : snap->switches) {
        capable += sw.capable;
        enabled += sw.enabled;
      }
      a["switches"] = snap->switches.size();
      a["capable"] = capable;
      a["enabled"] = enabled;
      a["summary"] = snap->summary;
    }
    j["ar"] = std::move(a);
    const SharpSummary& sh = sm.sharp().summary();
    json sj{{"configured", sm.options().sharp_enable}, {"ran", sh.ran}};
    if (sh.ran) {
      size_t programmed = 0;
      for (const SharpTreeSummary& t : sh.trees) programmed += t.programmed;
      sj["aggregation_nodes"] = sh.ans;
      sj["usable"] = sh.ans_usable;
      sj["trees"] = sh.trees.size();
      sj["programmed"] = programmed;
      sj["hosts"] = sh.hosts;
      sj["hosts_not_covered"] = sh.never_covered.size();
    }
    j["sharp"] = std::move(sj);
  }
  json issues = json::object();
  for (const auto& [id, n] : c.issues_by_id) issues[id] = n;
  json counters = CountersJson(c, CounterSection::kStatus);
  counters["issues_by_id"] = std::move(issues);
  j["counters"] = std::move(counters);
  // The MAD transport, shared by the sweep, SA, PerfMgr and vendor stages (README "MAD
  // transport: backpressure").
  const mad::TransportCounters& t = sm.transport_counters();
  j["transport"] = RowsJson(mad::kTransportCounterRows, t);
  // The sweep pipeline's SMPs and the SA's counters, from their tables
  // (sm/model/smp_pipeline.h, sm/sa/sa_server.h).
  j["smp_pipeline"] = RowsJson(kPipelineCounterRows, sm.smp_counters());
  j["sa"] = RowsJson(kSaCounterRows, sm.sa().counters());
  // The control socket's own counters (sm/net/control_server.h), and the metrics endpoint's
  // when it runs.
  auto server_json = [](const auto& rows, const auto& counters) {
    json out = json::object();
    for (const auto& row : rows) out[std::string(row.key)] = row.get(counters);
    return out;
  };
  j["control_server"] = server_json(kControlCounterRows, server_.counters());
  if (ctx_.metrics_server) j["metrics_server"] = server_json(kMetricsServerCounterRows, *ctx_.metrics_server);
  return j;
}

void ControlCommands::Render(std::function<Result<std::string>()> render,
                             ControlServer::TextReply reply) {
  boost::asio::post(answers_, [this, alive = alive_, render = std::move(render),
                               reply = std::move(reply)]() mutable {
    // An exception on this thread would end the daemon: it becomes the request's error.
    Result<std::string> text = ibsm::Status(StatusCode::kInternal, "the answer failed");
    try {
      text = render();
    } catch (const std::exception& e) {
      text = ibsm::Status(StatusCode::kInternal, std::string("the answer failed: ") + e.what());
    }
    boost::asio::post(io_, [alive, reply = std::move(reply), text = std::move(text)]() mutable {
      if (*alive) reply(std::move(text));
    });
  });
}

void ControlCommands::Nodes(const json&, ControlServer::TextReply reply) {
  ibsm::Status why;
  std::shared_ptr<const DiscoveryResult> model = PublishedModel(*ctx_.sm, &why);
  if (!model) return reply(why);
  Render(
      [model]() -> Result<std::string> {
        std::string text;
        StreamNodesAnswer(model->fabric, [&text](std::string_view piece) { text += piece; });
        return text;
      },
      std::move(reply));
}

void ControlCommands::Links(const json& args, ControlServer::TextReply reply) {
  ibsm::Status why;
  std::shared_ptr<const DiscoveryResult> model = PublishedModel(*ctx_.sm, &why);
  if (!model) return reply(why);
  auto only_degraded = Arg<bool>(args, "degraded", false);
  auto only_errors = Arg<bool>(args, "errors", false);
  if (!only_degraded.ok()) return reply(only_degraded.status());
  if (!only_errors.ok()) return reply(only_errors.status());
  // Cables are judged degraded from the model only with health_degraded_links (Judged).
  const bool judged = Judged(*ctx_.sm, model.get()) != nullptr;
  // What the PerfMgr holds, copied here on the io thread that owns it.
  std::shared_ptr<const PerfView> perf = ViewOfPerf(ctx_.perf);
  Render(
      [model, judged, perf, degraded = *only_degraded,
       errors = *only_errors]() -> Result<std::string> {
        const DiscoveryResult* d = judged ? model.get() : nullptr;
        if (degraded || errors) {
          IBSM_ASSIGN_OR_RETURN(json filtered,
                                FilterLinks(LinksAnswerOfView(model->fabric, d, perf.get()), degraded,
                                            errors));
          return DumpJson(filtered);
        }
        std::string text;
        StreamLinksAnswer(model->fabric, d, perf.get(), /*with_sweep=*/true,
                          [&text](std::string_view piece) { text += piece; });
        return text;
      },
      std::move(reply));
}

// history: the health findings of the event log instead of those of the health window;
// window_s: only findings last seen within that many seconds.
Result<json> ControlCommands::Health(const json& args) const {
  IBSM_ASSIGN_OR_RETURN(bool history, Arg<bool>(args, "history", false));
  if (history) {
    if (!ctx_.store) return Unavailable("this daemon runs without a state file (state_db_file)");
    IBSM_ASSIGN_OR_RETURN(int64_t since, Arg<int64_t>(args, "since_us", 0));
    IBSM_ASSIGN_OR_RETURN(size_t limit, Arg<size_t>(args, "limit", 1000));
    return HealthHistory(*ctx_.store, since, std::min<size_t>(limit, 10000));
  }
  ibsm::Status why;
  const std::shared_ptr<const DiscoveryResult> model = PublishedModel(*ctx_.sm, &why);
  if (!model) return why;
  const DiscoveryResult* judged = Judged(*ctx_.sm, model.get());
  IBSM_ASSIGN_OR_RETURN(uint64_t window_s, Arg<uint64_t>(args, "window_s", 0));
  if (window_s == 0 || !ctx_.perf) return HealthAnswer(judged, ctx_.perf);
  const int64_t now = ctx_.perf->clock().UnixMicros();  // the clock the findings were timed by
  const int64_t span = static_cast<int64_t>(std::min<uint64_t>(window_s, 1ull << 40)) * 1000000;
  json h = HealthAnswer(judged, ctx_.perf, std::max<int64_t>(1, now - span));
  h["window_s"] = window_s;
  return h;
}

Result<json> ControlCommands::Route(const json& args) const {
  ibsm::Status why;
  const auto programmed = Programmed(*ctx_.sm, &why);
  if (!programmed) return why;
  const Fabric* f = &programmed->fabric();
  const routing::RoutingTables* tables = programmed->tables.get();
  IBSM_ASSIGN_OR_RETURN(std::string from_text, Arg<std::string>(args, "from", ""));
  IBSM_ASSIGN_OR_RETURN(std::string to_text, Arg<std::string>(args, "to", ""));
  IBSM_ASSIGN_OR_RETURN(PortId from, ResolveEndpoint(*f, from_text, ctx_.topology.get()));
  IBSM_ASSIGN_OR_RETURN(PortId to, ResolveEndpoint(*f, to_text, ctx_.topology.get()));
  json r = TraceRoute(*f, *tables, from, to);
  r["from"] = EndJson(*f, from);
  r["to"] = EndJson(*f, to);
  return r;
}

Result<json> ControlCommands::Lft(const json& args) const {
  ibsm::Status why;
  const auto programmed = Programmed(*ctx_.sm, &why);
  if (!programmed) return why;
  const Fabric* f = &programmed->fabric();
  const routing::RoutingTables* tables = programmed->tables.get();
  IBSM_ASSIGN_OR_RETURN(std::string which, Arg<std::string>(args, "switch", ""));
  IBSM_ASSIGN_OR_RETURN(PortId p, ResolveEndpoint(*f, which, ctx_.topology.get()));
  NodeId n = f->port(p).node;
  if (!f->node(n).is_switch())
    return InvalidArgument(fmt::format("'{}' is not a switch", EscapeControls(which)));
  const routing::SwitchTable* t = tables->table(n);
  if (!t) return NotFound(fmt::format("no table for switch '{}'", EscapeControls(which)));
  json entries = json::array();
  for (size_t lid = 1; lid < t->lft.size(); ++lid) {
    if (t->lft[lid] == routing::kDropPort) continue;
    auto owner = f->FindPortByLid(Lid{static_cast<uint16_t>(lid)});
    json e{{"lid", lid}, {"port", t->lft[lid]}};
    if (owner) {
      const Node& on = f->node(f->port(*owner).node);
      e["dest"] = DisplayName(on);
    }
    entries.push_back(std::move(e));
  }
  return json{{"switch", EndJson(*f, p)}, {"engine", tables->engine}, {"entries", entries}};
}

Result<json> ControlCommands::Events(const json& args) const {
  if (!ctx_.store) return Unavailable("this daemon runs without a state file (state_db_file)");
  IBSM_ASSIGN_OR_RETURN(int64_t since, Arg<int64_t>(args, "since_us", 0));
  IBSM_ASSIGN_OR_RETURN(size_t limit, Arg<size_t>(args, "limit", 100));
  limit = std::min<size_t>(limit, 10000);
  IBSM_ASSIGN_OR_RETURN(std::vector<ha::EventRow> rows, ctx_.store->RecentEvents(limit, since));
  json events = json::array();
  for (const auto& e : rows) events.push_back(EventJson(e));
  IBSM_ASSIGN_OR_RETURN(uint64_t total, ctx_.store->CountEvents(since));
  return json{{"events", events}, {"more", total > rows.size() ? total - rows.size() : 0}};
}

Result<json> ControlCommands::Ha(const json&) const {
  const SubnetManager& sm = *ctx_.sm;
  const SmCounters& c = sm.counters();
  json j{{"state", std::string(ha::SmStateName(sm.state()))},
         {"guid", GuidText(sm.port_guid())},
         {"priority", sm.options().sm_priority},
         {"polled_master", sm.polled_master().value() ? json(GuidText(sm.polled_master())) : json()},
         {"counters", CountersJson(c, CounterSection::kHa)}};
  j["standby_model"] = json();
  if (auto m = sm.standby_model()) {
    j["standby_model"] = {{"age_s", m->age_s},         {"nodes", m->nodes},
                          {"links", m->links},         {"tables_read", m->tables_read},
                          {"tables_age_s", m->tables_age_s}, {"takeover_starts_from_it", m->usable}};
  }
  json peers = json::array();
  if (ctx_.store) {
    if (auto rows = ctx_.store->Peers(); rows.ok())
      peers = PeersJson(*rows, PeersNotAnsweringJson(sm.peer_liveness()));
  }
  // The state file's row is written when a sweep finds the peer; a poll answered since is
  // newer.
  for (json& p : peers) {
    for (const auto& [g, l] : sm.peer_liveness())
      if (GuidText(g) == p.value("guid", std::string()))
        p["last_seen_us"] = std::max(p.value("last_seen_us", int64_t{0}), l.last_answer_us);
  }
  j["peers"] = peers;
  return j;
}

namespace {

// The `check` answer: balance measured over the tables (runs on the check worker).
json CheckAnswer(const Fabric& fabric, const routing::RoutingTables& tables,
                 const routing::QualityOptions& qo, json base) {
  routing::LidMap lids(fabric);
  routing::QualityReport q = routing::MeasureQuality(fabric, lids, tables, qo);
  json tiers = json::array();
  for (const auto& t : q.routes_per_link)
    tiers.push_back({{"tier", t.tier},
                     {"channels", t.channels},
                     {"min_routes", t.min_routes},
                     {"max_routes", t.max_routes},
                     {"mean_routes", t.mean_routes},
                     {"stddev_routes", t.stddev_routes}});
  base["balance"] = {{"hosts", q.hosts},
                     {"routes_per_link", tiers},
                     {"shift_max_sharing", qo.shifts ? json(q.shift_max_sharing) : json()},
                     {"random_permutations", qo.random_permutations},
                     {"random_max_sharing", q.random_max_sharing},
                     {"effective_bisection_bandwidth", q.effective_bisection_bandwidth},
                     {"unrouted_flows", q.unrouted_flows}};
  return base;
}

}  // namespace

// Verification and the deadlock proof are those of the last routing (the SM runs them before
// it programs anything); the balance figures are computed now, on a worker thread, from a
// copy of the fabric and the shared tables, so the daemon keeps serving meanwhile.
void ControlCommands::Check(const json& args, ControlServer::Reply reply) {
  const SubnetManager& sm = *ctx_.sm;
  ibsm::Status why;
  const auto programmed = Programmed(sm, &why);
  const auto& last = sm.last_routing_check();
  if (!programmed || !last) {
    reply(Unavailable("no routing has been programmed yet"));
    return;
  }
  std::shared_ptr<const routing::RoutingTables> tables = programmed->tables;
  auto perms = Arg<uint32_t>(args, "permutations", 100);
  auto seed = Arg<uint64_t>(args, "seed", 1);
  if (!perms.ok() || !seed.ok()) {
    reply(perms.ok() ? seed.status() : perms.status());
    return;
  }
  json base{{"engine", last->engine},
            {"accepted", last->accepted},
            {"verify",
             {{"ok", last->verify.ok},
              {"missing_entries", last->verify.missing_entries},
              {"loops", last->verify.loops},
              {"misrouted_entries", last->verify.misrouted_entries},
              {"unreachable_pairs", last->verify.unreachable_pairs},
              {"problems", last->verify.problems},
              {"lids_verified", last->verified_lids == 0 ? json("all") : json(last->verified_lids)}}},
            {"credit_loops",
             {{"acyclic", last->loops.acyclic},
              {"by", last->loops_proven ? "up*/down* proof" : "dependency graph"},
              {"turns", last->turns},
              {"channels", last->loops.channels},
              {"dependencies", last->loops.dependencies},
              {"cycle", last->loops.cycle}}},
            {"seconds",
             {{"route", last->route_s}, {"verify", last->verify_s}, {"loops", last->loops_s}}}};
  // A refused request costs the io thread nothing.
  if (check_running_) {
    reply(Unavailable("a check is already running; ask again when it has answered"));
    return;
  }
  // The published model, shared: nothing is copied on the io thread.
  auto fabric = std::shared_ptr<const Fabric>(programmed, &programmed->fabric());
  routing::QualityOptions qo;
  qo.random_permutations = std::min<uint32_t>(*perms, 100000);
  qo.seed = *seed;
  qo.shifts = fabric->ca_count() <= 4096;  // every shift is O(hosts^2 x hops)
  qo.cancel = &stopping_;  // the worker ends before this object does (the destructor joins)
  if (check_worker_.joinable()) check_worker_.join();  // finished: its reply was posted
  check_running_ = true;
  check_worker_ = std::thread([this, alive = alive_, fabric, tables, qo, base, reply]() mutable {
    // An exception on this thread would end the daemon: it becomes the request's error.
    Result<json> result = ibsm::Status(StatusCode::kInternal, "check failed");
    try {
      result = CheckAnswer(*fabric, *tables, qo, std::move(base));
    } catch (const std::exception& e) {
      result = ibsm::Status(StatusCode::kInternal, std::string("check failed: ") + e.what());
    }
    boost::asio::post(io_, [this, alive, reply, result = std::move(result)]() mutable {
      if (!*alive) return;
      check_running_ = false;
      reply(std::move(result));
    });
  });
}

}  // namespace ibsm::sm
