// The rows of the SM's state, and the narrow interfaces through which each part of the SM
// reads and writes them (ARCHITECTURE.md section 5). `StateStore` (ha/state_store.h) keeps
// them in the SQLite file; `MemoryStateStore` (ha/memory_state_store.h) is its in-memory
// twin for tests, held to the same contract by one test suite run against both
// (ha/state_rows_test.cc).
//
// Each interface is one aggregate, as the store's row files are: routing (guid2lid, LFT
// digests, AR group IDs), history (sweeps, events), SM state (key/values, peers), SA
// (ServiceRecords, subscriptions, multicast groups), snapshots and PerfMgr history. A part
// of the SM takes only the ones it writes or reads; `StateFile` is all of them plus the
// file's health, for the parts that own the file's life (the state writer, the daemon).
//
// Contract, for every implementation: every write method is one transaction (all of it or
// nothing); a read after a successful write sees it; the orders stated below hold.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/types.h"

namespace ibsm::ha {

// FROZEN: stored in sweeps.kind.
enum class SweepKind: int {
  kHeavy = 1,
  kLight = 2,
};

// FROZEN: stored in events.severity.
enum class EventSeverity: int {
  kInfo = 1,
  kWarning = 2,
  kError = 3,
  kCritical = 4,
};

// Event kinds are open-ended text; these are the ones the SM writes. FROZEN spellings.
inline constexpr std::string_view kEventTrap = "trap";
inline constexpr std::string_view kEventLinkChange = "link_change";
inline constexpr std::string_view kEventStateChange = "state_change";
inline constexpr std::string_view kEventLidChange = "lid_change";
inline constexpr std::string_view kEventError = "error";
inline constexpr std::string_view kEventHealth = "health";  // PerfMgr health findings
inline constexpr std::string_view kEventConfigReload = "config_reload";  // SIGHUP

// Snapshot names (snapshots.name), one per control command whose answer the daemon keeps
// in the state file. FROZEN spellings; the JSON is the command's answer, unfiltered.
inline constexpr std::string_view kSnapshotNodes = "nodes";
inline constexpr std::string_view kSnapshotLinks = "links";
inline constexpr std::string_view kSnapshotHealth = "health";

struct SnapshotRow {
  std::string name;
  int64_t written_us = 0;  // Unix microseconds, from the writer's Clock
  std::string json;

  bool operator==(const SnapshotRow&) const = default;
};

// The LIDs of one end port (or switch port 0): min_lid .. max_lid = min_lid + 2^LMC - 1.
struct Guid2LidEntry {
  Guid port_guid;
  Lid min_lid;
  Lid max_lid;
  int64_t updated_us = 0;  // set by the store from its Clock on write; ignored on input

  bool operator==(const Guid2LidEntry&) const = default;
};

struct SweepRow {
  int64_t id = 0;  // assigned by RecordSweep; ignored on input. Never reused after Prune.
  SweepKind kind = SweepKind::kHeavy;
  int64_t started_us = 0;  // Unix microseconds
  int64_t ended_us = 0;
  uint64_t smps_sent = 0;
  uint64_t smps_failed = 0;
  uint32_t nodes = 0;
  uint32_t switches = 0;
  uint32_t cas = 0;
  uint32_t links = 0;
  uint32_t lid_changes = 0;
  uint32_t lft_blocks_sent = 0;
  std::string engine;   // routing engine that produced the tables ("minhop", "ftree", ...)
  std::string outcome;  // "ok", "partial", "failed", ...
  std::string note;

  bool operator==(const SweepRow&) const = default;
};

struct EventRow {
  int64_t id = 0;       // assigned by RecordEvent; ignored on input
  int64_t time_us = 0;  // when it happened (Unix microseconds), as given by the caller
  std::string kind;     // kEventTrap, kEventLinkChange, ...
  EventSeverity severity = EventSeverity::kInfo;
  std::optional<Guid> node_guid;
  std::optional<PortNum> port_num;
  std::string message;

