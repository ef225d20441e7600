// ibsmd: the ibsm subnet manager daemon. At this stage it discovers the fabric by
// directed-route SMPs, on the local HCA (libibumad; ibsim through its preload library) or on
// the in-process simulator, and reports what it found after each sweep.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "base/log.h"
#include "fabric/topology_reader.h"
#include "mad/umad_transport.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/daemon_options.h"
#include "sm/discovery.h"

namespace ibsm::sm {
namespace {

// Attach point for --sim: a node by name, node GUID or port GUID; default the first CA with
// a cable, which is where ibsim attaches its clients for the same file.
Result<PortId> PickSimPort(const Fabric& f, const std::string& host) {
  if (host.empty()) {
    for (NodeId n = 0; n < f.node_count(); ++n) {
      if (f.node(n).kind != NodeKind::kCa) continue;
      for (uint32_t p = 1; p <= f.node(n).num_ports; ++p)
        if (f.port(n, PortNum{static_cast<uint8_t>(p)}).connected())
          return f.port_id(n, PortNum{static_cast<uint8_t>(p)});
    }
    return NotFound("the topology has no cabled CA port to attach the SM to");
  }
  std::optional<NodeId> node = f.FindNodeByName(host);
  if (!node) {
    char* end = nullptr;
    uint64_t g = std::strtoull(host.c_str(), &end, 0);
    if (end && *end == 0 && g != 0) {
      if (auto p = f.FindPort(Guid{g})) return *p;
      node = f.FindNode(Guid{g});
    }
  }
  if (!node) return NotFound("--sim-host '" + host + "' names no node in the topology");
  for (uint32_t p = 1; p <= f.node(*node).num_ports; ++p)
    if (f.port(*node, PortNum{static_cast<uint8_t>(p)}).connected())
      return f.port_id(*node, PortNum{static_cast<uint8_t>(p)});
  return NotFound("--sim-host '" + host + "' has no cabled port");
}

class Daemon {
 public:
  Daemon(boost::asio::io_context& io, mad::Transport& transport, const DaemonOptions& o)
      : io_(io), transport_(transport), options_(o), timer_(io) {}

  void Start() { Sweep(); }
  int exit_code() const { return exit_code_; }

 private:
  void Sweep() {
    mad::SendOptions send;
    send.timeout = std::chrono::milliseconds(options_.transaction_timeout_ms);
    send.retries = static_cast<int>(options_.transaction_retries);
    pipeline_ = std::make_unique<SmpPipeline>(transport_, options_.max_wire_smps, send, 0);
    discovery_ = std::make_unique<Discovery>(*pipeline_);
    Log(LogName::kSm).info("Entering heavy sweep {}", ++sweeps_);
    discovery_->Run([this](DiscoveryResult r) { OnSwept(std::move(r)); });
  }

  void OnSwept(DiscoveryResult r) {
    const Fabric& f = r.fabric;
    size_t up = 0;
    for (PortId p = 0; p < f.port_count(); ++p) up += f.port(p).connected();
    Log(LogName::kSm)
        .info("sweep {} done: {} nodes ({} switches, {} CAs), {} links, {} SMPs ({} failed), "
              "{} issues, {:.3f} s",
              sweeps_, f.node_count(), f.switch_count(), f.ca_count(), f.link_count(),
              r.smps_sent, r.smps_failed, r.issues.size(), r.duration.count() / 1e6);
    fmt::print("discovered {} nodes: {} switches, {} CAs, {} links; {} SMPs sent, {} failed; "
               "{} issues; {:.3f} s\n",
               f.node_count(), f.switch_count(), f.ca_count(), f.link_count(), r.smps_sent,
               r.smps_failed, r.issues.size(), r.duration.count() / 1e6);
    if (options_.print_fabric) fmt::print("{}", FormatFabric(f));
    std::fflush(stdout);
    if (f.node_count() == 0) exit_code_ = 1;
    if (options_.once || options_.sweep_interval_s == 0) {
      if (options_.once) {
        transport_.Close();
        io_.stop();
      }
      return;
    }
    timer_.expires_after(std::chrono::seconds(options_.sweep_interval_s));
    timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) Sweep();
    });
  }

  boost::asio::io_context& io_;
  mad::Transport& transport_;
  DaemonOptions options_;
  boost::asio::steady_timer timer_;
  std::unique_ptr<SmpPipeline> pipeline_;
  std::unique_ptr<Discovery> discovery_;
  uint64_t sweeps_ = 0;
  int exit_code_ = 0;
};

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = ParseDaemonOptions(args);
  if (!parsed.ok()) {
    fmt::print(stderr, "ibsmd: {}\n", parsed.status().message());
    return 2;
  }
  const DaemonOptions& o = *parsed;
  if (o.show_help) {
    fmt::print("{}", DaemonUsage());
    return 0;
  }
  if (o.show_version) {
    fmt::print("ibsmd 0.1.0\n");
    return 0;
  }
  auto level = o.verbosity >= 2 ? spdlog::level::trace
               : o.verbosity == 1 ? spdlog::level::debug
                                  : spdlog::level::info;
  if (!ConfigureLogging(o.log_file, level)) return 1;

  boost::asio::io_context io;
  std::unique_ptr<sim::Simulator> simulator;
  std::unique_ptr<mad::Transport> transport;
  if (!o.sim_topology.empty()) {
    auto fabric = ReadTopologyFile(o.sim_topology);
    if (!fabric.ok()) {
      fmt::print(stderr, "ibsmd: {}\n", fabric.status().message());
      return 1;
    }
    auto port = PickSimPort(*fabric, o.sim_host);
    if (!port.ok()) {
      fmt::print(stderr, "ibsmd: {}\n", port.status().message());
      return 1;
    }
    sim::SimOptions so;
    so.io = &io;
    simulator = std::make_unique<sim::Simulator>(*fabric, so);
    auto st = std::make_unique<sim::SimTransport>(io, *simulator, *port);
    if (!st->bind_status().ok()) {
      fmt::print(stderr, "ibsmd: {}\n", st->bind_status().message());
      return 1;
    }
    Log(LogName::kSm).info("simulated fabric {}: {} nodes, attached at {}", o.sim_topology,
                           fabric->node_count(), ToString(fabric->port(*port).guid));
    transport = std::move(st);
  } else {
    mad::UmadOptions uo;
    if (o.port_guid) uo.port_guid = *o.port_guid;
    uo.claim_sm = true;
    auto ut = mad::UmadTransport::Open(io, uo);
    if (!ut.ok()) {
      fmt::print(stderr, "ibsmd: {}\n", ut.status().message());
      return 1;
    }
    transport = std::move(*ut);
  }
  auto local = transport->QueryLocalPort();
  if (local.ok()) {
    Log(LogName::kSm).info("bound to port {} (node {}, port {}, LID {})",
                           ToString(local->port_guid), ToString(local->node_guid),
                           local->port_num.value(), local->lid.value());
  }

  Daemon daemon(io, *transport, o);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    Log(LogName::kSm).info("signal {}: exiting", sig);
    transport->Close();
    io.stop();
  });
  daemon.Start();
  io.run();
  return daemon.exit_code();
}

}  // namespace
}  // namespace ibsm::sm

int main(int argc, char** argv) { return ibsm::sm::Main(argc, argv); }
