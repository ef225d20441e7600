// ibsmd: the ibsm subnet manager daemon. Reads opensm.conf (-F) and OpenSM's flags, binds to
// the local HCA port through libibumad (ibsim through its preload library) or to the
// in-process simulator (--sim), and runs the sweep engine until SIGTERM/SIGINT (or after one
// sweep with -o). SIGHUP re-reads the config and re-sweeps; SIGUSR1 reopens the log.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <unordered_set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "base/clock.h"
#include "base/guarded_run.h"
#include "base/log.h"
#include "base/version.h"
#include "conf/command_line.h"
#include "conf/guid_file.h"
#include "conf/partitions.h"
#include "conf/qos_config.h"
#include "conf/sm_config.h"
#include "conf/text_file.h"
#include "fabric/topology_reader.h"
#include "ha/locked_state_file.h"
#include "ha/state_store.h"
#include "mad/umad_transport.h"
#include "routing/routing_engine.h"
#include "fabric/aggregation_node.h"
#include "sim/sharp_an.h"
#include "sim/sim_transport.h"
#include "sm/ctl/ar_commands.h"
#include "sim/simulator.h"
#include "sm/ctl/control_commands.h"
#include "sm/net/control_server.h"
#include "sm/net/metrics_server.h"
#include "sm/sweep/config_options.h"
#include "sm/ctl/sm_metrics.h"
#include "sm/model/discovery.h"
#include "sm/perf/perf_manager.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

// Attach point for --sim: a node by name, node GUID or port GUID; default the first CA with
// a cable, which is where ibsim attaches its clients for the same file.
Result<PortId> PickSimPort(const Fabric& f, const std::string& host) {
  std::optional<NodeId> node;
  if (host.empty()) {
    for (NodeId n = 0; n < f.node_count() && !node; ++n)
      if (f.node(n).kind == NodeKind::kCa) node = n;
    if (!node) return NotFound("the topology has no CA to attach the SM to");
  } else {
    node = f.FindNodeByName(host);
    if (!node) {
      char* end = nullptr;
      uint64_t g = std::strtoull(host.c_str(), &end, 0);
      if (end && *end == 0 && g != 0) {
        if (auto p = f.FindPort(Guid{g})) return *p;
        node = f.FindNode(Guid{g});
      }
    }
    if (!node) return NotFound("--sim-host '" + host + "' names no node in the topology");
  }
  for (uint32_t p = 1; p <= f.node(*node).num_ports; ++p)
    if (f.port(*node, PortNum{static_cast<uint8_t>(p)}).connected())
      return f.port_id(*node, PortNum{static_cast<uint8_t>(p)});
  return NotFound("node '" + f.node(*node).name + "' has no cabled port");
}

// A warning that changes what ibsmd does (no isolation, a key ignored, an engine dropped):
// at start it goes to stderr as well as the log, so whoever starts ibsmd by hand sees it
// without opening the log (README "Logs"). `loud` is false on a SIGHUP reload, when stderr
// is nobody's terminal.
// When the log itself goes to stderr the line is not printed twice.
bool g_log_on_stderr = false;

template <typename... Args>
void WarnLoudly(bool loud, LogName area, fmt::format_string<Args...> f, Args&&... args) {
  const std::string text = fmt::format(f, std::forward<Args>(args)...);
  Log(area).warn("{}", text);
  if (loud && !g_log_on_stderr) fmt::print(stderr, "ibsmd: warning: {}\n", text);
}

Result<std::vector<Guid>> LoadGuids(const std::string& path) {
  if (path.empty()) return std::vector<Guid>{};
  IBSM_ASSIGN_OR_RETURN(conf::GuidList list, conf::LoadGuidListFile(path));
  for (const auto& w : list.warnings) Log(LogName::kConf).warn("{}", w.ToString());
  return list.guids;
}

