// The Subnet Administrator (IBA 15; "the SA answers from the last published
// snapshot"): Get and GetTable of NodeRecord, PortInfoRecord, SwitchInfoRecord, LFTRecord,
// SMInfoRecord, LinkRecord, GUIDInfoRecord, P_KeyTableRecord, SL2VLTableRecord,
// VLArbitrationTableRecord and ClassPortInfo, with component masks honoured; Get and
// GetTable of PathRecord and GetMulti (or GetTable) of MultiPathRecord through sm/sa_path;
// ServiceRecord Set (register), Get/GetTable and Delete with lease expiry; InformInfo Set
// (subscribe/unsubscribe) and InformInfoRecord Get/GetTable through sm/sa/inform.h, whose
// Reports' late ReportResponses are routed there too.
//
// ServiceRecords are the one piece of state the server owns: registered by clients, kept
// in memory and, when a StateStore is given, in the state file, so they outlive a restart
// (LoadServices). Changes are written by FlushServices: at once when nobody schedules it,
// else when the SM's flush timer fires (a burst of Sets costs one transaction, not one
// fsync each) and at shutdown. At most kServicesPerPort records per requesting port and
// kServicesTotal in all (README "What one SA request may cost or hold").
//
// The server owns nothing of the sweep. After each heavy sweep the SubnetManager publishes
// an immutable SaSnapshot and the server answers every query from the last one it got, so a
// sweep or a routing run in progress never delays an answer (OpenSM's SA stalls while it
// routes). A GetTable answer larger than one MAD goes out as RMPP through Transport::Post.
//
// Every request is untrusted: malformed MADs are dropped and counted,
// bad requests answered with an SA status and counted, nothing asserts on wire input.
//
// Threading: Publish, OnRequest, LoadServices and ExpireServices run on the transport's
// io_context thread (the ServiceRecords are not locked). A snapshot is
// immutable once published, so a PathRecord worker may read one from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "conf/qos_policy.h"
#include "fabric/fabric.h"
#include "ha/state_rows.h"
#include "mad/attr/sa_records.h"
#include "mad/attr/sm_info.h"
#include "mad/transport.h"
#include "routing/routing_engine.h"
#include "sm/model/discovery.h"
#include "sm/sa/inform.h"
#include "sm/model/pkey_manager.h"
#include "sm/model/multicast.h"
#include "sm/model/qos_tables.h"
#include "sm/model/subnet_snapshot.h"

