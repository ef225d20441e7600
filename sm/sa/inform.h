// Event subscriptions and Reports (IBA 13.4.8.3 InformInfo, 13.4.9 Report, 15.2.5.12
// InformInfoRecord): the SA's InformManager.
//
// A port subscribes with SubnAdmSet(InformInfo) Subscribe=1 and unsubscribes with
// Subscribe=0. Each subscription says which notices it wants (GID or LID range of the
// issuer, IsGeneric, Type, TrapNumber/DeviceID, ProducerType/VendorID, each but IsGeneric
// with a wildcard) and the Reports go to the address the Set came from (LID, QPN, Q_Key),
// as OpenSM does (osm_sa_informinfo.c: "we only copy the source address vector").
//
// Publish sends a Report(Notice) (SA class, method 0x06) to every matching subscriber and
// expects a ReportResponse (0x86); an unanswered Report is resent `report.retries` times,
// then given up and counted. Subscriptions whose subscriber port left the fabric are
// dropped after the sweep that saw it go (OpenSM's osm_infr_remove_subscriptions).
//
// Subscriptions are kept in memory and, when a StateStore is given, in the state file
// (one transaction per change, written before the answer goes out), so they outlive a
// restart (Load).
//
// Every Set is untrusted: bad requests get an SA status and a counter.
//
// Threading: every method runs on the transport's io_context thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "fabric/fabric.h"
#include "ha/state_rows.h"
#include "mad/attr/inform_info.h"
#include "mad/attr/notice.h"
#include "mad/transport.h"

namespace ibsm::sm {

struct InformOptions {
  // Per Report attempt, and resends after the first before it is given up (OpenSM uses
  // transaction_timeout / transaction_retries for Reports too).
  mad::SendOptions report{std::chrono::milliseconds(200), 3};
  size_t max_subscriptions = 4096;     // in all (NO_RESOURCES beyond)
  size_t max_per_subscriber = 64;      // per subscriber port (NO_RESOURCES beyond)
  // Reports waiting for their ReportResponse, in all and per report address: a subscriber
  // that never answers (or a flood of traps) holds at most this many; the rest are dropped.
  size_t max_reports_in_flight = 1024;
  size_t max_reports_per_subscriber = 16;
};

// Operators act on these.
struct InformCounters {
  uint64_t subscribed = 0;         // Sets with Subscribe=1 accepted (replacements included)
  uint64_t unsubscribed = 0;       // Sets with Subscribe=0 that removed a subscription
  uint64_t rejected = 0;           // Sets answered with an error status
  uint64_t state_failures = 0;     // state-file writes that failed (request refused)
  uint64_t notices_published = 0;  // notices handed to Publish
  uint64_t reports_sent = 0;       // Reports sent, first attempts only
  uint64_t report_retries = 0;     // resends after an attempt got no ReportResponse
  uint64_t reports_acked = 0;      // Reports answered by a ReportResponse
  uint64_t reports_unacked = 0;    // Reports given up after every retry
  uint64_t report_responses_late = 0;  // ReportResponses reaching the SA with nothing waiting
  uint64_t subscribers_dropped = 0;    // subscriptions dropped: the subscriber left the fabric
  uint64_t reports_dropped = 0;  // not sent: too many Reports already waiting (SA-INF-011)
};

// One subscription as kept.
struct Subscription {
  // Subscriber GID, Enum 0 (as OpenSM), and the InformInfo as stored: Subscribe 1, QPN the
  // one Reports go to.
  mad::InformInfoRecord record;
  mad::MadAddress report_to;
  bool trusted = false;  // subscribed presenting the SA key (may receive security traps)
};

// What a Set is answered with: an SA/MAD status, and the InformInfo to echo (13.4.8.3
// o13-12.1.1: a copy of the request; on an error with Subscribe cleared, o13-13.1.1).
struct InformSetAnswer {
  uint16_t status = 0;
  mad::InformInfo info;
};

class InformManager {
 public:
  // REQUIRES: `transport` and `store` (may be null: subscriptions then live in memory only)
  // outlive the manager.
  InformManager(mad::Transport& transport, InformOptions options, ha::SaRows* store);
  ~InformManager();
  InformManager(const InformManager&) = delete;
  InformManager& operator=(const InformManager&) = delete;

  // Replaces the subscriptions in memory with those of the state file.
  Status Load();

  // SubnAdmSet(InformInfo) from `from` (the request's source address) on `fabric`, the
  // SA's current snapshot. `trusted`: the request presented the SA key.
  InformSetAnswer Set(const Fabric& fabric, uint64_t subnet_prefix, const mad::InformInfo& req,
                      const mad::MadAddress& from, bool trusted);

  // InformInfoRecords of every subscription. For an untrusted requester the QPN reads 0
  // (C15-0.2-1.16, as OpenSM).
  std::vector<mad::InformInfoRecord> Records(bool trusted) const;

  // Sends a Report of `notice` to every subscriber whose subscription matches it. Returns
  // how many Reports went out.
  size_t Publish(const mad::Notice& notice);

  // Drops the subscriptions of subscriber ports `fabric` no longer has (after a sweep).
  // Returns how many were dropped.
  size_t DropGone(const Fabric& fabric);

  // A ReportResponse that reached the SA rather than the transport's matching (late).
  void OnLateReportResponse(const mad::MadMessage& msg);

  // The IBA 13.4.8.3 matching rules, as OpenSM's match_notice_to_inf_rec: GID (if not 0)
  // against IssuerGID, else the LID range (unless 0xFFFF) against IssuerLID; IsGeneric
  // equal; Type, TrapNumber/DeviceID and ProducerType/VendorID equal unless wildcards.
  static bool Matches(const mad::InformInfo& ii, const mad::Notice& notice);

  const std::vector<Subscription>& subscriptions() const { return subs_; }
  const InformCounters& counters() const { return counters_; }
  size_t reports_in_flight() const { return in_flight_; }

 private:
  struct Report;
  void SendAttempt(std::shared_ptr<Report> report);
  Status Persist(const std::vector<const Subscription*>& upserts,
                 const std::vector<std::vector<uint8_t>>& removals);

  mad::Transport& transport_;
  InformOptions options_;
  ha::SaRows* store_;
  std::vector<Subscription> subs_;
  InformCounters counters_;
  size_t in_flight_ = 0;
  // Reports waiting, by report address (LID, QPN).
  std::map<std::pair<uint16_t, uint32_t>, size_t> in_flight_to_;
  bool reports_dropping_ = false;  // SA-INF-011 logged for the current spell
  void ReportDone(const mad::MadAddress& to);
  // Report handlers run only while this is alive (the transport may outlive the manager).
  std::shared_ptr<char> alive_ = std::make_shared<char>(0);
};

// The identity of a subscription (what a Subscribe=0 must name to remove it, and what a
// second Subscribe=1 replaces): report address, GID or LID range, IsGeneric, Type,
// TrapNumber/DeviceID, ProducerType/VendorID. Exposed for the state file and tests.
std::vector<uint8_t> SubscriptionKey(const Subscription& s);

// The port GID of `guid` in the subnet `prefix` (a subscriber's, a notice's issuer).
std::array<uint8_t, 16> PortGid(uint64_t prefix, Guid guid);

}  // namespace ibsm::sm
