// The performance manager (OpenSM's PerfMgr): every perfmgr_sweep_time_s, and once
// after the first SUBNET UP, reads PortCounters (IBA 16.1.3.5) and, where the node's PerfMgt
// ClassPortInfo says it has them, PortCountersExtended (16.1.4.11) of every cabled port by
// LID; keeps each port's previous reading and computes deltas; judges them with the health
// rules (sm/answers/health.h); stores the deltas in the state file with a retention limit
// and each new finding (a port and rule the sweep before did not report) as an event, so
// the event log holds the health history without a row per sweep for a lasting fault.
//
// Counters: PortCounters' error fields (4 to 16 bits) and data fields (32 bits) saturate at
// their maximum rather than wrap (16.1.3.5). A reading lower than the one before means the
// counters were reset (someone cleared them, or the node rebooted): the port's deltas are
// then the new readings. A counter near its maximum (OpenSM's rule: 3/4 of it; 10 for the
// 4-bit ones) is cleared with a PortCounters Set when perfmgr_clear_near_overflow is on, so
// the next deltas are exact again.
//
// Threading: every method runs on the io_context thread that owns the transport; MADs go out
// through mad::Transport (never blocking), at most max_outstanding at a time.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/clock.h"
#include "ha/state_rows.h"
#include "mad/attr/port_counters.h"
#include "mad/attr/port_counters_extended.h"
#include "mad/transport.h"
#include "sm/answers/health.h"
#include "sm/model/discovery.h"

