#include "routing/ar_engine.h"

#include <string>

#include "routing/ftree_engine.h"
#include "routing/updn_engine.h"

namespace ibsm::routing {
namespace {

class ArEngine : public RoutingEngine {
 public:
  ArEngine(std::string_view name, std::unique_ptr<RoutingEngine> base)
      : name_(name), base_(std::move(base)) {}
  std::string_view name() const override { return name_; }
  Result<RoutingTables> Route(const Fabric& fabric, const LidMap& lids,
                              const RoutingOptions& options) const override {
    return base_->Route(fabric, lids, options);
  }

 private:
  std::string_view name_;
  std::unique_ptr<RoutingEngine> base_;
};

}  // namespace

std::unique_ptr<RoutingEngine> MakeArUpDn() {
  return std::make_unique<ArEngine>("ar_updn", MakeUpDn());
}
std::unique_ptr<RoutingEngine> MakeArFTree() {
  return std::make_unique<ArEngine>("ar_ftree", MakeFTree());
}

bool IsArEngine(std::string_view name) { return name == "ar_updn" || name == "ar_ftree"; }

}  // namespace ibsm::routing
