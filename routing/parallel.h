// The one way routing code runs work on several threads. Routing, verification and the
// quality figures are pure functions of their inputs; these helpers keep them so: the
// result never depends on the thread count or the schedule.
//
// If the system refuses a thread (EAGAIN under a TasksMax or RLIMIT_NPROC limit), the work of
// the workers that could not start runs on the calling thread instead: slower, never wrong,
// and never std::terminate.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

namespace ibsm::routing {

// How many workers share `items` pieces of work with `threads` asked for: at least 1, at
// most one per item.
inline size_t WorkerCount(unsigned threads, size_t items) {
  return std::clamp<size_t>(threads == 0 ? 1 : threads, 1, std::max<size_t>(items, 1));
}

// Runs fn(w) once for every worker w in [0, WorkerCount(threads, items)); the calling thread
// is worker 0. The caller divides the work by w.
template <typename Fn>
void RunWorkers(unsigned threads, size_t items, Fn&& fn) {
  const size_t n = WorkerCount(threads, items);
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  size_t started = 1;
  for (; started < n; ++started) {
    try {
      pool.emplace_back([&fn, w = started] { fn(w); });
    } catch (const std::system_error&) {
      break;
    }
  }
  fn(size_t{0});
  for (size_t w = started; w < n; ++w) fn(w);
  for (auto& t : pool) t.join();
}

// Runs fn(state, i) for every i in [0, n), items claimed one at a time by the workers, each
// worker with its own state from make_state().
template <typename MakeState, typename Fn>
void ParallelFor(size_t n, unsigned threads, MakeState make_state, Fn fn) {
  std::atomic<size_t> next{0};
  RunWorkers(threads, n, [&](size_t) {
    auto state = make_state();
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(state, i);
  });
}

// ParallelFor without per-worker state.
template <typename Fn>
void ParallelFor(size_t n, unsigned threads, Fn fn) {
  std::atomic<size_t> next{0};
  RunWorkers(threads, n, [&](size_t) {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
  });
}

}  // namespace ibsm::routing