namespace ibsm::sm {

// One reading or one delta, indexed as ha::kPerfCounterNames.
using PerfCounters = std::array<uint64_t, ha::kPerfCounterCount>;
inline constexpr size_t kPerfXmitData = 13;  // first of the four data/packet counters
inline constexpr size_t kPerfErrorCounters = 12;  // the error counters come first

// Bit widths of the PortCounters fields, in kPerfCounterNames order (data fields 32 bits).
const std::array<uint8_t, ha::kPerfCounterCount>& PortCountersWidths();
PerfCounters FromPortCounters(const mad::PortCounters& pc);
// Takes the 64-bit data and packet counters of PortCountersExtended into `c`.
void TakeExtendedData(const mad::PortCountersExtended& x, PerfCounters* c);

// Deltas between two readings of one port. `widths`: each counter's width (64 = never
// saturates). A counter lower than before marks a reset: every delta is then the new
// reading. `near_overflow` is set when a counter reached OpenSM's clearing point.
struct PerfDelta {
  PerfCounters delta{};
  uint32_t flags = 0;  // ha::kPerfFlag*
  bool near_overflow = false;
};
PerfDelta ComputeDelta(const PerfCounters& before, const PerfCounters& now,
                       const std::array<uint8_t, ha::kPerfCounterCount>& widths);

// True for the one port of each cable that stands for it: the end with the lower PortId.
bool CableEnd(const Fabric& f, PortId a);
// Why the cable at port `a` runs below what both ends support (sm/perf/link_health.h); nothing
// when it does not, or when `d` (may be null) lacks either end's PortInfo.
std::optional<std::string> DegradedCable(const Fabric& f, const DiscoveryResult* d, PortId a);

// Degraded-link findings (sm/perf/link_health.h) of every cable discovery read both ends of.
std::vector<HealthFinding> DegradedLinkFindings(const DiscoveryResult& d);
// ForEachCable(DegradedLinkFindings(d), visit) without holding the findings: one cable's at
// a time.
void ForEachDegradedCable(const DiscoveryResult& d,
                          const std::function<void(const CableHealth&)>& visit);

// More degraded links than this in one PerfMgr sweep are logged as one summary line (and
// one event when any is new) instead of a line each.
inline constexpr size_t kDegradedLinksLoggedOneByOne = 3;

struct PerfManagerOptions {
  std::chrono::seconds sweep_time{180};
  size_t max_outstanding = 500;  // perfmgr_max_outstanding_queries
  bool query_cpi = true;         // perfmgr_query_cpi: ask ClassPortInfo for 64-bit counters
  bool ignore_cas = false;       // perfmgr_ignore_cas
  bool clear_near_overflow = true;
  size_t history_sweeps = 1000;  // perf_history rows kept, in sweeps
  // health_window_s: a finding, and a port's error counts, are remembered this long after the
  // last sweep that saw them (`health`, `links --errors`, topo colours).
  std::chrono::seconds health_window{3600};
  mad::SendOptions send;
  HealthThresholds thresholds;
};

struct PerfCountersStats {
  uint64_t sweeps = 0;
  uint64_t queries_sent = 0;      // PerfMgt Gets and Sets
  uint64_t timeouts = 0;          // queries with no answer after every retry
  uint64_t bad_answers = 0;       // answered with a MAD status, or undecodable
  uint64_t resets_seen = 0;       // ports whose counters went down (cleared, rebooted)
  uint64_t clears_sent = 0;       // PortCounters Sets near overflow
  uint64_t history_errors = 0;    // sweeps whose rows could not be stored
  std::array<uint64_t, kHealthRuleCount> findings_by_rule{};
};

// What the PerfMgr knows of one port.
struct PortPerf {
  PortEnd end;
  std::optional<PortEnd> peer;
  std::optional<PerfCounters> last;  // last reading
  PerfCounters delta{};              // of the last sweep that read it
  uint32_t flags = 0;
  uint64_t delta_sweep = 0;          // the sweep `delta` belongs to (0: none yet)
  uint64_t timeouts = 0;             // over the port's life
  bool extended = false;             // data counters from PortCountersExtended
  // The sweeps of the health window in which an error counter (the first 12) moved:
  // (sweep start, Unix microseconds; deltas).
  std::deque<std::pair<int64_t, PerfCounters>> error_window;
  // The error deltas summed over the window.
  PerfCounters WindowErrors() const;
};

class PerfManager {
 public:
  // `history` keeps the counter deltas, `events` the health findings; either may be null
  // (no state file), and usually both are the one state file.
  // REQUIRES: io, transport, clock and (if not null) history and events outlive this.
  PerfManager(boost::asio::io_context& io, mad::Transport& transport, const Clock& clock,
              ha::PerfRows* history, ha::HistoryRows* events, PerfManagerOptions options);
  ~PerfManager();
  PerfManager(const PerfManager&) = delete;
  PerfManager& operator=(const PerfManager&) = delete;

  // The fabric to poll from the next sweep on: the model the SM published with its last sweep
  // as master (SubnetManager::AddModelObserver), immutable; null: none (not master, or no
  // sweep yet), and sweeps are skipped. A sweep running goes on with the model it began with.
  void SetModel(std::shared_ptr<const DiscoveryResult> model) { model_ = std::move(model); }
  // Arms the periodic sweep. The first sweep waits for OnSubnetUp.
  void Start();
  // A heavy sweep brought the subnet up: the first one starts a PerfMgr sweep now.
  void OnSubnetUp();
  // Runs one sweep now (unless one is running: then `done` runs after it). `done` may be
  // empty.
  void SweepNow(std::function<void()> done = {});
  void Stop();
  // SIGHUP: thresholds, limits and retention apply from the next sweep; a new sweep period
  // re-arms the timer now (after the running sweep, if one runs).
  void Reconfigure(PerfManagerOptions options);
  // Runs after every completed sweep, once findings() are the new ones (the daemon stores
  // the health answer then). May be empty.
  void set_on_sweep(std::function<void()> on_sweep) { on_sweep_ = std::move(on_sweep); }
  // Where a sweep's history rows and events are written: the daemon hands them to the state
  // writer's thread (SubnetManager::RunOnStateWriter), so a large fabric's rows do not hold
  // up the io thread; a failure is counted back on the io thread. Unset: written at once.
  using StoreRunner = std::function<void(std::function<void()>)>;
  void set_store_runner(StoreRunner run) { store_runner_ = std::move(run); }
  // No query in flight (the daemon waits for this before closing the port).
  bool idle() const { return in_flight_ == 0; }