  bool operator==(const EventRow&) const = default;
};

// Another SM seen on the subnet (SMInfo).
struct PeerRow {
  Guid guid;
  uint8_t priority = 0;  // SMInfo.Priority, 0..15
  uint8_t state = 0;     // SMInfo.SMState as on the wire (IBA 14.4.1): 0 NOTACTIVE ..3 MASTER
  int64_t last_seen_us = 0;
  bool sm_key_match = false;

  bool operator==(const PeerRow&) const = default;
};

// What the SM last programmed into one switch's LFT.
struct LftDigestEntry {
  Guid switch_guid;
  uint64_t digest = 0;     // hash of LFT blocks 0..max_lid; the hash function is the router's
  Lid max_lid;             // LinearFDBTop it was computed up to
  int64_t updated_us = 0;  // set by the store from its Clock on write; ignored on input

  bool operator==(const LftDigestEntry&) const = default;
};

// A ServiceRecord registered with the SA (IBA 15.2.5.14), keyed as the SA keys it.
inline constexpr size_t kServiceRecordSize = 176;
struct ServiceKey {
  uint64_t service_id = 0;
  std::array<uint8_t, 16> service_gid{};
  uint16_t pkey = 0;

  bool operator==(const ServiceKey&) const = default;
};
struct ServiceRow {
  ServiceKey key;
  std::vector<uint8_t> record;       // the wire image, kServiceRecordSize bytes
  std::optional<int64_t> expires_us;  // Unix microseconds; nullopt: the lease is infinite

  bool operator==(const ServiceRow&) const = default;
};

// An InformInfo subscription (IBA 13.4.8.3) as the SA keeps it: its identity, its
// InformInfoRecord and where Reports go.
inline constexpr size_t kInformInfoRecordSize = 60;
struct InformRow {
  std::vector<uint8_t> key;     // opaque identity, non-empty (sm/sa/inform.cc builds it)
  std::vector<uint8_t> record;  // the InformInfoRecord wire image, kInformInfoRecordSize bytes
  uint16_t report_lid = 0;
  uint32_t report_qpn = 0;  // 24 bits
  uint32_t report_qkey = 0;
  uint16_t pkey_index = 0;
  uint8_t sl = 0;  // 4 bits
  bool trusted = false;  // subscribed presenting the SA key (may see security traps)

  bool operator==(const InformRow&) const = default;
};

// A multicast group the SA created (IBA 15.2.5.17) and its members, so that a restarted SM
// keeps every group on its MLID. `record` is the group's MCMemberRecord wire image
// (kMcGroupRecordSize bytes: MGID, Q_Key, MLID, MTU, P_Key, rate, SL, ...; PortGID and
// JoinState zero).
inline constexpr size_t kMcGroupRecordSize = 52;
struct McMemberRow {
  uint64_t port_guid = 0;
  std::array<uint8_t, 16> port_gid{};
  uint8_t join_state = 0;
  bool proxy_join = false;

  bool operator==(const McMemberRow&) const = default;
};
struct McGroupRow {
  std::array<uint8_t, 16> mgid{};
  uint16_t mlid = 0;
  std::vector<uint8_t> record;
  bool permanent = false;
  std::vector<McMemberRow> members;  // by port GUID

  bool operator==(const McGroupRow&) const = default;
};

// Port counter deltas of one PerfMgr sweep (sm/perf/perf_manager.h). FROZEN: the order of
// kPerfCounterNames is the column order of perf_history and the index into `deltas`.
inline constexpr size_t kPerfCounterCount = 17;
inline constexpr std::array<std::string_view, kPerfCounterCount> kPerfCounterNames = {
    "symbol_errors",          "link_error_recovery",         "link_downed",
    "rcv_errors",             "rcv_remote_physical_errors",  "rcv_switch_relay_errors",
    "xmit_discards",          "xmit_constraint_errors",      "rcv_constraint_errors",
    "local_link_integrity_errors", "excessive_buffer_overruns", "vl15_dropped",
    "xmit_wait",              "xmit_data",                   "rcv_data",
    "xmit_pkts",              "rcv_pkts"};
// FROZEN: perf_history.flags bits.
inline constexpr uint32_t kPerfFlagReset = 1u << 0;      // a counter read lower than before
inline constexpr uint32_t kPerfFlagSaturated = 1u << 1;  // a counter stuck at its maximum
inline constexpr uint32_t kPerfFlagCleared = 1u << 2;    // the PerfMgr cleared the counters
struct PerfHistoryRow {
  int64_t sweep = 0;  // PerfMgr sweep number, >= 1, increasing across restarts
  int64_t time_us = 0;
  Guid node_guid{0};
  PortNum port_num{0};
  uint32_t flags = 0;
  std::array<uint64_t, kPerfCounterCount> deltas{};

