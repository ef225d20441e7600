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
#include <ctime>

#include "fabric/generators.h"
#include "routing/ftree_engine.h"
#include "routing/quality.h"
#include "routing/reroute.h"
#include "routing/updown_proof.h"
#include "routing/verify.h"
#include "tests/bench/bench_util.h"

namespace ibsm::routing {
namespace {

// LFT blocks of `a` (for fabric `fa`) that differ from `b`'s (for `fb`), switches matched by
// GUID: what the SM would write (BlocksDiffering where the NodeIds differ).
size_t BlocksWritten(const RoutingTables& a, const Fabric& fa, const RoutingTables& b,
                     const Fabric& fb) {
  RoutingTables mapped = b;
  mapped.switch_index.assign(fa.node_count(), SIZE_MAX);
  for (size_t i = 0; i < mapped.switches.size(); ++i) {
    const auto n = fa.FindNode(fb.node(mapped.switches[i].node).guid);
    mapped.switches[i].node = n ? *n : kNoNode;
    if (n) mapped.switch_index[*n] = i;
  }
  return BlocksDiffering(a, mapped);
}

// fault 0: the first cable from an aggregation switch (tier 1) up to a core; fault 1: that
// aggregation switch dead (taken out of the model), its cores left without a way into its pod;
// fault 2: every cable up from that switch cut (bench_repair.sh's cables16 at k=32).
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
  Fabric after = *before;
  const auto tier = LeafDistanceRanks(after);
  for (NodeId n = 0; n < after.node_count(); ++n) {
    if (tier[n] != 1) continue;
    if (state.range(2) == 1) {
      after = WithoutNode(*before, n);
      break;
    }
    bool cut = false;
    for (uint32_t p = 1; p <= after.node(n).num_ports && (!cut || state.range(2) == 2); ++p) {
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
    state.counters["reroute_verified"] = rv.ok ? 1 : 0;
    // As the SM repairs when the old tables carry a proof: the re-route under the proof's
    // ranking, the examined LIDs verified, the proof renewed from them.
    t0 = std::chrono::steady_clock::now();
    const std::clock_t cpu0 = std::clock();  // the process's CPU time, every thread's
    auto pr = RerouteAround(after, lids, *before, *old, options, false, &*prior);
    // CPU seconds move less than wall seconds on a busy machine: the figure to compare.
    state.counters["proven_reroute_cpu_s"] = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
    if (!pr.ok()) {
      state.SkipWithError(pr.status().ToString().c_str());
      return;
    }
    state.counters["proven_reroute_s"] = bench::Seconds(t0);
    auto t_verify = std::chrono::steady_clock::now();
    const VerifyReport pv =
        VerifyTables(after, lids, pr->tables, 20, options.threads, &pr->examined, &pr->changes);
    state.counters["proven_verify_s"] = bench::Seconds(t_verify);
    auto renewed = ReproveUpDown(after, lids, pr->tables, *before, *prior, pr->examined,
                                 options.threads, &pr->changes);
    state.counters["proven_s"] = bench::Seconds(t0);
    state.counters["proven_ok"] = pv.ok && renewed.ok() ? 1 : 0;
    // The LIDs examined, and how many of them are switches' own (port 0).
    size_t switch_lids = 0;
    for (uint32_t lid : pr->examined) {
      const PortId o = lids.owner(Lid(static_cast<uint16_t>(lid)));
      switch_lids += o != kNoPort && after.node(after.port(o).node).is_switch();
    }
    state.counters["proven_lids"] = static_cast<double>(pr->examined.size());
    state.counters["proven_switch_lids"] = static_cast<double>(switch_lids);
    state.counters["proven_blocks"] =
        static_cast<double>(BlocksWritten(pr->tables, after, *old, *before));
    state.counters["reroute_lids"] = static_cast<double>(r->stats.lids_examined);
    state.counters["reroute_blocks"] =
        static_cast<double>(BlocksWritten(r->tables, after, *old, *before));
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
    state.counters["full_blocks"] = static_cast<double>(BlocksWritten(*full, after, *old, *before));
  }
  state.counters["switches"] = static_cast<double>(after.switch_count());
  state.counters["lids"] = lids.max_lid();
}
BENCHMARK(BM_RerouteAfterCut)
    ->ArgNames({"k", "threads", "fault"})
    ->Args({16, 2, 0})
    ->Args({32, 2, 0})
    ->Args({48, 2, 0})
    ->Args({56, 2, 0})
    ->Args({16, 2, 1})
    ->Args({32, 2, 1})
    ->Args({48, 2, 1})
    ->Args({16, 2, 2})
    ->Args({32, 2, 2})
    ->Args({48, 2, 2})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace ibsm::routing

BENCHMARK_MAIN();
