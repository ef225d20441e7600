// Rates of the SQLite state store (ha/state_store.h) on the local disk, with its real
// durability settings (WAL, synchronous=FULL: one fsync per commit). A 2-tier k=32 fat tree
// has about 16,900 ports; 65,536 guid2lid rows is the whole unicast LID space with room.
// Reports items/second of wall time (fsync waits are the point); asserts nothing about timing.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "ha/state_store.h"

namespace ibsm::ha {
namespace {

constexpr int kGuid2LidRows = 65'536;
constexpr int kEvents = 1'000;

// A fresh state file in its own temporary directory, removed afterwards.
class BenchStore {
 public:
  BenchStore() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ibsm_state_bench_XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    auto r = StateStore::Open(dir_ + "/state.db", clock_);
    if (r.ok()) store_ = std::move(r).value();
  }
  ~BenchStore() {
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  StateStore* get() { return store_.get(); }
  std::string path() const { return dir_ + "/state.db"; }
  ManualClock& clock() { return clock_; }

 private:
  ManualClock clock_;
  std::string dir_;
  std::unique_ptr<StateStore> store_;
};

// 65,536 distinct port GUIDs; LIDs wrap over the unicast range and shift with `round` so
// every save changes every row.
std::vector<Guid2LidEntry> Guid2LidRows(int round) {
  std::vector<Guid2LidEntry> rows;
  rows.reserve(kGuid2LidRows);
  for (int i = 0; i < kGuid2LidRows; ++i) {
    auto lid = static_cast<uint16_t>((i + round) % kMaxUnicastLid + 1);
    rows.push_back({Guid{0x0002c90300000000ull + static_cast<uint64_t>(i)}, Lid{lid}, Lid{lid}, 0});
  }
  return rows;
}

void BM_Guid2LidSave65536Rows(benchmark::State& state) {
  BenchStore bs;
  if (bs.get() == nullptr) return state.SkipWithError("cannot open state file");
  int round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto rows = Guid2LidRows(++round);
    state.ResumeTiming();
    if (!bs.get()->SaveGuid2Lid(rows, {}).ok()) return state.SkipWithError("save failed");
  }
  state.SetItemsProcessed(state.iterations() * kGuid2LidRows);
}
BENCHMARK(BM_Guid2LidSave65536Rows)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Guid2LidReplace65536Rows(benchmark::State& state) {
  BenchStore bs;
  if (bs.get() == nullptr) return state.SkipWithError("cannot open state file");
  int round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto rows = Guid2LidRows(++round);
    state.ResumeTiming();
    if (!bs.get()->ReplaceGuid2Lid(rows).ok()) return state.SkipWithError("replace failed");
  }
  state.SetItemsProcessed(state.iterations() * kGuid2LidRows);
}
BENCHMARK(BM_Guid2LidReplace65536Rows)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Guid2LidLoad65536Rows(benchmark::State& state) {
  BenchStore bs;
  if (bs.get() == nullptr || !bs.get()->SaveGuid2Lid(Guid2LidRows(0), {}).ok()) {
    return state.SkipWithError("cannot fill state file");
  }
  for (auto _ : state) {
    auto rows = bs.get()->LoadGuid2Lid();
    if (!rows.ok() || rows->size() != kGuid2LidRows) return state.SkipWithError("load failed");
    benchmark::DoNotOptimize(rows->data());
  }
  state.SetItemsProcessed(state.iterations() * kGuid2LidRows);
}
BENCHMARK(BM_Guid2LidLoad65536Rows)->Unit(benchmark::kMillisecond)->UseRealTime();

// Startup cost with a full guid2lid table: open, quick_check, schema check.
void BM_Reopen65536Rows(benchmark::State& state) {
  BenchStore bs;
  if (bs.get() == nullptr || !bs.get()->SaveGuid2Lid(Guid2LidRows(0), {}).ok()) {
    return state.SkipWithError("cannot fill state file");
  }
  for (auto _ : state) {
    auto r = StateStore::Open(bs.path(), bs.clock());
    if (!r.ok()) return state.SkipWithError("reopen failed");
  }
}
BENCHMARK(BM_Reopen65536Rows)->Unit(benchmark::kMillisecond)->UseRealTime();

EventRow SampleEvent(int i) {
  return {0,
          1'700'000'000'000'000 + i,
          std::string(kEventTrap),
          EventSeverity::kWarning,
          Guid{0x0002c90300000011},
          PortNum{static_cast<uint8_t>(i % 36 + 1)},
          "trap 128: PortStateChange on switch port"};
}

// One transaction, hence one fsync, per event: the rate of a trickle of events.
void BM_Insert1000EventsOneCommitEach(benchmark::State& state) {
  BenchStore bs;
  if (bs.get() == nullptr) return state.SkipWithError("cannot open state file");
  for (auto _ : state) {
    for (int i = 0; i < kEvents; ++i) {
      if (!bs.get()->RecordEvent(SampleEvent(i)).ok()) return state.SkipWithError("failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kEvents);
}
BENCHMARK(BM_Insert1000EventsOneCommitEach)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

// A trap storm recorded as one burst.
void BM_Insert1000EventsOneCommit(benchmark::State& state) {
  BenchStore bs;
  if (bs.get() == nullptr) return state.SkipWithError("cannot open state file");
  std::vector<EventRow> burst;
  for (int i = 0; i < kEvents; ++i) burst.push_back(SampleEvent(i));
  for (auto _ : state) {
    if (!bs.get()->RecordEvents(burst).ok()) return state.SkipWithError("failed");
  }
  state.SetItemsProcessed(state.iterations() * kEvents);
}
BENCHMARK(BM_Insert1000EventsOneCommit)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ibsm::ha

BENCHMARK_MAIN();
