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

}  // namespace ibsm::sm
