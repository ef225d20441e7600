// Re-route after one cut core cable on FatTree3(k): the incremental re-route (RerouteAround)
// beside a full ftree run, each with the verification and credit-loop check the SM runs before
// it programs anything, both from the same ftree tables, side by side in one process. Reports
// seconds (reroute_s: the re-route alone; reroute_checked_s and full_s: with the checks) and
// the LFT blocks each would make the SM write; proven_s: the re-route as the SM runs it when
// the old tables carry an up*/down* proof (routing/updown_proof.h), with the examined LIDs
// verified and the proof renewed from them instead of the whole-fabric checks; prove_s: that
// proof made once for the heavy sweep's tables. Asserts nothing.
//
//   reroute_bench --benchmark_filter='k:48'
#include <benchmark/benchmark.h>

#include <chrono>

#include "fabric/generators.h"
#include "routing/ftree_engine.h"
#include "routing/quality.h"
#include "routing/reroute.h"
#include "routing/updown_proof.h"
#include "routing/verify.h"
#include "tests/bench/bench_util.h"

namespace ibsm::routing {
namespace {

void BM_RerouteAfterCut(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  auto before = FatTree3(k);
  if (!before.ok()) {
    state.SkipWithError(before.status().ToString().c_str());
    return;
  }
  bench::AssignLidsInNodeOrder(*before);
  const LidMap old_lids(*before);
  RoutingOptions options;
  options.threads = static_cast<unsigned>(state.range(1));
  auto old = FTreeEngine().Route(*before, old_lids, options);
  if (!old.ok()) {
    state.SkipWithError(old.status().ToString().c_str());
    return;
  }
  // The first cable from an aggregation switch (tier 1) up to a core.
  Fabric after = *before;
  const auto tier = LeafDistanceRanks(after);
  for (NodeId n = 0; n < after.node_count(); ++n) {
    if (tier[n] != 1) continue;
    bool cut = false;
    for (uint32_t p = 1; p <= after.node(n).num_ports && !cut; ++p) {
      const PortId id = after.port_id(n, PortNum(static_cast<uint8_t>(p)));
      if (after.port(id).connected() && tier[after.port(after.port(id).peer).node] == 2) {
        after.Disconnect(id);
        cut = true;
      }
    }
    if (cut) break;
  }
  const LidMap lids(after);
  // The proof the SM makes of a heavy sweep's tables (on the worker, after the checks).
  auto t_prove = std::chrono::steady_clock::now();
  auto prior = ProveUpDown(*before, old_lids, *old, UpDownRanks(*before, {}), options.threads);
  if (!prior.ok()) {
    state.SkipWithError(prior.status().ToString().c_str());
    return;
  }
  state.counters["prove_s"] = bench::Seconds(t_prove);
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = RerouteAround(after, lids, *before, *old, options);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    state.counters["reroute_s"] = bench::Seconds(t0);
    // The checks the SM runs on it before anything is programmed.
    const VerifyReport rv = VerifyTables(after, lids, r->tables, 20, options.threads);
    const CreditLoopReport rl = CheckCreditLoops(after, lids, r->tables, options.threads);
    state.counters["reroute_checked_s"] = bench::Seconds(t0);
    state.counters["reroute_ok"] = rv.ok && rl.acyclic ? 1 : 0;
    // As the SM repairs when the old tables carry a proof: the re-route under the proof's
    // ranking, the examined LIDs verified, the proof renewed from them.
    t0 = std::chrono::steady_clock::now();
    auto pr = RerouteAround(after, lids, *before, *old, options, false, &prior->rank);
    if (!pr.ok()) {
      state.SkipWithError(pr.status().ToString().c_str());
      return;
    }
    state.counters["proven_reroute_s"] = bench::Seconds(t0);
    const VerifyReport pv =
        VerifyTables(after, lids, pr->tables, 20, options.threads, &pr->examined);
    auto renewed = ReproveUpDown(after, lids, pr->tables, *before, *prior, pr->examined,
                                 options.threads);
    state.counters["proven_s"] = bench::Seconds(t0);
    state.counters["proven_ok"] = pv.ok && renewed.ok() ? 1 : 0;
    state.counters["proven_blocks"] = static_cast<double>(BlocksDiffering(pr->tables, *old));
    state.counters["reroute_lids"] = static_cast<double>(r->stats.lids_examined);
    state.counters["reroute_blocks"] = static_cast<double>(BlocksDiffering(r->tables, *old));
    t0 = std::chrono::steady_clock::now();
    auto full = FTreeEngine().Route(after, lids, options);
    if (!full.ok()) {
      state.SkipWithError(full.status().ToString().c_str());
      return;
    }
    const VerifyReport v = VerifyTables(after, lids, *full, 20, options.threads);
    const CreditLoopReport loops = CheckCreditLoops(after, lids, *full, options.threads);
    state.counters["full_s"] = bench::Seconds(t0);
    benchmark::DoNotOptimize(v.ok && loops.acyclic);
    state.counters["full_blocks"] = static_cast<double>(BlocksDiffering(*full, *old));
  }
  state.counters["switches"] = static_cast<double>(after.switch_count());
  state.counters["lids"] = lids.max_lid();
}
BENCHMARK(BM_RerouteAfterCut)
    ->ArgNames({"k", "threads"})
    ->Args({16, 2})
    ->Args({32, 2})
    ->Args({48, 2})
    ->Args({56, 2})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace ibsm::routing

BENCHMARK_MAIN();
