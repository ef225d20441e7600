// The contract of ha/state_rows.h, run against both of its implementations: the SQLite file
// (StateStore) and its in-memory twin (MemoryStateStore). A test that uses the twin in place
// of the file relies on exactly what passes here for both.
#include "ha/state_rows.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "base/clock.h"
#include "ha/memory_state_store.h"
#include "ha/state_store.h"

namespace ibsm::ha {
namespace {

// What each implementation needs to be built and torn down.
struct SqliteRows {
  static constexpr const char* kName = "sqlite";
  std::string dir;
  std::unique_ptr<StateStore> store;
  StateFile* Open(const Clock& clock) {
    char tmpl[] = "/tmp/ibsm-rows-XXXXXX";
    dir = mkdtemp(tmpl);
    auto s = StateStore::Open(dir + "/state.db", clock);
    if (!s.ok()) return nullptr;
    store = std::move(*s);
    return store.get();
  }
  ~SqliteRows() {
    store.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

struct MemoryRows {
  static constexpr const char* kName = "memory";
  std::unique_ptr<MemoryStateStore> store;
  StateFile* Open(const Clock& clock) {
    store = std::make_unique<MemoryStateStore>(clock);
    return store.get();
  }
};

template <typename Impl>
class StateRowsTest: public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.Advance(std::chrono::seconds(1'700'000'000));
    rows_ = impl_.Open(clock_);
    ASSERT_NE(rows_, nullptr);
  }
  ManualClock clock_;
  Impl impl_;
  StateFile* rows_ = nullptr;
};

using Implementations = ::testing::Types<SqliteRows, MemoryRows>;
struct ImplName {
  template <typename T>
  static std::string GetName(int) { return T::kName; }
};
TYPED_TEST_SUITE(StateRowsTest, Implementations, ImplName);

Guid2LidEntry Lids(uint64_t guid, uint16_t min, uint16_t max) {
  return {Guid{guid}, Lid{min}, Lid{max}};
}

TYPED_TEST(StateRowsTest, Guid2LidIsOrderedAsTheFileStoresGuidsAndStampedByTheClock) {
  StateFile& s = *this->rows_;
  // 0x8000... is negative as an int64: it sorts first.
  ASSERT_TRUE(s.SaveGuid2Lid({Lids(2, 5, 5), Lids(0x8000000000000001ull, 7, 8), Lids(1, 3, 3)}, {})
                  .ok());
  auto all = s.LoadGuid2Lid();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].port_guid, Guid{0x8000000000000001ull});
  EXPECT_EQ((*all)[1].port_guid, Guid{1});
  EXPECT_EQ((*all)[2].port_guid, Guid{2});
  EXPECT_EQ((*all)[0].updated_us, this->clock_.UnixMicros());
  // Upserts then removals; a removal of a row upserted in the same call wins.
  ASSERT_TRUE(s.SaveGuid2Lid({Lids(1, 9, 9), Lids(4, 10, 11)}, {Guid{2}, Guid{4}}).ok());
  all = s.LoadGuid2Lid();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].min_lid, Lid{9});
  ASSERT_TRUE(s.ReplaceGuid2Lid({Lids(6, 12, 12)}).ok());
  EXPECT_EQ(s.LoadGuid2Lid()->size(), 1u);
}

