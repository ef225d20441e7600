// The commands ibsmd serves on its control socket (sm/net/control_server.h), built from the
// running SubnetManager. Every reply is JSON; GUIDs are "0x%016x" strings, LIDs numbers.
//
//   status                      SM state, identity, last sweep, counts, engine, counters
//   nodes                       every node: GUID, name, kind, LIDs, ports
//   links [degraded errors]     every cable with both ends; degraded = below what both support;
//                               errors = error counters moved within the health window
//   health [window_s | history since_us limit]  cables with findings of the health window,
//                               worst first, both ends named; history: the event log's
//   route {from, to}            hop by hop from the programmed tables (ResolveEndpoint below)
//   lft {switch}                one switch's unicast table
//   check [permutations seed]   route verification, deadlock proof, balance figures
//   events [since_us limit]     the state file's event log
//   ha                          SM state, master, peers, HA counters
//   sharp                       SHARP trees (sm/vendor/sharp_view.h)
//   resweep (change)            queue a heavy sweep
//   log-level {level} (change)  trace|debug|info|warn|error
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/common.h>

#include "base/status.h"
#include "fabric/fabric.h"
#include "routing/routing_engine.h"
#include "sm/record/control_answers.h"
#include "sm/net/control_server.h"
#include "sm/net/metrics_server.h"

namespace ibsm::ha {
class StateFile;
}

namespace ibsm::sm {

class SubnetManager;
class PerfManager;

// The last SIGHUP reload, for `status`: when, and whether it was applied.
struct ReloadStatus {
  int64_t time_us = 0;   // 0: none since start
  std::string outcome;   // "applied", "refused" (the running configuration stays),
                         // "applied but the partition file was refused",
                         // "applied but the QoS policy file was refused"
  std::string why;       // what was refused
};

struct ControlContext {
  SubnetManager* sm = nullptr;    // REQUIRED; outlives the commands
  ha::StateFile* store = nullptr;  // may be null (no state file)
  const PerfManager* perf = nullptr;  // may be null (perfmgr FALSE)
  std::string config_file;
  std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
  std::function<void(spdlog::level::level_enum)> set_log_level;  // default: SetLogLevel
  // The topology file the daemon runs on (--sim): its node names ("node-0001/hca1") name
  // nodes in route and lft as well. Null on hardware and ibsim.
  std::shared_ptr<const Fabric> topology;
  const ReloadStatus* last_reload = nullptr;  // may be null; outlives the commands
  // OpenSM keys of the running configuration set to values ibsm does not honour (CONF-030,
  // README.md "opensm.conf keys"); may be null; outlives the commands.
  const size_t* config_not_honoured = nullptr;
  // The metrics endpoint's counters when it runs (status "metrics_server"); may be null.
  const MetricsServerCounters* metrics_server = nullptr;
};

// Finds the end of a route: a LID ("17", "0x11"), a port or node GUID with or without 0x
// ("0x0002c90300000011", "2c90300000011"), a node name of `topology` (the file in use, may be
// null), the fabric's node name or NodeDescription ("pod01-leaf-01", "node-0001 HCA-1"), or
// an unambiguous prefix of one ("node-0001"). A name or prefix several nodes share is
// refused with the candidates. A switch resolves to its port 0; a CA given by node to its
// first cabled port.
Result<PortId> ResolveEndpoint(const Fabric& fabric, const std::string& what,
                               const Fabric* topology = nullptr);

// The hops a packet from `from` to `to`'s base LID takes through `tables`:
// {"dlid", "complete", "problem"?, "hops": [{"guid", "name", "kind", "in_port", "out_port"}]}.
nlohmann::json TraceRoute(const Fabric& fabric, const routing::RoutingTables& tables,
                          PortId from, PortId to);

class ControlCommands {
 public:
  ControlCommands(boost::asio::io_context& io, ControlServer& server, ControlContext context);
  // Stops a running `check` at its next permutation and waits for it, so a daemon told to
  // stop never waits out a 100,000-permutation measurement (its request gets no answer: the
  // socket closes with the daemon).
  ~ControlCommands();

  ControlCommands(const ControlCommands&) = delete;
  ControlCommands& operator=(const ControlCommands&) = delete;

  // The metrics endpoint, when it starts after the commands (status "metrics_server").
  void set_metrics_server(const MetricsServerCounters* c) { ctx_.metrics_server = c; }

 private:
  Result<nlohmann::json> Status(const nlohmann::json& args) const;
  // The answers of many megabytes (3-tier k=32: links 11.8 MB, nodes 2.7 MB) are rendered on
  // answers_, from the SM's shared model, never on the io thread.
  void Nodes(const nlohmann::json& args, ControlServer::TextReply reply);
  void Links(const nlohmann::json& args, ControlServer::TextReply reply);
  // Runs `render` on answers_ and posts its text to `reply` on the io thread.
  void Render(std::function<Result<std::string>()> render, ControlServer::TextReply reply);
  Result<nlohmann::json> Health(const nlohmann::json& args) const;
  Result<nlohmann::json> Route(const nlohmann::json& args) const;
  Result<nlohmann::json> Lft(const nlohmann::json& args) const;
  Result<nlohmann::json> Events(const nlohmann::json& args) const;
  Result<nlohmann::json> Ha(const nlohmann::json& args) const;
  void Check(const nlohmann::json& args, ControlServer::Reply reply);

  boost::asio::io_context& io_;
  const ControlServer& server_;
  ControlContext ctx_;
  std::thread check_worker_;     // one `check` at a time
  bool check_running_ = false;   // io thread only
  std::atomic<bool> stopping_{false};  // set by the destructor; the worker polls it
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  boost::asio::thread_pool answers_{1};  // renders nodes and links; joined by the destructor
};

}  // namespace ibsm::sm