namespace ibsm::sm {

struct MftPlan;

// What the SA serves: the sweep's published snapshot (sm/model/subnet_snapshot.h).
using SaSnapshot = SubnetSnapshot;

// SubnetSnapshot::port_mtu for `fabric` as discovered: for every port whose PortInfo is known,
// min(its MTUCap, its neighbour's MTUCap when known). 0 for the rest.
std::vector<uint8_t> LinkMtus(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes);

// ClassPortInfo RespTimeValue for a transaction timeout, as OpenSM computes it: the
// smallest v (8..31) with 4.096 us * 2^v >= timeout (200 ms -> 16).
uint8_t RespTimeValueFor(std::chrono::milliseconds transaction_timeout);

// ServiceRecords one requesting port may register, and the SA holds in all: one host cannot
// take the SA's memory, and every Get walks a bounded table.
inline constexpr size_t kServicesPerPort = 32;
inline constexpr size_t kServicesTotal = 8192;

struct SaServerOptions {
  // Requests whose SM_Key field equals this are trusted (see M_Key and SM_Key in answers);
  // opensm.conf sa_key. 0: nobody is trusted.
  uint64_t sa_key = 1;
  uint8_t resp_time_value = 18;  // ClassPortInfo RespTimeValue (4.096 us * 2^v)
  InformOptions inform;  // event subscriptions and Reports (taken at construction)
  size_t services_per_port = kServicesPerPort;  // tests lower them
  size_t services_total = kServicesTotal;
};

// Operators act on these. Keys of the maps are attribute IDs and MAD
// status values.
struct SaCounters {
  uint64_t requests = 0;          // class 0x03 MADs handed to the server
  uint64_t answered = 0;          // responses posted (errors included)
  uint64_t records_sent = 0;      // records in successful answers
  uint64_t rmpp_answers = 0;      // GetTable answers larger than one MAD (sent as RMPP)
  uint64_t malformed = 0;         // undecodable MADs (dropped)
  uint64_t responses_ignored = 0; // MADs with the response bit set (dropped)
  uint64_t rmpp_control = 0;      // RMPP ACK/STOP/ABORT of no transfer of ours (dropped)
  uint64_t post_failures = 0;     // the transport refused an answer
  uint64_t not_ready = 0;         // requests before the first snapshot (answered Busy)
  uint64_t services_registered = 0;  // ServiceRecord Sets stored (replacements included)
  uint64_t services_deleted = 0;     // ServiceRecords removed by a Delete
  uint64_t services_expired = 0;     // ServiceRecords dropped when their lease ran out
  // Writes of ServiceRecord changes to the state file that failed (SA-SR-001; the changes
  // stay in memory, served, and are written at the next flush).
  uint64_t service_state_failures = 0;
  // ServiceRecord Sets of a new registration refused with ERR_NO_RESOURCES: the requesting
  // port holds kServicesPerPort already (SA-SR-006), or the SA holds kServicesTotal (SA-SR-007).
  uint64_t service_port_cap_refused = 0;
  uint64_t service_total_cap_refused = 0;
  // SA_Key (C15-0.1.5, opensm.conf sa_key): requests whose SM_Key is neither 0 nor the SA
  // key are dropped unanswered, as OpenSM does (its ERR 1A04).
  uint64_t sa_key_mismatches = 0;
  // ServiceRecord Set/Delete refused: another ServiceKey than the registration's (REQ_DENIED),
  // or a ServiceP_Key the requester or the service port does not hold (REQ_INVALID).
  uint64_t service_key_refused = 0;
  uint64_t service_pkey_refused = 0;
  // MCMemberRecord proxy joins refused: requester and joining port share no partition.
  uint64_t mc_partition_refusals = 0;
  // MultiPathRecord requests over sm/sa/sa_path.h's caps: refused for naming more than
  // kMultiPathMaxPortPairs port pairs (ERR_NO_RESOURCES, SA-MP-001), or answered from
  // kMultiPathMaxCandidates LID pairs when they ask more.
  uint64_t multipath_refused = 0;
  uint64_t multipath_trimmed = 0;
  // MFTRecord answers come from one multicast forwarding plan per (snapshot, multicast
  // generation): how many plans were computed (not one per request).
  uint64_t mft_plans_computed = 0;
  std::map<uint16_t, uint64_t> by_attribute;  // every request with a decodable header
  std::map<uint16_t, uint64_t> by_error;      // answers with a non-zero status
};

// Every uint64_t field of SaCounters once, for the control answer's "sa" object and the
// metrics (ARCHITECTURE.md "Where to add ... A counter"). The by-attribute and by-status maps
// are exported beside them; `requests` has no family of its own (ibsm_sa_requests_total,
// by attribute, adds up to it).
struct SaCounterRow {
  uint64_t SaCounters::*member;
  std::string_view key;     // control answer key
  std::string_view family;  // metric family; "" for none
  std::string_view help;
};

inline constexpr SaCounterRow kSaCounterRows[] = {
    {&SaCounters::requests, "requests", "",
     "class 0x03 MADs handed to the server"},
    {&SaCounters::answered, "answered", "ibsm_sa_answered_total",
     "SA responses posted, errors included"},
    {&SaCounters::records_sent, "records_sent", "ibsm_sa_records_sent_total",
     "records in successful SA answers"},
    {&SaCounters::rmpp_answers, "rmpp_answers", "ibsm_sa_rmpp_answers_total",
     "SA answers larger than one MAD, sent as RMPP"},
    {&SaCounters::malformed, "malformed", "ibsm_sa_malformed_total",
     "SA MADs that could not be decoded (dropped)"},
    {&SaCounters::responses_ignored, "responses_ignored", "ibsm_sa_responses_ignored_total",
     "SA MADs with the response bit set (dropped)"},
    {&SaCounters::rmpp_control, "rmpp_control", "ibsm_sa_rmpp_control_total",
     "RMPP ACK, STOP or ABORT of no transfer of the SA (dropped)"},
    {&SaCounters::post_failures, "post_failures", "ibsm_sa_post_failures_total",
     "SA answers the transport refused"},
    {&SaCounters::not_ready, "not_ready", "ibsm_sa_not_ready_total",
     "SA requests before the first snapshot (answered busy)"},
    {&SaCounters::services_registered, "services_registered", "ibsm_sa_services_registered_total",
     "ServiceRecord Sets stored, replacements included"},
    {&SaCounters::services_deleted, "services_deleted", "ibsm_sa_services_deleted_total",
     "ServiceRecords removed by a Delete"},
    {&SaCounters::services_expired, "services_expired", "ibsm_sa_services_expired_total",
     "ServiceRecords dropped when their lease ran out"},
    {&SaCounters::service_state_failures, "service_state_failures", "ibsm_sa_service_state_failures_total",
     "ServiceRecord state-file writes that failed (SA-SR-001)"},
    {&SaCounters::service_port_cap_refused, "service_port_cap_refused", "ibsm_sa_service_port_cap_refused_total",
     "ServiceRecord registrations refused: the port holds its cap (SA-SR-006)"},
    {&SaCounters::service_total_cap_refused, "service_total_cap_refused", "ibsm_sa_service_total_cap_refused_total",
     "ServiceRecord registrations refused: the SA holds its cap (SA-SR-007)"},
    {&SaCounters::sa_key_mismatches, "sa_key_mismatches", "ibsm_sa_key_mismatches_total",
     "SA requests with an SM_Key that is neither 0 nor the SA key (dropped)"},
    {&SaCounters::service_key_refused, "service_key_refused", "ibsm_sa_service_key_refused_total",
     "ServiceRecord Sets and Deletes with another ServiceKey (REQ_DENIED)"},
    {&SaCounters::service_pkey_refused, "service_pkey_refused", "ibsm_sa_service_pkey_refused_total",
     "ServiceRecord Sets and Deletes with a ServiceP_Key not held (REQ_INVALID)"},
    {&SaCounters::mc_partition_refusals, "mc_partition_refusals", "ibsm_sa_mc_partition_refusals_total",
     "proxy multicast joins refused: no shared partition"},
    {&SaCounters::multipath_refused, "multipath_refused", "ibsm_sa_multipath_refused_total",
     "MultiPathRecord requests over the port-pair cap (SA-MP-001)"},
    {&SaCounters::multipath_trimmed, "multipath_trimmed", "ibsm_sa_multipath_trimmed_total",
     "MultiPathRecord requests answered from the first LID pairs only"},
    {&SaCounters::mft_plans_computed, "mft_plans_computed", "ibsm_sa_mft_plans_computed_total",
     "multicast forwarding plans computed for MFTRecord answers"},
};
// A field without a row fails to build.
static_assert(std::size(kSaCounterRows) ==
              (sizeof(SaCounters) - 2 * sizeof(std::map<uint16_t, uint64_t>)) / sizeof(uint64_t));

class SaServer {
 public:
  // REQUIRES: `transport`, `clock` and `store` (may be null: ServiceRecords then live in
  // memory only) outlive the server. `clock`'s UnixMicros times ServiceRecord leases.
  SaServer(mad::Transport& transport, SaServerOptions options, const Clock& clock,
           ha::SaRows* store = nullptr);

