// A fault repaired in process: ibsmd's SubnetManager on the in-process simulator, a 3-tier fat
// tree of radix k brought up by a heavy sweep, then one fault, timed from the moment the
// simulator takes the link down (and sends its switches' traps 128) to the last LFT block
// the repair writes. The in-process figure of README "Faults repaired"; asserts nothing.
//
//   fault 0: one spine-core cable cut; fault 1: a spine (aggregation) switch dead, every
//   cable of it down at once; fault 2: every cable up from that spine cut at once; fault 3:
//   that spine reboots (power cycle: its tables and LIDs cleared, its links bounce; the
//   neighbours' traps report it, the SM finds it behind them and programs it whole);
//   fault 4: the cable of fault 0 comes back once its cut is repaired (timed from the relink;
//   blocks and smps are the come-back's alone).
//
//   pod 1 is the SM's (its host is the first), whose first spine is also where ftree's
//   switch-to-switch routes turn; pod 2's spine, dying or cut off one cable at a time, leaves
//   first, still sends its own trap for the first cut through a core (the repair must not
//   wait for its reads, which cannot be answered).
//
//   after: milliseconds from SUBNET UP to the fault (0: at once; 3000: in steady state, once
//   the SM has made the copy of its model that a repair patches, sm/sweep/model_spare.h).
//
//   repair_bench --benchmark_filter='k:48'
//
// Counters: heavy_s (the first sweep, start to SUBNET UP), trap_to_last_block_s, repair_s
// (the sweeps after the fault, start to end, summed: the traps of one fault may come to more
// than one repair), sweeps (how many), blocks and smps (theirs), repair (1 when repair sweeps
// did it all, 0 when a heavy sweep had to), proven (repairs whose tables were checked from
// the changed LIDs alone), refused (re-routes refused, the engine routed them), model_kept
// (repairs that patched the copy of the model made while the SM was idle), tables_kept
// (re-routes built in the copy of the tables made after the sweep before).
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <fmt/format.h>

#include "base/clock.h"
#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "tests/bench/bench_util.h"

namespace ibsm::sm {
namespace {

using Clock = std::chrono::steady_clock;

PortId FirstCa(const Fabric& f) {
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).kind == NodeKind::kCa) return f.port_id(n, PortNum{1});
  return kNoPort;
}

// The first spine of pod `pod` (by name, as FatTree3 names them) and its first cable up to
// a core.
PortId SpineUplink(const Fabric& f, int pod) {
  const std::string prefix = fmt::format("pod{:02d}-spine-", pod);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).name.starts_with(prefix)) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      const PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
      if (f.port(id).connected() && f.node(f.port(f.port(id).peer).node).name.starts_with("core"))
        return id;
    }
  }
  return kNoPort;
}

