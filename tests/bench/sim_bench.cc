// Simulator SMP round trips through SimTransport (figures for the
// README). Reports items/s; asserts nothing.
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <chrono>

#include <boost/asio.hpp>

#include "fabric/fabric.h"
#include "fabric/generators.h"
#include "mad/attr/node_info.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"

namespace ibsm::sim {
namespace {

// 2-tier fat tree of k-port switches: k leaves with k/2 hosts and k/2 uplinks each, k/2
// spines. Leaf port k/2+1+j goes to spine j; spine port i+1 goes to leaf i.
struct FatTree {
  Fabric f;
  std::vector<NodeId> leaves, spines, hosts;
  explicit FatTree(int k) {
    uint64_t g = 0x1000;
    for (int s = 0; s < k / 2; ++s)
      spines.push_back(*f.AddNode(NodeKind::kSwitch, Guid{g += 2}, static_cast<uint8_t>(k), "", ""));
    for (int l = 0; l < k; ++l) {
      NodeId leaf = *f.AddNode(NodeKind::kSwitch, Guid{g += 2}, static_cast<uint8_t>(k), "", "");
      leaves.push_back(leaf);
      for (int j = 0; j < k / 2; ++j)
        (void)f.Connect(leaf, PortNum{static_cast<uint8_t>(k / 2 + 1 + j)}, spines[j],
                        PortNum{static_cast<uint8_t>(l + 1)});
      for (int h = 0; h < k / 2; ++h) {
        NodeId host = *f.AddNode(NodeKind::kCa, Guid{g += 2}, 1, "", "");
        hosts.push_back(host);
        (void)f.Connect(host, PortNum{1}, leaf, PortNum{static_cast<uint8_t>(h + 1)});
      }
    }
  }
};

void BM_DrNodeInfoRoundTrip(benchmark::State& state) {
  const int k = 32;
  FatTree t(k);
  boost::asio::io_context io;
  Simulator sim(t.f);
  SimTransport sm(io, sim, t.f.port_id(t.hosts[0], PortNum{1}));
  const size_t in_flight = static_cast<size_t>(state.range(0));
  // Paths to every host: own port, up to spine (h % k/2), down to its leaf, to the host.
  std::vector<mad::MadMessage> reqs;
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    size_t leaf = i / (k / 2), slot = i % (k / 2);
    std::vector<uint8_t> path = {1, static_cast<uint8_t>(k / 2 + 1 + slot % (k / 2)),
                                 static_cast<uint8_t>(leaf + 1), static_cast<uint8_t>(slot + 1)};
    reqs.push_back(mad::ToMessage(mad::MakeDrSmp(mad::method::kGet, mad::attr::kNodeInfo, 0, path)));
  }
  mad::SendOptions opts{std::chrono::milliseconds(1000), 0};
  uint64_t done = 0, failed = 0, next = 0;
  std::function<void(Result<mad::MadMessage>)> on_done;
  auto send_one = [&] { sm.Send(reqs[next++ % reqs.size()], opts, on_done); };
  for (auto _ : state) {
    const uint64_t target = 100000;
    uint64_t start = done;
    on_done = [&](Result<mad::MadMessage> r) {
      ++done;
      if (!r.ok()) ++failed;
      if (done - start + in_flight <= target) send_one();
    };
    for (size_t i = 0; i < in_flight; ++i) send_one();
    io.restart();
    while (done - start < target) io.run_one();
  }
  state.SetItemsProcessed(static_cast<int64_t>(done));
  state.counters["failed"] = static_cast<double>(failed);
  state.counters["hops"] = 8;
}
BENCHMARK(BM_DrNodeInfoRoundTrip)->Arg(1)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

// Peak resident set of the process so far, in MiB (getrusage: ru_maxrss is KiB on Linux).
double MaxRssMib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Building a Simulator for a 3-tier fat tree of k-port switches (k=32: 8,192 hosts and
// 1,280 switches; k=64: 65,536 hosts and 5,120 switches). Reports construction time, the
// simulator's own state (state_bytes) and the process's peak RSS after the fabric and after
// the simulator. Run it alone (--benchmark_filter=Scale) for a clean RSS figure.
void BM_SimulatorScale(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  auto fabric = FatTree3(k);
  if (!fabric.ok()) {
    state.SkipWithError(fabric.status().ToString().c_str());
    return;
  }
  double rss_fabric = MaxRssMib();
  double build_ms = 0;
  size_t bytes = 0, ports = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    Simulator sim(*fabric);
    build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count();
    bytes = sim.state_bytes();
    ports = sim.port_count();
    benchmark::DoNotOptimize(sim.port_count());
  }
  state.counters["nodes"] = static_cast<double>(fabric->node_count());
  state.counters["ports"] = static_cast<double>(ports);
  state.counters["build_ms"] = build_ms;
  state.counters["sim_state_MiB"] = static_cast<double>(bytes) / (1024.0 * 1024.0);
  state.counters["bytes_per_port"] = static_cast<double>(bytes) / static_cast<double>(ports);
  state.counters["rss_after_fabric_MiB"] = rss_fabric;
  state.counters["rss_peak_MiB"] = MaxRssMib();
}
BENCHMARK(BM_SimulatorScale)->Arg(32)->Arg(64)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ibsm::sim

BENCHMARK_MAIN();
