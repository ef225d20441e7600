#include "sm/sweep/mft_programmer.h"

#include <algorithm>

#include "mad/attr/modifiers.h"
#include "mad/attr/multicast_forwarding_table.h"

namespace ibsm::sm {

size_t MftProgrammer::Push(
    const Fabric& f, const std::vector<DiscoveredNode>& nodes, const MftPlan& plan,
    std::function<void(Guid, uint32_t, uint32_t, const Status&)> on_error) {
  ++counters_.pushes;
  size_t queued = 0;
  const uint32_t top_block =
      plan.max_mlid >= mad::kMulticastLidBase
          ? (plan.max_mlid - mad::kMulticastLidBase) / mad::kMftBlockSize
          : 0;
  for (const auto& [n, want] : plan.switches) {
    if (n >= nodes.size() || n >= f.node_count()) continue;
    const Guid guid = f.node(n).guid;
    auto known = written_.find(guid);
    const bool fresh = known == written_.end();
    if (fresh && plan.max_mlid < mad::kMulticastLidBase) continue;  // nothing to clear up to
    // Blocks to look at: every block up to the highest in use (fresh switch), else those
    // the plan or the last write touches.
    std::map<uint32_t, Block> wanted;
    for (const auto& [mlid, masks] : want.masks) {
      uint32_t block = (mlid - mad::kMulticastLidBase) / mad::kMftBlockSize;
      for (uint32_t pos = 0; pos < masks.size(); ++pos)
        wanted[pos << 16 | block][(mlid - mad::kMulticastLidBase) % mad::kMftBlockSize] =
            masks[pos];
    }
    Written& held = written_[guid];
    std::vector<uint32_t> keys;
    if (fresh) {
      for (uint32_t pos = 0; pos < want.positions; ++pos)
        for (uint32_t b = 0; b <= top_block; ++b) keys.push_back(pos << 16 | b);
    } else {
      for (const auto& [k, blk] : wanted) keys.push_back(k);
      for (const auto& [k, blk] : held)
        if (!wanted.count(k)) keys.push_back(k);
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    }
    for (uint32_t k : keys) {
      Block blk{};
      if (auto w = wanted.find(k); w != wanted.end()) blk = w->second;
      auto h = held.find(k);
      if (h != held.end() && h->second && *h->second == blk) continue;
      if (!fresh && h == held.end() &&
          std::all_of(blk.begin(), blk.end(), [](uint16_t v) { return v == 0; }))
        continue;
      const uint32_t pos = k >> 16, block = k & 0xFFFF;
      mad::MulticastForwardingTable t;
      t.port_mask = blk;
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(t, data);
      ++counters_.blocks_sent;
      ++queued;
      // Until the answer comes, the block counts as unknown: a push meanwhile resends it.
      held[k] = std::nullopt;
      pipeline_.Set(nodes[n].path, mad::attr::kMulticastForwardingTable,
                    mad::MftAttrMod(pos, block), data,
                    [this, guid, k, pos, block, on_error](Result<mad::Smp> r) {
                      auto it = written_.find(guid);
                      if (!r.ok()) {
                        ++counters_.blocks_failed;
                        if (on_error) on_error(guid, pos, block, r.status());
                        return;
                      }
                      auto got = mad::Decode<mad::MulticastForwardingTable>(r->data);
                      if (it == written_.end() || !got.ok()) return;
                      it->second[k] = got->port_mask;
                    });
    }
  }
  return queued;
}

}  // namespace ibsm::sm
