#include "sm/sweep/link_damping.h"

#include <algorithm>

namespace ibsm::sm {

bool LinkDamper::NoteDown(End a, End b, TimePoint now) {
  if (options_.threshold == 0) return false;
  const bool was = Damped(a, b);
  bool damp = false;
  for (const End& e : {a, b}) {
    if (auto d = damped_.find(e); d != damped_.end()) {
      d->second.up = false;
      Restart(e, now);  // still flapping: the hold starts again
      continue;
    }
    auto& q = downs_[e];
    peer_[e] = e == a ? b : a;
    q.push_back(now);
    while (!q.empty() && now - q.front() > options_.window) q.pop_front();
    if (q.size() >= options_.threshold) damp = true;
  }
  if (damp && !was) {
    damped_[a] = DampedEnd{now, false, b};
    damped_[b] = DampedEnd{now, false, a};
    for (const End& e : {a, b}) {
      downs_.erase(e);
      peer_.erase(e);
    }
    ++damped_total_;
    return true;
  }
  return false;
}

std::vector<std::pair<LinkDamper::End, LinkDamper::End>> LinkDamper::RecentCables(Guid g) const {
  std::vector<std::pair<End, End>> out;
  for (auto it = downs_.lower_bound(End{g, 0}); it != downs_.end() && it->first.first == g; ++it) {
    auto p = peer_.find(it->first);
    if (!it->second.empty() && p != peer_.end()) out.emplace_back(it->first, p->second);
  }
  return out;
}

void LinkDamper::NoteState(End e, bool up, TimePoint now) {
  auto d = damped_.find(e);
  if (d == damped_.end()) return;
  const bool changed = d->second.up != up;
  d->second.up = up;
  if (changed) Restart(e, now);
}

void LinkDamper::Restart(End e, TimePoint now) {
  auto d = damped_.find(e);
  if (d == damped_.end()) return;
  d->second.last = now;
  if (auto p = damped_.find(d->second.peer); p != damped_.end()) p->second.last = now;
}

void LinkDamper::Touch(Guid g, TimePoint now) {
  std::vector<End> ends;
  for (auto it = damped_.lower_bound(End{g, 0}); it != damped_.end() && it->first.first == g; ++it)
    ends.push_back(it->first);
  for (const End& e : ends) Restart(e, now);
}

std::vector<LinkDamper::End> LinkDamper::Release(TimePoint now) {
  std::vector<End> out;
  for (auto it = damped_.begin(); it != damped_.end();) {
    if (now - it->second.last >= options_.hold) {
      out.push_back(it->first);
      it = damped_.erase(it);
    } else {
      ++it;
    }
  }
  // Ends without a down inside the window have nothing left to count.
  for (auto it = downs_.begin(); it != downs_.end();) {
    auto& q = it->second;
    while (!q.empty() && now - q.front() > options_.window) q.pop_front();
    if (q.empty()) {
      peer_.erase(it->first);
      it = downs_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<LinkDamper::TimePoint> LinkDamper::NextRelease() const {
  std::optional<TimePoint> next;
  for (const auto& [end, d] : damped_) {
    const TimePoint t = d.last + options_.hold;
    if (!next || t < *next) next = t;
  }
  return next;
}

}  // namespace ibsm::sm
