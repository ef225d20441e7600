// PathRecord service under load: ibsmd's SubnetManager and SA on the
// in-process simulator, an SA client on another host asking PathRecord Gets between random
// host pairs, one query at a time (latency) and 16 in flight (throughput); first on a quiet
// SM, then while a heavy sweep re-discovers and fully re-routes the fabric. The SA answers
// from the last published snapshot, so no query should wait for routing: compare the
// query latencies during the re-route with the re-route's own duration. Asserts nothing.
//
//   sa_bench --benchmark_filter='PathRecords/k:16'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "mad/attr/path_record.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "tests/bench/bench_util.h"
#include "tools/sa_client.h"

namespace ibsm::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// Keeps `window` PathRecord Gets in flight until `stop()` says so; records each latency.
class Load {
 public:
  Load(tools::SaClient& client, std::vector<uint16_t> lids, size_t window)
      : client_(client), lids_(std::move(lids)), window_(window) {}

  void Start(std::function<bool()> stop) {
    stop_ = std::move(stop);
    for (size_t i = 0; i < window_; ++i) Next();
  }
  bool idle() const { return in_flight_ == 0; }
  const std::vector<double>& latencies_us() const { return latencies_us_; }
  size_t errors() const { return errors_; }

 private:
  void Next() {
    if (stop_()) return;
    uint16_t s = lids_[rng_() % lids_.size()], d = lids_[rng_() % lids_.size()];
    mad::PathRecord r;
    r.slid = s;
    r.dlid = d;
    tools::SaRequest req;
    req.method = mad::method::kGet;
    req.attr_id = mad::sa_attr::kPathRecord;
    req.comp_mask = mad::path_comp::kSlid | mad::path_comp::kDlid;
    req.record.resize(mad::Layout<mad::PathRecord>::kSize);
    mad::EncodeTo(r, req.record);
    ++in_flight_;
    auto t0 = Clock::now();
    client_.Query(req, [this, t0](Result<tools::SaReply> reply) {
      --in_flight_;
      if (!reply.ok() || reply->status != 0 || reply->records.size() != 1) ++errors_;
      latencies_us_.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      Next();
    });
  }

  tools::SaClient& client_;
  std::vector<uint16_t> lids_;
  size_t window_;
  std::function<bool()> stop_;
  std::mt19937 rng_{7};
  size_t in_flight_ = 0, errors_ = 0;
  std::vector<double> latencies_us_;
};

void BM_PathRecords(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const size_t window = static_cast<size_t>(state.range(1));
  auto fabric = FatTree3(k);
  if (!fabric.ok()) {
    state.SkipWithError(fabric.status().ToString().c_str());
    return;
  }
  std::vector<PortId> cas;
  for (NodeId n = 0; n < fabric->node_count(); ++n)
    if (fabric->node(n).kind == NodeKind::kCa) cas.push_back(fabric->port_id(n, PortNum{1}));
  boost::asio::io_context io;
  sim::Simulator sim(*fabric);
  sim::SimTransport sm_port(io, sim, cas.front()), client_port(io, sim, cas.back());
  SystemClock clock;
  sm::SubnetManagerOptions o;
  o.sweep_interval = std::chrono::seconds(0);
  o.routing_engine = "ftree";
  sm::SubnetManager sm(io, sm_port, clock, nullptr, o);
  int sweeps = 0;
  double reroute_s = 0;
  sm.Start([&](const sm::SweepStats& s) {
    ++sweeps;
    if (sweeps == 2) reroute_s = std::chrono::duration<double>(s.duration).count();
    io.stop();
  });
  io.run();
  if (!sm.last_sweep().subnet_up) {
    state.SkipWithError("no SUBNET UP");
    return;
  }
  std::vector<uint16_t> lids;
  for (PortId p: cas) lids.push_back(sim.port_info(p).lid);
  tools::SaClient client(client_port, sm.sm_lid(), mad::SendOptions{std::chrono::seconds(5), 0});

  for (auto _ : state) {
    // Quiet SM: a fixed number of queries.
    Load quiet(client, lids, window);
    const size_t n_quiet = 20000;
    auto t0 = Clock::now();
    quiet.Start([&] { return quiet.latencies_us().size() + window >= n_quiet; });
    io.restart();
    while (!quiet.idle() && io.run_one() > 0) {
    }
    double quiet_s = Seconds(t0);

    // The same load while a heavy sweep re-discovers and re-routes everything.
    Load busy(client, lids, window);
    bool swept = false;
    sm.RequestHeavySweep("sa_bench re-route");
    t0 = Clock::now();
    busy.Start([&] { return sweeps >= 2; });
    io.restart();
    while (!(sweeps >= 2 && busy.idle()) && io.run_one() > 0) {
    }
    swept = sweeps >= 2;
    double busy_s = Seconds(t0);

    state.counters["quiet_qps"] = static_cast<double>(quiet.latencies_us().size()) / quiet_s;
    state.counters["quiet_p50_us"] = Percentile(quiet.latencies_us(), 0.50);
    state.counters["quiet_p99_us"] = Percentile(quiet.latencies_us(), 0.99);
    state.counters["quiet_max_us"] = Percentile(quiet.latencies_us(), 1.0);
    state.counters["reroute_s"] = swept ? reroute_s: -1;
    state.counters["during_queries"] = static_cast<double>(busy.latencies_us().size());
    state.counters["during_qps"] = static_cast<double>(busy.latencies_us().size()) / busy_s;
    state.counters["during_p50_us"] = Percentile(busy.latencies_us(), 0.50);
    state.counters["during_p99_us"] = Percentile(busy.latencies_us(), 0.99);
    state.counters["during_max_us"] = Percentile(busy.latencies_us(), 1.0);
    state.counters["errors"] = static_cast<double>(quiet.errors() + busy.errors());
  }
  state.counters["hosts"] = static_cast<double>(cas.size());
  state.counters["peak_rss_MiB"] = PeakRssMiB();
  sm.Stop();
}
BENCHMARK(BM_PathRecords)
    ->ArgNames({"k", "window"})
    ->Args({16, 1})
    ->Args({16, 16})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace ibsm::bench

BENCHMARK_MAIN();
