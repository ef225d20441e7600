#include "routing/minhop_engine.h"

#include "routing/lft_builder.h"

namespace ibsm::routing {
namespace {

// Candidates towards d: the links of s whose far end is one hop nearer to d.
class MinHopCandidates final : public CandidateSource {
 public:
  explicit MinHopCandidates(const HopTable& hops) : hops_(hops) {}

  void Candidates(SwitchIdx s, uint64_t* masks) const override {
    const size_t S = hops_.switch_count();
    const uint32_t words =
        CandidateMaskWords(static_cast<uint32_t>(hops_.links_end(s) - hops_.links_begin(s)));
    uint32_t i = 0;
    // Link-major, so each neighbour's row is read sequentially.
    for (const HopTable::Link* l = hops_.links_begin(s); l != hops_.links_end(s); ++l, ++i) {
      uint64_t* word = masks + i / 64;
      const uint64_t bit = uint64_t{1} << (i % 64);
      for (size_t d = 0; d < S; ++d) {
        const uint8_t own = hops_.hops(s, static_cast<SwitchIdx>(d));
        const uint8_t far = hops_.hops(l->remote, static_cast<SwitchIdx>(d));
        if (own != kUnreachableHops && own != 0 && far + 1 == own) word[d * words] |= bit;
      }
    }
  }

 private:
  const HopTable& hops_;
};

}  // namespace

RoutingTables RouteMinHop(const Fabric& fabric, const LidMap& lids, const HopTable& hops,
                          unsigned threads) {
  RoutingOptions options;
  options.threads = threads;
  return BuildLfts(fabric, lids, SwitchGraph::Build(fabric), MinHopCandidates(hops), options,
                   "minhop");
}

Result<RoutingTables> MinHopEngine::Route(const Fabric& fabric, const LidMap& lids,
                                          const RoutingOptions& options) const {
  const HopTable hops = HopTable::Build(fabric, options.threads);
  return BuildLfts(fabric, lids, SwitchGraph::Build(fabric), MinHopCandidates(hops), options,
                   "minhop");
}

std::unique_ptr<RoutingEngine> MakeMinHop() { return std::make_unique<MinHopEngine>(); }

}  // namespace ibsm::routing
