#include "sm/sweep/qos_stage.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/log.h"

namespace ibsm::sm {

void QosStage::StartReads() {
  const std::shared_ptr<const DiscoveryResult> model = hooks_.model();
  if (!model || hooks_.stopped()) return;
  const bool repair = sweep_.stats.repair;
  // Reads still running from an earlier sweep go on by the repaired model's paths.
  if (repair && reader_.running()) reader_.Reroute(model->fabric, model->nodes);
  // A local repair adds no node, and one that took none out leaves nothing to read or
  // forget.
  if (repair && !sweep_.touched.empty() && sweep_.stats.repair_nodes_lost == 0) return;
  if (reader_.running()) {
    rerun_ = true;  // this sweep's new nodes once the reads in flight end
    return;
  }
  const Fabric& f = model->fabric;
  // A device that left is read afresh, and probed again, when it comes back; so is a switch
  // that answers a LinearFDBTop not the one the SM set (it rebooted, and its SL2VL and VLArb
  // tables are its power-on ones again). Only switches the SM has programmed are compared.
  std::unordered_set<Guid> present;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    const std::optional<uint16_t> ours = hooks_.lft_top(node.guid);
    if (node.is_switch() && ours && *ours != model->nodes[n].switch_info.linear_fdb_top)
      continue;
    present.insert(node.guid);
  }
  std::erase_if(support_, [&](const auto& e) { return !present.count(e.first); });
  if (std::any_of(tables_->begin(), tables_->end(),
                  [&](const auto& e) { return !present.count(e.first); })) {
    auto kept = std::make_shared<QosMap>(*tables_);
    std::erase_if(*kept, [&](const auto& e) { return !present.count(e.first); });
    tables_ = std::move(kept);
  }
  rerun_ = false;
  reader_.Run(f, model->nodes, *tables_, &support_, [this](QosMap fresh, QosReadStats stats) {
    if (hooks_.stopped()) return;
    if (!fresh.empty()) {
      auto merged = std::make_shared<QosMap>(*tables_);
      for (auto& [guid, q] : fresh) (*merged)[guid] = std::move(q);
      tables_ = std::move(merged);
      Log(LogName::kSm).info("read SL2VL and VLArb tables of {} new nodes: {} SMPs, {} "
                             "without an answer, {} device tables absent ({} reads not sent)",
                             stats.nodes, stats.smps, stats.failed, stats.probes_failed,
                             stats.skipped);
    }
    if (rerun_) {
      StartReads();
      return;
    }
    if (finish_waits_) {
      finish_waits_ = false;
      hooks_.finish();
      return;
    }
    if (!fresh.empty() && !hooks_.sweeping()) hooks_.republish();
    // A sweep that ended before the reads owes their QoS Sets; a sweep running now writes
    // them at its end instead.
    if (program_owed_ && !hooks_.sweeping() && hooks_.has_tables() && hooks_.master()) {
      program_owed_ = false;
      Program([] {});
    }
  });
}

bool QosStage::HoldsFinish() {
  if (WaitsForReads()) return true;
  const bool reads_running = reader_.running() && !hooks_.stopped();
  if (reads_running && !sweep_.stats.repair && hooks_.master() && hooks_.repair_pending() > 0) {
    ++counters_.qos_waits_cut_short;
    Log(LogName::kSm).info("heavy sweep {}: {} switches reported changes; it ends without "
                           "waiting for the SL2VL and VLArb reads, which go on beside the "
                           "repair",
                           sweep_.stats.number, hooks_.repair_pending());
  }
  // With qos TRUE the tables are written once the reads are in (by difference with them);
  // when they are not in yet, once they are (StartReads).
  if (options_.qos && !programmed_ && reads_running) program_owed_ = true;
  if (options_.qos && !programmed_ && !reads_running && !hooks_.stopped() && hooks_.master() &&
      hooks_.model() && hooks_.has_tables()) {
    program_owed_ = false;
    programmed_ = true;
    hooks_.open_stage("QoS Sets");
    Program([this] {
      if (!hooks_.stopped()) hooks_.finish();
    });
    return true;
  }
  programmed_ = false;
  return false;
}

