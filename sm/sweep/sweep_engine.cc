#include "sm/sweep/sweep_engine.h"

#include <cassert>

#include <fmt/format.h>

namespace ibsm::sm {

SweepEngine::SweepEngine(const Clock& clock, std::vector<Row> rows)
    : clock_(clock), rows_(std::move(rows)) {
  assert(rows_.size() >= 2);
  row0_name_ = rows_.front().name;
}

SweepContext& SweepEngine::Begin(uint64_t number, bool repair, std::string_view row0_name) {
  ctx_ = SweepContext{};
  ctx_.stats.number = number;
  ctx_.stats.heavy = true;
  ctx_.stats.repair = repair;
  ctx_.stats.started = clock_.Now();
  mark_ = ctx_.stats.started;
  row_ = 0;
  row0_name_ = row0_name.empty() ? rows_.front().name : row0_name;
  open_name_ = {};
  return ctx_;
}

void SweepEngine::JumpTo(size_t next) {
  assert(next > row_ && next < rows_.size());
  const std::string_view ending = row_ == 0 ? row0_name_ : rows_[row_].name;
  row_ = next;
  if (next == finish_row()) {
    open_name_ = ending;  // the finish closes it, and each of its own parts
  } else {
    EndStage(ending);
  }
  rows_[next].run();
}

void SweepEngine::EndStage(std::string_view name) {
  const auto now = clock_.Now();
  ctx_.stats.stages.emplace_back(
      std::string(name), std::chrono::duration_cast<std::chrono::microseconds>(now - mark_));
  mark_ = now;
}

std::string SweepEngine::Summary() const {
  std::string out;
  for (const auto& [name, took] : ctx_.stats.stages)
    out += fmt::format("{}{} {:.1f} ms", out.empty() ? "" : ", ", name, took.count() / 1e3);
  return out;
}

void AddHandedOver(SweepStats& into, const SweepStats& from) {
  into.in_place_of_heavy = into.in_place_of_heavy || from.in_place_of_heavy;
  for (auto [to, add] : {
           std::pair{&SweepStats::repair_links_lost, &from.repair_links_lost},
           std::pair{&SweepStats::repair_nodes_lost, &from.repair_nodes_lost},
           std::pair{&SweepStats::repair_links_up, &from.repair_links_up},
           std::pair{&SweepStats::repair_nodes_joined, &from.repair_nodes_joined},
       })
    into.*to += *add;
  into.lid_changes += from.lid_changes;
  for (auto [to, add] : {
           std::pair{&SweepStats::smps, &from.smps},
           std::pair{&SweepStats::smps_failed, &from.smps_failed},
           std::pair{&SweepStats::portinfo_sets, &from.portinfo_sets},
           std::pair{&SweepStats::client_reregisters, &from.client_reregisters},
           std::pair{&SweepStats::lft_blocks_sent, &from.lft_blocks_sent},
           std::pair{&SweepStats::lft_blocks_urgent, &from.lft_blocks_urgent},
           std::pair{&SweepStats::lft_blocks_read, &from.lft_blocks_read},
           std::pair{&SweepStats::switchinfo_sets, &from.switchinfo_sets},
           std::pair{&SweepStats::pkey_blocks_sent, &from.pkey_blocks_sent},
           std::pair{&SweepStats::pkey_blocks_read, &from.pkey_blocks_read},
           std::pair{&SweepStats::enforcement_sets, &from.enforcement_sets},
           std::pair{&SweepStats::qos_sets, &from.qos_sets},
           std::pair{&SweepStats::qos_sets_failed, &from.qos_sets_failed},
           std::pair{&SweepStats::ports_armed, &from.ports_armed},
           std::pair{&SweepStats::ports_activated, &from.ports_activated},
           std::pair{&SweepStats::port_state_readbacks, &from.port_state_readbacks},
       })
    into.*to += *add;
  if (from.started < into.started) into.started = from.started;
  std::vector<std::pair<std::string, std::chrono::microseconds>> stages;
  stages.reserve(from.stages.size() + into.stages.size());
  for (const auto& [name, took] : from.stages)
    stages.emplace_back(fmt::format("sweep {} {}", from.number, name), took);
  stages.insert(stages.end(), into.stages.begin(), into.stages.end());
  into.stages = std::move(stages);
}

}  // namespace ibsm::sm
