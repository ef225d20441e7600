#include "ha/state_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/log.h"

namespace ibsm::ha {
namespace {

using std::chrono::seconds;

// FROZEN copy of schema version 1 as it shipped. If this test fails, migration 1 was
// edited: restore it and add a new migration instead.
constexpr const char* kFrozenV1Sql = R"sql(
CREATE TABLE guid2lid (
  port_guid  INTEGER PRIMARY KEY,  -- EUI-64 as two's-complement int64
  min_lid    INTEGER NOT NULL CHECK (min_lid BETWEEN 1 AND 49151),
  max_lid    INTEGER NOT NULL CHECK (max_lid BETWEEN min_lid AND 49151),
  updated_us INTEGER NOT NULL
);
CREATE TABLE sweeps (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  kind            INTEGER NOT NULL CHECK (kind IN (1, 2)),  -- SweepKind: 1 heavy, 2 light
  started_us      INTEGER NOT NULL,
  ended_us        INTEGER NOT NULL,
  smps_sent       INTEGER NOT NULL DEFAULT 0,
  smps_failed     INTEGER NOT NULL DEFAULT 0,
  nodes           INTEGER NOT NULL DEFAULT 0,
  switches        INTEGER NOT NULL DEFAULT 0,
  cas             INTEGER NOT NULL DEFAULT 0,
  links           INTEGER NOT NULL DEFAULT 0,
  lid_changes     INTEGER NOT NULL DEFAULT 0,
  lft_blocks_sent INTEGER NOT NULL DEFAULT 0,
  engine          TEXT NOT NULL DEFAULT '',
  outcome         TEXT NOT NULL,
  note            TEXT NOT NULL DEFAULT ''
);
CREATE TABLE sm_state (
  key        TEXT PRIMARY KEY,
  value      TEXT NOT NULL,
  updated_us INTEGER NOT NULL
) WITHOUT ROWID;
)sql";

// Runs SQL on a file directly, as another program or an older ibsm would.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

std::string RawQueryText(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(s, 0);
    out = t ? reinterpret_cast<const char*>(t) : "";
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

void WriteFile(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> out(n);
  for (char& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

Guid2LidEntry G2L(uint64_t guid, uint16_t min_lid, uint16_t max_lid) {
  return {Guid{guid}, Lid{min_lid}, Lid{max_lid}, 0};
}

SweepRow SampleSweep(SweepKind kind, int64_t start) {
  SweepRow r;
  r.kind = kind;
  r.started_us = start;
  r.ended_us = start + 1500;
  r.smps_sent = 12345;
  r.smps_failed = 3;
  r.nodes = 40;
  r.switches = 8;
  r.cas = 32;
  r.links = 64;
  r.lid_changes = 2;
  r.lft_blocks_sent = 16;
  r.engine = "minhop";
  r.outcome = "ok";
  r.note = "first sweep";
  return r;
}

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ibsm_state_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/state.db";
    clock_.Advance(seconds(1'700'000'000));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<StateStore> OpenOrDie() {
    auto r = StateStore::Open(path_, clock_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  std::string dir_;
  std::string path_;
  ManualClock clock_;
};

TEST_F(StateStoreTest, Guid2LidRowsRoundTripStampedWithTheClock) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(
      store->SaveGuid2Lid({G2L(0x0002c90300000011, 1, 1), G2L(0xfffffffffffffffe, 4, 7)}, {}).ok());
  auto rows = store->LoadGuid2Lid();
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  int64_t now = clock_.UnixMicros();
  // Ordered by the signed on-disk value: GUIDs with the top bit set come first.
  EXPECT_EQ((*rows)[0], (Guid2LidEntry{Guid{0xfffffffffffffffe}, Lid{4}, Lid{7}, now}));
  EXPECT_EQ((*rows)[1], (Guid2LidEntry{Guid{0x0002c90300000011}, Lid{1}, Lid{1}, now}));
}

TEST_F(StateStoreTest, SaveGuid2LidUpdatesInsertsAndRemovesInOneCall) {
  auto store = OpenOrDie();
  ASSERT_TRUE(store->SaveGuid2Lid({G2L(1, 10, 10), G2L(2, 20, 20), G2L(3, 30, 30)}, {}).ok());
  clock_.Advance(seconds(5));
  ASSERT_TRUE(store->SaveGuid2Lid({G2L(2, 21, 21), G2L(4, 40, 43)}, {Guid{3}}).ok());
  auto rows = store->LoadGuid2Lid();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].min_lid, Lid{10});
  EXPECT_EQ((*rows)[1].min_lid, Lid{21});
  EXPECT_EQ((*rows)[1].updated_us, clock_.UnixMicros());
  EXPECT_LT((*rows)[0].updated_us, clock_.UnixMicros());
  EXPECT_EQ((*rows)[2], (Guid2LidEntry{Guid{4}, Lid{40}, Lid{43}, clock_.UnixMicros()}));
}

TEST_F(StateStoreTest, ReplaceGuid2LidLeavesOnlyTheNewSet) {
  auto store = OpenOrDie();
  ASSERT_TRUE(store->SaveGuid2Lid({G2L(1, 10, 10), G2L(2, 20, 20)}, {}).ok());
  ASSERT_TRUE(store->ReplaceGuid2Lid({G2L(5, 50, 50)}).ok());
  auto rows = store->LoadGuid2Lid();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].port_guid, Guid{5});
}

TEST_F(StateStoreTest, ABatchWithAnInvalidLidRangeIsRejectedWhole) {
  auto store = OpenOrDie();
  ASSERT_TRUE(store->SaveGuid2Lid({G2L(1, 10, 10)}, {}).ok());
  Status bad = store->SaveGuid2Lid({G2L(1, 11, 11), G2L(2, 0, 0)}, {});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad.ToString();
  Status multicast = store->SaveGuid2Lid({G2L(3, 0xC000, 0xC000)}, {});
  EXPECT_EQ(multicast.code(), StatusCode::kInvalidArgument);
  auto rows = store->LoadGuid2Lid();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].min_lid, Lid{10}) << "the failed batch must roll back its first row";
}

TEST_F(StateStoreTest, SweepRowsRoundTripNewestFirst) {
  auto store = OpenOrDie();
  SweepRow heavy = SampleSweep(SweepKind::kHeavy, 1000);
  SweepRow light = SampleSweep(SweepKind::kLight, 5000);
  light.smps_sent = 0xffffffffffffffffull;  // survives the signed on-disk column
  light.note = "";
  auto id1 = store->RecordSweep(heavy);
  auto id2 = store->RecordSweep(light);
  ASSERT_TRUE(id1.ok() && id2.ok());
  EXPECT_LT(*id1, *id2);
  heavy.id = *id1;
  light.id = *id2;
  auto rows = store->RecentSweeps(10);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0], light);
  EXPECT_EQ((*rows)[1], heavy);
  auto one = store->RecentSweeps(1);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].id, *id2);
}

