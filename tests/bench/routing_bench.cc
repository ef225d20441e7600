// Routing scale: minhop (hop table + tables), updn and dnup, and VerifyTables on 3-tier fat
// trees, on 1 and 2 worker threads. Reports seconds per step and peak memory; asserts nothing.
//
//   routing_bench --benchmark_filter=MinHop
//   routing_bench --benchmark_filter='UpDn.*k:64'   (k=64: 5,120 switches, 65,536 hosts)
// peak_rss_MiB is the process high-water mark (getrusage ru_maxrss), so a later, smaller case
// reports the peak of an earlier, larger one; run one case per process for its own peak.
#include <sys/resource.h>

#include <chrono>

#include <benchmark/benchmark.h>

#include "fabric/generators.h"
#include "tests/bench/bench_util.h"
#include "routing/minhop_engine.h"
#include "routing/updn_engine.h"
#include "routing/verify.h"

namespace ibsm::routing {
namespace {

void BM_MinHopAndVerifyFatTree3(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const unsigned threads = static_cast<unsigned>(state.range(1));
  auto fabric = FatTree3(k);
  if (!fabric.ok()) {
    state.SkipWithError(fabric.status().ToString().c_str());
    return;
  }
  bench::AssignLidsInNodeOrder(*fabric);
  const LidMap lids(*fabric);
  RoutingOptions options;
  options.threads = threads;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    const HopTable hops = HopTable::Build(*fabric, threads);
    const double hops_s = bench::Seconds(t0);
    t0 = std::chrono::steady_clock::now();
    const RoutingTables tables = RouteMinHop(*fabric, lids, hops, threads);
    const double route_s = bench::Seconds(t0);
    t0 = std::chrono::steady_clock::now();
    const VerifyReport report = VerifyTables(*fabric, lids, tables);
    const double verify_s = bench::Seconds(t0);
    if (!report.ok) {
      state.SkipWithError(report.problems.empty() ? "verification failed"
                                                  : report.problems.front().c_str());
      return;
    }
    state.counters["hop_table_s"] = hops_s;
    state.counters["minhop_s"] = hops_s + route_s;
    state.counters["verify_s"] = verify_s;
  }
  state.counters["hosts"] = static_cast<double>(fabric->ca_count());
  state.counters["switches"] = static_cast<double>(fabric->switch_count());
  state.counters["lids"] = lids.max_lid();
  state.counters["peak_rss_MiB"] = bench::PeakRssMiB();
}
BENCHMARK(BM_MinHopAndVerifyFatTree3)
    ->ArgNames({"k", "threads"})
    ->Args({16, 1})
    ->Args({16, 2})
    ->Args({32, 1})
    ->Args({32, 2})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

// updn (or dnup with range(2) == 1): ranking, distance matrix and tables in one Route call;
// cpu_s is the process CPU time of that call (user + system, all threads), which stays
// meaningful on a loaded machine where route_s (wall) does not.
void BM_UpDnAndVerifyFatTree3(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const unsigned threads = static_cast<unsigned>(state.range(1));
  const bool dnup = state.range(2) != 0;
  auto fabric = FatTree3(k);
  if (!fabric.ok()) {
    state.SkipWithError(fabric.status().ToString().c_str());
    return;
  }
  bench::AssignLidsInNodeOrder(*fabric);
  const LidMap lids(*fabric);
  RoutingOptions options;
  options.threads = threads;
  const UpDnEngine engine(dnup);
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  for (auto _ : state) {
    const double cpu0 = cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    auto tables = engine.Route(*fabric, lids, options);
    const double route_s = bench::Seconds(t0);
    const double cpu_s = cpu_seconds() - cpu0;
    if (!tables.ok()) {
      state.SkipWithError(tables.status().ToString().c_str());
      return;
    }
    t0 = std::chrono::steady_clock::now();
    const VerifyReport report = VerifyTables(*fabric, lids, *tables);
    const double verify_s = bench::Seconds(t0);
    if (!report.ok) {
      state.SkipWithError(report.problems.empty() ? "verification failed"
                                                  : report.problems.front().c_str());
      return;
    }
    state.counters[dnup ? "dnup_s" : "updn_s"] = route_s;
    state.counters["cpu_s"] = cpu_s;
    state.counters["verify_s"] = verify_s;
  }
  state.counters["hosts"] = static_cast<double>(fabric->ca_count());
  state.counters["switches"] = static_cast<double>(fabric->switch_count());
  state.counters["lids"] = lids.max_lid();
  state.counters["peak_rss_MiB"] = bench::PeakRssMiB();
}
BENCHMARK(BM_UpDnAndVerifyFatTree3)
    ->ArgNames({"k", "threads", "dnup"})
    ->Args({16, 1, 0})
    ->Args({16, 2, 0})
    ->Args({32, 1, 0})
    ->Args({32, 2, 0})
    ->Args({32, 2, 1})
    ->Args({64, 2, 0})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace ibsm::routing

BENCHMARK_MAIN();