  // Reads the ServiceRecords the state file holds, replacing those in memory; those whose
  // lease ran out while the SM was down are dropped (and removed from the file).
  Status LoadServices();

  // Drops every ServiceRecord whose lease has run out (also done before each ServiceRecord
  // request). Returns how many were dropped. The SM calls it on its sweep timer.
  size_t ExpireServices();

  // The registered ServiceRecords, in registration order (tests, ibsmctl).
  std::vector<mad::ServiceRecord> services() const;

  // ServiceRecord changes not yet in the state file, and writing them (one transaction).
  // A failed write keeps them for the next call (counted, SA-SR-001).
  bool services_dirty() const { return !pending_upserts_.empty() || !pending_removals_.empty(); }
  Status FlushServices();
  // Runs after every change; the SM arms its flush timer there (once for a burst). Unset:
  // every change is flushed before the answer goes out.
  void set_on_services_dirty(std::function<void()> fn) { on_services_dirty_ = std::move(fn); }

  // Makes `snapshot` the one every later answer comes from. Null is ignored.
  void Publish(std::shared_ptr<const SaSnapshot> snapshot);
  std::shared_ptr<const SaSnapshot> snapshot() const { return snapshot_; }

  // Handles one MAD of class 0x03 the transport handed up: answers it through
  // Transport::Post, or drops it (counted).
  void OnRequest(const mad::MadMessage& msg);