// partitions.conf. No file: null (OpenSM's default: every port a full member of 0x7fff).
// A file with errors: each logged with file and line, and InvalidArgument; the caller keeps
// the partition set in force (at start there is none: ibsmd refuses to start rather than
// run the fabric without the isolation the file asks for).
// A file the config names (partition_config_file) that does not exist is a mistake that
// turns isolation off: PART-021, loudly; OpenSM's default path missing is the usual case.
Result<std::shared_ptr<const conf::PartitionConfig>> LoadPartitions(const std::string& file,
                                                                    bool loud) {
  constexpr std::string_view kOpenSmDefault = "/etc/opensm/partitions.conf";
  const std::string path = file.empty() ? std::string(kOpenSmDefault) : file;
  auto r = conf::LoadPartitionsFile(path);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kNotFound) {
      if (path == kOpenSmDefault) {
        Log(LogName::kConf).info("no partition file {}: every port is a full member of the "
                                 "default partition",
                                 path);
      } else {
        WarnLoudly(loud, LogName::kConf,
                   "PART-021 partition_config_file {} does not exist: every port is a full "
                   "member of the default partition, no partition isolation",
                   path);
      }
      return std::shared_ptr<const conf::PartitionConfig>();
    }
    Log(LogName::kConf).error("{} {}", conf::kPartFileRejected, r.status().ToString());
    return r.status();
  }
  for (const auto& w : r->warnings) Log(LogName::kConf).warn("{}", w.ToString());
  for (const auto& e : r->errors) Log(LogName::kConf).error("{}", e.ToString());
  if (!r->ok()) {
    return InvalidArgument(fmt::format("{}: {} bad line(s) (first: {}); partition file rejected",
                                       path, r->errors.size(), r->errors[0].ToString()));
  }
  Log(LogName::kConf).info("{}: {} partition(s) loaded", path, r->config.partitions.size());
  return std::make_shared<const conf::PartitionConfig>(std::move(r->config));
}

// QoS policy files refused since start, for the metrics (ibsm_qos_policy_refused_total).
std::atomic<uint64_t> qos_policy_refusals{0};

// qos_policy_file (docs/qos.md, "QoS policy file"), read with qos TRUE only, as OpenSM does.
// No file at OpenSM's default path: null, no policy. A file the config names that does not
// exist: QOS-POL-021, null. A file with errors: each logged with file and line (QOS-POL-0xx)
// and InvalidArgument; the caller keeps the policy in force (at start there is none: ibsmd
// refuses to start rather than give PathRecords SLs the operator did not ask for).
Result<std::shared_ptr<const conf::QosPolicy>> LoadQosPolicy(const conf::SmConfig& c, bool loud) {
  constexpr std::string_view kOpenSmDefault = "/etc/opensm/qos-policy.conf";
  if (!c.qos) return std::shared_ptr<const conf::QosPolicy>();
  const std::string path = c.qos_policy_file.empty() ? std::string(kOpenSmDefault)
                                                     : c.qos_policy_file;
  auto r = conf::LoadQosPolicyFile(path);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kNotFound) {
      if (path == kOpenSmDefault) {
        Log(LogName::kConf).info("no QoS policy file {}: PathRecord SLs from the request or "
                                 "the partition",
                                 path);
      } else {
        WarnLoudly(loud, LogName::kConf,
                   "QOS-POL-021 qos_policy_file {} does not exist: no QoS policy, PathRecord "
                   "SLs from the request or the partition",
                   path);
      }
      return std::shared_ptr<const conf::QosPolicy>();
    }
    Log(LogName::kConf).error("{} {}", conf::kQosPolRejected, r.status().ToString());
    ++qos_policy_refusals;
    return r.status();
  }
  for (const auto& e : r->errors) Log(LogName::kConf).error("{}", e.ToString());
  if (!r->ok()) {
    ++qos_policy_refusals;
    return InvalidArgument(fmt::format("{}: {} error(s) (first: {}); QoS policy file refused",
                                       path, r->errors.size() - 1, r->errors[0].ToString()));
  }
  Log(LogName::kConf).info("{}: QoS policy loaded: {} qos-ulps rule(s), default SL {}", path,
                           r->policy.rules.size(), r->policy.default_sl);
  return std::make_shared<const conf::QosPolicy>(std::move(r->policy));
}