TEST_F(StateStoreTest, EventsRoundTripWithOptionalFieldsAndFilterByTime) {
  auto store = OpenOrDie();
  EventRow trap{0,
                100,
                std::string(kEventTrap),
                EventSeverity::kWarning,
                Guid{0x0002c90300000011},
                PortNum{0},
                "trap 128 from switch"};
  EventRow state{0,
                 200,
                 std::string(kEventStateChange),
                 EventSeverity::kInfo,
                 std::nullopt,
                 std::nullopt,
                 "Entering MASTER state"};
  EventRow error{0,       300,         std::string(kEventError), EventSeverity::kCritical,
                 Guid{7}, PortNum{36}, "port 36 flapping"};
  ASSERT_TRUE(store->RecordEvent(trap).ok());
  ASSERT_TRUE(store->RecordEvents({state, error}).ok());
  auto all = store->RecentEvents(10);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  trap.id = 1;
  state.id = 2;
  error.id = 3;
  EXPECT_EQ((*all)[0], error);
  EXPECT_EQ((*all)[1], state);
  EXPECT_EQ((*all)[2], trap);
  auto recent = store->RecentEvents(10, 200);
  ASSERT_TRUE(recent.ok());
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[1].message, "Entering MASTER state");
  auto newest = store->RecentEvents(1, 0);
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 1u);
  EXPECT_EQ((*newest)[0].kind, "error");
}

TEST_F(StateStoreTest, SmStateValuesOverwriteAndAMissingKeyIsEmpty) {
  auto store = OpenOrDie();
  ASSERT_TRUE(store->SetValue("sm_state", "STANDBY").ok());
  ASSERT_TRUE(store->SetValue("sm_state", "MASTER").ok());
  ASSERT_TRUE(store->SetValue("act_count", "").ok());
  auto v = store->GetValue("sm_state");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, std::optional<std::string>("MASTER"));
  auto empty = store->GetValue("act_count");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, std::optional<std::string>(""));
  auto missing = store->GetValue("priority");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST_F(StateStoreTest, PeersAreUpsertedByGuidAndRemovable) {
  auto store = OpenOrDie();
  PeerRow a{Guid{0x20}, 5, 2, 1000, true};
  PeerRow b{Guid{0x10}, 15, 3, 2000, false};
  ASSERT_TRUE(store->UpsertPeer(a).ok());
  ASSERT_TRUE(store->UpsertPeer(b).ok());
  a.state = 3;
  a.last_seen_us = 3000;
  ASSERT_TRUE(store->UpsertPeer(a).ok());
  auto peers = store->Peers();
  ASSERT_TRUE(peers.ok());
  ASSERT_EQ(peers->size(), 2u);
  EXPECT_EQ((*peers)[0], b);
  EXPECT_EQ((*peers)[1], a);
  ASSERT_TRUE(store->RemovePeer(Guid{0x10}).ok());
  peers = store->Peers();
  ASSERT_TRUE(peers.ok());
  ASSERT_EQ(peers->size(), 1u);
  EXPECT_EQ((*peers)[0].guid, Guid{0x20});
  EXPECT_EQ(store->UpsertPeer(PeerRow{Guid{1}, 16, 0, 0, false}).code(),
            StatusCode::kInvalidArgument)
      << "SMInfo priority is 4 bits";
}

TEST_F(StateStoreTest, LftDigestsRoundTripFullSixtyFourBits) {
  auto store = OpenOrDie();
  LftDigestEntry s1{Guid{0x100}, 0xdeadbeefcafef00dull, Lid{1023}, 0};
  LftDigestEntry s2{Guid{0x200}, 42, Lid{64}, 0};
  ASSERT_TRUE(store->SaveLftDigests({s1, s2}, {}).ok());
  s2.digest = 43;
  ASSERT_TRUE(store->SaveLftDigests({s2}, {Guid{0x100}}).ok());
  auto rows = store->LoadLftDigests();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  s2.updated_us = clock_.UnixMicros();
  EXPECT_EQ((*rows)[0], s2);
  ASSERT_TRUE(store->SaveLftDigests({s1}, {}).ok());
  rows = store->LoadLftDigests();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].digest, 0xdeadbeefcafef00dull);
}

TEST_F(StateStoreTest, PruneKeepsTheNewestRowsAndNeverReusesIds) {
  auto store = OpenOrDie();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(store->RecordSweep(SampleSweep(SweepKind::kLight, i)).ok());
    ASSERT_TRUE(
        store->RecordEvent({0, i, "trap", EventSeverity::kInfo, {}, {}, std::to_string(i)}).ok());
  }
  ASSERT_TRUE(store->Prune(3, 5).ok());
  auto sweeps = store->RecentSweeps(100);
  auto events = store->RecentEvents(100);
  ASSERT_TRUE(sweeps.ok() && events.ok());
  ASSERT_EQ(sweeps->size(), 3u);
  EXPECT_EQ(sweeps->back().id, 8);
  ASSERT_EQ(events->size(), 5u);
  EXPECT_EQ(events->back().message, "5");
  ASSERT_TRUE(store->Prune(100, 100).ok());
  EXPECT_EQ(store->RecentSweeps(100)->size(), 3u);
  ASSERT_TRUE(store->Prune(0, 0).ok());
  EXPECT_TRUE(store->RecentSweeps(100)->empty());
  EXPECT_TRUE(store->RecentEvents(100)->empty());
  auto id = store->RecordSweep(SampleSweep(SweepKind::kHeavy, 99));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 11);
}

TEST_F(StateStoreTest, ReopeningTheFileKeepsEveryTable) {
  {
    auto store = OpenOrDie();
    ASSERT_TRUE(store->SaveGuid2Lid({G2L(1, 10, 10)}, {}).ok());
    ASSERT_TRUE(store->RecordSweep(SampleSweep(SweepKind::kHeavy, 1)).ok());
    ASSERT_TRUE(store->RecordEvent({0, 5, "trap", EventSeverity::kInfo, {}, {}, "x"}).ok());
    ASSERT_TRUE(store->SetValue("sm_state", "MASTER").ok());
    ASSERT_TRUE(store->UpsertPeer({Guid{2}, 1, 2, 3, true}).ok());
    ASSERT_TRUE(store->SaveLftDigests({{Guid{3}, 9, Lid{10}, 0}}, {}).ok());
  }
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->LoadGuid2Lid()->size(), 1u);
  EXPECT_EQ(store->RecentSweeps(10)->size(), 1u);
  EXPECT_EQ(store->RecentEvents(10)->size(), 1u);
  EXPECT_EQ(*store->GetValue("sm_state"), std::optional<std::string>("MASTER"));
  EXPECT_EQ(store->Peers()->size(), 1u);
  EXPECT_EQ(store->LoadLftDigests()->size(), 1u);
  EXPECT_EQ(*store->SchemaVersion(), StateStoreSchemaVersion());
}

