#include "sm/sweep/model_spare.h"

#include <boost/asio/post.hpp>

namespace ibsm::sm {

// Copies are made and dropped on the spare's thread: freeing a model costs about what
// copying it does.
void ModelSpare::Keep(std::shared_ptr<const DiscoveryResult> model, uint64_t version) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (latest_ == version && latest_of_.lock() == model) return;  // made, or being made
    latest_ = version;
    latest_of_ = model;
    WakeLocked();
  }
  boost::asio::post(pool_, [this, model = std::move(model), version] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (latest_ != version || latest_of_.lock() != model) {  // asked for another meanwhile
        if (waiter_version_ == version) WakeLocked();
        return;
      }
    }
    auto copy = std::make_unique<DiscoveryResult>(*model);
    copy->fabric.Unshare();  // a repair changes it: its indexes copied here, not then
    std::unique_ptr<DiscoveryResult> old;
    std::lock_guard<std::mutex> lock(mu_);
    ++copies_;
    if (latest_ == version && latest_of_.lock() == model) {
      old = std::move(copy_);
      copy_ = std::move(copy);
      copy_of_ = model;
      copy_version_ = version;
    }
    if (waiter_version_ == version) WakeLocked();
  });
}

void ModelSpare::WakeLocked() {
  if (!waiter_) return;
  boost::asio::post(*waiter_io_, std::move(waiter_));
  waiter_ = nullptr;
  waiter_io_ = nullptr;
  waiter_version_ = 0;
}

bool ModelSpare::WhenReady(const std::shared_ptr<const DiscoveryResult>& model, uint64_t version,
                           boost::asio::io_context& io, std::function<void()> then) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool made = copy_ && copy_version_ == version && copy_of_.lock() == model;
  if (made || latest_ != version || latest_of_.lock() != model || version == 0) return false;
  WakeLocked();  // one waiter at a time: an earlier one takes what there is
  waiter_ = std::move(then);
  waiter_io_ = &io;
  waiter_version_ = version;
  return true;
}

uint64_t ModelSpare::copies() {
  std::lock_guard<std::mutex> lock(mu_);
  return copies_;
}

bool ModelSpare::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return copy_ != nullptr && copy_version_ == latest_ && copy_of_.lock() == latest_of_.lock();
}

DiscoveryResult ModelSpare::Take(const std::shared_ptr<const DiscoveryResult>& model,
                                 uint64_t version) {
  std::unique_ptr<DiscoveryResult> copy;
  bool mine = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine = copy_ && copy_version_ == version && copy_of_.lock() == model;
    copy = std::move(copy_);
    copy_of_.reset();
    latest_ = 0;  // a copy still being made is dropped
    latest_of_.reset();
  }
  if (mine) {
    ++taken_;
    return std::move(*copy);
  }
  if (copy) boost::asio::post(pool_, [stale = std::move(copy)] {});
  return *model;
}

}  // namespace ibsm::sm
