#include "sm/model/smp_pipeline.h"

#include <fmt/format.h>

namespace ibsm::sm {

std::string PathString(const DrPath& p) {
  std::string s = "0";
  for (uint8_t x : p) s += fmt::format(",{}", x);
  return s;
}

SmpPipeline::SmpPipeline(mad::Transport& transport, size_t max_in_flight,
                         mad::SendOptions send, uint64_t m_key)
    : transport_(transport),
      max_in_flight_(max_in_flight ? max_in_flight : 1),
      send_(send),
      m_key_(m_key) {}

void SmpPipeline::Get(const DrPath& path, uint16_t attr_id, uint32_t attr_mod, Callback cb,
                      const void* group, bool abandonable) {
  ++counters_.gets;
  Enqueue(mad::MakeDrSmp(mad::method::kGet, attr_id, attr_mod, path, m_key_), std::move(cb),
          group, abandonable && group != nullptr);
}

void SmpPipeline::Set(const DrPath& path, uint16_t attr_id, uint32_t attr_mod,
                      std::span<const uint8_t> data, Callback cb, const void* group,
                      bool abandonable) {
  if (fenced_ && attr_id != mad::attr::kSmInfo) {
    ++counters_.fenced;
    if (cb) cb(FailedPrecondition("fenced: this SM is not master"));
    return;
  }
  ++counters_.sets;
  mad::Smp smp = mad::MakeDrSmp(mad::method::kSet, attr_id, attr_mod, path, m_key_);
  std::copy_n(data.begin(), std::min(data.size(), smp.data.size()), smp.data.begin());
  Enqueue(std::move(smp), std::move(cb), group, abandonable && group != nullptr);
}

void SmpPipeline::Enqueue(mad::Smp smp, Callback cb, const void* group, bool abandonable) {
  queue_.push_back({std::move(smp), std::move(cb), 0, group, abandonable, nullptr});
  Pump();
}

void SmpPipeline::Feed(std::function<bool()> next) {
  feeder_ = std::move(next);
  Pump();
  CheckIdle();
}

void SmpPipeline::set_held(bool held) {
  if (held_ == held) return;
  held_ = held;
  if (!held_) Pump();
}

void SmpPipeline::Pump() {
  if (pumping_) return;  // a feeder queuing requests re-enters here; the outer loop sends
  if (held_) return;     // set_held(false) pumps again
  pumping_ = true;
  while (in_flight_ < max_in_flight_) {
    if (queue_.empty()) {
      if (!feeder_) break;
      if (!feeder_()) feeder_ = nullptr;
      if (queue_.empty()) {
        if (!feeder_) break;
        continue;
      }
    }
    Request req = std::move(queue_.front());
    queue_.pop_front();
    ++in_flight_;
    if (req.abandonable) {
      auto& flight = flights_[req.group];
      if (!flight) flight = std::make_shared<GroupInFlight>();
      ++flight->count;
      req.flight = flight;
    }
    Send(std::move(req));
  }
  pumping_ = false;
}

// One request on the wire. A request that got no answer after every transport retry goes
// round once more (rounds_, a fresh TID and attempts) before it fails: on a lossy link the
// transport's attempts can all be lost, and one failed SMP fails the sweep.
void SmpPipeline::Send(Request req) {
  const uint16_t attr_id = req.smp.attr_id;
  mad::MadMessage msg = mad::ToMessage(req.smp);
  transport_.Send(
      std::move(msg), send_,
      [this, attr_id, req = std::move(req)](Result<mad::MadMessage> r) mutable {
        if (req.flight && req.flight->abandoned) return;  // Abandon let it go
        if (!r.ok() && r.status().code() == StatusCode::kTimeout && ++req.round < rounds_) {
          ++counters_.resent;
          Send(std::move(req));
          return;
        }
        --in_flight_;
        if (req.flight && --req.flight->count == 0) flights_.erase(req.group);
        Result<mad::Smp> out = [&]() -> Result<mad::Smp> {
          if (!r.ok()) return r.status();
          mad::Smp smp;
          IBSM_RETURN_IF_ERROR(mad::DecodeFrom(r->bytes, &smp));
          if (smp.attr_id != attr_id) {
            return Corrupt(fmt::format("response attribute {:#06x}, expected {:#06x}",
                                       smp.attr_id, attr_id));
          }
          if (smp.status != mad::mad_status::kOk) {
            return FailedPrecondition(fmt::format("MAD status {:#06x}", smp.status));
          }
          return smp;
        }();
        if (!out.ok()) ++counters_.failed;
        if (req.cb) req.cb(std::move(out));
        Pump();
        CheckIdle();
      });
}

size_t SmpPipeline::DropQueued(const void* group) {
  if (group == nullptr) return 0;
  std::vector<Callback> dropped;
  uint64_t sets = 0;
  std::erase_if(queue_, [&](Request& r) {
    if (r.group != group) return false;
    if (r.smp.method == mad::method::kSet) ++sets;
    dropped.push_back(std::move(r.cb));
    return true;
  });
  // Counted when queued; they never left.
  counters_.sets -= std::min<uint64_t>(counters_.sets, sets);
  counters_.gets -= std::min<uint64_t>(counters_.gets, dropped.size() - sets);
  for (auto& cb : dropped)
    if (cb) cb(Status(StatusCode::kUnavailable, "dropped before it was sent"));
  CheckIdle();
  return dropped.size();
}

size_t SmpPipeline::Abandon(const void* group) {
  if (group == nullptr) return 0;
  size_t in_flight = 0;
  if (auto it = flights_.find(group); it != flights_.end()) {
    it->second->abandoned = true;
    in_flight = it->second->count;
    in_flight_ -= std::min(in_flight_, in_flight);
    counters_.abandoned += in_flight;
    flights_.erase(it);
  }
  DropQueued(group);  // runs CheckIdle
  Pump();
  return in_flight;
}

void SmpPipeline::WhenIdle(std::function<void()> fn) {
  idle_fn_ = std::move(fn);
  CheckIdle();
}

void SmpPipeline::CheckIdle() {
  if (!idle() || !idle_fn_) return;
  auto fn = std::move(idle_fn_);
  idle_fn_ = nullptr;
  fn();
}

}  // namespace ibsm::sm