TEST_F(StateStoreTest, TheFileIsAWalDatabaseTaggedAsIbsms) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawQueryText(path_, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawQueryText(path_, "PRAGMA application_id"), std::to_string(0x6962736d));
}

TEST_F(StateStoreTest, MigrationOneIsFrozenAsShipped) {
  auto migrations = StateStoreMigrations();
  ASSERT_FALSE(migrations.empty());
  EXPECT_EQ(migrations[0].version, 1);
  EXPECT_EQ(std::string(migrations[0].sql), std::string(kFrozenV1Sql));
}

TEST_F(StateStoreTest, MigrationsAreNumberedOneUpwardsWithoutGaps) {
  int expected = 1;
  for (const Migration& m : StateStoreMigrations()) EXPECT_EQ(m.version, expected++);
  EXPECT_EQ(StateStoreSchemaVersion(), expected - 1);
}

TEST_F(StateStoreTest, AVersionOneFileIsMigratedKeepingItsRows) {
  RawExec(path_, std::string(kFrozenV1Sql) +
                     "INSERT INTO guid2lid VALUES (-2, 4, 7, 11);"
                     "INSERT INTO guid2lid VALUES (17, 1, 1, 12);"
                     "INSERT INTO sweeps (kind, started_us, ended_us, outcome) "
                     "VALUES (1, 100, 200, 'ok');"
                     "INSERT INTO sm_state VALUES ('sm_state', 'STANDBY', 13);"
                     "PRAGMA user_version = 1;");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), StateStoreSchemaVersion());
  auto rows = store->LoadGuid2Lid();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0], (Guid2LidEntry{Guid{0xfffffffffffffffe}, Lid{4}, Lid{7}, 11}));
  EXPECT_EQ((*rows)[1], (Guid2LidEntry{Guid{17}, Lid{1}, Lid{1}, 12}));
  auto sweeps = store->RecentSweeps(5);
  ASSERT_TRUE(sweeps.ok());
  ASSERT_EQ(sweeps->size(), 1u);
  EXPECT_EQ((*sweeps)[0].outcome, "ok");
  EXPECT_EQ((*sweeps)[0].engine, "");
  EXPECT_EQ(*store->GetValue("sm_state"), std::optional<std::string>("STANDBY"));
  // The tables added after version 1 work.
  ASSERT_TRUE(store->RecordEvent({0, 1, "trap", EventSeverity::kInfo, {}, {}, "m"}).ok());
  ASSERT_TRUE(store->UpsertPeer({Guid{1}, 1, 2, 3, true}).ok());
  ASSERT_TRUE(store->SaveLftDigests({{Guid{3}, 9, Lid{10}, 0}}, {}).ok());
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

ServiceRow SampleService(uint64_t id, std::optional<int64_t> expires) {
  ServiceRow r;
  r.key.service_id = id;
  r.key.service_gid.fill(0xfe);
  r.key.pkey = 0xffff;
  r.record.assign(kServiceRecordSize, 0);
  r.record[0] = static_cast<uint8_t>(id >> 56);
  r.record[175] = 0x5a;
  r.expires_us = expires;
  return r;
}

TEST_F(StateStoreTest, ServiceRecordsRoundTripAndAreReplacedByKeyAndRemoved) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ServiceRow a = SampleService(0x8000000000000001ull, std::nullopt);
  ServiceRow b = SampleService(2, 1'700'000'100'000'000);
  ASSERT_TRUE(store->SaveServiceRecords({a, b}, {}).ok());
  b.record[100] = 9;
  ASSERT_TRUE(store->SaveServiceRecords({b}, {}).ok());
  auto rows = store->LoadServiceRecords();
  ASSERT_TRUE(rows.ok());
  // Ordered by the stored key: an ID with the top bit set is a negative int64, so first.
  EXPECT_EQ(*rows, (std::vector<ServiceRow>{a, b}));
  ASSERT_TRUE(store->SaveServiceRecords({}, {b.key}).ok());
  EXPECT_EQ(*store->LoadServiceRecords(), std::vector<ServiceRow>{a});
}

TEST_F(StateStoreTest, AServiceRecordOfTheWrongSizeIsRejectedAndNothingIsWritten) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ServiceRow bad = SampleService(3, std::nullopt);
  bad.record.resize(100);
  Status st = store->SaveServiceRecords({SampleService(1, std::nullopt), bad}, {});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store->LoadServiceRecords()->empty());
}

TEST_F(StateStoreTest, AVersionTwoFileIsMigratedKeepingItsRowsAndGainsServiceRecords) {
  auto migrations = StateStoreMigrations();
  ASSERT_GE(migrations.size(), 3u);
  RawExec(path_, std::string(migrations[0].sql) + migrations[1].sql +
                     "INSERT INTO guid2lid VALUES (17, 1, 1, 12);"
                     "INSERT INTO lft_digest VALUES (5, -1, 40, 13);"
                     "PRAGMA user_version = 2;");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), StateStoreSchemaVersion());
  EXPECT_EQ(*store->LoadGuid2Lid(),
            (std::vector<Guid2LidEntry>{{Guid{17}, Lid{1}, Lid{1}, 12}}));
  auto digests = store->LoadLftDigests();
  ASSERT_TRUE(digests.ok());
  ASSERT_EQ(digests->size(), 1u);
  EXPECT_EQ((*digests)[0].digest, ~uint64_t{0});
  EXPECT_TRUE(store->LoadServiceRecords()->empty());
  ASSERT_TRUE(store->SaveServiceRecords({SampleService(1, std::nullopt)}, {}).ok());
  EXPECT_EQ(store->LoadServiceRecords()->size(), 1u);
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

InformRow SampleInform(uint8_t tag) {
  InformRow r;
  r.key = {tag, 1, 2, 3};
  r.record.assign(kInformInfoRecordSize, tag);
  r.report_lid = static_cast<uint16_t>(100 + tag);
  r.report_qpn = 1;
  r.report_qkey = 0x80010000;
  r.pkey_index = 0;
  r.sl = 0;
  r.trusted = tag % 2 == 0;
  return r;
}

TEST_F(StateStoreTest, InformSubscriptionsRoundTripAndAreReplacedByKeyAndRemoved) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  InformRow a = SampleInform(1), b = SampleInform(2);
  ASSERT_TRUE(store->SaveInformSubscriptions({a, b}, {}).ok());
  b.report_lid = 7;
  b.record.assign(kInformInfoRecordSize, 0x55);
  ASSERT_TRUE(store->SaveInformSubscriptions({b}, {}).ok());
  EXPECT_EQ(*store->LoadInformSubscriptions(), (std::vector<InformRow>{a, b}));
  ASSERT_TRUE(store->SaveInformSubscriptions({}, {a.key}).ok());
  EXPECT_EQ(*store->LoadInformSubscriptions(), std::vector<InformRow>{b});
}