TYPED_TEST(StateRowsTest, ARefusedRowChangesNothing) {
  StateFile& s = *this->rows_;
  ASSERT_TRUE(s.SaveGuid2Lid({Lids(1, 3, 3)}, {}).ok());
  const uint64_t before = s.transactions();
  // LID 0 and a range past the unicast LIDs break the file's constraints.
  EXPECT_FALSE(s.SaveGuid2Lid({Lids(2, 4, 4), Lids(3, 0, 0)}, {Guid{1}}).ok());
  EXPECT_FALSE(s.ReplaceGuid2Lid({Lids(2, 4, 4), Lids(3, 49151, 49152)}).ok());
  auto all = s.LoadGuid2Lid();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].port_guid, Guid{1});
  EXPECT_EQ(s.transactions(), before);

  McGroupRow g;
  g.mgid[0] = 0xff;
  g.mlid = 0xC001;
  g.record.assign(kMcGroupRecordSize, 0);
  g.members.push_back({5, {}, 1, false});
  ASSERT_TRUE(s.SaveMulticastGroups({g}).ok());
  McGroupRow clash = g;
  clash.mgid[1] = 1;  // another group on the same MLID
  EXPECT_FALSE(s.SaveMulticastChanges({clash}, {}).ok());
  McGroupRow bad_join = g;
  bad_join.members[0].join_state = 0;
  EXPECT_FALSE(s.SaveMulticastGroups({bad_join}).ok());
  ASSERT_EQ(s.LoadMulticastGroups()->size(), 1u);
  EXPECT_EQ(s.LoadMulticastGroups()->front().members.front().join_state, 1);

  EXPECT_FALSE(s.SaveArGroupIds({{Guid{1}, 4096}}).ok());
  EXPECT_FALSE(s.SaveArGroupIds({{Guid{1}, 7}, {Guid{2}, 7}}).ok());  // one ID, two leaves
  EXPECT_TRUE(s.LoadArGroupIds()->empty());
}

TYPED_TEST(StateRowsTest, SweepsAndEventsKeepTheirIdsAndTheNewestArePruned) {
  StateFile& s = *this->rows_;
  for (int i = 0; i < 5; ++i) {
    SweepRow r;
    r.kind = i % 2 ? SweepKind::kLight : SweepKind::kHeavy;
    r.started_us = i;
    r.outcome = "ok";
    auto id = s.RecordSweep(r);
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(*id, i + 1);
  }
  auto recent = s.RecentSweeps(2);
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[0].id, 5);
  EXPECT_EQ((*recent)[1].started_us, 3);

  // Newest by time first, and by id among equal times; `kind` and `since` filter.
  std::vector<EventRow> ev;
  for (int i = 0; i < 4; ++i) {
    EventRow e;
    e.time_us = i < 2 ? 100 : 50;
    e.kind = i == 3 ? std::string(kEventTrap) : std::string(kEventError);
    e.severity = EventSeverity::kWarning;
    e.message = "e" + std::to_string(i);
    if (i == 0) e.port_num = PortNum{3};
    ev.push_back(e);
  }
  ASSERT_TRUE(s.RecordEvents(ev).ok());
  auto events = s.RecentEvents(10);
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[0].message, "e1");
  EXPECT_EQ((*events)[1].message, "e0");
  EXPECT_EQ((*events)[1].port_num, PortNum{3});
  EXPECT_EQ((*events)[2].message, "e3");
  EXPECT_EQ(s.RecentEvents(10, 0, kEventTrap)->size(), 1u);
  EXPECT_EQ(s.RecentEvents(10, 60)->size(), 2u);
  EXPECT_EQ(*s.CountEvents(60), 2u);
  EXPECT_EQ(*s.CountEvents(), 4u);

  ASSERT_TRUE(s.Prune(2, 1).ok());
  recent = s.RecentSweeps(10);
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[1].id, 4);
  events = s.RecentEvents(10);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].message, "e3");  // the newest by id, not by time
  // Ids are not reused after a prune.
  SweepRow r;
  r.outcome = "ok";
  EXPECT_EQ(*s.RecordSweep(r), 6);
}

TYPED_TEST(StateRowsTest, ValuesAndPeers) {
  StateFile& s = *this->rows_;
  EXPECT_FALSE(s.GetValue("sm_state")->has_value());
  ASSERT_TRUE(s.SetValue("sm_state", "STANDBY").ok());
  ASSERT_TRUE(s.SetValue("sm_state", "MASTER").ok());
  EXPECT_EQ(s.GetValue("sm_state")->value(), "MASTER");
  ASSERT_TRUE(s.UpsertPeer({Guid{9}, 3, 2, 10, true}).ok());
  ASSERT_TRUE(s.UpsertPeer({Guid{0xF000000000000000ull}, 1, 1, 11, false}).ok());
  ASSERT_TRUE(s.UpsertPeer({Guid{9}, 4, 3, 12, false}).ok());
  EXPECT_FALSE(s.UpsertPeer({Guid{8}, 16, 0, 0, false}).ok());
  auto peers = s.Peers();
  ASSERT_EQ(peers->size(), 2u);
  EXPECT_EQ((*peers)[0].guid, Guid{0xF000000000000000ull});
  EXPECT_EQ((*peers)[1], (PeerRow{Guid{9}, 4, 3, 12, false}));
  ASSERT_TRUE(s.RemovePeer(Guid{9}).ok());
  EXPECT_EQ(s.Peers()->size(), 1u);
}

