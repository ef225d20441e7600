// The channel dependency graph of a routing (Dally and Seitz): the one structure both
// credit-loop checks build, CheckCreditLoops (routing/quality.h) over static tables and
// VerifyArTables (routing/ar_groups.h) over every port an adaptive-routing group may choose.
//
// A channel is a switch's egress port: switch s (an index 0..S-1 the caller chose), port p,
// numbered base(s) + p. A dependency from channel (a, pa) to port q of the switch b at the far
// end of pa says that some route leaves a by pa and then b by q; it is kept as bit q of
// channel (a, pa)'s PortSet (ports are at most 255). The routing is free of credit loops when
// the graph has no cycle. Each check fills the graph its own way; this holds it and finds a
// cycle.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

namespace ibsm::routing {

class ChannelGraph {
 public:
  // Out-ports of the next switch that follow one channel.
  using PortSet = std::array<uint64_t, 4>;
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  // `ports[s]`: how many ports switch s has (its channels are ports 0..ports[s]).
  explicit ChannelGraph(const std::vector<uint32_t>& ports) : base_(ports.size() + 1, 0) {
    for (size_t s = 0; s < ports.size(); ++s) base_[s + 1] = base_[s] + ports[s] + 1u;
    switch_of_.resize(base_.back());
    for (uint32_t s = 0; s < ports.size(); ++s)
      std::fill(switch_of_.begin() + base_[s], switch_of_.begin() + base_[s + 1], s);
    deps_.assign(base_.back(), PortSet{});
  }

  size_t channels() const { return deps_.size(); }
  uint32_t channel(uint32_t s, uint32_t p) const { return base_[s] + p; }
  uint32_t switch_of(uint32_t c) const { return switch_of_[c]; }
  uint32_t port_of(uint32_t c) const { return c - base_[switch_of_[c]]; }

  PortSet& deps(uint32_t c) { return deps_[c]; }
  const PortSet& deps(uint32_t c) const { return deps_[c]; }
  // Adds the dependency (channel c) -> port q of the next switch; false when it was there.
  bool Add(uint32_t c, uint32_t q) {
    uint64_t& w = deps_[c][q >> 6];
    const uint64_t bit = uint64_t{1} << (q & 63);
    if (w & bit) return false;
    w |= bit;
    return true;
  }
  uint64_t dependencies() const {
    uint64_t n = 0;
    for (const PortSet& d : deps_)
      for (uint64_t w : d) n += static_cast<uint64_t>(std::popcount(w));
    return n;
  }

  // The channels of the first cycle an iterative depth-first search meets (roots, then
  // ports, in ascending order), in dependency order; empty when there is none.
  // `next_switch(c)`: the switch at the far end of channel c, or kNone.
  template <typename NextSwitch>
  std::vector<uint32_t> FindCycle(NextSwitch next_switch) const {
    struct Frame {
      uint32_t chan;
      uint32_t next_bit;
    };
    const size_t C = deps_.size();
    std::vector<uint8_t> color(C, 0);  // 0 unvisited, 1 on the stack, 2 done
    std::vector<Frame> stack;
    for (uint32_t root = 0; root < C; ++root) {
      if (color[root] != 0) continue;
      color[root] = 1;
      stack.push_back({root, 0});
      while (!stack.empty()) {
        Frame& f = stack.back();
        const PortSet& d = deps_[f.chan];
        uint32_t bit = f.next_bit;
        bool found = false;
        while (bit < 256) {
          const uint64_t m = d[bit >> 6] & (~uint64_t{0} << (bit & 63));
          if (m) {
            bit = (bit & ~63u) + static_cast<uint32_t>(std::countr_zero(m));
            found = true;
            break;
          }
          bit = (bit & ~63u) + 64;
        }
        if (!found) {
          color[f.chan] = 2;
          stack.pop_back();
          continue;
        }
        f.next_bit = bit + 1;
        const uint32_t b = next_switch(f.chan);
        if (b == kNone) continue;
        const uint32_t w = base_[b] + bit;
        if (color[w] == 0) {
          color[w] = 1;
          stack.push_back({w, 0});
        } else if (color[w] == 1) {
          std::vector<uint32_t> cycle;
          auto it = std::find_if(stack.begin(), stack.end(),
                                 [w](const Frame& fr) { return fr.chan == w; });
          for (; it != stack.end(); ++it) cycle.push_back(it->chan);
          return cycle;
        }
      }
    }
    return {};
  }

 private:
  std::vector<uint32_t> base_;       // per switch: the channel of its port 0; size S + 1
  std::vector<uint32_t> switch_of_;  // channel -> switch
  std::vector<PortSet> deps_;        // by channel
};

}  // namespace ibsm::routing