  bool operator==(const PerfHistoryRow&) const = default;
};


// guid2lid, the LFT digests and the AR group IDs (ha/state_store_routing.cc).
class RoutingRows {
 public:
  virtual ~RoutingRows() = default;
  // guid2lid, ordered by port GUID. Save applies upserts then removals in one transaction.
  virtual Result<std::vector<Guid2LidEntry>> LoadGuid2Lid() = 0;
  virtual Status SaveGuid2Lid(const std::vector<Guid2LidEntry>& upserts,
                              const std::vector<Guid>& removals) = 0;
  virtual Status ReplaceGuid2Lid(const std::vector<Guid2LidEntry>& all) = 0;
  // Per-switch LFT digests, ordered by switch GUID; upserts then removals in one transaction.
  virtual Status SaveLftDigests(const std::vector<LftDigestEntry>& upserts,
                                const std::vector<Guid>& removals) = 0;
  virtual Result<std::vector<LftDigestEntry>> LoadLftDigests() = 0;
  // Adaptive-routing group IDs by destination leaf switch GUID (routing/ar_groups.h):
  // replaces the whole map in one transaction. InvalidArgument for an ID above 4095.
  virtual Status SaveArGroupIds(const std::map<Guid, uint16_t>& ids) = 0;
  virtual Result<std::map<Guid, uint16_t>> LoadArGroupIds() = 0;
};

// Sweeps and events (ha/state_store_history.cc).
class HistoryRows {
 public:
  virtual ~HistoryRows() = default;
  // RecordSweep assigns the row's id (increasing, never reused after Prune). RecentSweeps
  // returns the newest n, newest first.
  virtual Result<int64_t> RecordSweep(const SweepRow& row) = 0;
  virtual Result<std::vector<SweepRow>> RecentSweeps(size_t n) = 0;
  // RecentEvents returns at most n events with time_us >= since_us (and of `kind` unless it
  // is empty), newest first (by time, then by id).
  virtual Status RecordEvent(const EventRow& row) = 0;
  virtual Status RecordEvents(const std::vector<EventRow>& rows) = 0;  // one transaction
  virtual Result<std::vector<EventRow>> RecentEvents(size_t n, int64_t since_us = 0,
                                                     std::string_view kind = {}) = 0;
  // How many events have time_us >= since_us (what RecentEvents could return without `n`).
  virtual Result<uint64_t> CountEvents(int64_t since_us = 0) = 0;
  // Keeps the newest keep_sweeps sweeps and keep_events events, in one transaction.
  virtual Status Prune(size_t keep_sweeps, size_t keep_events) = 0;
};

// SM state key/values ("sm_state", "act_count", "priority", ...) and peer SMs
// (ha/state_store_sm_state.cc).
class SmStateRows {
 public:
  virtual ~SmStateRows() = default;
  virtual Status SetValue(std::string_view key, std::string_view value) = 0;
  virtual Result<std::optional<std::string>> GetValue(std::string_view key) = 0;
  // Peer SMs, ordered by GUID.
  virtual Status UpsertPeer(const PeerRow& peer) = 0;
  virtual Status RemovePeer(Guid guid) = 0;
  virtual Result<std::vector<PeerRow>> Peers() = 0;
};

// What the SA registered: ServiceRecords, InformInfo subscriptions, multicast groups
// (ha/state_store_sa.cc).
class SaRows {
 public:
  virtual ~SaRows() = default;
  // ServiceRecords; upserts (by key) then removals in one transaction. InvalidArgument for
  // a record that is not kServiceRecordSize bytes (nothing is written then).
  virtual Status SaveServiceRecords(const std::vector<ServiceRow>& upserts,
                                    const std::vector<ServiceKey>& removals) = 0;
  // Ordered by key (IDs as the int64 they are stored as). Corrupt for a row whose sizes or
  // P_Key are out of range.
  virtual Result<std::vector<ServiceRow>> LoadServiceRecords() = 0;
  // InformInfo subscriptions; upserts (by key) then removals in one transaction.
  // InvalidArgument for a row out of range (nothing is written then).
  virtual Status SaveInformSubscriptions(const std::vector<InformRow>& upserts,
                                         const std::vector<std::vector<uint8_t>>& removals) = 0;
  // In the order they were first stored. Corrupt for a row whose sizes or ranges are off.
  virtual Result<std::vector<InformRow>> LoadInformSubscriptions() = 0;
  // Replaces every multicast group and member with `groups`, in one transaction.
  // InvalidArgument for a record that is not kMcGroupRecordSize bytes (nothing written).
  virtual Status SaveMulticastGroups(const std::vector<McGroupRow>& groups) = 0;
  // Row by row: deletes the groups in `removals` (their members with them), then writes each
  // group of `upserts` and replaces its members, in one transaction. What neither names is
  // left as it is. InvalidArgument as SaveMulticastGroups.
  virtual Status SaveMulticastChanges(const std::vector<McGroupRow>& upserts,
                                      const std::vector<std::array<uint8_t, 16>>& removals) = 0;
  // Ordered by MLID, members by port GUID. Corrupt for a malformed row.
  virtual Result<std::vector<McGroupRow>> LoadMulticastGroups() = 0;
};

// The daemon's last answer to a control command (kSnapshot*), replaced whole
// (ha/state_store_snapshots.cc).
class SnapshotRows {
 public:
  virtual ~SnapshotRows() = default;
  // written_us is set from the store's Clock.
  virtual Status SaveSnapshot(std::string_view name, std::string_view json) = 0;
  // The same, with the text handed over in pieces: `produce` calls its sink with each piece
  // in order, so a large fabric's answer is never held whole by the caller.
  using SnapshotSink = std::function<void(std::string_view piece)>;
  virtual Status SaveSnapshotStreamed(
      std::string_view name, const std::function<void(const SnapshotSink&)>& produce) = 0;
  // nullopt when none was ever written.
  virtual Result<std::optional<SnapshotRow>> LoadSnapshot(std::string_view name) = 0;
};

// PerfMgr history (ha/state_store_perf.cc).
class PerfRows {
 public:
  virtual ~PerfRows() = default;
  // Inserts the rows (one sweep's, usually) and drops every row older than the newest
  // `keep_sweeps` sweeps, in one transaction.
  virtual Status RecordPerfHistory(const std::vector<PerfHistoryRow>& rows,
                                   size_t keep_sweeps) = 0;
  // Newest sweep first, then by node GUID (as the int64 it is stored as) and port; `node`:
  // only that node's ports.
  virtual Result<std::vector<PerfHistoryRow>> LoadPerfHistory(std::optional<Guid> node,
                                                              size_t limit) = 0;
  // The highest sweep number stored, 0 for none (sweep numbers continue after a restart).
  virtual Result<int64_t> LastPerfSweep() = 0;
};

// Every aggregate, and the health of what holds them: for the state writer and the daemon.
class StateFile: public RoutingRows,
                 public HistoryRows,
                 public SmStateRows,
                 public SaRows,
                 public SnapshotRows,
                 public PerfRows {
 public:
  // Where the rows live (a path, or a name for an in-memory store), for logs.
  virtual const std::string& path() const = 0;
  // True while writes are refused for a reason that may pass (StateStore::OpenDegraded);
  // RetryWritable then tries again and is OK once writes are taken.
  virtual bool degraded() const = 0;
  virtual Status RetryWritable() = 0;
  // Write transactions committed since it was opened (tests, and what a burst of SA changes
  // costs in fsyncs).
  virtual uint64_t transactions() const = 0;
};

}  // namespace ibsm::ha