TYPED_TEST(StateRowsTest, ServicesSubscriptionsAndGroupsKeepTheFilesOrders) {
  StateFile& s = *this->rows_;
  auto service = [](uint64_t id, uint8_t gid0, uint16_t pkey) {
    ServiceRow r;
    r.key.service_id = id;
    r.key.service_gid[0] = gid0;
    r.key.pkey = pkey;
    r.record.assign(kServiceRecordSize, gid0);
    return r;
  };
  ASSERT_TRUE(s.SaveServiceRecords({service(5, 1, 2), service(~0ull, 0, 0), service(5, 0, 9)}, {})
                  .ok());
  EXPECT_FALSE(s.SaveServiceRecords({ServiceRow{}}, {}).ok());  // no 176-byte record
  auto services = s.LoadServiceRecords();
  ASSERT_EQ(services->size(), 3u);
  EXPECT_EQ((*services)[0].key.service_id, ~0ull);  // -1 as int64
  EXPECT_EQ((*services)[1].key.pkey, 9);
  ASSERT_TRUE(s.SaveServiceRecords({}, {service(5, 1, 2).key}).ok());
  EXPECT_EQ(s.LoadServiceRecords()->size(), 2u);

  auto inform = [](uint8_t key) {
    InformRow r;
    r.key = {key};
    r.record.assign(kInformInfoRecordSize, key);
    r.report_lid = key;
    return r;
  };
  ASSERT_TRUE(s.SaveInformSubscriptions({inform(3), inform(1), inform(2)}, {}).ok());
  InformRow moved = inform(3);
  moved.report_lid = 99;
  ASSERT_TRUE(s.SaveInformSubscriptions({moved}, {{1}}).ok());  // kept in place, updated
  auto subs = s.LoadInformSubscriptions();
  ASSERT_EQ(subs->size(), 2u);
  EXPECT_EQ((*subs)[0].report_lid, 99);
  EXPECT_EQ((*subs)[1].key, std::vector<uint8_t>{2});

  auto group = [](uint8_t tag, uint16_t mlid, std::vector<uint64_t> ports) {
    McGroupRow g;
    g.mgid[15] = tag;
    g.mlid = mlid;
    g.record.assign(kMcGroupRecordSize, tag);
    for (uint64_t p : ports) g.members.push_back({p, {}, 1, false});
    return g;
  };
  ASSERT_TRUE(s.SaveMulticastGroups({group(1, 0xC005, {7, 2}), group(2, 0xC002, {})}).ok());
  auto groups = s.LoadMulticastGroups();
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[0].mlid, 0xC002);
  ASSERT_EQ((*groups)[1].members.size(), 2u);
  EXPECT_EQ((*groups)[1].members[0].port_guid, 2u);
  // A removed group's MLID may go to a group created in the same change.
  ASSERT_TRUE(s.SaveMulticastChanges({group(3, 0xC005, {4})}, {group(1, 0, {}).mgid}).ok());
  groups = s.LoadMulticastGroups();
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[1].mgid[15], 3);
}

