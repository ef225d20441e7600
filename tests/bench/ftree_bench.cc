// ftree scale: FatTree3(k) routed by the ftree engine on 1 and 2 worker threads. Reports
// seconds and peak memory; asserts nothing.
//
//   ftree_bench --benchmark_filter='FTree/k:64/threads:2'
// peak_rss_MiB is the process high-water mark (getrusage ru_maxrss); run one case per process
// for its own peak. FatTree3(64) has 65,536 hosts and 5,120 switches, more end ports than the
// 49,151 unicast LIDs: LIDs go to switches and hosts in NodeId order until they run out, as a
// LID manager would, and the hosts left over are not routed.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>

#include "fabric/generators.h"
#include "tests/bench/bench_util.h"
#include "routing/ftree_engine.h"

namespace ibsm::routing {
namespace {

void BM_FTree(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  auto fabric = FatTree3(k);
  if (!fabric.ok()) {
    state.SkipWithError(fabric.status().ToString().c_str());
    return;
  }
  bench::AssignLidsInNodeOrder(*fabric);
  const LidMap lids(*fabric);
  RoutingOptions options;
  options.threads = static_cast<unsigned>(state.range(1));
  const FTreeEngine engine;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto tables = engine.Route(*fabric, lids, options);
    state.counters["route_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!tables.ok()) {
      state.SkipWithError(tables.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(tables->switches.data());
  }
  state.counters["hosts"] = static_cast<double>(fabric->ca_count());
  state.counters["switches"] = static_cast<double>(fabric->switch_count());
  state.counters["lids"] = lids.max_lid();
  state.counters["peak_rss_MiB"] = bench::PeakRssMiB();
}
BENCHMARK(BM_FTree)
    ->ArgNames({"k", "threads"})
    ->Args({16, 1})
    ->Args({16, 2})
    ->Args({32, 1})
    ->Args({32, 2})
    ->Args({64, 1})
    ->Args({64, 2})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace ibsm::routing

BENCHMARK_MAIN();