// SUBNET UP means the SA answers everything, the SL2VL and VLArb records included: their
// reads, running beside the sweep since the election, end first. With qos TRUE the QoS Sets
// are made from them, and the finish waits for them whole. With qos FALSE they are optional:
// the SA serves this sweep's fabric at once, and the finish waits for the reads at most
// options_.optional_reads_wait (250 ms); past that SUBNET UP is logged and the records reach
// the SA when the reads end (a switch answers one SL2VL table per port pair: 1.49 million
// reads at 3-tier k=32). Not when a switch reported a change meanwhile: the fabric is
// programmed, and its repair does not wait behind optional reads. A repair sweep never waits
// for them.
bool QosStage::WaitsForReads() {
  const bool reads_running = reader_.running() && !hooks_.stopped();
  if (reads_running && hooks_.master() && !sweep_.stats.repair && hooks_.repair_pending() == 0 &&
      !wait_over_) {
    finish_waits_ = true;
    hooks_.open_stage("waiting for SL2VL and VLArb reads");
    if (!options_.qos) {
      hooks_.publish();
      const std::chrono::steady_clock::duration waited_for = options_.optional_reads_wait;
      wait_timer_.expires_after(waited_for);
      wait_timer_.async_wait([this, sweep = sweep_.stats.number,
                              waited_for](boost::system::error_code ec) {
        if (ec || hooks_.stopped() || !finish_waits_ || sweep_.stats.number != sweep) return;
        finish_waits_ = false;
        wait_over_ = true;
        ++counters_.qos_waits_timed_out;
        Log(LogName::kSm).info(
            "heavy sweep {}: the SL2VL and VLArb reads are still running after {:.2f} s; the "
            "sweep ends without them, and their records reach the SA when they are in",
            sweep, std::chrono::duration<double>(waited_for).count());
        hooks_.finish();
      });
    }
    return true;
  }
  wait_timer_.cancel();
  wait_over_ = false;
  return false;
}

bool QosStage::StopWaiting() {
  if (!finish_waits_) return false;
  finish_waits_ = false;
  return true;
}

void QosStage::Stop() {
  reader_.Cancel();
  wait_timer_.cancel();
}

void QosStage::Program(std::function<void()> then) {
  // The model the Sets were planned on: a repair may replace the SM's model (and renumber
  // its nodes) before they end.
  std::shared_ptr<const DiscoveryResult> planned = hooks_.model();
  const Fabric& f = planned->fabric;
  std::vector<QosTableSet> sets =
      PlanQosSets(f, planned->nodes, *tables_, support_, options_.qos_levels);
  if (sets.empty()) {
    then();
    return;
  }
  programmer_.Run(f, planned->nodes, *tables_, std::move(sets),
                  [this, planned, then = std::move(then)](QosProgrammer::Outcome out) {
    if (hooks_.stopped()) return;
    auto merged = std::make_shared<QosMap>(*tables_);
    for (auto& [guid, q] : out.written) (*merged)[guid] = std::move(q);
    tables_ = std::move(merged);
    for (const auto& [node, text] : out.failures) {
      const Guid g = planned->fabric.node(node).guid;
      if (!options_.suppress_sl2vl_mad_status_errors) {
        hooks_.issue("SM-QOS-001", fmt::format("{}: {}", ToString(g), text));
      } else if (set_failed_.insert(g).second) {
        Log(LogName::kSm).warn("SM-QOS-001 {}: {} (suppress_sl2vl_mad_status_errors: the "
                               "sweep goes on)", ToString(g), text);
      }
    }
    Log(LogName::kSm).info("QoS: {} SL2VL and VLArb Sets, {} failed", out.stats.sets,
                           out.stats.failed);
    sweep_.stats.qos_sets += out.stats.sets;
    sweep_.stats.qos_sets_failed += out.stats.failed;
    then();
  });
}

}  // namespace ibsm::sm
