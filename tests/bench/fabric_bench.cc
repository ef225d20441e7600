// Fabric model scale: generate a k-ary 3-tier fat tree, write it as an ibsim net file, read
// it back. Reports the time of each step and memory (the issue asks that k=64 -- 65,536
// hosts, 5,120 switches -- loads in under 1 GiB). Reports only; asserts nothing.
//
//   fabric_bench --benchmark_filter=FatTree3
// peak_rss_MiB is the process high-water mark (getrusage ru_maxrss) and so includes the
// generated fabric and the text held at the same time; read_fabric_MiB is the resident
// growth while reading the text back, i.e. what loading a file costs.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <benchmark/benchmark.h>

#include "fabric/generators.h"
#include "tests/bench/bench_util.h"
#include "fabric/topology_reader.h"
#include "fabric/topology_writer.h"

namespace ibsm {
namespace {

double CurrentRssMiB() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
  std::fclose(f);
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

void BM_FatTree3GenerateWriteRead(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto gen = FatTree3(k);
    if (!gen.ok()) {
      state.SkipWithError(gen.status().ToString().c_str());
      return;
    }
    double gen_s = bench::Seconds(t0);

    t0 = std::chrono::steady_clock::now();
    std::string text = WriteTopology(*gen);
    double write_s = bench::Seconds(t0);
    const size_t nodes = gen->node_count(), links = gen->link_count();
    gen = Fabric();  // drop the generated fabric before loading, as a real load would

    double rss_before = CurrentRssMiB();
    t0 = std::chrono::steady_clock::now();
    auto back = ReadTopology(text, "bench.net");
    double read_s = bench::Seconds(t0);
    double rss_after = CurrentRssMiB();
    if (!back.ok() || back->node_count() != nodes || back->link_count() != links) {
      state.SkipWithError("read-back fabric differs");
      return;
    }
    benchmark::DoNotOptimize(back->port_count());
    state.counters["hosts"] = static_cast<double>(back->ca_count());
    state.counters["switches"] = static_cast<double>(back->switch_count());
    state.counters["generate_s"] = gen_s;
    state.counters["write_s"] = write_s;
    state.counters["read_s"] = read_s;
    state.counters["text_MiB"] = static_cast<double>(text.size()) / (1024.0 * 1024.0);
    state.counters["read_fabric_MiB"] = rss_after - rss_before;
    state.counters["peak_rss_MiB"] = bench::PeakRssMiB();
  }
}
// k=32 first: peak RSS is a high-water mark, so the smaller run must not follow the larger.
BENCHMARK(BM_FatTree3GenerateWriteRead)
    ->Arg(32)
    ->Arg(64)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void BM_FatTree3Generate(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  for (auto _ : state) {
    auto f = FatTree3(k);
    benchmark::DoNotOptimize(f.ok());
  }
}
BENCHMARK(BM_FatTree3Generate)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond);

// A copy of a 3-tier fat tree's model, as the SM makes one for the routing worker on every
// sweep and repair; arg 1: then made to own its GUID and name indexes (Unshare), which is what
// every copy cost before copies shared them (the spare model a repair patches still does).
void BM_FabricCopy(benchmark::State& state) {
  auto f = FatTree3(static_cast<int>(state.range(0)));
  if (!f.ok()) {
    state.SkipWithError(f.status().ToString().c_str());
    return;
  }
  for (auto _ : state) {
    Fabric copy = *f;
    if (state.range(1)) copy.Unshare();
    benchmark::DoNotOptimize(copy.node_count());
  }
}
BENCHMARK(BM_FabricCopy)->Args({48, 0})->Args({48, 1})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ibsm

BENCHMARK_MAIN();
