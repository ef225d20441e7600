// The LFT stage (sm/sweep/lft_programmer.h).
#include "sm/sweep/lft_programmer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <utility>

#include <fmt/format.h>

#include "mad/field.h"

namespace ibsm::sm {

mad::LinearForwardingTable LftBlock(const routing::SwitchTable& t, size_t b) {
  mad::LinearForwardingTable blk;
  blk.port.fill(mad::kLftDropPort);
  for (size_t i = 0; i < 64; ++i)
    if (b * 64 + i < t.lft.size()) blk.port[i] = t.lft[b * 64 + i];
  return blk;
}

namespace {

// LftBlock(a, b) == LftBlock(x, b), without building either where both hold the whole block
// (a heavy sweep's rebase compares every block of every switch: 1.4 million at k=48).
bool SameBlock(const routing::SwitchTable& a, const routing::SwitchTable& x, size_t b) {
  const size_t end = b * 64 + 64;
  if (a.lft.size() >= end && x.lft.size() >= end)
    return std::equal(a.lft.begin() + b * 64, a.lft.begin() + end, x.lft.begin() + b * 64);
  return LftBlock(a, b).port == LftBlock(x, b).port;
}

}  // namespace

std::optional<uint16_t> LftProgrammer::top(Guid g) const {
  auto it = cache_.find(g);
  if (it == cache_.end()) return std::nullopt;
  return it->second.top;
}

bool LftProgrammer::Compare(Guid g, NodeId n, const DrPath& path, uint16_t reported_top,
                            uint16_t top,
                            const std::shared_ptr<const routing::RoutingTables>& tables,
                            bool reread_assumed,
                            const std::function<std::vector<bool>(size_t blocks)>& warm_held) {
  SwitchCache& cache = cache_[g];
  bool forgot = false;
  if (cache.top != reported_top) {
    cache.Clear();
    forgot = true;
  }
  if (cache.assumed && reread_assumed) cache.Clear();
  if (reported_top == 0 || !cache.empty()) return forgot;
  const size_t blocks = std::min<size_t>(reported_top, top) / 64 + 1;
  if (warm_held) {
    // The takeover: what the standby read of this switch, compared block by block.
    std::vector<bool> held = warm_held(blocks);
    if (!held.empty()) {
      cache.source = tables;
      cache.source_table = tables->table(n);
      cache.held = std::move(held);
      cache.assumed = true;
      return forgot;
    }
  }
  // Read what it holds, compared with what it should hold: a block that matches needs no
  // Set (a second SM, or a restart, on a programmed fabric writes nothing).
  cache.source = tables;
  cache.source_table = tables->table(n);
  cache.held.assign(blocks, false);
  for (size_t b = 0; b < blocks; ++b) {
    ++run_.read;
    pipeline_.Get(path, mad::attr::kLinearForwardingTable, static_cast<uint32_t>(b),
                  [this, g, b](Result<mad::Smp> r) {
                    if (!r.ok()) return;  // stays unknown: the block will be written
                    auto blk = mad::Decode<mad::LinearForwardingTable>(r->data);
                    auto it = cache_.find(g);
                    if (!blk.ok() || it == cache_.end()) return;
                    SwitchCache& c = it->second;
                    if (b >= c.held.size() || !c.source_table) return;
                    c.held[b] = blk->port == LftBlock(*c.source_table, b).port;
                  });
  }
  return forgot;
}

void LftProgrammer::Push(const Fabric& f, std::shared_ptr<const routing::RoutingTables> tables,
                         uint16_t top, std::function<const DrPath&(NodeId)> path,
                         const LftHint* hint) {
  if (hint && hint->to != tables) hint = nullptr;
  struct Cursor {
    std::shared_ptr<const routing::RoutingTables> tables;
    std::function<const DrPath&(NodeId)> path;
    std::vector<Guid> guid;  // by NodeId
    // By NodeId, each routed switch's entry of cache_ (stable: the map's nodes stay where they
    // are until ForgetAll, which stops the push first).
    std::vector<SwitchCache*> cache;
    // First the urgent blocks, switch by switch: those whose old entries send a LID to a
    // port that lost its cable (a repair after a cut), so the traffic being dropped there is
    // moved first; then every other block that differs, block-major across switches as
    // OpenSM does, so every switch gets its first blocks early. Only blocks a switch does
    // not hold are listed: a repair walks its few thousand, not every block of the fabric.
    std::vector<std::pair<NodeId, size_t>> urgent;
    std::vector<std::pair<NodeId, size_t>> rest;
    size_t u = 0;
    size_t r = 0;
  };
  auto c = std::make_shared<Cursor>();
  c->tables = tables;
  c->path = std::move(path);
  c->guid.resize(f.node_count());
  c->cache.resize(f.node_count(), nullptr);
  const size_t blocks = top / 64 + 1;
  std::vector<NodeId> switches;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    c->guid[n] = f.node(n).guid;
    if (f.node(n).is_switch() && tables->table(n)) switches.push_back(n);
  }
  // The blocks each switch lacks, bucketed by block number (a counting sort into
  // block-major order, switches in NodeId order within a block).
  std::vector<std::vector<size_t>> lacking(switches.size());
  std::vector<size_t> per_block(blocks + 1, 0);
  for (size_t si = 0; si < switches.size(); ++si) {
    const NodeId n = switches[si];
    SwitchCache& cache = cache_[f.node(n).guid];
    c->cache[n] = &cache;
    cache.top = top;
    // Rebase on the new tables: a block the switch holds of the old ones stays held only
    // where the new tables have the same entries.
    const routing::SwitchTable* now = tables->table(n);
    std::vector<bool> held(blocks, false);
    // From the re-route's own account where the switch holds the tables it started from (and
    // a row as long): a block it did not change is the same.
    const bool hinted = hint && cache.source == hint->from && cache.source_table &&
                        cache.source_table->lft.size() == now->lft.size();
    if (hinted && cache.held.size() == blocks) {
      // Held as before but where the re-route changed a block: only those are compared
      // (a few of the 478 of each switch at 3-tier k=48), word by word of the hint.
      held = cache.held;
      const size_t at = tables->switch_index[n];
      for (size_t w = 0; w < (blocks + 63) / 64; ++w) {
        for (uint64_t m = hint->blocks.word(at, w); m != 0; m &= m - 1) {
          const size_t b = w * 64 + static_cast<size_t>(std::countr_zero(m));
          if (b >= blocks) break;
          if (held[b]) held[b] = SameBlock(*cache.source_table, *now, b);
        }
      }
    } else {
      for (size_t b = 0; b < held.size() && b < cache.held.size(); ++b)
        held[b] = cache.held[b] && cache.source_table && SameBlock(*cache.source_table, *now, b);
    }
    std::vector<bool> dead;
    if (cache.source_table) {
      const uint8_t ports = f.node(n).num_ports;
      dead.assign(size_t{ports} + 1, false);
      bool any = false;
      for (uint32_t p = 1; p <= ports; ++p) {
        dead[p] = !f.port(f.port_id(n, PortNum{static_cast<uint8_t>(p)})).connected();
        any = any || dead[p];
      }
      if (!any) dead.clear();
    }
    for (size_t b = 0; b < held.size(); ++b) {
      if (held[b]) continue;
      bool urgent = false;
      if (!dead.empty() && b < cache.held.size() && cache.held[b]) {
        const mad::LinearForwardingTable old = LftBlock(*cache.source_table, b);
        urgent = std::any_of(old.port.begin(), old.port.end(), [&](uint8_t e) {
          return e >= 1 && e < dead.size() && dead[e];
        });
      }
      if (urgent) {
        c->urgent.emplace_back(n, b);
      } else {
        lacking[si].push_back(b);
        ++per_block[b + 1];
      }
    }
    cache.source = tables;
    cache.source_table = now;
    cache.held = std::move(held);
  }
  for (size_t b = 1; b < per_block.size(); ++b) per_block[b] += per_block[b - 1];
  c->rest.resize(per_block.back());
  for (size_t si = 0; si < switches.size(); ++si)
    for (size_t b : lacking[si]) c->rest[per_block[b]++] = {switches[si], b};
  // A switch this sweep did not route (gone, or unreachable) must not keep old tables
  // alive: it forgets what it held, and is read again if it comes back with our top.
  for (auto& [guid, cache] : cache_)
    if (cache.source && cache.source != tables) cache.Clear();
  // Blocks are produced as the SMP window frees up: at 3-tier k=32 there are 190,000.
  const uint64_t push = ++push_;
  pipeline_.Feed([this, c, push]() -> bool {
    while (push == push_ && (c->u < c->urgent.size() || c->r < c->rest.size())) {
      const bool urgent = c->u < c->urgent.size();
      const auto [n, b] = urgent ? c->urgent[c->u++] : c->rest[c->r++];
      const Guid g = c->guid[n];
      SwitchCache& cache = *c->cache[n];
      if (b < cache.held.size() && cache.held[b]) continue;
      const mad::LinearForwardingTable blk = LftBlock(*c->tables->table(n), b);
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(blk, data);
      ++run_.sent;
      if (urgent) ++run_.urgent;
      pipeline_.Set(c->path(n), mad::attr::kLinearForwardingTable, static_cast<uint32_t>(b),
                    data, [this, g, b, push, at = &cache](Result<mad::Smp> r) {
                      if (push != push_) return;  // stopped: taken back before it was sent
                      SwitchCache& cache = *at;
                      if (b >= cache.held.size() || !cache.source_table) return;
                      if (!r.ok()) {
                        issue_("SM-LFT-002",
                               fmt::format("LFT block {} Set on {} failed: {}", b, ToString(g),
                                           r.status().ToString()));
                        cache.held[b] = false;
                        return;
                      }
                      // What the switch answered is what it holds (it may refuse entries).
                      auto blk = mad::Decode<mad::LinearForwardingTable>(r->data);
                      cache.held[b] = blk.ok() &&
                                      blk->port == LftBlock(*cache.source_table, b).port;
                    },
                    this, /*abandonable=*/true);
      return true;
    }
    return false;
  });
}

size_t LftProgrammer::Stop() {
  ++push_;
  return pipeline_.Abandon(this);
}

}  // namespace ibsm::sm