// `previous`: the partition set in force (SIGHUP), kept when the file is rejected.
// `partitions_refused`: set to why when the partition file was refused and `previous` kept;
// `qos_policy_refused` the same for the QoS policy file and `previous_qos_policy`.
Result<SubnetManagerOptions> MakeOptions(const conf::SmConfig& c, bool once,
                                         const PartitionPolicy* previous = nullptr,
                                         bool loud = false,
                                         std::string* partitions_refused = nullptr,
                                         const std::shared_ptr<const conf::QosPolicy>*
                                             previous_qos_policy = nullptr,
                                         std::string* qos_policy_refused = nullptr) {
  // Every option the sweep reads, from its row (sm/sweep/config_options.h); what follows
  // loads the files options name.
  SubnetManagerOptions o = SweepOptionsFrom(c);
  IBSM_RETURN_IF_ERROR(ParsePartEnforce(c.part_enforce).status());
  auto parts = LoadPartitions(c.partition_config_file, loud);
  if (parts.ok()) {
    o.partitions.config = *parts;
  } else if (previous) {
    Log(LogName::kConf).error("{} the previous partition set stays in force",
                              conf::kPartFileRejected);
    if (partitions_refused) *partitions_refused = parts.status().message();
    o.partitions.config = previous->config;
  } else {
    return parts.status();
  }
  auto policy = LoadQosPolicy(c, loud);
  if (policy.ok()) {
    o.qos_policy = *policy;
  } else if (previous_qos_policy) {
    Log(LogName::kConf).error("{} the previous QoS policy stays in force", conf::kQosPolRejected);
    if (qos_policy_refused) *qos_policy_refused = policy.status().message();
    o.qos_policy = *previous_qos_policy;
  } else {
    return policy.status();
  }
  IBSM_ASSIGN_OR_RETURN(o.routing.root_guids, LoadGuids(c.root_guid_file));
  IBSM_ASSIGN_OR_RETURN(o.routing.cn_guids, LoadGuids(c.cn_guid_file));
  IBSM_ASSIGN_OR_RETURN(o.routing.io_guids, LoadGuids(c.io_guid_file));
  IBSM_ASSIGN_OR_RETURN(o.routing.guid_routing_order, LoadGuids(c.guid_routing_order_file));
  o.once = once;
  return o;
}

PerfManagerOptions MakePerfOptions(const conf::SmConfig& c) { return PerfOptionsFrom(c); }

// Creates the parent directory of `path` if missing (the state dir is ibsmd's own).
void EnsureParent(const std::string& path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
}

// OpenSM logs an unknown engine name and routes without it; so does ibsmd, with the
// names it does know, in order.
// With "no_fallback" and no engine it knows left, the chain stays "no_fallback" and routing
// refuses (routing::RouteChain): the operator forbade minhop, and minhop is all that is left.
std::string KnownEngines(const std::string& chain, bool loud) {
  std::string out;
  bool dropped = false;
  size_t start = 0;
  while (start <= chain.size()) {
    size_t end = chain.find(',', start);
    if (end == std::string::npos) end = chain.size();
    std::string name = chain.substr(start, end - start);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    start = end + 1;
    if (name.empty()) continue;
    if (name != "no_fallback" && !routing::MakeEngine(name)) {
      std::string known;
      for (const auto& e : routing::EngineRegistry()) known += (known.empty() ? "" : ", ") + std::string(e.name);
      WarnLoudly(loud, LogName::kRouting,
                 "SM-ROUTE-004 routing engine '{}' is not known (known: {}); routing without it",
                 name, known);
      dropped = true;
      continue;
    }
    out += (out.empty() ? "" : ",") + name;
  }
  if (dropped && out == "no_fallback") {
    Log(LogName::kRouting).error("SM-ROUTE-004 routing_engine '{}' names no engine ibsmd knows "
                                 "and no_fallback forbids minhop: nothing will be routed",
                                 chain);
    if (loud && !g_log_on_stderr)
      fmt::print(stderr,
                 "ibsmd: error: routing_engine '{}' names no engine ibsmd knows and no_fallback "
                 "forbids minhop: nothing will be routed\n",
                 chain);
  } else if (dropped && out.empty()) {
    WarnLoudly(loud, LogName::kRouting,
               "SM-ROUTE-004 routing_engine '{}' names no engine ibsmd knows: routing with the "
               "default chain {}",
               chain, routing::kDefaultChain);
  }
  return out;
}

// The log level from -v/-V and from log_flags, whichever asks for more: OpenSM's VERBOSE
// (0x04) and DEBUG (0x08) bits give debug lines, FUNCS (0x10) and FRAMES (0x20) trace lines.
spdlog::level::level_enum LevelFor(int verbosity, uint8_t log_flags) {
  if (log_flags & 0x30) verbosity = std::max(verbosity, 3);
  if (log_flags & 0x0C) verbosity = std::max(verbosity, 1);
  return verbosity >= 3   ? spdlog::level::trace
         : verbosity >= 1 ? spdlog::level::debug
                          : spdlog::level::info;
}

