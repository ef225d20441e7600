#include "sm/vendor/sharp_view.h"

#include <fmt/format.h>

namespace ibsm::sm {
namespace {
std::string G(Guid g) { return fmt::format("0x{:016x}", g.value()); }
nlohmann::json Guids(const std::vector<Guid>& gs) {
  nlohmann::json a = nlohmann::json::array();
  for (Guid g : gs) a.push_back(G(g));
  return a;
}
}  // namespace

nlohmann::json SharpTreesJson(const SharpSummary& s) {
  nlohmann::json trees = nlohmann::json::array();
  for (const SharpTreeSummary& t : s.trees) {
    trees.push_back({{"id", t.id},
                     {"root", G(t.root_switch)},
                     {"root_name", t.root_name},
                     {"root_an", G(t.root_an)},
                     {"depth", t.depth},
                     {"hosts", t.hosts},
                     {"switches", t.switches},
                     {"programmed", t.programmed},
                     {"missing_hosts", Guids(t.missing_hosts)}});
  }
  return {{"enabled", s.ran},
          {"aggregation_nodes", s.ans},
          {"enabled_nodes", s.ans_enabled},
          {"usable_nodes", s.ans_usable},
          {"switch_tiers", s.switch_tiers},
          {"hosts", s.hosts},
          {"trees", std::move(trees)},
          {"uncovered", Guids(s.uncovered)},
          {"never_covered", Guids(s.never_covered)},
          {"notes", s.notes}};
}

}  // namespace ibsm::sm