  // The answer OnRequest would post for `msg`, or nullopt when it is dropped. Changes
  // nothing but the counters, apart from a ServiceRecord Set or Delete (and the leases it
  // expires); fuzz targets and tests call it directly.
  std::optional<mad::MadMessage> Answer(const mad::MadMessage& msg);

  const SaCounters& counters() const { return counters_; }
  // MCMemberRecord and MFTRecord are served from `groups` (sm/sa/sa_multicast.cc); null: not
  // served. REQUIRES: outlives the server, same thread.
  void AttachMulticast(MulticastManager* groups) {
    mcast_ = groups;
    mft_plan_.reset();  // another manager's generations are not comparable
  }
  // The other SMs the SM knows (matching SM_Key, not NOTACTIVE), as SMInfoRecords with
  // their keys: served beside the SM's own record (OpenSM's sm_guid_tbl), keys only to
  // the trusted. Replaces the previous list.
  void SetOtherSms(std::vector<mad::SmInfoRecord> records) { other_sms_ = std::move(records); }
  void set_options(const SaServerOptions& options) { options_ = options; }

  // Event subscriptions (InformInfo Set, InformInfoRecord) and the Reports sent to them:
  // the SM publishes its notices here.
  InformManager& inform() { return inform_; }
  const InformManager& inform() const { return inform_; }

 private:
  struct ServiceKeyHash {
    size_t operator()(const ha::ServiceKey& k) const;
  };
  struct Service {
    mad::ServiceRecord record;
    std::optional<int64_t> expires_us;  // Unix microseconds; nullopt: infinite lease
    // The port that registered it (its cap); restored records: the ServiceGID's port.
    Guid owner{0};
    std::multimap<int64_t, ha::ServiceKey>::iterator expiry;  // valid with expires_us
  };
  using ServiceList = std::list<Service>;
  // Adds or replaces the record of its key (keeping its owner on replacement); drops one.
  void PutService(const mad::ServiceRecord& r, std::optional<int64_t> expires_us, Guid owner);
  void DropService(ServiceList::iterator it);
  void MarkServiceChanged(const ha::ServiceKey& key, bool removed);
  std::optional<mad::MadMessage> AnswerService(const mad::MadMessage& msg,
                                               const mad::SaMad& req,
                                               std::span<const uint8_t> data);
  std::optional<mad::MadMessage> AnswerInform(const mad::MadMessage& msg, const mad::SaMad& req,
                                              std::span<const uint8_t> data, bool trusted);

  std::optional<mad::MadMessage> AnswerMcMember(const mad::MadMessage& msg,
                                                const mad::SaMad& req,
                                                std::span<const uint8_t> data, bool trusted);
  std::optional<mad::MadMessage> AnswerMftRecord(const mad::MadMessage& msg,
                                                 const mad::SaMad& req,
                                                 std::span<const uint8_t> data);

  mad::Transport& transport_;
  SaServerOptions options_;
  const Clock& clock_;
  ha::SaRows* store_;
  // Registration order, indexed by key, by lease end and by owner, so no request walks the
  // whole table to find, expire or count what it touches.
  ServiceList services_;
  std::unordered_map<ha::ServiceKey, ServiceList::iterator, ServiceKeyHash> service_index_;
  std::multimap<int64_t, ha::ServiceKey> service_expiry_;
  std::unordered_map<Guid, size_t> services_by_owner_;
  std::unordered_set<ha::ServiceKey, ServiceKeyHash> pending_upserts_, pending_removals_;
  std::function<void()> on_services_dirty_;
  MulticastManager* mcast_ = nullptr;
  std::shared_ptr<const SaSnapshot> snapshot_;
  // The MFT plan of the multicast generation and snapshot it was computed for (a weak
  // pointer: no snapshot is kept alive for it, and its control block is not reused).
  std::shared_ptr<const MftPlan> mft_plan_;
  std::weak_ptr<const SaSnapshot> mft_plan_snapshot_;
  uint64_t mft_plan_generation_ = 0;
  std::vector<mad::SmInfoRecord> other_sms_;
  SaCounters counters_;
  InformManager inform_;
};

}  // namespace ibsm::sm
