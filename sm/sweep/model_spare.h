// A copy of the last sweep's model, made on a thread of its own while the SM is idle, for
// the next repair to patch (ARCHITECTURE.md "Repair sweep"). A repair changes a copy of the
// model, never the published one (the SA answers from it); copying it then cost each repair
// about 50 ms on the io thread at 3-tier k=48. As RouteWorker::KeepSpare does for the tables.
//
// Threading: Keep and Take on the io thread; the copy on the spare's own thread. The model
// is immutable while shared (SubnetManager::MutableDiscovered copies it first), and Keep's
// job holds it while it copies; `version` tells a model changed in place later apart.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "sm/model/discovery.h"

namespace ibsm::sm {

class ModelSpare {
 public:
  ModelSpare() = default;
  ModelSpare(const ModelSpare&) = delete;
  ModelSpare& operator=(const ModelSpare&) = delete;
  ~ModelSpare() { pool_.join(); }

  // Copies `model` (at `version`, never 0) on the spare's thread; an earlier copy is dropped.
  // Asked again for the model it copies (or has copied) at the same version: nothing to do,
  // so a sweep may ask as soon as its model is final and again when it publishes it.
  void Keep(std::shared_ptr<const DiscoveryResult> model, uint64_t version);
  // The copy of `model` at `version` when one is ready (counted in taken()), else a copy
  // made now. Either way the spare is empty after.
  DiscoveryResult Take(const std::shared_ptr<const DiscoveryResult>& model, uint64_t version);
  // While the copy of `model` at `version` is still being made: true, and `then` is posted to
  // `io` once that copy is ready (or dropped), so that the repair takes it then instead of
  // copying the model a second time beside it (right after SUBNET UP, both copies ran at once
  // on two cores, beside the tables' spare). False when there is nothing to wait for: take now.
  bool WhenReady(const std::shared_ptr<const DiscoveryResult>& model, uint64_t version,
                 boost::asio::io_context& io, std::function<void()> then);
  uint64_t taken() const { return taken_; }
  // Copies made so far (tests).
  uint64_t copies();
  // The copy Keep last asked for is ready (tests wait for it).
  bool ready();

 private:
  boost::asio::thread_pool pool_{1};
  std::mutex mu_;  // guards the six below: the copy's thread fills them, Take empties them
  std::unique_ptr<DiscoveryResult> copy_;
  std::weak_ptr<const DiscoveryResult> copy_of_;
  uint64_t copy_version_ = 0;
  uint64_t latest_ = 0;  // the version Keep last asked for (0: none); a copy of another is dropped
  std::weak_ptr<const DiscoveryResult> latest_of_;  // and the model it asked for
  uint64_t copies_ = 0;
  uint64_t taken_ = 0;   // io thread
  // WhenReady's: posted to waiter_io_ when the copy at waiter_version_ ends (made or dropped),
  // or when Keep asks for another.
  std::function<void()> waiter_;
  boost::asio::io_context* waiter_io_ = nullptr;
  uint64_t waiter_version_ = 0;
  void WakeLocked();
};

}  // namespace ibsm::sm
