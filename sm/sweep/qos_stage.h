// The optional SL2VL and VLArb reads, run beside each sweep on a pipeline of their own, and
// what the sweep's finish does with them (ARCHITECTURE.md "Heavy sweep", steps 3 and 13):
// it waits for them (whole with qos TRUE, at most optional_reads_wait with qos FALSE, not at
// all when a switch reported meanwhile or in a repair), and with qos TRUE writes the QoS
// tables that differ from what was read (sm/sweep/qos_program.h).
//
// The stage owns its cache: the tables read and written (tables(), which the SA snapshot
// serves), the devices found without one of them, and whether QoS Sets are owed by a sweep
// that ended before its reads were in.
//
// Threading: the io thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/types.h"
#include "sm/model/discovery.h"
#include "sm/model/qos_tables.h"
#include "sm/model/smp_pipeline.h"
#include "sm/sweep/qos_program.h"
#include "sm/sweep/sm_counters.h"
#include "sm/sweep/sm_options.h"
#include "sm/sweep/sweep_engine.h"

namespace ibsm::sm {

class QosStage {
 public:
  // What the stage asks of the SM that hosts it.
  struct Hooks {
    std::function<std::shared_ptr<const DiscoveryResult>()> model;  // now; null before any
    // The LinearFDBTop the SM set on a switch (LftProgrammer::top); nullopt: none.
    std::function<std::optional<uint16_t>(Guid)> lft_top;
    std::function<bool()> master;          // this SM is master
    std::function<bool()> sweeping;        // a sweep runs now
    std::function<size_t()> repair_pending;  // switches that reported, not yet repaired
    std::function<bool()> has_tables;        // the SM has programmed tables
    // Publishes the SA snapshot of the model now, where the model has the SM's port.
    std::function<void()> publish;
    // The same after reads added tables between sweeps: only where one was published.
    std::function<void()> republish;
    std::function<void()> finish;          // enters the running sweep's finish again
    std::function<void(std::string_view id, std::string message)> issue;
    std::function<void(std::string_view name)> open_stage;  // SweepEngine::OpenStage
    std::function<bool()> stopped;                          // the SM stopped
  };
  // `sweep`: the engine's context, whose figures the QoS Sets are counted in.
  // REQUIRES: all outlive this.
  QosStage(boost::asio::io_context& io, SmpPipeline& pipeline,
           const SubnetManagerOptions& options, SmCounters& counters, SweepContext& sweep,
           Hooks hooks)
      : options_(options), counters_(counters), sweep_(sweep),
        hooks_(std::move(hooks)), reader_(pipeline), programmer_(pipeline), wait_timer_(io) {}

  // After the election: reads the tables of the nodes not read yet (a device that left, or
  // a switch that rebooted, is read afresh). A repair re-paths reads still running and, when
  // local with no node lost, reads nothing. While reads run, this sweep's new nodes are read
  // once they end.
  void StartReads();

  // The sweep's finish is entered (again): true when it must wait, for the reads or for this
  // sweep's QoS Sets; `finish` enters it again when they end, when the wait runs out, or
  // when a switch reports (StopWaiting). False: the finish goes on.
  bool HoldsFinish();
  // A switch reported: a finish that waits only for the reads stops waiting. True when one
  // did (the caller enters the finish again).
  bool StopWaiting();
  // Shutdown: no more reads are queued and the wait ends.
  void Stop();

  // The SL2VL and VLArb tables by node GUID, as read or written.
  const std::shared_ptr<const QosMap>& tables() const { return tables_; }
  bool reads_running() const { return reader_.running(); }

 private:
  bool WaitsForReads();
  void Program(std::function<void()> then);

  const SubnetManagerOptions& options_;
  SmCounters& counters_;
  SweepContext& sweep_;
  Hooks hooks_;
  QosReader reader_;
  QosProgrammer programmer_;
  QosSupportMap support_;            // devices found without one of those tables
  std::shared_ptr<const QosMap> tables_ = std::make_shared<QosMap>();  // by node GUID
  bool rerun_ = false;               // a sweep found new nodes while reads were in flight
  bool finish_waits_ = false;        // the sweep's finish waits for the reads
  // qos FALSE: the finish waits for the reads at most options_.optional_reads_wait;
  // `wait_over_` is set when that wait ran out, until the sweep has ended.
  boost::asio::steady_timer wait_timer_;
  bool wait_over_ = false;
  bool program_owed_ = false;  // qos TRUE: a sweep ended before its reads were in
  bool programmed_ = false;    // this sweep's QoS Sets are done
  std::unordered_set<Guid> set_failed_;  // devices whose failed Set was logged (once)
};

}  // namespace ibsm::sm