  const PerfCountersStats& counters() const { return counters_; }
  uint64_t sweep_number() const { return sweep_number_; }
  const PerfManagerOptions& options() const { return options_; }
  // Findings of the last completed sweep (empty before one).
  const std::vector<HealthFinding>& findings() const { return findings_; }
  // Every finding of the health window (options().health_window up to the last sweep's
  // end), once per port and rule, with when it was first and last seen, in how many sweeps
  // and its growth summed; the fields of its last occurrence otherwise.
  const std::vector<HealthFinding>& window_findings() const { return window_findings_; }
  // Every port polled, by (node GUID, port number).
  const std::map<std::pair<Guid, uint8_t>, PortPerf>& ports() const { return ports_; }
  // When the last PerfMgr sweep ended, Unix microseconds of the injected clock.
  std::optional<int64_t> last_sweep_end_us() const { return last_end_us_; }
  const Clock& clock() const { return clock_; }

 private:
  struct NodeCaps {
    bool known = false;
    bool extended = false;  // PortCountersExtended (IsExtendedWidthSupported[NoIETF])
    bool xmit_wait = false;
  };
  struct Target {
    std::pair<Guid, uint8_t> key;
    Lid lid{0};
  };

  void ScheduleNext();
  void BeginSweep();
  void QueryNode(Guid node, std::vector<Target> targets);
  void QueryPort(const Target& t, bool extended);
  void OnPortCounters(const Target& t, bool extended, Result<mad::MadMessage> r);
  void OnExtended(const Target& t, PerfCounters reading, Result<mad::MadMessage> r);
  void Record(const Target& t, const PerfCounters& reading, bool extended);
  void ClearCounters(const Target& t, bool extended);
  // Sends through the bounded window; `cb` runs with the answer (on the io thread).
  void Issue(mad::MadMessage msg, std::function<void(Result<mad::MadMessage>)> cb);
  void Pump();
  void OpDone();
  void FinishSweep();
  void UpdateWindow();

  boost::asio::io_context& io_;
  mad::Transport& transport_;
  const Clock& clock_;
  ha::PerfRows* store_;
  ha::HistoryRows* events_;
  PerfManagerOptions options_;
  std::shared_ptr<const DiscoveryResult> model_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  StoreRunner store_runner_;

  bool started_ = false;
  bool stopped_ = false;
  bool sweeping_ = false;
  bool first_done_ = false;
  bool again_ = false;
  std::vector<std::function<void()>> waiters_;
  std::function<void()> on_sweep_;
  uint64_t sweep_number_ = 0;
  int64_t sweep_started_us_ = 0;
  size_t pending_ = 0;     // operations of this sweep not finished
  size_t in_flight_ = 0;   // MADs sent and not answered
  std::deque<std::pair<mad::MadMessage, std::function<void(Result<mad::MadMessage>)>>> queue_;
  uint64_t sweep_timeouts_ = 0;
  uint64_t sweep_ports_read_ = 0;

  std::map<Guid, NodeCaps> caps_;
  std::map<std::pair<Guid, uint8_t>, PortPerf> ports_;
  std::vector<HealthFinding> findings_;
  std::vector<HealthFinding> window_findings_;
  std::vector<HealthFinding> findings_next_;  // degraded links of the running sweep
  std::optional<int64_t> last_end_us_;
  PerfCountersStats counters_;
};

// Prometheus text for the PerfMgr (sm/net/metrics_server.h): sweeps, queries, timeouts, resets,
// clears, ports polled, and health findings by kind (total and in the last sweep).
std::string RenderPerfMetrics(const PerfManager& pm);

}  // namespace ibsm::sm