void BM_RepairInProcess(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const bool dead_spine = state.range(1) == 1;
  const bool uplinks = state.range(1) == 2;
  const bool reboot = state.range(1) == 3;
  const bool comeback = state.range(1) == 4;
  auto f = FatTree3(k);
  if (!f.ok()) {
    state.SkipWithError(f.status().ToString().c_str());
    return;
  }
  const PortId cut = SpineUplink(*f, static_cast<int>(state.range(2)));
  const auto after = std::chrono::milliseconds(state.range(3));
  for (auto _ : state) {
    sim::Simulator sim(*f);
    SubnetManagerOptions o;
    o.send.timeout = std::chrono::milliseconds(200);
    o.sweep_interval = std::chrono::seconds(0);  // only the traps start sweeps
    o.routing.threads = 2;
    boost::asio::io_context io;
    sim::SimTransport transport(io, sim, FirstCa(*f));
    SystemClock clock;
    SubnetManager sm(io, transport, clock, nullptr, o);
    bool faulted = false;
    Clock::time_point fault_at, last_block;
    sim.SetSmpObserver([&](NodeId, uint8_t method, uint16_t attr, uint32_t) {
      if (faulted && method == mad::method::kSet && attr == mad::attr::kLinearForwardingTable)
        last_block = Clock::now();
    });
    SweepStats first;
    std::chrono::microseconds repair_time{0};
    uint64_t blocks = 0, smps = 0, sweeps = 0;
    bool all_repairs = true;
    bool relinked = false;  // fault 4: the cut's repair is done and the cable is back
    auto stop = [&] {
      sm.Stop();
      transport.Close();
      io.stop();
    };
    // Done once no sweep has run for 300 ms (the optional SL2VL and VLArb reads may still
    // be running: they are not the repair's).
    boost::asio::steady_timer quiet(io);
    std::function<void()> arm = [&] {
      quiet.expires_after(std::chrono::milliseconds(300));
      quiet.async_wait([&](boost::system::error_code ec) {
        if (ec) return;
        if (sm.sweep_in_progress()) return arm();
        if (comeback && !relinked) {
          // The cut is repaired: what follows is the come-back's alone.
          relinked = true;
          fault_at = Clock::now();
          last_block = fault_at;
          repair_time = std::chrono::microseconds{0};
          blocks = smps = sweeps = 0;
          all_repairs = true;
          (void)sim.LinkUp(cut);
          return arm();
        }
        stop();
      });
    };
    boost::asio::steady_timer pause(io);
    std::function<void()> fault;
    sm.Start([&](const SweepStats& s) {
      if (!faulted) {
        first = s;
        if (!s.subnet_up) return stop();
        faulted = true;
        if (after.count() == 0) return fault();
        pause.expires_after(after);
        pause.async_wait([&](boost::system::error_code ec) {
          if (!ec) fault();
        });
        return;
      }
      repair_time += s.duration;
      blocks += s.lft_blocks_sent;
      smps += s.smps;
      ++sweeps;
      all_repairs = all_repairs && s.repair;
      arm();
    });
    fault = [&] {
      fault_at = Clock::now();
      last_block = fault_at;
      if (reboot) {
        (void)sim.RebootSwitch(f->port(cut).node);
      } else if (dead_spine || uplinks) {
        const NodeId spine = f->port(cut).node;
        for (uint32_t p = 1; p <= f->node(spine).num_ports; ++p) {
          const PortId id = f->port_id(spine, PortNum{static_cast<uint8_t>(p)});
          if (!f->port(id).connected()) continue;
          const bool up = f->node(f->port(f->port(id).peer).node).name.starts_with("core");
          if (dead_spine || up) (void)sim.LinkDown(id);
        }
      } else {
        (void)sim.LinkDown(cut);
      }
    };
    io.run();
    sim.SetSmpObserver({});
    const SmCounters& c = sm.counters();
    state.counters["heavy_s"] = std::chrono::duration<double>(first.duration).count();
    state.counters["trap_to_last_block_s"] =
        std::chrono::duration<double>(last_block - fault_at).count();
    state.counters["repair_s"] = std::chrono::duration<double>(repair_time).count();
    state.counters["sweeps"] = static_cast<double>(sweeps);
    state.counters["blocks"] = static_cast<double>(blocks);
    state.counters["smps"] = static_cast<double>(smps);
    state.counters["repair"] = all_repairs && sweeps > 0 ? 1 : 0;
    state.counters["proven"] = static_cast<double>(c.repair_reroutes_proven);
    state.counters["refused"] = static_cast<double>(c.repair_reroutes_refused);
    state.counters["model_kept"] = static_cast<double>(c.repair_models_kept);
    state.counters["tables_kept"] = static_cast<double>(c.repair_tables_kept);
    state.counters["spare_awaited"] = static_cast<double>(c.repair_spare_awaited);
  }
  state.counters["switches"] = static_cast<double>(f->switch_count());
}
BENCHMARK(BM_RepairInProcess)
    ->ArgNames({"k", "fault", "pod", "after"})
    ->Args({16, 0, 1, 0})
    ->Args({32, 0, 1, 0})
    ->Args({48, 0, 1, 0})
    ->Args({56, 0, 1, 0})
    ->Args({16, 1, 1, 0})
    ->Args({32, 1, 1, 0})
    ->Args({48, 1, 1, 0})
    ->Args({56, 1, 1, 0})
    ->Args({16, 2, 1, 0})
    ->Args({32, 2, 1, 0})
    ->Args({48, 2, 1, 0})
    ->Args({56, 2, 1, 0})
    ->Args({16, 3, 1, 0})
    ->Args({32, 3, 1, 0})
    ->Args({48, 3, 1, 0})
    ->Args({56, 3, 1, 0})
    ->Args({16, 4, 1, 0})
    ->Args({32, 4, 1, 0})
    ->Args({48, 4, 1, 0})
    ->Args({16, 1, 2, 0})
    ->Args({32, 1, 2, 0})
    ->Args({48, 1, 2, 0})
    ->Args({16, 2, 2, 0})
    ->Args({32, 2, 2, 0})
    ->Args({48, 2, 2, 0})
    ->Args({48, 0, 1, 3000})
    ->Args({48, 1, 1, 3000})
    ->Args({48, 1, 2, 3000})
    ->Args({48, 2, 1, 3000})
    ->Args({48, 3, 1, 3000})
    ->Args({56, 0, 1, 3000})
    ->Args({56, 1, 1, 3000})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace ibsm::sm

BENCHMARK_MAIN();