TEST_F(StateStoreTest, AnInformSubscriptionOutOfRangeIsRejectedAndNothingIsWritten) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  InformRow bad = SampleInform(3);
  bad.record.resize(10);
  EXPECT_EQ(store->SaveInformSubscriptions({SampleInform(1), bad}, {}).code(),
            StatusCode::kInvalidArgument);
  bad = SampleInform(3);
  bad.report_qpn = 0x1000000;
  EXPECT_EQ(store->SaveInformSubscriptions({bad}, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store->LoadInformSubscriptions()->empty());
}

TEST_F(StateStoreTest, AVersionThreeFileIsMigratedKeepingItsServicesAndGainsSubscriptions) {
  auto migrations = StateStoreMigrations();
  ASSERT_GE(migrations.size(), 4u);
  ASSERT_EQ(migrations[3].version, 4);
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->SaveServiceRecords({SampleService(1, std::nullopt)}, {}).ok());
  }
  // Back to what a version-3 ibsm left: no subscriptions table (nor the later multicast ones).
  RawExec(path_, "DROP TABLE perf_history; DROP TABLE mcast_members; DROP TABLE mcast_groups; "
                 "DROP TABLE inform_subscriptions; DROP TABLE ar_group_ids; DROP TABLE snapshots; "
                 "DROP TABLE snapshot_parts; "
                 "PRAGMA user_version = 3;");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), StateStoreSchemaVersion());
  EXPECT_EQ(store->LoadServiceRecords()->size(), 1u);
  EXPECT_TRUE(store->LoadInformSubscriptions()->empty());
  ASSERT_TRUE(store->SaveInformSubscriptions({SampleInform(4)}, {}).ok());
  EXPECT_EQ(*store->LoadInformSubscriptions(), std::vector<InformRow>{SampleInform(4)});
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

