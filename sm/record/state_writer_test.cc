// StateWriter without the sweep engine: sweep records handed to it, a real state file.
#include "sm/record/state_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "fabric/generators.h"
#include "ha/locked_state_file.h"
#include "ha/memory_state_store.h"
#include "ha/state_store.h"

namespace ibsm::sm {
namespace {

class StateWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ibsm_state_writer_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = ha::StateStore::Open(dir_ + "/state.db", clock_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<StateWriter> Writer(StateWriterOptions o = {}) {
    return std::make_unique<StateWriter>(store_.get(), clock_, std::move(o),
                                         StateWriterCounters{&state_failures_, &dump_failures_,
                                                             &issues_});
  }
  // As the daemon has it: a shared store, dump files in dir_, the LIDs loaded (its thread is
  // the test's to start).
  std::unique_ptr<StateWriter> DaemonWriter(ha::LockedStateFile& shared) {
    StateWriterOptions o;
    o.dump_dir = dir_;
    auto w = std::make_unique<StateWriter>(&shared, clock_, o,
                                           StateWriterCounters{&state_failures_, &dump_failures_,
                                                               &issues_});
    w->LoadLids("");
    return w;
  }
  static SweepPublication Publication(const SweepRecord& r,
                                      std::unordered_map<Guid, PersistedLid> lids = {}) {
    SweepPublication p;
    p.record = r;
    p.guid2lid = std::move(lids);
    return p;
  }
  SweepRecord Record() {
    auto f = FatTree2(4);
    EXPECT_TRUE(f.ok());
    auto d = std::make_shared<DiscoveryResult>();
    d->fabric = std::move(*f);
    auto published = std::make_shared<SubnetSnapshot>();
    published->discovery = d;
    published->sm_lid = Lid{1};
    published->sm_state = mad::SmState::kMaster;
    SweepRecord r;
    r.snapshot = published;
    r.nodes = d->fabric.node_count();
    r.engine = "minhop";
    r.subnet_up = true;
    return r;
  }

  SystemClock clock_;
  std::string dir_;
  std::unique_ptr<ha::StateStore> store_;
  uint64_t state_failures_ = 0, dump_failures_ = 0;
  std::map<std::string, uint64_t> issues_;
};

TEST_F(StateWriterTest, ASweepWritesItsRowItsLidsAndItsSnapshotsAndAFreshWriterReadsTheLidsBack) {
  std::unique_ptr<StateWriter> w = Writer();
  EXPECT_TRUE(w->LoadLids("").empty());
  std::unordered_map<Guid, PersistedLid> lids = {{Guid{0x10}, {5, 5}}, {Guid{0x11}, {6, 7}}};
  const SweepRecord r = Record();
  w->Publish(Publication(r, lids));
  auto rows = store_->LoadGuid2Lid();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  auto sweeps = store_->RecentSweeps(10);
  ASSERT_TRUE(sweeps.ok());
  ASSERT_EQ(sweeps->size(), 1u);
  EXPECT_EQ((*sweeps)[0].engine, "minhop");
  EXPECT_EQ((*sweeps)[0].outcome, "ok");
  EXPECT_EQ((*sweeps)[0].nodes, r.nodes);
  auto nodes = store_->LoadSnapshot(ha::kSnapshotNodes);
  ASSERT_TRUE(nodes.ok());
  ASSERT_TRUE(nodes->has_value());  // the topology, for ibsmctl --state-db
  EXPECT_NE((*nodes)->json.find(ToString(r.discovered()->fabric.node(0).guid).substr(2)),
            std::string::npos);

  // A second sweep: one LID moved, one port came. A fresh writer over the same file reads
  // every row back.
  lids[Guid{0x11}] = {8, 9};
  lids[Guid{0x12}] = {10, 10};
  w->Publish(Publication(r, lids));
  std::unique_ptr<StateWriter> again = Writer();
  auto loaded = again->LoadLids("");
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded.at(Guid{0x11}).min_lid, 8);
  EXPECT_EQ(loaded.at(Guid{0x12}).max_lid, 10);
  EXPECT_EQ(state_failures_, 0u);
}

TEST_F(StateWriterTest, DumpFilesThatCannotBeWrittenAreCountedAndTriedAgainEachSweep) {
  StateWriterOptions o;
  o.dump_dir = dir_ + "/no/such/dir";
  std::unique_ptr<StateWriter> w = Writer(o);
  const SweepRecord r = Record();
  w->Publish(Publication(r));
  w->Publish(Publication(r));
  EXPECT_EQ(dump_failures_, 2u);  // each sweep tries again and counts
  o.dump_dir = dir_;
  w->set_options(o);
  w->Publish(Publication(r));
  EXPECT_EQ(dump_failures_, 2u);
  std::ifstream lst(dir_ + "/opensm-subnet.lst");
  EXPECT_TRUE(lst.good());
}

TEST_F(StateWriterTest, AFailedWriteIsCountedByItsIdAndASuccessfulOneEndsTheSpell) {
  std::unique_ptr<StateWriter> w = Writer();
  EXPECT_FALSE(w->NoteStateWrite("SM-STATE-002", Internal("disk full"), "guid2lid"));
  EXPECT_FALSE(w->NoteStateWrite("SM-STATE-002", Internal("disk full"), "guid2lid"));
  EXPECT_TRUE(w->NoteStateWrite("SM-STATE-002", Status::Ok(), "guid2lid"));
  EXPECT_EQ(state_failures_, 2u);
  EXPECT_EQ(issues_["SM-STATE-002"], 2u);
}

// A state directory that takes no writes for a while (a full disk, a read-only mount), on
// the in-memory twin: each sweep's writes fail and are counted, nothing half-written is
// left, and the first sweep after the outage writes the sweep's rows and the SM state.
TEST_F(StateWriterTest, ASweepDuringAnOutageIsCountedAndTheFirstAfterItWritesEverything) {
  ha::MemoryStateStore store(clock_);
  StateWriter w(&store, clock_, {}, {&state_failures_, &dump_failures_, &issues_});
  SweepRecord r = Record();
  r.engine = "ftree";
  const std::unordered_map<Guid, PersistedLid> lids = {{Guid{0x10}, {5, 5}}};
  store.RefuseWrites("no space left on device");
  w.Publish(Publication(r, lids));
  EXPECT_GT(state_failures_, 0u);
  EXPECT_TRUE(store.LoadGuid2Lid()->empty());
  EXPECT_TRUE(store.RecentSweeps(10)->empty());
  EXPECT_FALSE(store.LoadSnapshot(ha::kSnapshotNodes)->has_value());
  const uint64_t failed = state_failures_;
  w.Publish(Publication(r, lids));  // still refused: counted again, not lost
  EXPECT_GT(state_failures_, failed);

  store.AcceptWrites();
  w.Publish(Publication(r, lids));
  EXPECT_FALSE(store.degraded());
  ASSERT_EQ(store.LoadGuid2Lid()->size(), 1u);
  ASSERT_EQ(store.RecentSweeps(10)->size(), 1u);
  EXPECT_EQ(store.RecentSweeps(10)->front().engine, "ftree");
  EXPECT_EQ(store.GetValue("sm_state")->value_or(""), ha::SmStateName(mad::SmState::kMaster));
  EXPECT_TRUE(store.LoadSnapshot(ha::kSnapshotNodes)->has_value());
}

// The daemon's writer: what a sweep hands over is written on the writer's own thread, in
// order; the line after the dumps comes after the dump files and before the rows; the
// counters change only where `home` runs them (the io thread in the daemon); Drain waits.
TEST_F(StateWriterTest, OnItsOwnThreadTheWriterKeepsTheOrderAndCountsAtHome) {
  ha::MemoryStateStore memory(clock_);
  ha::LockedStateFile shared(memory);
  std::unique_ptr<StateWriter> writer = DaemonWriter(shared);
  StateWriter& w = *writer;
  std::mutex home_mu;
  std::vector<std::function<void()>> at_home;
  w.StartThread([&](std::function<void()> change) {
    std::lock_guard<std::mutex> lock(home_mu);
    at_home.push_back(std::move(change));
  });
  ASSERT_TRUE(w.threaded());

  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> dumps_there{false}, rows_there{true}, on_caller{true};
  std::atomic<int> lines{0};
  SweepPublication p = Publication(Record(), {{Guid{0x10}, {5, 5}}});
  p.after_dumps = [&] {
    on_caller = std::this_thread::get_id() == caller;
    dumps_there = std::filesystem::exists(dir_ + "/opensm-subnet.lst");
    rows_there = !memory.RecentSweeps(10)->empty();
    ++lines;
  };
  w.Publish(p);
  w.Drain();
  memory.RefuseWrites("no space left on device");
  SweepPublication refused = Publication(Record(), {{Guid{0x11}, {6, 6}}});
  refused.after_dumps = [&] { ++lines; };
  w.Publish(std::move(refused));
  w.Drain();
  EXPECT_EQ(lines, 2);
  EXPECT_FALSE(on_caller);
  EXPECT_TRUE(dumps_there);
  EXPECT_FALSE(rows_there);  // the line before the rows
  EXPECT_EQ(memory.RecentSweeps(10)->size(), 1u);
  EXPECT_EQ(memory.LoadGuid2Lid()->size(), 1u);
  EXPECT_TRUE(memory.LoadSnapshot(ha::kSnapshotNodes)->has_value());

  // The refused sweep's failures wait for home.
  EXPECT_EQ(state_failures_, 0u);
  std::vector<std::function<void()>> changes;
  {
    std::lock_guard<std::mutex> lock(home_mu);
    changes.swap(at_home);
  }
  EXPECT_FALSE(changes.empty());
  for (auto& c : changes) c();
  EXPECT_GT(state_failures_, 0u);
  EXPECT_GT(issues_["SM-STATE-002"], 0u);

  // What failed is written by the next sweep once the store takes writes again.
  memory.AcceptWrites();
  w.Publish(Publication(Record(), {{Guid{0x11}, {6, 6}}}));
  w.Drain();
  // 0x10 from the first sweep and 0x11, which the refused sweep did not save.
  EXPECT_EQ(memory.LoadGuid2Lid()->size(), 2u);
}

// Behind a long write (here: a line that waits), later sweeps' dumps and lines go ahead of the
// earlier sweeps' rows; every sweep row is written, in order, and the snapshots are rendered
// once, from the newest sweep.
TEST_F(StateWriterTest, OnItsOwnThreadLaterDumpsGoAheadOfEarlierRowsAndOnlyTheNewestSnapshotIsWritten) {
  ha::MemoryStateStore memory(clock_);
  ha::LockedStateFile shared(memory);
  std::unique_ptr<StateWriter> writer = DaemonWriter(shared);
  StateWriter& w = *writer;
  w.StartThread([](std::function<void()> change) { change(); });
  std::mutex gate;
  gate.lock();  // the first sweep's line waits on it
  std::vector<std::string> seen;  // on the writer's thread only
  auto at_line = [&](std::string name) {
    seen.push_back(name + " line, " + std::to_string(memory.RecentSweeps(10)->size()) + " rows");
  };
  SweepPublication first = Publication(Record());
  first.record.engine = "first";
  first.after_dumps = [&] {
    std::lock_guard<std::mutex> wait(gate);
    at_line("first");
  };
  w.Publish(std::move(first));
  SweepPublication second = Publication(Record());
  second.record.engine = "second";
  second.after_dumps = [&] { at_line("second"); };
  w.Publish(std::move(second));
  auto f = FatTree2(8);  // the newest sweep finds a larger fabric
  ASSERT_TRUE(f.ok());
  auto bigger = std::make_shared<DiscoveryResult>();
  bigger->fabric = std::move(*f);
  SweepPublication third = Publication(Record());
  auto bigger_snapshot = std::make_shared<SubnetSnapshot>(*third.record.snapshot);
  bigger_snapshot->discovery = bigger;
  third.record.snapshot = bigger_snapshot;
  third.record.engine = "third";
  third.after_dumps = [&] { at_line("third"); };
  w.Publish(std::move(third));
  const uint64_t before = memory.transactions();
  gate.unlock();
  w.Drain();
  EXPECT_EQ(seen, (std::vector<std::string>{"first line, 0 rows", "second line, 0 rows",
                                            "third line, 0 rows"}));
  auto rows = memory.RecentSweeps(10);
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].engine, "third");  // newest first
  EXPECT_EQ((*rows)[2].engine, "first");
  auto nodes = memory.LoadSnapshot(ha::kSnapshotNodes);
  ASSERT_TRUE(nodes->has_value());
  EXPECT_EQ(nlohmann::json::parse((*nodes)->json)["nodes"].size(), bigger->fabric.node_count());
  // Three sweep rows (and their pruning), one write of each of the three snapshots.
  EXPECT_EQ(memory.transactions() - before, 3u * 2u + 3u);
}

}  // namespace
}  // namespace ibsm::sm