// force_log_flush: every line reaches the file at once; otherwise info and above do.
spdlog::level::level_enum FlushLevelFor(const conf::SmConfig& c) {
  return c.force_log_flush ? spdlog::level::trace : spdlog::level::info;
}

// One line that counts the config file's CONF-030 keys (each is named above it), so an
// operator who dropped in an opensm.conf sees at once how much of it ibsm does differently.
void LogNotHonoured(const conf::CommandLineExtras& extras, bool loud) {
  if (extras.config_not_honoured == 0) return;
  WarnLoudly(loud, LogName::kConf,
             "CONF-031 {} key(s) of {} are set to values ibsm does not honour (CONF-030 lines); "
             "README.md \"opensm.conf keys\" says what ibsm does with each",
             extras.config_not_honoured,
             extras.config_file.empty() ? "the command line"
                                        : extras.config_file + " and the command line");
}

// Removes the PID file at every return from Main after it was written.
struct PidFileGuard {
  explicit PidFileGuard(std::string p) : path(std::move(p)) {}
  ~PidFileGuard() { ::unlink(path.c_str()); }
  PidFileGuard(const PidFileGuard&) = delete;
  PidFileGuard& operator=(const PidFileGuard&) = delete;
  std::string path;
};

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  conf::SmConfig config;
  conf::CommandLineExtras extras;
  Status st = conf::ApplyCommandLine(args, &config, &extras);
  if (!st.ok()) {
    fmt::print(stderr, "ibsmd: {}\n", st.message());
    return 2;
  }
  if (extras.show_help) {
    fmt::print("{}", conf::CommandLineUsage());
    return 0;
  }
  if (extras.show_version) {
    fmt::print("{}\n", VersionLine("ibsmd"));
    return 0;
  }
  if (!extras.create_config_file.empty()) {
    Status w = conf::WriteFileAtomically(extras.create_config_file, conf::WriteConfig(config));
    if (!w.ok()) {
      fmt::print(stderr, "ibsmd: {}\n", w.message());
      return 1;
    }
    fmt::print("ibsmd: wrote {}\n", extras.create_config_file);
    return 0;
  }
  // Lines at info and above (every line with force_log_flush) are flushed at once so scripts
  // can wait for "SUBNET UP".
  // log_max_size is in MB as in OpenSM; -e (accum_log_file FALSE) empties the file at start.
  const LogFileOptions log_file{config.accum_log_file, uint64_t{config.log_max_size} << 20};
  if (!ConfigureLogging(config.log_file, LevelFor(extras.verbosity, config.log_flags),
                        FlushLevelFor(config), log_file)) {
    return 1;
  }
  g_log_on_stderr = config.log_file.empty() || config.log_file == "-" || config.log_file == "stderr";
  // The banner: what runs, from which file, with which settings that matter most (OpenSM
  // prints its version and the options it uses the same way).
  Log(LogName::kSm).info(
      "{} starting: config {}; routing {}; lmc {}; sweep_interval {} s; sm_priority {}; "
      "perfmgr {}; state file {}; control socket {}",
      VersionLine("ibsmd"), extras.config_file.empty() ? "(none)" : extras.config_file,
      config.routing_engine.empty() ? std::string(routing::kDefaultChain)
                                    : config.routing_engine,
      config.lmc, config.sweep_interval, config.sm_priority, config.perfmgr ? "on" : "off",
      config.state_db_file.empty() ? "(none)" : config.state_db_file,
      config.control_socket.empty() ? "(none)" : config.control_socket);
  for (const auto& w : extras.config_warnings) WarnLoudly(true, LogName::kConf, "{}", w.ToString());
  LogNotHonoured(extras, /*loud=*/true);
  auto options = MakeOptions(config, extras.once, nullptr, /*loud=*/true);
  if (!options.ok()) {
    fmt::print(stderr, "ibsmd: {}\n", options.status().message());
    return 1;
  }
  options->routing_engine = KnownEngines(options->routing_engine, /*loud=*/true);
  if (config.daemon) {
    // Before any thread or descriptor the SM depends on exists; keep the working directory
    // (relative paths in the config stay valid).
    if (::daemon(1, 0) != 0) {
      fmt::print(stderr, "ibsmd: cannot become a daemon: {}\n", std::strerror(errno));
      return 1;
    }
  }
  if (!options->dump_dir.empty()) EnsureParent(options->dump_dir + "/x");
  // OpenSM's -J: the PID after daemon(), so init scripts signal the process that runs. Written
  // atomically (no half PID for a reader), removed at a clean exit.
  std::optional<PidFileGuard> pid_file;
  if (!extras.pid_file.empty()) {
    EnsureParent(extras.pid_file);
    Status w = conf::WriteFileAtomically(extras.pid_file, fmt::format("{}\n", ::getpid()));
    if (!w.ok()) {
      fmt::print(stderr, "ibsmd: --pidfile: {}\n", w.message());
      return 1;
    }
    pid_file.emplace(extras.pid_file);
  }

  SystemClock clock;
  std::unique_ptr<ha::StateStore> store;
  if (!config.state_db_file.empty()) {
    EnsureParent(config.state_db_file);
    auto opened = ha::StateStore::Open(config.state_db_file, clock);
    const StatusCode code = opened.ok() ? StatusCode::kOk : opened.status().code();
    if (code == StatusCode::kCorrupt || code == StatusCode::kFailedPrecondition) {
      // A damaged, foreign or newer file: an operator decides, the SM does not guess.
      fmt::print(stderr, "ibsmd: state file {}: {}\n", config.state_db_file,
                 opened.status().message());
      return 1;
    }
    if (!opened.ok()) {
      // The directory cannot take writes (read-only, full, permissions): the fabric matters
      // more than the file, so serve it with what the file holds and retry every heavy sweep.
      auto degraded = ha::StateStore::OpenDegraded(config.state_db_file, clock, opened.status());
      if (!degraded.ok()) {
        fmt::print(stderr, "ibsmd: state file {}: {}; {}\n", config.state_db_file,
                   opened.status().message(), degraded.status().message());
        return 1;
      }
      auto rows = (*degraded)->LoadGuid2Lid();
      Log(LogName::kSm).error(
          "SM-STATE-015 state file {} cannot be opened for writing: {}; serving the fabric with "
          "the {} guid2lid row(s) it holds, and trying to open it again every heavy sweep",
          config.state_db_file, opened.status().message(), rows.ok() ? rows->size() : 0);
      opened = std::move(degraded);
    }
    store = std::move(*opened);
  }
  // The state writer's thread and the io thread share the file (SubnetManagerOptions::
  // state_writer_thread): everything reaches it through one lock.
  std::unique_ptr<ha::LockedStateFile> shared_store =
      store ? std::make_unique<ha::LockedStateFile>(*store) : nullptr;

  // A state file or log that hits a file-size limit gets EFBIG from write() (reported and
  // retried like a full disk) instead of the default SIGXFSZ, which would kill the SM.
  ::signal(SIGXFSZ, SIG_IGN);
  boost::asio::io_context io;
  std::unique_ptr<sim::SharpSim> sharp_sim;  // outlives the simulator that calls it
  std::unique_ptr<sim::Simulator> simulator;
  std::unique_ptr<mad::Transport> transport;
  std::shared_ptr<const Fabric> sim_fabric;  // its node names serve ibsmctl route and lft
  if (!extras.sim_topology.empty()) {
    auto fabric = ReadTopologyFile(extras.sim_topology);
    if (!fabric.ok()) {
      fmt::print(stderr, "ibsmd: {}\n", fabric.status().message());
      return 1;
    }
    auto port = PickSimPort(*fabric, extras.sim_host);
    if (!port.ok()) {
      fmt::print(stderr, "ibsmd: {}\n", port.status().message());
      return 1;
    }
    auto sharp_switches = sim::SelectSwitches(*fabric, extras.sim_sharp_switches);
    if (!sharp_switches.ok()) {
      fmt::print(stderr, "ibsmd: --sim-sharp-switches: {}\n", sharp_switches.status().message());
      return 1;
    }
    if (!sharp_switches->empty()) {
      std::unordered_set<Guid> sharp_guids;
      for (NodeId n : *sharp_switches) sharp_guids.insert(fabric->node(n).guid);
      auto with_ans = WithAggregationNodes(
          *fabric, [&](const Node& n) { return sharp_guids.count(n.guid) > 0; });
      if (!with_ans.ok()) {
        fmt::print(stderr, "ibsmd: {}\n", with_ans.status().message());
        return 1;
      }
      *fabric = std::move(*with_ans);
      port = PickSimPort(*fabric, extras.sim_host);  // PortIds moved
      if (!port.ok()) return 1;
    }
    sim::SimOptions so;
    if (extras.sim_profile == "kind") {
      so = sim::SimOptions::Kind();
    } else if (extras.sim_profile == "strict-plain-names") {
      so.hostile_descriptions = false;
    } else if (!extras.sim_profile.empty() && extras.sim_profile != "strict") {
      fmt::print(stderr,
                 "ibsmd: --sim-profile: '{}' is none of strict, strict-plain-names, kind\n",
                 extras.sim_profile);
      return 1;
    }
    so.io = &io;
    sim_fabric = std::make_shared<const Fabric>(*fabric);
    simulator = std::make_unique<sim::Simulator>(*fabric, so);
    auto ar_switches = sim::SelectSwitches(*fabric, extras.sim_ar_switches);
    if (!ar_switches.ok()) {
      fmt::print(stderr, "ibsmd: --sim-ar-switches: {}\n", ar_switches.status().message());
      return 1;
    }
    for (NodeId n : *ar_switches) (void)simulator->SetArCapable(n, true);
    if (!ar_switches->empty()) {
      Log(LogName::kSm).info("simulated fabric: {} of {} switches AR-capable",
                             ar_switches->size(), fabric->switch_count());
    }
    if (!sharp_switches->empty()) {
      sharp_sim = std::make_unique<sim::SharpSim>(*fabric);
      simulator->AddExtension(sharp_sim.get());
      Log(LogName::kSim).info("{} simulated switches expose a SHARP aggregation node",
                              sharp_sim->ans().size());
    }
    auto t = std::make_unique<sim::SimTransport>(io, *simulator, *port);
    if (!t->bind_status().ok()) {
      fmt::print(stderr, "ibsmd: {}\n", t->bind_status().message());
      return 1;
    }
    Log(LogName::kSm).info("simulated fabric {}: {} nodes, {} links; SM at {}",
                           extras.sim_topology, fabric->node_count(), fabric->link_count(),
                           ToString(fabric->port(*port).guid));
    transport = std::move(t);
  } else {
    mad::UmadOptions uo;
    uo.port_guid = config.guid;
    uo.claim_sm = true;
    auto t = mad::UmadTransport::Open(io, uo);
    if (!t.ok()) {
      fmt::print(stderr, "ibsmd: {}\n", t.status().message());
      return 1;
    }
    transport = std::move(*t);
  }
  if (auto local = transport->QueryLocalPort(); local.ok()) {
    Log(LogName::kSm).info("SM port {} (node {}, port {})", ToString(local->port_guid),
                           ToString(local->node_guid), local->port_num.value());
  }

  int exit_code = 0;
  ReloadStatus last_reload;  // the last SIGHUP's, for `ibsmctl status`
  size_t config_not_honoured = extras.config_not_honoured;  // CONF-030 keys, for `status`
  options->state_writer_thread = true;
  SubnetManager sm(io, *transport, clock, shared_store.get(), *options);
  // The PerfMgr polls only while this SM is master, from its last heavy sweep.
  std::unique_ptr<PerfManager> perf;
  if (config.perfmgr && !extras.once) {
    perf = std::make_unique<PerfManager>(io, *transport, clock, shared_store.get(),
                                         shared_store.get(), MakePerfOptions(config));
    // It polls the model the SM publishes as master, never the engine's own.
    sm.AddModelObserver([p = perf.get()](std::shared_ptr<const DiscoveryResult> model) {
      p->SetModel(std::move(model));
    });
    // The state file's health (and links) snapshot follows each PerfMgr sweep.
    sm.set_perf(perf.get());
    perf->set_on_sweep([&sm] { sm.SaveSweepSnapshots(); });
    perf->set_store_runner([&sm](std::function<void()> job) { sm.RunOnStateWriter(std::move(job)); });
    perf->Start();
  }
  // The control socket (not for -o runs). A socket that cannot be served (another daemon on
  // it, no permission) is reported and the SM runs without it: the fabric needs the SM more
  // than the operator needs ibsmctl.
  std::unique_ptr<ControlServer> control;
  std::unique_ptr<ControlCommands> commands;
  std::unique_ptr<ArCommands> ar_commands;
  if (!extras.once && !config.control_socket.empty() && config.control_socket != "none") {
    ControlServer::Options co;
    co.path = config.control_socket;
    co.group = config.control_socket_group;
    auto started = ControlServer::Start(io, co);
    if (!started.ok()) {
      Log(LogName::kSm).warn("SM-CTL-003 control socket: {}; running without it",
                             started.status().message());
    } else {
      control = std::move(*started);
      ControlContext ctx;
      ctx.sm = &sm;
      ctx.store = shared_store.get();
      ctx.perf = perf.get();
      ctx.config_file = extras.config_file;
      ctx.topology = sim_fabric;
      ctx.last_reload = &last_reload;
      ctx.config_not_honoured = &config_not_honoured;
      commands = std::make_unique<ControlCommands>(io, *control, ctx);
      ar_commands = std::make_unique<ArCommands>(io, *control, sm);
      Log(LogName::kSm).info("control socket {}", config.control_socket);
    }
  }
  // Prometheus metrics, off unless a port is configured; like the control socket, a port that
  // cannot be bound is reported and the SM runs on.
  std::unique_ptr<MetricsServer> metrics;
  if (!extras.once && config.metrics_port != 0) {
    MetricsServer::Options mo;
    mo.address = config.metrics_address;
    mo.port = static_cast<uint16_t>(config.metrics_port);
    auto started = MetricsServer::Start(io, mo, [&] {
      return RenderSmMetrics(sm, control.get(), metrics ? &metrics->counters() : nullptr) +
             fmt::format("# HELP ibsm_qos_policy_refused_total QoS policy files refused "
                         "(QOS-POL-020)\n# TYPE ibsm_qos_policy_refused_total counter\n"
                         "ibsm_qos_policy_refused_total {}\n",
                         qos_policy_refusals.load()) +
             (perf ? RenderPerfMetrics(*perf) : std::string());
    });
    if (!started.ok()) {
      Log(LogName::kSm).warn("SM-MET-002 {}; running without metrics", started.status().message());
    } else {
      metrics = std::move(*started);
      if (commands) commands->set_metrics_server(&metrics->counters());
      Log(LogName::kSm).info("metrics on http://{}:{}/metrics", config.metrics_address,
                             metrics->port());
    }
  }
  PartitionPolicy running_partitions = options->partitions;
  std::shared_ptr<const conf::QosPolicy> running_qos_policy = options->qos_policy;
  boost::asio::signal_set stop_signals(io, SIGINT, SIGTERM);
  // On SIGTERM: stop queuing SMPs, let those in flight finish (at most 500 ms, so ibsmd is
  // gone within a second whatever the fabric does), then close.
  boost::asio::steady_timer drain_timer(io);
  std::chrono::steady_clock::time_point drain_deadline;
  std::function<void()> drain = [&] {
    if ((sm.quiescent() && (!perf || perf->idle())) ||
        std::chrono::steady_clock::now() >= drain_deadline) {
      transport->Close();
      io.stop();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(20));
    drain_timer.async_wait([&](boost::system::error_code) { drain(); });
  };
  std::function<void()> arm_stop = [&] {
    stop_signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      Log(LogName::kSm).info("signal {}: exiting", sig);
      sm.Stop();
      if (perf) perf->Stop();
      drain_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      drain();
    });
  };
  arm_stop();
  boost::asio::signal_set other_signals(io, SIGHUP, SIGUSR1);
  std::function<void()> arm_other;
  arm_other = [&] {
    other_signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGUSR1) {
        LogFileOptions reopen = log_file;
        reopen.append = true;  // a reopen after logrotate never empties the new file
        ConfigureLogging(config.log_file, LevelFor(extras.verbosity, config.log_flags),
                         FlushLevelFor(config), reopen);
        Log(LogName::kSm).info("log reopened");
      } else {
        // Settings that take effect at the next sweep are re-read; the port binding and the
        // state file stay as they are until restart.
        // The file and the command line are applied again, in the same order as at start.
        conf::SmConfig fresh;
        conf::CommandLineExtras fresh_extras;
        Status re = conf::ApplyCommandLine(args, &fresh, &fresh_extras);
        std::string partitions_refused, qos_refused;
        Result<SubnetManagerOptions> next =
            re.ok() ? MakeOptions(fresh, extras.once, &running_partitions, /*loud=*/false,
                                  &partitions_refused, &running_qos_policy, &qos_refused)
                    : Result<SubnetManagerOptions>(re);
        // What SIGHUP does not apply keeps the value ibsmd started with: each option whose row
        // says so (conf/sm_config.cc, Reloads) and whose value changed is named.
        std::string restart;
        if (next.ok()) {
          for (const conf::OptionDesc& d : conf::OptionTable()) {
            if (d.reloads || !d.alias_of.empty()) continue;
            const std::string was = conf::OptionValueText(config, d);
            const std::string now = conf::OptionValueText(fresh, d);
            if (was == now) continue;
            Log(LogName::kConf).warn("CONF-104 {} changed from {} to {}: it takes effect when "
                                     "ibsmd restarts",
                                     d.name, was, now);
            restart += (restart.empty() ? "" : ", ") + std::string(d.name);
          }
        }
        // What `ibsmctl status` and `ibsmctl events` say of it.
        last_reload.time_us = clock.UnixMicros();
        last_reload.outcome = !next.ok()                     ? "refused"
                              : !partitions_refused.empty() ? "applied but the partition file was refused"
                              : !qos_refused.empty() ? "applied but the QoS policy file was refused"
                                                     : "applied";
        last_reload.why = !next.ok()                   ? next.status().message()
                          : !partitions_refused.empty() ? partitions_refused + (qos_refused.empty() ? "" : "; " + qos_refused)
                                                        : qos_refused;
        if (!restart.empty()) {
          if (last_reload.outcome == "applied")
            last_reload.outcome = "applied but some options take effect when ibsmd restarts";
          last_reload.why += (last_reload.why.empty() ? "" : "; ") +
                             ("taking effect when ibsmd restarts: " + restart);
        }
        if (shared_store) {
          ha::EventRow e;
          e.time_us = last_reload.time_us;
          e.kind = std::string(ha::kEventConfigReload);
          const bool failed = !next.ok() || !partitions_refused.empty() || !qos_refused.empty();
          e.severity = failed              ? ha::EventSeverity::kError
                       : !restart.empty() ? ha::EventSeverity::kWarning  // left for a restart
                                          : ha::EventSeverity::kInfo;
          e.message = last_reload.outcome == "refused"
                          ? "SIGHUP reload refused, the running configuration stays: " +
                                last_reload.why
                          : "SIGHUP reload " + last_reload.outcome +
                                (last_reload.why.empty() ? "" : ": " + last_reload.why);
          if (Status w = shared_store->RecordEvent(e); !w.ok())
            Log(LogName::kConf).warn("SM-STATE-018 the SIGHUP reload event not saved: {}", w.message());
        }
        if (!next.ok()) {
          Log(LogName::kConf).error("CONF-100 {}: keeping the running configuration",
                                    next.status().ToString());
        } else {
          for (const auto& w : fresh_extras.config_warnings)
            Log(LogName::kConf).warn("{}", w.ToString());
          LogNotHonoured(fresh_extras, /*loud=*/false);
          config_not_honoured = fresh_extras.config_not_honoured;
          next->routing_engine = KnownEngines(next->routing_engine, /*loud=*/false);
          sm.Reconfigure(*next);
          running_partitions = next->partitions;
          running_qos_policy = next->qos_policy;
          if (perf) perf->Reconfigure(MakePerfOptions(fresh));
          Log(LogName::kConf).info("configuration re-read{}",
                                   extras.config_file.empty() ? "" : " from " + extras.config_file);
        }
        sm.RequestHeavySweep("SIGHUP");
      }
      arm_other();
    });
  };
  arm_other();

  sm.Start([&](const SweepStats& s) {
    if (extras.print_fabric && sm.fabric()) fmt::print("{}", FormatFabric(*sm.fabric()));
    if (perf && s.subnet_up) perf->OnSubnetUp();
    std::fflush(stdout);
    if (!extras.once) return;
    exit_code = s.subnet_up ? 0 : 1;
    sm.Stop();
    transport->Close();
    io.stop();
  });
  // A handler that throws costs that one request or step, never the daemon.
  RunGuarded(io, [&sm](const std::string& what) { sm.NoteInternalError(what); });
  sm.set_perf(nullptr);  // the PerfMgr goes first
  return exit_code;
}

}  // namespace
}  // namespace ibsm::sm

int main(int argc, char** argv) { return ibsm::sm::Main(argc, argv); }
