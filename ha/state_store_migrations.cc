// The schema migrations, FROZEN and append-only: a schema change is a new entry at the end
// of kMigrations (and a test), never an edit of a shipped one.
#include <array>
#include <span>

#include "ha/state_store.h"

namespace ibsm::ha {
namespace {

// FROZEN: every entry below has shipped (or will, with this file). Never edit or reorder;
// append a new Migration for any change. ha/state_store_test.cc keeps a copy of version 1
// and fails if it drifts.
constexpr std::array<Migration, 9> kMigrations = {{
    // Version 1: what the SM core needs: LIDs kept across restarts, sweep
    // history, SM state key/values.
    {1, R"sql(
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
)sql"},
    // Version 2: high availability: events, peer SMs, per-switch LFT digests.
    {2, R"sql(
CREATE TABLE events (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  time_us   INTEGER NOT NULL,
  kind      TEXT NOT NULL,
  severity  INTEGER NOT NULL CHECK (severity BETWEEN 1 AND 4),  -- EventSeverity
  node_guid INTEGER,
  port_num  INTEGER CHECK (port_num IS NULL OR port_num BETWEEN 0 AND 255),
  message   TEXT NOT NULL
);
CREATE INDEX events_by_time ON events (time_us);
CREATE TABLE peers (
  guid         INTEGER PRIMARY KEY,
  priority     INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 15),
  state        INTEGER NOT NULL CHECK (state BETWEEN 0 AND 3),  -- SMInfo.SMState
  last_seen_us INTEGER NOT NULL,
  sm_key_match INTEGER NOT NULL CHECK (sm_key_match IN (0, 1))
);
CREATE TABLE lft_digest (
  switch_guid INTEGER PRIMARY KEY,
  digest      INTEGER NOT NULL,  -- uint64 as two's-complement int64
  max_lid     INTEGER NOT NULL CHECK (max_lid BETWEEN 0 AND 49151),
  updated_us  INTEGER NOT NULL
);
)sql"},
    // Version 3: ServiceRecords registered with the SA, so they outlive a restart.
    // `record` is the 176-byte wire image (IBA 15.2.5.14); the key columns repeat its
    // ServiceID, ServiceGID and ServiceP_Key. expires_us NULL: an infinite lease.
    {3, R"sql(
CREATE TABLE service_records (
  service_id  INTEGER NOT NULL,  -- uint64 as two's-complement int64
  service_gid BLOB    NOT NULL CHECK (length(service_gid) = 16),
  pkey        INTEGER NOT NULL CHECK (pkey BETWEEN 0 AND 65535),
  record      BLOB    NOT NULL CHECK (length(record) = 176),
  expires_us  INTEGER,
  PRIMARY KEY (service_id, service_gid, pkey)
);
)sql"},
    // Version 4: InformInfo event subscriptions, so they outlive a restart.
    // `key` is the subscription's identity as sm/sa/inform.cc builds it; `record` the 60-byte
    // InformInfoRecord wire image (IBA 15.2.5.12); report_* the address Reports go to.
    {4, R"sql(
CREATE TABLE inform_subscriptions (
  key         BLOB    PRIMARY KEY NOT NULL,
  record      BLOB    NOT NULL CHECK (length(record) = 60),
  report_lid  INTEGER NOT NULL CHECK (report_lid BETWEEN 0 AND 65535),
  report_qpn  INTEGER NOT NULL CHECK (report_qpn BETWEEN 0 AND 16777215),
  report_qkey INTEGER NOT NULL CHECK (report_qkey BETWEEN 0 AND 4294967295),
  pkey_index  INTEGER NOT NULL CHECK (pkey_index BETWEEN 0 AND 65535),
  sl          INTEGER NOT NULL CHECK (sl BETWEEN 0 AND 15),
  trusted     INTEGER NOT NULL CHECK (trusted IN (0, 1))
);
)sql"},
    // Version 5: multicast groups the SA created and their members (sm/model/multicast.h). `record` is the
    // group's 52-byte MCMemberRecord image; a member row dies with its group.
    {5, R"sql(
CREATE TABLE mcast_groups (
  mgid      BLOB    PRIMARY KEY CHECK (length(mgid) = 16),
  mlid      INTEGER NOT NULL UNIQUE CHECK (mlid BETWEEN 49152 AND 65535),
  record    BLOB    NOT NULL CHECK (length(record) = 52),
  permanent INTEGER NOT NULL CHECK (permanent IN (0, 1))
);
CREATE TABLE mcast_members (
  mgid       BLOB    NOT NULL REFERENCES mcast_groups (mgid) ON DELETE CASCADE,
  port_guid  INTEGER NOT NULL,  -- uint64 as two's-complement int64
  port_gid   BLOB    NOT NULL CHECK (length(port_gid) = 16),
  join_state INTEGER NOT NULL CHECK (join_state BETWEEN 1 AND 15),
  proxy_join INTEGER NOT NULL CHECK (proxy_join IN (0, 1)),
  PRIMARY KEY (mgid, port_guid)
);
)sql"},
    // Version 6: PerfMgr port-counter history (sm/perf/perf_manager.h): one row per port per
    // PerfMgr sweep in which some counter moved, holding that sweep's deltas (uint64 as
    // two's-complement int64; column order = kPerfCounterNames). `flags`: kPerfFlag* bits.
    {6, R"sql(
CREATE TABLE perf_history (
  sweep      INTEGER NOT NULL CHECK (sweep >= 1),
  time_us    INTEGER NOT NULL,
  node_guid  INTEGER NOT NULL,
  port_num   INTEGER NOT NULL CHECK (port_num BETWEEN 0 AND 255),
  flags      INTEGER NOT NULL DEFAULT 0,
  symbol_errors               INTEGER NOT NULL DEFAULT 0,
  link_error_recovery         INTEGER NOT NULL DEFAULT 0,
  link_downed                 INTEGER NOT NULL DEFAULT 0,
  rcv_errors                  INTEGER NOT NULL DEFAULT 0,
  rcv_remote_physical_errors  INTEGER NOT NULL DEFAULT 0,
  rcv_switch_relay_errors     INTEGER NOT NULL DEFAULT 0,
  xmit_discards               INTEGER NOT NULL DEFAULT 0,
  xmit_constraint_errors      INTEGER NOT NULL DEFAULT 0,
  rcv_constraint_errors       INTEGER NOT NULL DEFAULT 0,
  local_link_integrity_errors INTEGER NOT NULL DEFAULT 0,
  excessive_buffer_overruns   INTEGER NOT NULL DEFAULT 0,
  vl15_dropped                INTEGER NOT NULL DEFAULT 0,
  xmit_wait                   INTEGER NOT NULL DEFAULT 0,
  xmit_data                   INTEGER NOT NULL DEFAULT 0,
  rcv_data                    INTEGER NOT NULL DEFAULT 0,
  xmit_pkts                   INTEGER NOT NULL DEFAULT 0,
  rcv_pkts                    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sweep, node_guid, port_num)
) WITHOUT ROWID;
CREATE INDEX perf_history_by_port ON perf_history (node_guid, port_num, sweep);
)sql"},
    // Version 7: adaptive-routing group IDs (routing/ar_groups.h), one per destination leaf
    // switch, the same on every switch and kept across restarts.
    {7, R"sql(
CREATE TABLE ar_group_ids (
  leaf_guid INTEGER PRIMARY KEY,  -- uint64 as two's-complement int64
  group_id  INTEGER NOT NULL UNIQUE CHECK (group_id BETWEEN 0 AND 4095)
);
)sql"},
    // Version 8: the daemon's last answers to nodes, links and health, so that
    // ibsmctl --state-db answers them with no daemon running.
    {8, R"sql(
CREATE TABLE snapshots (
  name       TEXT PRIMARY KEY,   -- kSnapshotNodes, kSnapshotLinks, kSnapshotHealth
  written_us INTEGER NOT NULL,   -- Unix microseconds
  json       TEXT NOT NULL
);
)sql"},
    // A snapshot written in parts (SaveSnapshotStreamed): snapshots.json is then empty and
    // the text is the parts in order, so no writer or reader holds a large fabric's answer
    // twice.
    {9, R"sql(
CREATE TABLE snapshot_parts (
  name TEXT NOT NULL,
  part INTEGER NOT NULL CHECK (part >= 0),
  text TEXT NOT NULL,
  PRIMARY KEY (name, part)
) WITHOUT ROWID;
)sql"},
}};

}  // namespace

std::span<const Migration> StateStoreMigrations() { return kMigrations; }

int StateStoreSchemaVersion() { return kMigrations.back().version; }

}  // namespace ibsm::ha