TEST_F(StateStoreTest, AFileFromANewerIbsmIsRefusedAndLeftAlone) {
  int newer = StateStoreSchemaVersion() + 1;
  RawExec(path_,
          "CREATE TABLE future (x); PRAGMA application_id = 1768059757; "
          "PRAGMA user_version = " +
              std::to_string(newer) + ";");
  auto r = StateStore::Open(path_, clock_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("newer"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find(std::to_string(newer)), std::string::npos);
  auto ro = StateStore::OpenReadOnly(path_);
  EXPECT_EQ(ro.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(RawQueryText(path_, "PRAGMA user_version"), std::to_string(newer));
  EXPECT_EQ(RawQueryText(path_, "PRAGMA journal_mode"), "delete");
}

McGroupRow SampleGroup(uint16_t mlid, size_t members) {
  McGroupRow g;
  g.mgid = {0xff, 0x12, 0xa0, 0x1b, 0xfe, 0x80};
  g.mgid[15] = static_cast<uint8_t>(mlid);
  g.mlid = mlid;
  g.record.assign(kMcGroupRecordSize, 0);
  g.record[36] = static_cast<uint8_t>(mlid >> 8);
  g.record[37] = static_cast<uint8_t>(mlid);
  for (size_t i = 0; i < members; ++i) {
    McMemberRow m;
    m.port_guid = 0x8000000000000000ull + i;  // above INT64_MAX: stored as a negative int64
    m.port_gid[0] = 0xfe;
    m.port_gid[15] = static_cast<uint8_t>(i);
    m.join_state = static_cast<uint8_t>(1 + i % 4);
    m.proxy_join = i % 2 == 1;
    g.members.push_back(m);
  }
  return g;
}

TEST_F(StateStoreTest, MulticastGroupsAndMembersRoundTripAndSavesReplaceTheSet) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  std::vector<McGroupRow> groups = {SampleGroup(0xC000, 0), SampleGroup(0xC001, 3)};
  groups[0].permanent = true;
  ASSERT_TRUE(store->SaveMulticastGroups(groups).ok());
  EXPECT_EQ(*store->LoadMulticastGroups(), groups);
  ASSERT_TRUE(store->SaveMulticastGroups({groups[0]}).ok());
  EXPECT_EQ(*store->LoadMulticastGroups(), std::vector<McGroupRow>{groups[0]});
  McGroupRow bad = SampleGroup(0xC002, 1);
  bad.record.resize(10);
  EXPECT_EQ(store->SaveMulticastGroups({groups[1], bad}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*store->LoadMulticastGroups(), std::vector<McGroupRow>{groups[0]});
}

// Row-level saves: one transaction writes the named groups (members replaced) and deletes
// the removed ones; every other group stays as it was.
TEST_F(StateStoreTest, MulticastChangesTouchOnlyTheGroupsTheyNameInOneTransaction) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  std::vector<McGroupRow> groups = {SampleGroup(0xC000, 0), SampleGroup(0xC001, 3),
                                    SampleGroup(0xC002, 2)};
  ASSERT_TRUE(store->SaveMulticastGroups(groups).ok());
  const uint64_t before = store->transactions();
  McGroupRow changed = groups[1];
  changed.members.pop_back();
  changed.members[0].join_state = 8;
  McGroupRow added = SampleGroup(0xC003, 1);
  added.mlid = 0xC002;  // takes the MLID of the group removed in the same batch
  added.record[37] = 0x02;
  ASSERT_TRUE(store->SaveMulticastChanges({changed, added}, {groups[2].mgid}).ok());
  EXPECT_EQ(store->transactions(), before + 1);
  EXPECT_EQ(*store->LoadMulticastGroups(),
            (std::vector<McGroupRow>{groups[0], changed, added}));
  McGroupRow bad = SampleGroup(0xC004, 1);
  bad.record.resize(10);
  EXPECT_EQ(store->SaveMulticastChanges({bad}, {groups[0].mgid}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store->LoadMulticastGroups()->size(), 3u);
}

TEST_F(StateStoreTest, AVersionThreeFileIsMigratedKeepingServicesAndGainsMulticastTables) {
  auto migrations = StateStoreMigrations();
  ASSERT_GE(migrations.size(), 4u);
  RawExec(path_, std::string(migrations[0].sql) + migrations[1].sql + migrations[2].sql +
                     "INSERT INTO service_records VALUES "
                     "(1, zeroblob(16), 65535, zeroblob(176), NULL);"
                     "PRAGMA user_version = 3;");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), StateStoreSchemaVersion());
  EXPECT_EQ(store->LoadServiceRecords()->size(), 1u);
  EXPECT_TRUE(store->LoadMulticastGroups()->empty());
  ASSERT_TRUE(store->SaveMulticastGroups({SampleGroup(0xC001, 2)}).ok());
  EXPECT_EQ(store->LoadMulticastGroups()->size(), 1u);
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

TEST_F(StateStoreTest, AnotherProgramsDatabaseIsNotTakenOver) {
  RawExec(path_, "CREATE TABLE accounts (id INTEGER PRIMARY KEY);");
  auto r = StateStore::Open(path_, clock_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  RawExec(dir_ + "/other.db", "PRAGMA application_id = 7;");
  auto other = StateStore::Open(dir_ + "/other.db", clock_);
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(StateStoreTest, RandomBytesAreReportedAsCorruptNotACrash) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    WriteFile(path_, RandomBytes(4096 * seed, seed));
    auto r = StateStore::Open(path_, clock_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().ToString();
    EXPECT_NE(r.status().message().find(path_), std::string::npos);
    auto ro = StateStore::OpenReadOnly(path_);
    ASSERT_FALSE(ro.ok());
    EXPECT_EQ(ro.status().code(), StatusCode::kCorrupt) << ro.status().ToString();
  }
}

TEST_F(StateStoreTest, DamagedPagesBehindAValidHeaderAreReportedAsCorrupt) {
  {
    auto store = OpenOrDie();
    std::vector<Guid2LidEntry> rows;
    for (uint16_t i = 1; i <= 5000; ++i) rows.push_back(G2L(i, i, i));
    ASSERT_TRUE(store->ReplaceGuid2Lid(rows).ok());
  }  // closing checkpoints the WAL into the main file
  auto size = std::filesystem::file_size(path_);
  ASSERT_GT(size, 8 * 4096u);
  std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
  std::vector<char> junk = RandomBytes(4 * 4096, 99);
  f.seekp(3 * 4096);  // keep page 1 (header and schema) intact
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  f.close();
  auto r = StateStore::Open(path_, clock_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().ToString();
}

TEST_F(StateStoreTest, HandEditedRowsBreakingTheSchemaChecksAreReportedAsCorrupt) {
  OpenOrDie().reset();
  RawExec(path_,
          "PRAGMA ignore_check_constraints = ON;"
          "INSERT INTO guid2lid VALUES (1, 0, 0, 0);"
          "INSERT INTO sweeps (kind, started_us, ended_us, outcome) VALUES (9, 0, 0, 'ok');");
  // quick_check verifies CHECK constraints, so the damage is reported at open, not later.
  auto r = StateStore::Open(path_, clock_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("guid2lid"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("sweeps"), std::string::npos) << r.status().ToString();
  // A read-only connection's quick_check skips CHECK constraints; the readers catch them.
  RawExec(path_,
          "PRAGMA ignore_check_constraints = ON;"
          "INSERT INTO events (time_us, kind, severity, message) VALUES (1, 'x', 0, 'm');"
          "INSERT INTO peers VALUES (1, 99, 0, 0, 1);");
  auto ro = StateStore::OpenReadOnly(path_);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  auto reader = std::move(ro).value();
  auto g2l = reader->LoadGuid2Lid();
  EXPECT_EQ(g2l.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(g2l.status().message().find("0x0000000000000001"), std::string::npos);
  EXPECT_EQ(reader->RecentSweeps(10).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(reader->RecentEvents(10).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(reader->Peers().status().code(), StatusCode::kCorrupt);
}

TEST_F(StateStoreTest, AMissingDirectoryIsAnIoErrorNamingThePath) {
  std::string path = dir_ + "/no/such/dir/state.db";
  auto r = StateStore::Open(path, clock_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError) << r.status().ToString();
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  EXPECT_FALSE(StateStore::OpenReadOnly(dir_ + "/absent.db").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/absent.db"));
}

TEST_F(StateStoreTest, ReadOnlyOpenReadsWhatTheWriterCommittedButCannotWrite) {
  auto writer = OpenOrDie();
  ASSERT_TRUE(writer->SaveGuid2Lid({G2L(1, 10, 10)}, {}).ok());
  ASSERT_TRUE(writer->SetValue("sm_state", "MASTER").ok());
  auto ro = StateStore::OpenReadOnly(path_);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  auto reader = std::move(ro).value();
  EXPECT_TRUE(reader->read_only());
  EXPECT_EQ(reader->LoadGuid2Lid()->size(), 1u);
  // Rows committed after the reader opened are visible to its next read.
  ASSERT_TRUE(writer->SaveGuid2Lid({G2L(2, 20, 20)}, {}).ok());
  EXPECT_EQ(reader->LoadGuid2Lid()->size(), 2u);

  EXPECT_EQ(reader->SaveGuid2Lid({G2L(3, 30, 30)}, {}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->ReplaceGuid2Lid({}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->RecordSweep(SampleSweep(SweepKind::kHeavy, 1)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->RecordEvent({}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->SetValue("sm_state", "STANDBY").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->UpsertPeer({}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->SaveLftDigests({}, {}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->Prune(0, 0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*writer->GetValue("sm_state"), std::optional<std::string>("MASTER"));
  EXPECT_EQ(writer->LoadGuid2Lid()->size(), 2u);
}

// ibsmd on a state directory it cannot write (read-only, full, missing): it still reads
// what the file holds, every write fails as Unavailable, and once the directory takes
// writes again RetryWritable makes the same store a writer with the file's rows.
TEST_F(StateStoreTest, ADegradedStoreReadsTheFileRefusesWritesAndBecomesAWriterOnRetry) {
  {
    auto writer = OpenOrDie();
    ASSERT_TRUE(writer->SaveGuid2Lid({G2L(1, 10, 10), G2L(2, 20, 20)}, {}).ok());
  }
  auto opened = StateStore::OpenDegraded(path_, clock_, IoError("read-only file system"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto store = std::move(opened).value();
  EXPECT_TRUE(store->degraded());
  EXPECT_FALSE(store->read_only());
  ASSERT_TRUE(store->LoadGuid2Lid().ok());
  EXPECT_EQ(store->LoadGuid2Lid()->size(), 2u) << "the rows in the file are read";
  Status refused = store->SaveGuid2Lid({G2L(3, 30, 30)}, {});
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("read-only file system"), std::string::npos) << refused.ToString();
  EXPECT_EQ(store->RecordSweep(SampleSweep(SweepKind::kHeavy, 1)).status().code(),
            StatusCode::kUnavailable);

  ASSERT_TRUE(store->RetryWritable().ok());  // this directory is writable
  EXPECT_FALSE(store->degraded());
  ASSERT_TRUE(store->SaveGuid2Lid({G2L(3, 30, 30)}, {}).ok());
  ASSERT_TRUE(store->RecordSweep(SampleSweep(SweepKind::kHeavy, 1)).ok());
  store.reset();
  auto reopened = OpenOrDie();
  EXPECT_EQ(reopened->LoadGuid2Lid()->size(), 3u);
  EXPECT_EQ(reopened->RecentSweeps(5)->size(), 1u);
}

TEST_F(StateStoreTest, ADegradedStoreWithoutAFileIsEmptyUntilItsDirectoryAppears) {
  const std::string dir = dir_ + "/later";
  const std::string path = dir + "/state.db";
  auto open = StateStore::Open(path, clock_);
  ASSERT_FALSE(open.ok());
  auto opened = StateStore::OpenDegraded(path, clock_, open.status());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto store = std::move(opened).value();
  EXPECT_TRUE(store->LoadGuid2Lid()->empty());
  EXPECT_TRUE(store->RecentEvents(10, 0)->empty());
  EXPECT_EQ(store->SetValue("sm_state", "MASTER").code(), StatusCode::kUnavailable);
  EXPECT_FALSE(store->RetryWritable().ok()) << "the directory is still missing";
  EXPECT_TRUE(store->degraded());
  ASSERT_TRUE(std::filesystem::create_directory(dir));
  ASSERT_TRUE(store->RetryWritable().ok());
  ASSERT_TRUE(store->SetValue("sm_state", "MASTER").ok());
  EXPECT_EQ(*store->GetValue("sm_state"), std::optional<std::string>("MASTER"));
  EXPECT_TRUE(std::filesystem::exists(path));
}

// A file that is not ibsm's is never read as if it were: the degraded store starts empty.
TEST_F(StateStoreTest, ADegradedOpenOfAForeignFileStartsEmpty) {
  RawExec(path_, "CREATE TABLE accounts (id INTEGER PRIMARY KEY);");
  auto opened = StateStore::OpenDegraded(path_, clock_, IoError("disk full"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_TRUE((*opened)->LoadGuid2Lid()->empty());
}

TEST_F(StateStoreTest, ReadOnlyOpenOfAnOlderFileAsksForAMigration) {
  RawExec(path_, std::string(kFrozenV1Sql) + "PRAGMA user_version = 1;");
  auto ro = StateStore::OpenReadOnly(path_);
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(ro.status().message().find("migrate"), std::string::npos) << ro.status().ToString();
  EXPECT_EQ(RawQueryText(path_, "PRAGMA user_version"), "1");
}

// ---- crash safety ----

// Records the child reports down the pipe, each written only after its COMMIT returned.
struct Committed {
  int64_t what;  // kGuid2Lid, kSweep, or kFailed
  int64_t seq;
};
constexpr int64_t kGuid2Lid = 1;
constexpr int64_t kSweep = 2;
constexpr int64_t kFailed = -1;
constexpr int kRowsPerBatch = 16;

uint16_t LidFor(int64_t seq, int j) {
  return static_cast<uint16_t>((seq * kRowsPerBatch + j) % kMaxUnicastLid + 1);
}

// Runs in the forked child until killed. Never returns.
[[noreturn]] void WriteUntilKilled(const std::string& path, int64_t first_seq, int fd) {
  ManualClock clock;
  auto report = [fd](int64_t what, int64_t seq) {
    Committed c{what, seq};
    if (write(fd, &c, sizeof c) != static_cast<ssize_t>(sizeof c)) _exit(3);
  };
  auto r = StateStore::Open(path, clock);
  if (!r.ok()) {
    report(kFailed, 0);
    _exit(1);
  }
  auto store = std::move(r).value();
  for (int64_t seq = first_seq;; ++seq) {
    std::vector<Guid2LidEntry> batch;
    for (int j = 0; j < kRowsPerBatch; ++j) {
      uint16_t lid = LidFor(seq, j);
      batch.push_back(
          {Guid{static_cast<uint64_t>(seq * kRowsPerBatch + j)}, Lid{lid}, Lid{lid}, 0});
    }
    if (!store->SaveGuid2Lid(batch, {}).ok()) {
      report(kFailed, seq);
      _exit(1);
    }
    report(kGuid2Lid, seq);
    SweepRow row = SampleSweep(SweepKind::kLight, seq);
    row.note = std::to_string(seq);
    if (!store->RecordSweep(row).ok()) {
      report(kFailed, seq);
      _exit(1);
    }
    report(kSweep, seq);
  }
}

// Reads records until the write end closes, or until `deadline` when given.
void Drain(int fd, std::vector<Committed>& out,
           std::optional<std::chrono::steady_clock::time_point> deadline) {
  char buf[4096];
  size_t carry = 0;
  alignas(Committed) char rec[sizeof(Committed)];
  for (;;) {
    int timeout_ms = -1;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      timeout_ms = static_cast<int>(left.count());
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return;
    // Pipe writes of 16 bytes are atomic, but a read may end between two records.
    for (ssize_t i = 0; i < n; ++i) {
      rec[carry++] = buf[i];
      if (carry == sizeof rec) {
        Committed c;
        std::memcpy(&c, rec, sizeof c);
        out.push_back(c);
        carry = 0;
      }
    }
  }
}

TEST_F(StateStoreTest, AWriterKilledAtARandomMomentLosesNoCommittedRow) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> delay_us(0, 150'000);
  std::set<int64_t> guid2lid_seqs;
  std::set<int64_t> sweep_seqs;
  for (int round = 0; round < 20; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    int64_t first_seq = int64_t{round + 1} * 1'000'000;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      WriteUntilKilled(path_, first_seq, fds[1]);
    }
    close(fds[1]);
    std::vector<Committed> committed;
    Drain(fds[0], committed,
          std::chrono::steady_clock::now() + std::chrono::microseconds(delay_us(rng)));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    Drain(fds[0], committed, std::nullopt);
    close(fds[0]);
    for (const Committed& c : committed) {
      ASSERT_NE(c.what, kFailed) << "child failed to write at seq " << c.seq;
      (c.what == kGuid2Lid ? guid2lid_seqs : sweep_seqs).insert(c.seq);
    }

    auto r = StateStore::Open(path_, clock_);
    ASSERT_TRUE(r.ok()) << "round " << round << ": " << r.status().ToString();
    auto store = std::move(r).value();
    ASSERT_TRUE(store->CheckIntegrity().ok()) << "round " << round;
    auto rows = store->LoadGuid2Lid();
    ASSERT_TRUE(rows.ok());
    std::map<uint64_t, uint16_t> lids;
    for (const auto& e : *rows) lids[e.port_guid.value()] = e.min_lid.value();
    for (int64_t seq : guid2lid_seqs) {
      for (int j = 0; j < kRowsPerBatch; ++j) {
        auto it = lids.find(static_cast<uint64_t>(seq * kRowsPerBatch + j));
        ASSERT_NE(it, lids.end()) << "round " << round << " lost guid2lid seq " << seq;
        EXPECT_EQ(it->second, LidFor(seq, j));
      }
    }
    auto sweeps = store->RecentSweeps(1'000'000);
    ASSERT_TRUE(sweeps.ok());
    std::set<std::string> notes;
    for (const auto& s : *sweeps) notes.insert(s.note);
    for (int64_t seq : sweep_seqs) {
      ASSERT_TRUE(notes.count(std::to_string(seq))) << "round " << round << " lost sweep " << seq;
    }
  }
  // Not vacuous: the child committed rows before most kills.
  EXPECT_GT(guid2lid_seqs.size(), 20u);
  EXPECT_GT(sweep_seqs.size(), 20u);
  RecordProperty("committed_guid2lid_batches", static_cast<int>(guid2lid_seqs.size()));
  RecordProperty("committed_sweeps", static_cast<int>(sweep_seqs.size()));
}

TEST_F(StateStoreTest, ArGroupIdsAreReplacedWholeAndReadBackByLeaf) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->LoadArGroupIds()->empty());
  std::map<Guid, uint16_t> ids = {{Guid{0x0002c90200000001ull}, 0}, {Guid{~0ull}, 4095}};
  ASSERT_TRUE(store->SaveArGroupIds(ids).ok());
  EXPECT_EQ(*store->LoadArGroupIds(), ids);
  ids.erase(Guid{~0ull});
  ids[Guid{7}] = 12;
  ASSERT_TRUE(store->SaveArGroupIds(ids).ok());
  EXPECT_EQ(*store->LoadArGroupIds(), ids);
  EXPECT_EQ(store->SaveArGroupIds({{Guid{8}, 4096}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*store->LoadArGroupIds(), ids);
  // Two leaves with one ID is refused by the schema and changes nothing.
  EXPECT_FALSE(store->SaveArGroupIds({{Guid{1}, 3}, {Guid{2}, 3}}).ok());
  EXPECT_EQ(*store->LoadArGroupIds(), ids);
}

TEST_F(StateStoreTest, SnapshotsAreReplacedWholeStampedWithTheClockAndAbsentUntilWritten) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  auto none = store->LoadSnapshot(kSnapshotNodes);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(store->SaveSnapshot(kSnapshotNodes, R"({"nodes":[1]})").ok());
  const int64_t first_us = clock_.UnixMicros();
  clock_.Advance(seconds(5));
  ASSERT_TRUE(store->SaveSnapshot(kSnapshotLinks, R"({"links":[]})").ok());
  ASSERT_TRUE(store->SaveSnapshot(kSnapshotNodes, R"({"nodes":[2]})").ok());
  auto nodes = store->LoadSnapshot(kSnapshotNodes);
  ASSERT_TRUE(nodes.ok() && nodes->has_value());
  EXPECT_EQ(**nodes, (SnapshotRow{"nodes", first_us + 5'000'000, R"({"nodes":[2]})"}));
  EXPECT_EQ((*store->LoadSnapshot(kSnapshotLinks))->json, R"({"links":[]})");
  EXPECT_FALSE(store->LoadSnapshot(kSnapshotHealth)->has_value());
  // A reader sees them; it cannot write one.
  auto reader = StateStore::OpenReadOnly(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*(*reader)->LoadSnapshot(kSnapshotNodes))->json, R"({"nodes":[2]})");
  EXPECT_EQ((*reader)->SaveSnapshot(kSnapshotNodes, "{}").code(), StatusCode::kFailedPrecondition);
}

TEST_F(StateStoreTest, EventsFilterByKindNewestFirst) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  std::vector<EventRow> rows;
  for (int64_t t : {100, 200, 300, 400})
    rows.push_back({0, t, std::string(t % 200 == 0 ? kEventHealth : kEventTrap),
                    EventSeverity::kWarning, Guid{1}, PortNum{2}, std::to_string(t)});
  ASSERT_TRUE(store->RecordEvents(rows).ok());
  auto health = store->RecentEvents(10, 0, kEventHealth);
  ASSERT_TRUE(health.ok());
  ASSERT_EQ(health->size(), 2u);
  EXPECT_EQ((*health)[0].message, "400");
  EXPECT_EQ((*health)[1].message, "200");
  EXPECT_EQ(store->RecentEvents(10, 300, kEventHealth)->size(), 1u);
  EXPECT_EQ(store->RecentEvents(10)->size(), 4u);
}

TEST_F(StateStoreTest, AVersionSevenFileIsMigratedKeepingItsRowsAndGainsSnapshots) {
  auto migrations = StateStoreMigrations();
  ASSERT_GE(migrations.size(), 8u);
  ASSERT_EQ(migrations[7].version, 8);
  std::string v7;
  for (size_t i = 0; i < 7; ++i) v7 += migrations[i].sql;
  RawExec(path_, v7 +
                     "INSERT INTO ar_group_ids (leaf_guid, group_id) VALUES (9, 3);"
                     "PRAGMA user_version = 7;");
  // A version-7 file is not read by a tool until ibsmd has migrated it.
  auto early = StateStore::OpenReadOnly(path_);
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("open it once with ibsmd"), std::string::npos)
      << early.status().ToString();
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), StateStoreSchemaVersion());
  EXPECT_EQ(store->LoadArGroupIds()->at(Guid{9}), 3u);
  EXPECT_FALSE(store->LoadSnapshot(kSnapshotHealth)->has_value());
  ASSERT_TRUE(store->SaveSnapshot(kSnapshotHealth, "{}").ok());
  EXPECT_TRUE(store->LoadSnapshot(kSnapshotHealth)->has_value());
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

// A snapshot larger than one part is stored in parts and read back whole; a shorter one
// written over it leaves no stale part behind; a reader sees the same text.
TEST_F(StateStoreTest, AStreamedSnapshotIsStoredInPartsAndReadBackWhole) {
  auto store = OpenOrDie();
  std::string want;
  ASSERT_TRUE(store
                  ->SaveSnapshotStreamed(kSnapshotLinks,
                                         [&](const StateStore::SnapshotSink& sink) {
                                           for (int i = 0; i < 20000; ++i) {
                                             std::string piece = "{\"cable\":" +
                                                                 std::to_string(i) + "},";
                                             want += piece;
                                             sink(piece);
                                           }
                                         })
                  .ok());
  ASSERT_GT(want.size(), 3u * 64 * 1024);
  EXPECT_EQ((*store->LoadSnapshot(kSnapshotLinks))->json, want);
  EXPECT_GE(std::stoi(RawQueryText(path_, "SELECT count(*) FROM snapshot_parts WHERE name = 'links'")),
            4);
  EXPECT_EQ(RawQueryText(path_, "SELECT json FROM snapshots WHERE name = 'links'"), "");
  ASSERT_TRUE(store->SaveSnapshot(kSnapshotLinks, "{}").ok());
  EXPECT_EQ((*store->LoadSnapshot(kSnapshotLinks))->json, "{}");
  EXPECT_EQ(RawQueryText(path_, "SELECT count(*) FROM snapshot_parts WHERE name = 'links'"), "1");
  auto reader = StateStore::OpenReadOnly(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*(*reader)->LoadSnapshot(kSnapshotLinks))->json, "{}");
}

// A version-8 file keeps its snapshots (whole, in snapshots.json) readable after the
// migration that adds parts.
TEST_F(StateStoreTest, AVersionEightFileIsMigratedKeepingItsWholeSnapshots) {
  auto migrations = StateStoreMigrations();
  ASSERT_GE(migrations.size(), 9u);
  ASSERT_EQ(migrations[8].version, 9);
  std::string v8;
  for (size_t i = 0; i < 8; ++i) v8 += migrations[i].sql;
  RawExec(path_, v8 +
                     "INSERT INTO snapshots (name, written_us, json) "
                     "VALUES ('nodes', 42, '{\"nodes\":[7]}');"
                     "PRAGMA user_version = 8;");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), 9);
  auto nodes = store->LoadSnapshot(kSnapshotNodes);
  ASSERT_TRUE(nodes.ok());
  ASSERT_TRUE(nodes->has_value());
  EXPECT_EQ((*nodes)->json, "{\"nodes\":[7]}");
  EXPECT_EQ((*nodes)->written_us, 42);
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

TEST_F(StateStoreTest, AVersionSixFileIsMigratedAndGainsTheArGroupTable) {
  auto migrations = StateStoreMigrations();
  ASSERT_GE(migrations.size(), 7u);
  ASSERT_EQ(migrations[6].version, 7);
  std::string v6;
  for (size_t i = 0; i < 6; ++i) v6 += migrations[i].sql;
  RawExec(path_, v6 + "PRAGMA user_version = 6;");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), StateStoreSchemaVersion());
  EXPECT_TRUE(store->LoadArGroupIds()->empty());
  ASSERT_TRUE(store->SaveArGroupIds({{Guid{5}, 1}}).ok());
  EXPECT_EQ(store->LoadArGroupIds()->size(), 1u);
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

}  // namespace
}  // namespace ibsm::ha

namespace ibsm::ha {
namespace {

PerfHistoryRow PerfRow(int64_t sweep, uint64_t node, uint8_t port, uint64_t symbol_errors) {
  PerfHistoryRow r;
  r.sweep = sweep;
  r.time_us = 1'700'000'000'000'000 + sweep;
  r.node_guid = Guid{node};
  r.port_num = PortNum{port};
  r.deltas[0] = symbol_errors;
  r.deltas[13] = 0xFFFF'FFFF'FFFF'FFF0ull;  // xmit_data: the full 64 bits survive
  r.flags = kPerfFlagReset;
  return r;
}

TEST_F(StateStoreTest, PerfHistoryRoundTripsNewestFirstAndKeepsOnlyTheNewestSweeps) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->LastPerfSweep(), 0);
  for (int64_t sweep = 1; sweep <= 5; ++sweep) {
    ASSERT_TRUE(store->RecordPerfHistory({PerfRow(sweep, 0x8000000000000001ull, 3, sweep),
                                          PerfRow(sweep, 0x2, 1, 100 + sweep)},
                                         /*keep_sweeps=*/3)
                    .ok());
  }
  EXPECT_EQ(*store->LastPerfSweep(), 5);
  auto all = store->LoadPerfHistory(std::nullopt, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 6u) << "sweeps 3, 4 and 5 kept, two rows each";
  // Within a sweep by node GUID as stored (two's-complement): 0x8000... comes first.
  EXPECT_EQ((*all)[0], PerfRow(5, 0x8000000000000001ull, 3, 5));
  EXPECT_EQ((*all)[1], PerfRow(5, 0x2, 1, 105));
  EXPECT_EQ(all->back().sweep, 3);
  auto one = store->LoadPerfHistory(Guid{0x8000000000000001ull}, 2);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 2u);
  EXPECT_EQ((*one)[0].sweep, 5);
  EXPECT_EQ((*one)[1].sweep, 4);
}

TEST_F(StateStoreTest, AVersionFiveFileIsMigratedKeepingItsEventsAndGainsPerfHistory) {
  auto migrations = StateStoreMigrations();
  ASSERT_GE(migrations.size(), 6u);
  std::string sql;
  for (size_t i = 0; i < 5; ++i) sql += migrations[i].sql;
  RawExec(path_, sql +
                     "INSERT INTO events (time_us, kind, severity, message) "
                     "VALUES (1, 'trap', 1, 'kept');"
                     "PRAGMA user_version = 5;");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), StateStoreSchemaVersion());
  ASSERT_EQ(store->RecentEvents(10)->size(), 1u);
  EXPECT_TRUE(store->LoadPerfHistory(std::nullopt, 10)->empty());
  ASSERT_TRUE(store->RecordPerfHistory({PerfRow(1, 7, 1, 9)}, 10).ok());
  EXPECT_EQ(store->LoadPerfHistory(std::nullopt, 10)->size(), 1u);
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

// No ibsm schema has a trigger or a view: one in the file is someone else's SQL that would
// run with the SM's privileges on its next write or read, so the file is refused, by name.
TEST_F(StateStoreTest, AFileCarryingATriggerOrAViewIsRefusedNamingIt) {
  OpenOrDie().reset();
  RawExec(path_, "CREATE TRIGGER wipe AFTER INSERT ON events BEGIN DELETE FROM guid2lid; END;");
  auto r = StateStore::Open(path_, clock_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("trigger \"wipe\""), std::string::npos)
      << r.status().ToString();
  auto ro = StateStore::OpenReadOnly(path_);
  ASSERT_FALSE(ro.ok());
  EXPECT_NE(ro.status().message().find("trigger \"wipe\""), std::string::npos);
  RawExec(path_, "DROP TRIGGER wipe; CREATE VIEW peek AS SELECT * FROM guid2lid;");
  auto v = StateStore::Open(path_, clock_);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("view \"peek\""), std::string::npos)
      << v.status().ToString();
  RawExec(path_, "DROP VIEW peek;");
  EXPECT_NE(OpenOrDie(), nullptr);
}

// The file holds ServiceKeys: owner only, whatever the umask; a wider file is narrowed, and
// the log says so.
TEST_F(StateStoreTest, TheStateFileIsOwnerOnlyEvenUnderUmask022AndAWiderOneIsNarrowed) {
  const mode_t saved = ::umask(022);
  auto mode = [](const std::string& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->SetValue("k", "v").ok());
    EXPECT_EQ(mode(path_), 0600u);
    EXPECT_EQ(mode(path_ + "-wal"), 0600u);
    EXPECT_EQ(mode(path_ + "-shm"), 0600u);
  }
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  const std::string log = dir_ + "/log";
  ASSERT_TRUE(ConfigureLogging(log, spdlog::level::info));
  EXPECT_NE(OpenOrDie(), nullptr);
  ConfigureLogging("", spdlog::level::info);
  EXPECT_EQ(mode(path_), 0600u);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("HA-DB-002 state file " + path_ + " was mode 0644"), std::string::npos)
      << text;
  ::umask(saved);
}

}  // namespace
}  // namespace ibsm::ha