TYPED_TEST(StateRowsTest, SnapshotsAreReplacedWholeAndStampedByTheClock) {
  StateFile& s = *this->rows_;
  EXPECT_FALSE(s.LoadSnapshot(kSnapshotNodes)->has_value());
  EXPECT_FALSE(s.SaveSnapshot("", "{}").ok());
  std::string big(200 * 1024, 'x');
  ASSERT_TRUE(s.SaveSnapshotStreamed(kSnapshotLinks, [&](const SnapshotRows::SnapshotSink& sink) {
                 sink("[");
                 sink(big);
                 sink("]");
               }).ok());
  this->clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(s.SaveSnapshot(kSnapshotNodes, "{\"a\":1}").ok());
  auto links = s.LoadSnapshot(kSnapshotLinks);
  ASSERT_TRUE(links->has_value());
  EXPECT_EQ((*links)->json.size(), big.size() + 2);
  ASSERT_TRUE(s.SaveSnapshot(kSnapshotLinks, "[]").ok());
  EXPECT_EQ(s.LoadSnapshot(kSnapshotLinks)->value().json, "[]");
  EXPECT_EQ(s.LoadSnapshot(kSnapshotNodes)->value().written_us, this->clock_.UnixMicros());
}

TYPED_TEST(StateRowsTest, PerfHistoryIsNewestSweepFirstAndKeepsItsRetention) {
  StateFile& s = *this->rows_;
  EXPECT_EQ(*s.LastPerfSweep(), 0);
  EXPECT_FALSE(s.RecordPerfHistory({PerfHistoryRow{}}, 5).ok());  // sweep 0
  for (int64_t sweep = 1; sweep <= 4; ++sweep) {
    std::vector<PerfHistoryRow> rows;
    for (uint64_t node : {2ull, 0x9000000000000000ull}) {
      PerfHistoryRow r;
      r.sweep = sweep;
      r.node_guid = Guid{node};
      r.port_num = PortNum{static_cast<uint8_t>(sweep)};
      r.deltas[0] = static_cast<uint64_t>(sweep);
      rows.push_back(r);
    }
    ASSERT_TRUE(s.RecordPerfHistory(rows, 3).ok());
  }
  EXPECT_EQ(*s.LastPerfSweep(), 4);
  auto all = s.LoadPerfHistory(std::nullopt, 100);
  ASSERT_EQ(all->size(), 6u);  // sweeps 2..4 kept
  EXPECT_EQ((*all)[0].sweep, 4);
  EXPECT_EQ((*all)[0].node_guid, Guid{0x9000000000000000ull});
  EXPECT_EQ((*all)[5].sweep, 2);
  auto one = s.LoadPerfHistory(Guid{2}, 2);
  ASSERT_EQ(one->size(), 2u);
  EXPECT_EQ((*one)[0].sweep, 4);
  EXPECT_EQ((*one)[1].sweep, 3);
  EXPECT_EQ((*one)[1].deltas[0], 3u);
}

TYPED_TEST(StateRowsTest, EveryWriteIsOneTransaction) {
  StateFile& s = *this->rows_;
  const uint64_t before = s.transactions();
  ASSERT_TRUE(s.SaveGuid2Lid({Lids(1, 1, 1), Lids(2, 2, 2)}, {}).ok());
  ASSERT_TRUE(s.RecordEvents({EventRow{}, EventRow{}}).ok());
  ASSERT_TRUE(s.SetValue("k", "v").ok());
  EXPECT_EQ(s.transactions(), before + 3);
  EXPECT_FALSE(s.degraded());
  EXPECT_TRUE(s.RetryWritable().ok());
}

TEST(MemoryStateStoreTest, RefusedWritesLookLikeADegradedFileAndComeBackOnRetry) {
  ManualClock clock;
  MemoryStateStore s(clock);
  ASSERT_TRUE(s.SetValue("k", "1").ok());
  s.RefuseWrites("disk full");
  EXPECT_TRUE(s.degraded());
  Status st = s.SetValue("k", "2");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_EQ(s.GetValue("k")->value(), "1");  // reads go on
  EXPECT_FALSE(s.RetryWritable().ok());
  s.AcceptWrites();
  EXPECT_TRUE(s.degraded());  // until a retry, as the file
  ASSERT_TRUE(s.RetryWritable().ok());
  EXPECT_TRUE(s.SetValue("k", "2").ok());
}

}  // namespace
}  // namespace ibsm::ha
