// The adaptive-routing commands of ibsmd's control socket:
//
//   ar                                   per switch: capable, enabled, SLs, mode, groups (and
//                                        why not); per destination leaf: its group's ports
//   traffic {pattern, count, seed}       the flow-level traffic model (routing/traffic_model.h)
//                                        on the live tables: static routes versus AR
//
// `traffic` runs on a worker thread over the AR manager's immutable snapshot, so the daemon's
// io thread (sweeps, SA) never waits for it; one runs at a time.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "routing/traffic_model.h"
#include "sm/vendor/ar_manager.h"
#include "sm/net/control_server.h"

namespace ibsm::sm {

class SubnetManager;

// {"summary", "engine", "ar_mode", "sl_mask", "mode", "switches": [{"guid", "name", "capable",
// "enabled", "sl_mask", "mode", "groups", "why_not"}], "destinations": [{"leaf", "name",
// "group", "members": [{"switch", "name", "ports"}]}]}. Pure; `snap` may be null (no sweep).
nlohmann::json ArReport(const ArSnapshot* snap);

// {"pattern", "count", "seed", "hosts", "matrices", "ar_programmed", "static": {"max_link_load",
// "ebb", "flows", "unrouted"}, "ar": {...}}.
nlohmann::json TrafficReportJson(const routing::TrafficReport& r, const routing::TrafficOptions& o,
                                 bool ar_programmed);

// Parses the traffic command's args: pattern (default random), count (default 100 for
// random, 1 otherwise; at most 100,000), seed (default 1).
Result<routing::TrafficOptions> ParseTrafficArgs(const nlohmann::json& args);

class ArCommands {
 public:
  ArCommands(boost::asio::io_context& io, ControlServer& server, const SubnetManager& sm);
  // Stops a running `traffic` before its next matrix and waits for it (a daemon told to stop
  // does not wait out 100,000 permutations; the request gets no answer).
  ~ArCommands();

  ArCommands(const ArCommands&) = delete;
  ArCommands& operator=(const ArCommands&) = delete;

 private:
  void Traffic(const nlohmann::json& args, ControlServer::Reply reply);

  boost::asio::io_context& io_;
  const SubnetManager& sm_;
  std::thread worker_;
  bool running_ = false;  // io thread only
  std::atomic<bool> stopping_{false};  // set by the destructor; the worker polls it
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ibsm::sm
