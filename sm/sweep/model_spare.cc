#include "sm/sweep/model_spare.h"

#include <boost/asio/post.hpp>

namespace ibsm::sm {

// Copies are made and dropped on the spare's thread: freeing a model costs about what
// copying it does.
void ModelSpare::Keep(std::shared_ptr<const DiscoveryResult> model, uint64_t version) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = version;
  }
  boost::asio::post(pool_, [this, model = std::move(model), version] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (latest_ != version) return;  // asked for a later one meanwhile
    }
    auto copy = std::make_unique<DiscoveryResult>(*model);
    std::unique_ptr<DiscoveryResult> old;
    std::lock_guard<std::mutex> lock(mu_);
    if (latest_ != version) return;
    old = std::move(copy_);
    copy_ = std::move(copy);
    copy_of_ = model;
    copy_version_ = version;
  });
}

bool ModelSpare::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return copy_ != nullptr && copy_version_ == latest_;
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
  }
  if (mine) {
    ++taken_;
    return std::move(*copy);
  }
  if (copy) boost::asio::post(pool_, [stale = std::move(copy)] {});
  return *model;
}

}  // namespace ibsm::sm
