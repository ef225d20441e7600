// SubnetManager, the optional SL2VL and VLArb reads and the QoS Sets (qos TRUE): on their
// own pipeline beside the sweeps (sm/model/qos_tables.h, sm/sweep/qos_program.h; ARCHITECTURE.md
// section 2).
#include "sm/sweep/subnet_manager.h"

#include <unordered_set>

#include <fmt/format.h>

#include "base/log.h"

namespace ibsm::sm {

// The SL2VL and VLArb tables of nodes not read yet, on the optional reads' own pipeline
// (sm/model/qos_tables.h): started right after the election, beside the rest of the sweep.
void SubnetManager::StartQosReads() {
  if (!discovered_ || stopped_) return;
  // Reads still running from an earlier sweep go on by the repaired model's paths.
  if (current_.repair && qos_reader_.running())
    qos_reader_.Reroute(discovered_->fabric, discovered_->nodes);
  // A repair adds no node, and one that took none out leaves nothing to read or forget.
  if (RepairIsLocal() && current_.repair_nodes_lost == 0) return;
  if (qos_reader_.running()) {
    qos_rerun_ = true;  // this sweep's new nodes once the reads in flight end
    return;
  }
  const Fabric& f = discovered_->fabric;
  // A device that left is read afresh, and probed again, when it comes back; so is a switch
  // that answers a LinearFDBTop not the one the SM set (it rebooted, and its SL2VL and VLArb
  // tables are its power-on ones again). Only switches the SM has programmed are compared.
  std::unordered_set<Guid> present;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    const std::optional<uint16_t> ours = lfts_.top(node.guid);
    if (node.is_switch() && ours && *ours != discovered_->nodes[n].switch_info.linear_fdb_top)
      continue;
    present.insert(node.guid);
  }
  std::erase_if(qos_support_, [&](const auto& e) { return !present.count(e.first); });
  if (std::any_of(qos_->begin(), qos_->end(), [&](const auto& e) { return !present.count(e.first); })) {
    auto kept = std::make_shared<QosMap>(*qos_);
    std::erase_if(*kept, [&](const auto& e) { return !present.count(e.first); });
    qos_ = std::move(kept);
  }
  qos_rerun_ = false;
  qos_reader_.Run(f, discovered_->nodes, *qos_, &qos_support_,
                  [this](QosMap fresh, QosReadStats stats) {
                    if (stopped_) return;
                    if (!fresh.empty()) {
                      auto merged = std::make_shared<QosMap>(*qos_);
                      for (auto& [guid, q] : fresh) (*merged)[guid] = std::move(q);
                      qos_ = std::move(merged);
                      Log(LogName::kSm)
                          .info("read SL2VL and VLArb tables of {} new nodes: {} SMPs, {} "
                                "without an answer, {} device tables absent ({} reads not sent)",
                                stats.nodes, stats.smps, stats.failed, stats.probes_failed,
                                stats.skipped);
                    }
                    if (qos_rerun_) {
                      StartQosReads();
                      return;
                    }
                    if (finish_waits_for_qos_) {
                      finish_waits_for_qos_ = false;
                      FinishHeavySweep();
                      return;
                    }
                    if (!fresh.empty() && sa_.snapshot() && !sweeping_) PublishSaSnapshot();
                    // A sweep that ended before the reads owes their QoS Sets; a sweep
                    // running now writes them at its end instead.
                    if (qos_program_owed_ && !sweeping_ && tables_ &&
                        state() == mad::SmState::kMaster) {
                      qos_program_owed_ = false;
                      ProgramQos([] {});
                    }
                  });
}

// The end of a heavy sweep (FinishHeavySweep): true when it must wait for the optional reads
// first; it is entered again when they end, when its wait runs out, or when a switch reports.
bool SubnetManager::WaitsForQosReads() {
  // SUBNET UP means the SA answers everything, the SL2VL and VLArb records included: their
  // reads, running beside the sweep since discovery, end first. With qos TRUE the QoS Sets
  // are made from them, and the end waits for them whole. With qos FALSE they are optional:
  // the SA serves this sweep's fabric at once, and the end waits for the reads at most
  // options_.optional_reads_wait (250 ms); past that SUBNET UP is logged and the records reach the SA when the
  // reads end (a switch answers one SL2VL table per port pair: 1.49 million reads at 3-tier
  // k=32). Not when a switch reported a change meanwhile:
  // the fabric is programmed, and its repair does not wait behind optional reads. A repair
  // sweep never waits for them.
  const bool reads_running = qos_reader_.running() && !stopped_;
  if (reads_running && state() == mad::SmState::kMaster && !current_.repair &&
      repair_pending_.empty() && !qos_wait_over_) {
    finish_waits_for_qos_ = true;
    engine_.OpenStage("waiting for SL2VL and VLArb reads");
    if (!options_.qos) {
      if (discovered_ && sm_port_ != kNoPort) PublishSaSnapshot();
      const std::chrono::steady_clock::duration waited_for = options_.optional_reads_wait;
      qos_wait_timer_.expires_after(waited_for);
      qos_wait_timer_.async_wait([this, sweep = current_.number,
                                  waited_for](boost::system::error_code ec) {
        if (ec || stopped_ || !finish_waits_for_qos_ || current_.number != sweep) return;
        finish_waits_for_qos_ = false;
        qos_wait_over_ = true;
        ++counters_.qos_waits_timed_out;
        Log(LogName::kSm).info(
            "heavy sweep {}: the SL2VL and VLArb reads are still running after {:.2f} s; the "
            "sweep ends without them, and their records reach the SA when they are in",
            sweep, std::chrono::duration<double>(waited_for).count());
        FinishHeavySweep();
      });
    }
    return true;
  }
  qos_wait_timer_.cancel();
  qos_wait_over_ = false;
  return false;
}

void SubnetManager::ProgramQos(std::function<void()> then) {
  // The model the Sets were planned on: a repair may replace discovered_ (and renumber its
  // nodes) before they end.
  std::shared_ptr<const DiscoveryResult> planned = discovered_;
  const Fabric& f = planned->fabric;
  std::vector<QosTableSet> sets =
      PlanQosSets(f, discovered_->nodes, *qos_, qos_support_, options_.qos_levels);
  if (sets.empty()) {
    then();
    return;
  }
  qos_programmer_.Run(f, planned->nodes, *qos_, std::move(sets),
                      [this, planned, then = std::move(then)](QosProgrammer::Outcome out) {
    if (stopped_) return;
    auto merged = std::make_shared<QosMap>(*qos_);
    for (auto& [guid, q] : out.written) (*merged)[guid] = std::move(q);
    qos_ = std::move(merged);
    for (const auto& [node, text] : out.failures) {
      const Guid g = planned->fabric.node(node).guid;
      if (!options_.suppress_sl2vl_mad_status_errors) {
        Issue("SM-QOS-001", fmt::format("{}: {}", ToString(g), text));
      } else if (qos_set_failed_.insert(g).second) {
        Log(LogName::kSm).warn("SM-QOS-001 {}: {} (suppress_sl2vl_mad_status_errors: the "
                               "sweep goes on)", ToString(g), text);
      }
    }
    Log(LogName::kSm).info("QoS: {} SL2VL and VLArb Sets, {} failed", out.stats.sets,
                           out.stats.failed);
    current_.qos_sets += out.stats.sets;
    current_.qos_sets_failed += out.stats.failed;
    then();
  });
}

}  // namespace ibsm::sm
