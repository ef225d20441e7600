// StateWriter without the sweep engine: sweep records handed to it, a real state file.
#include "sm/record/state_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/clock.h"
#include "fabric/generators.h"
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

  StateWriter Writer(StateWriterOptions o = {}) {
    return StateWriter(store_.get(), clock_, std::move(o),
                       {&state_failures_, &dump_failures_, &issues_});
  }
  SweepRecord Record() {
    auto f = FatTree2(4);
    EXPECT_TRUE(f.ok());
    auto d = std::make_shared<DiscoveryResult>();
    d->fabric = std::move(*f);
    SweepRecord r;
    r.discovered = d;
    r.sm_lid = Lid{1};
    r.sm_state = mad::SmState::kMaster;
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
  StateWriter w = Writer();
  EXPECT_TRUE(w.LoadLids("").empty());
  std::unordered_map<Guid, PersistedLid> lids = {{Guid{0x10}, {5, 5}}, {Guid{0x11}, {6, 7}}};
  int flushes = 0;
  const SweepRecord r = Record();
  w.RecordSweep(r, lids, [&] { ++flushes; });
  EXPECT_EQ(flushes, 1);
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
  EXPECT_NE((*nodes)->json.find(ToString(r.discovered->fabric.node(0).guid).substr(2)),
            std::string::npos);

  // A second sweep: one LID moved, one port came. A fresh writer over the same file reads
  // every row back.
  lids[Guid{0x11}] = {8, 9};
  lids[Guid{0x12}] = {10, 10};
  w.RecordSweep(r, lids, [&] { ++flushes; });
  StateWriter again = Writer();
  auto loaded = again.LoadLids("");
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded.at(Guid{0x11}).min_lid, 8);
  EXPECT_EQ(loaded.at(Guid{0x12}).max_lid, 10);
  EXPECT_EQ(state_failures_, 0u);
}

TEST_F(StateWriterTest, DumpFilesThatCannotBeWrittenAreCountedAndTriedAgainEachSweep) {
  StateWriterOptions o;
  o.dump_dir = dir_ + "/no/such/dir";
  StateWriter w = Writer(o);
  const SweepRecord r = Record();
  w.WriteDumps(r, {});
  w.WriteDumps(r, {});
  EXPECT_EQ(dump_failures_, 2u);  // each sweep tries again and counts
  o.dump_dir = dir_;
  w.set_options(o);
  w.WriteDumps(r, {});
  EXPECT_EQ(dump_failures_, 2u);
  std::ifstream lst(dir_ + "/opensm-subnet.lst");
  EXPECT_TRUE(lst.good());
}

TEST_F(StateWriterTest, AFailedWriteIsCountedByItsIdAndASuccessfulOneEndsTheSpell) {
  StateWriter w = Writer();
  EXPECT_FALSE(w.NoteStateWrite("SM-STATE-002", Internal("disk full"), "guid2lid"));
  EXPECT_FALSE(w.NoteStateWrite("SM-STATE-002", Internal("disk full"), "guid2lid"));
  EXPECT_TRUE(w.NoteStateWrite("SM-STATE-002", Status::Ok(), "guid2lid"));
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
  w.RecordSweep(r, lids, [] {});
  EXPECT_GT(state_failures_, 0u);
  EXPECT_TRUE(store.LoadGuid2Lid()->empty());
  EXPECT_TRUE(store.RecentSweeps(10)->empty());
  EXPECT_FALSE(store.LoadSnapshot(ha::kSnapshotNodes)->has_value());
  const uint64_t failed = state_failures_;
  w.RecordSweep(r, lids, [] {});  // still refused: counted again, not lost
  EXPECT_GT(state_failures_, failed);

  store.AcceptWrites();
  w.RecordSweep(r, lids, [] {});
  EXPECT_FALSE(store.degraded());
  ASSERT_EQ(store.LoadGuid2Lid()->size(), 1u);
  ASSERT_EQ(store.RecentSweeps(10)->size(), 1u);
  EXPECT_EQ(store.RecentSweeps(10)->front().engine, "ftree");
  EXPECT_EQ(store.GetValue("sm_state")->value_or(""), ha::SmStateName(mad::SmState::kMaster));
  EXPECT_TRUE(store.LoadSnapshot(ha::kSnapshotNodes)->has_value());
}

}  // namespace
}  // namespace ibsm::sm
