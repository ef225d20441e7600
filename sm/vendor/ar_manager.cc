#include "sm/vendor/ar_manager.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/log.h"
#include "ha/state_rows.h"
#include "mad/attr/general_info.h"
#include "routing/ar_engine.h"

namespace ibsm::sm {
namespace {

constexpr mad::ArLftEntry kUnsetEntry{static_cast<uint8_t>(mad::ArLidState::kStatic), 0, 0xFF,
                                      0xFF};
constexpr size_t kMaxListed = 8;  // switches named in one log line

mad::ArLftEntry ToWire(const routing::ArEntry& e) {
  return {static_cast<uint8_t>(e.mode), 0, e.default_port, e.group};
}

mad::ArPortMask ToMask(const std::vector<uint8_t>& ports) {
  mad::ArPortMask m;
  for (uint8_t p : ports) m.Add(p);
  return m;
}

std::string NodeName(const Fabric& f, NodeId n) {
  const Node& node = f.node(n);
  return node.name.empty() ? node.description : node.name;
}

}  // namespace

bool IsArVendor(uint32_t vendor_id) {
  return vendor_id == 0x0002c9 || vendor_id == 0x0008f1 || vendor_id == 0x00119f;
}

struct ArManager::Run_ {
  std::shared_ptr<Fabric> fabric;
  std::vector<DrPath> paths;      // by NodeId
  std::vector<NodeId> switches;   // with a static table
  std::shared_ptr<const routing::LidMap> lids;
  std::shared_ptr<const routing::RoutingTables> tables;
  ArConfig config;
  std::shared_ptr<routing::ArTables> ar;
  std::vector<NodeId> targets;    // capable switches being programmed
  std::string refused;            // why no switch gets AR this run (empty: none refused)
  std::function<void()> done;
  uint64_t gen = 0;  // ArManager::gen_ when it began: a stopped run's answers change nothing
};

ArManager::ArManager(SmpPipeline& pipeline, ha::RoutingRows* store)
    : pipeline_(pipeline), store_(store) {}

void ArManager::LoadIds() {
  if (ids_loaded_) return;
  ids_loaded_ = true;
  if (!store_) return;
  auto ids = store_->LoadArGroupIds();
  if (!ids.ok()) {
    Log(LogName::kSm).warn("SM-AR-005 cannot read AR group IDs from the state file: {}; new IDs "
                           "are allocated",
                           ids.status().ToString());
    return;
  }
  group_ids_ = std::move(*ids);
}

void ArManager::Run(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes,
                    std::shared_ptr<const routing::LidMap> lids,
                    std::shared_ptr<const routing::RoutingTables> tables,
                    const ArConfig& config, std::function<void()> done) {
  ++counters_.runs;
  auto run = std::make_shared<Run_>();
  run->gen = ++gen_;
  running_ = true;
  run->fabric = std::make_shared<Fabric>(fabric);
  run->paths.resize(fabric.node_count());
  for (NodeId n = 0; n < fabric.node_count() && n < nodes.size(); ++n) run->paths[n] = nodes[n].path;
  for (NodeId n = 0; n < fabric.node_count(); ++n)
    if (fabric.node(n).is_switch() && tables && tables->table(n)) run->switches.push_back(n);
  run->lids = std::move(lids);
  run->tables = std::move(tables);
  run->config = config;
  run->done = std::move(done);
  // ar_enable / ar_mode turns AR on whatever the engine: its static routes become the AR LFT
  // default ports, exactly as with ar_ftree / ar_updn, which stay as names for the same thing
  // (docs/ar-sharp.md "Configuration names seen in the field").
  if (!config.on() || !run->tables) {
    run->refused = !config.on() ? "ar_mode is 0 (adaptive routing off)" : "no routing tables";
    Disable(run);
    return;
  }
  const std::string& engine = run->tables->engine;
  if (!routing::IsArEngine(engine) && engine != announced_engine_) {
    announced_engine_ = engine;
    Log(LogName::kSm).info("AR enabled on top of {}", engine);
  }
  Discover(run);
}

// GeneralInfo capabilities of every switch not asked before; a timeout is a legacy switch.
void ArManager::Discover(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  for (NodeId n : run->switches) {
    const Guid g = f.node(n).guid;
    SwitchState& s = state_[g];
    if (s.capable.has_value()) continue;
    if (!IsArVendor(f.node(n).vendor_id)) {
      s.capable = false;
      s.why_not = fmt::format("vendor {:#08x} has no AR", f.node(n).vendor_id);
      ++counters_.not_capable;
      continue;
    }
    ++counters_.capability_queries;
    Get(*run, run->paths[n], mad::attr::kGeneralInfo, mad::kGeneralInfoCapabilityModifier,
        [this, g](Result<mad::Smp> r) {
          SwitchState& s = state_[g];
          if (!r.ok()) {
            s.capable = false;
            s.why_not = r.status().code() == StatusCode::kTimeout
                            ? "no answer to GeneralInfo (no vendor attributes)"
                            : "GeneralInfo refused: " + r.status().message();
            // A timeout is a legacy switch only if the switch answered the
            // NodeInfo sent beside it (decided when both are in).
            s.silent = r.status().code() == StatusCode::kTimeout;
            if (!s.silent) ++counters_.not_capable;
            return;
          }
          auto caps = mad::Decode<mad::GeneralInfoCapabilities>(r->data);
          if (!caps.ok()) {
            ++counters_.bad_answers;
            s.capable = false;
            s.why_not = "undecodable GeneralInfo";
            return;
          }
          // Bit 2 is the SwitchX-style AR ibsm programs; bit 1 without it is the
          // pre-SwitchX LFT format (docs/ar-sharp.md "Discovery").
          s.capable = caps->Has(mad::general_cap::kAdaptiveRoutingRev1);
          if (!*s.capable) {
            s.why_not = caps->Has(mad::general_cap::kAdaptiveRoutingLegacy)
                            ? "AR: legacy format not supported"
                            : "GeneralInfo has no AR capability";
            ++counters_.not_capable;
          }
        });
    s.answered = false;
    Get(*run, run->paths[n], mad::attr::kNodeInfo, 0,
        [this, g](Result<mad::Smp> r) { state_[g].answered = r.ok(); });
  }
  pipeline_.WhenIdle([this, run] {
    if (run->gen != gen_) return;
    // A switch silent to GeneralInfo that answered NodeInfo has no vendor attributes (as
    // legacy switches, and ibsim's, drop them); one silent to both was not reachable this
    // run (a cut on its path, lost answers): it is asked again next run, not written off.
    for (auto& [guid, s] : state_) {
      if (!s.silent) continue;
      s.silent = false;
      if (s.answered) {
        ++counters_.not_capable;
        continue;
      }
      s.capable.reset();
      s.why_not = "no answer to GeneralInfo nor to NodeInfo this sweep (asked again next)";
    }
    ReadInfo(run);
  });
}

// ARInfo of every capable switch: the capabilities once (capability Get), the current
// settings every run with a plain Get (modifier 0), since a plain LFT Set may have cleared E
// and a reboot clears the tables (GroupTop back to 0). The plain Get's bytes are what every
// Set writes back, changed only where ibsm manages a field.
void ArManager::ReadInfo(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  for (NodeId n : run->switches) {
    const Guid g = f.node(n).guid;
    SwitchState& s = state_[g];
    if (!s.capable.value_or(false)) continue;
    s.failed = false;
    if (!s.caps_valid) {
      Get(*run, run->paths[n], mad::attr::kArInfo, mad::EncodeModifier(mad::ArInfoModifier{1}),
          [this, g](Result<mad::Smp> r) {
            SwitchState& s = state_[g];
            auto caps =
                r.ok() ? mad::Decode<mad::ArInfo>(r->data) : Result<mad::ArInfo>(r.status());
            if (!caps.ok()) {
              s.failed = true;
              s.why_not = "ARInfo capability Get failed: " + caps.status().message();
              return;
            }
            if (caps->group_cap == 0) {
              s.capable = false;
              s.why_not = "ARInfo GroupCap is 0";
              ++counters_.not_capable;
              return;
            }
            s.caps = *caps;
            s.caps_valid = true;
          });
    }
    Get(*run, run->paths[n], mad::attr::kArInfo, 0, [this, g](Result<mad::Smp> r) {
      SwitchState& s = state_[g];
      auto info = r.ok() ? mad::Decode<mad::ArInfo>(r->data) : Result<mad::ArInfo>(r.status());
      if (!info.ok()) {
        s.info_valid = false;
        s.failed = true;
        s.why_not = "ARInfo Get failed: " + info.status().message();
        return;
      }
      // Tables we did not write (reboot, another SM): unknown again.
      if (!s.info_valid || info->group_top != s.info.group_top) {
        s.groups.clear();
        s.lft.clear();
      }
      s.info = *info;
      s.raw = r->data;
      s.info_valid = true;
      s.enabled = info->e != 0;
      // With sub-groups active each group-table entry is a set of sub-group masks, not the
      // one port mask per group ibsm writes (docs/ar-sharp.md "Attributes"): refused rather
      // than programmed with a meaning the switch does not give it.
      if (info->sub_grps_active > 0) {
        s.failed = true;
        s.why_not = fmt::format("ARInfo sub-groups active is {}: ibsm programs one port mask "
                                "per group, not sub-group masks",
                                info->sub_grps_active);
      }
    });
  }
  Then(run, &ArManager::Compute);
}

void ArManager::Compute(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  uint16_t group_cap = 4095;
  for (NodeId n : run->switches) {
    const SwitchState& s = state_[f.node(n).guid];
    if (s.capable.value_or(false) && s.caps_valid && s.info_valid && !s.failed) {
      run->targets.push_back(n);
      group_cap = std::min<uint16_t>(group_cap, s.caps.group_cap);
    }
  }
  if (run->targets.empty()) {
    Finish(run);
    return;
  }
  LoadIds();
  routing::ArOptions o;
  o.mode = run->config.lid_mode;
  o.group_cap = group_cap;
  o.previous_ids = group_ids_;
  auto ar = routing::BuildArTables(f, *run->lids, *run->tables, o);
  if (!ar.ok()) {
    run->refused = "AR groups not computed: " + ar.status().message();
    Log(LogName::kSm).error("SM-AR-004 {}", run->refused);
    run->targets.clear();
    Disable(run);
    return;
  }
  routing::ArVerifyReport v = routing::VerifyArTables(f, *run->lids, *run->tables, *ar);
  if (!v.ok) {
    ++counters_.verify_failures;
    run->refused = fmt::format(
        "AR tables failed verification ({} group mismatches, {} missing groups, {} default "
        "ports off the static route, {} ID mismatches, {})",
        v.group_mismatches, v.missing_groups, v.default_mismatches, v.id_mismatches,
        v.acyclic ? "no credit loop" : "a credit loop over the group ports");
    Log(LogName::kSm).error("SM-AR-003 {}; AR stays off", run->refused);
    for (const auto& p : v.problems) Log(LogName::kSm).warn("SM-AR-003 {}", p);
    run->targets.clear();
    Disable(run);
    return;
  }
  Log(LogName::kRouting)
      .info("AR groups on {} engine routes: {} destination leaves, group top {}, channel "
            "dependency graph of every group port acyclic ({} channels, {} dependencies)",
            run->tables->engine, ar->group_ids.size(), ar->group_top, v.channels,
            v.dependencies);
  if (ar->group_ids != group_ids_) {
    group_ids_ = ar->group_ids;
    if (store_) {
      Status st = store_->SaveArGroupIds(group_ids_);
      if (!st.ok())
        Log(LogName::kSm).error("SM-AR-005 AR group IDs not saved: {}", st.ToString());
    }
  }
  run->ar = std::make_shared<routing::ArTables>(std::move(*ar));
  ReadTables(run);
}

// Switches that hold AR tables we do not know (programmed before this SM started) are read
// once, so a restart on an unchanged fabric writes nothing. A fresh switch (GroupTop 0, AR
// off) is written whole without reading.
void ArManager::ReadTables(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  for (NodeId n : run->targets) {
    const Guid g = f.node(n).guid;
    SwitchState& s = state_[g];
    const routing::ArSwitchTable* t = run->ar->table(n);
    const size_t top = std::max<size_t>(t->group_top, s.info.group_top);
    const size_t gblocks = top / mad::kArGroupsPerBlock + 1;
    const size_t lblocks = (t->lft.size() + mad::kArLftBlockSize - 1) / mad::kArLftBlockSize;
    if (s.groups.size() < gblocks * mad::kArGroupsPerBlock)
      s.groups.resize(gblocks * mad::kArGroupsPerBlock);
    if (s.lft.size() < lblocks * mad::kArLftBlockSize) s.lft.resize(lblocks * mad::kArLftBlockSize);
    if (s.info.group_top == 0 && s.info.e == 0) continue;
    for (size_t b = 0; b < gblocks; ++b) {
      if (s.groups[b * 2] && s.groups[b * 2 + 1]) continue;
      ++counters_.group_blocks_read;
      Get(*run, run->paths[n], mad::attr::kArGroupTable,
          mad::ArGroupTableAttrMod(static_cast<uint32_t>(b)), [this, g, b](Result<mad::Smp> r) {
            if (!r.ok()) return;  // stays unknown: written below
            auto blk = mad::Decode<mad::ArGroupTable>(r->data);
            auto& groups = state_[g].groups;
            if (!blk.ok() || groups.size() < b * 2 + 2) return;
            groups[b * 2] = blk->Group(0);
            groups[b * 2 + 1] = blk->Group(1);
          });
    }
    for (size_t b = 0; b < lblocks; ++b) {
      bool known = true;
      for (size_t i = 0; i < mad::kArLftBlockSize; ++i) known &= s.lft[b * 16 + i].has_value();
      if (known) continue;
      ++counters_.lft_blocks_read;
      Get(*run, run->paths[n], mad::attr::kArLinearForwardingTable,
          mad::ArLftAttrMod(static_cast<uint32_t>(b)), [this, g, b](Result<mad::Smp> r) {
            if (!r.ok()) return;
            auto blk = mad::Decode<mad::ArLinearForwardingTable>(r->data);
            auto& lft = state_[g].lft;
            if (!blk.ok() || lft.size() < (b + 1) * 16) return;
            for (size_t i = 0; i < 16; ++i) lft[b * 16 + i] = blk->Entry(i);
          });
    }
  }
  Then(run, &ArManager::WriteGroups);
}

void ArManager::WriteGroups(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  for (NodeId n : run->targets) {
    const Guid g = f.node(n).guid;
    SwitchState& s = state_[g];
    const routing::ArSwitchTable* t = run->ar->table(n);
    const size_t blocks = s.groups.size() / mad::kArGroupsPerBlock;
    for (size_t b = 0; b < blocks; ++b) {
      mad::ArGroupTable blk;
      bool same = true;
      for (size_t i = 0; i < 2; ++i) {
        const size_t gid = b * 2 + i;
        const mad::ArPortMask want = gid < t->groups.size() ? ToMask(t->groups[gid]) : mad::ArPortMask{};
        blk.SetGroup(i, want);
        same &= s.groups[gid].has_value() && *s.groups[gid] == want;
      }
      if (same) continue;
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(blk, data);
      ++counters_.group_blocks_sent;
      // Not known held until answered: a run stopped before the answer (Stop) leaves the
      // block to be read or written again.
      s.groups[b * 2] = s.groups[b * 2 + 1] = std::nullopt;
      Set(*run, run->paths[n], mad::attr::kArGroupTable,
          mad::ArGroupTableAttrMod(static_cast<uint32_t>(b)), data,
          [this, g, b, name = NodeName(f, n)](Result<mad::Smp> r) {
            SwitchState& s = state_[g];
            auto blk = r.ok() ? mad::Decode<mad::ArGroupTable>(r->data)
                              : Result<mad::ArGroupTable>(r.status());
            if (!blk.ok()) {
              ++counters_.set_failures;
              if (!s.failed)
                Log(LogName::kSm)
                    .warn(
                        "SM-AR-006 ARGroupTable block {} Set on {} ({}) "
                        "failed: {}; AR stays off there",
                        b, name, ToString(g), blk.status().ToString());
              s.failed = true;
              s.why_not = "ARGroupTable Set failed";
              if (s.groups.size() >= b * 2 + 2)
                s.groups[b * 2] = s.groups[b * 2 + 1] = std::nullopt;
              return;
            }
            if (s.groups.size() < b * 2 + 2) return;
            s.groups[b * 2] = blk->Group(0);
            s.groups[b * 2 + 1] = blk->Group(1);
          });
    }
  }
  Then(run, &ArManager::WriteLfts);
}

void ArManager::WriteLfts(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  struct Cursor {
    size_t i = 0;  // target
    size_t b = 0;  // block
  };
  auto c = std::make_shared<Cursor>();
  // Blocks are produced as the SMP window frees up (tens of thousands on a large fabric).
  pipeline_.Feed([this, run, c]() -> bool {
    const Fabric& f = *run->fabric;
    while (run->gen == gen_ && c->i < run->targets.size()) {
      const NodeId n = run->targets[c->i];
      const Guid g = f.node(n).guid;
      SwitchState& s = state_[g];
      const routing::ArSwitchTable* t = run->ar->table(n);
      const size_t blocks = s.lft.size() / mad::kArLftBlockSize;
      if (s.failed || c->b >= blocks) {
        ++c->i;
        c->b = 0;
        continue;
      }
      const size_t b = c->b++;
      mad::ArLinearForwardingTable blk;
      bool same = true;
      for (size_t i = 0; i < mad::kArLftBlockSize; ++i) {
        const size_t lid = b * mad::kArLftBlockSize + i;
        const mad::ArLftEntry want = lid < t->lft.size() ? ToWire(t->lft[lid]) : kUnsetEntry;
        blk.SetEntry(i, want);
        same &= s.lft[lid].has_value() && *s.lft[lid] == want;
      }
      if (same) continue;
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(blk, data);
      ++counters_.lft_blocks_sent;
      for (size_t i = 0; i < mad::kArLftBlockSize; ++i)  // as the group blocks above
        s.lft[b * mad::kArLftBlockSize + i] = std::nullopt;
      Set(*run, run->paths[n], mad::attr::kArLinearForwardingTable,
          mad::ArLftAttrMod(static_cast<uint32_t>(b)), data,
          [this, g, b, name = NodeName(f, n)](Result<mad::Smp> r) {
            SwitchState& s = state_[g];
            auto blk = r.ok() ? mad::Decode<mad::ArLinearForwardingTable>(r->data)
                              : Result<mad::ArLinearForwardingTable>(r.status());
            const size_t first = b * mad::kArLftBlockSize;
            if (!blk.ok()) {
              ++counters_.set_failures;
              if (!s.failed)
                Log(LogName::kSm)
                    .warn(
                        "SM-AR-006 ARLinearForwardingTable block {} Set "
                        "on {} ({}) failed: {}; AR stays off there",
                        b, name, ToString(g), blk.status().ToString());
              s.failed = true;
              s.why_not = "ARLinearForwardingTable Set failed";
              for (size_t i = 0; i < 16 && first + i < s.lft.size(); ++i)
                s.lft[first + i] = std::nullopt;
              return;
            }
            for (size_t i = 0; i < 16 && first + i < s.lft.size(); ++i)
              s.lft[first + i] = blk->Entry(i);
          });
      return true;
    }
    return false;
  });
  (void)f;
  Then(run, &ArManager::Enable);
}

// ARInfo Set: E on, the SL mask (per-SL enable when the switch can and not every SL is
// asked for), GroupTop, transports, ageing time; only where something differs.
void ArManager::Enable(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  const ArConfig& cfg = run->config;
  for (NodeId n : run->targets) {
    const Guid g = f.node(n).guid;
    SwitchState& s = state_[g];
    const routing::ArSwitchTable* t = run->ar->table(n);
    s.programmed_groups = t->group_count;
    if (s.failed) continue;
    const mad::ArInfo& have = s.info;
    const bool by_transport = s.caps.by_transport_cap != 0;
    mad::ArInfoSettings want;
    const bool all_sls = cfg.sl_mask == 0xFFFF;
    if (!all_sls && !s.caps.by_sl_cap) {
      s.failed = true;
      s.why_not = fmt::format("no per-SL AR and ar_sl_mask is {:#06x}", cfg.sl_mask);
      want.e = 0;
    } else {
      want.e = cfg.sl_mask != 0;
      if (cfg.sl_mask == 0) s.why_not = "ar_sl_mask is 0";
    }
    want.by_sl_enabled = all_sls ? 0 : 1;
    want.enable_by_sl_mask = all_sls ? have.enable_by_sl_mask : cfg.sl_mask;
    want.no_fallback = 0;
    want.group_top = t->group_top;
    // Without by-transport capability the field means nothing and stays as read.
    want.by_transport_disable =
        by_transport ? static_cast<uint8_t>(~cfg.transport_mask & 0xF) : have.by_transport_disable;
    want.ageing_time = cfg.ageing_time_us;
    if (have.e == want.e && have.by_sl_enabled == want.by_sl_enabled &&
        have.enable_by_sl_mask == want.enable_by_sl_mask && have.no_fallback == want.no_fallback &&
        have.group_top == want.group_top && have.by_transport_disable == want.by_transport_disable &&
        have.ageing_time == want.ageing_time) {
      s.enabled = have.e != 0;
      continue;
    }
    const std::array<uint8_t, 64> data = mad::ArInfoSetData(s.raw, want, by_transport);
    ++counters_.info_sets;
    Set(*run, run->paths[n], mad::attr::kArInfo, 0, data,
        [this, g, name = NodeName(f, n)](Result<mad::Smp> r) {
          SwitchState& s = state_[g];
          auto info = r.ok() ? mad::Decode<mad::ArInfo>(r->data) : Result<mad::ArInfo>(r.status());
          if (!info.ok()) {
            ++counters_.set_failures;
            Log(LogName::kSm)
                .warn("SM-AR-006 ARInfo Set on {} ({}) failed: {}", name, ToString(g),
                      info.status().ToString());
            s.failed = true;
            s.why_not = "ARInfo Set failed";
            s.info_valid = false;
            s.enabled = false;
            return;
          }
          s.info = *info;
          s.raw = r->data;
          s.enabled = info->e != 0;
        });
  }
  // A switch refused here (sub-groups active, a failed read) that another SM or an earlier
  // run left with AR on forwards by groups ibsm did not write: turned off like the rest.
  Then(run, &ArManager::Disable);
}

// AR off where it is on (ar_mode 0, a non-AR engine, or tables refused; after a run that
// programmed some switches, on every switch it did not program): E cleared so those switches
// forward by their plain LFTs, which the SM just programmed.
void ArManager::Disable(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  for (NodeId n : run->switches) {
    if (std::find(run->targets.begin(), run->targets.end(), n) != run->targets.end()) continue;
    const Guid g = f.node(n).guid;
    auto it = state_.find(g);
    if (it == state_.end() || !it->second.info_valid || !it->second.info.e) continue;
    const SwitchState& s = it->second;
    const mad::ArInfoSettings want{0, s.info.no_fallback, s.info.by_sl_enabled,
                                   s.info.enable_by_sl_mask, s.info.group_top,
                                   s.info.by_transport_disable, s.info.ageing_time};
    const std::array<uint8_t, 64> data =
        mad::ArInfoSetData(s.raw, want, s.caps_valid && s.caps.by_transport_cap);
    ++counters_.info_sets;
    Set(*run, run->paths[n], mad::attr::kArInfo, 0, data, [this, g](Result<mad::Smp> r) {
      SwitchState& s = state_[g];
      auto info = r.ok() ? mad::Decode<mad::ArInfo>(r->data) : Result<mad::ArInfo>(r.status());
      if (!info.ok()) {
        ++counters_.set_failures;
        s.info_valid = false;
        return;
      }
      s.info = *info;
      s.raw = r->data;
      s.enabled = info->e != 0;
    });
  }
  Then(run, &ArManager::Finish);
}

// A run's SMPs are one abandonable group (Stop), and what answers a stopped run changes
// nothing: Abandon runs the callbacks of the requests still queued, with "dropped".
SmpPipeline::Callback ArManager::OfRun(const Run_& run, SmpPipeline::Callback fn) {
  return [this, gen = run.gen, fn = std::move(fn)](Result<mad::Smp> r) {
    if (gen == gen_) fn(std::move(r));
  };
}

void ArManager::Get(const Run_& run, const DrPath& path, uint16_t attr, uint32_t mod,
                    SmpPipeline::Callback fn) {
  pipeline_.Get(path, attr, mod, OfRun(run, std::move(fn)), this, /*abandonable=*/true);
}

void ArManager::Set(const Run_& run, const DrPath& path, uint16_t attr, uint32_t mod,
                    std::span<const uint8_t> data, SmpPipeline::Callback fn) {
  pipeline_.Set(path, attr, mod, data, OfRun(run, std::move(fn)), this, /*abandonable=*/true);
}

// The run's next step once its SMPs are in, unless it was stopped meanwhile.
void ArManager::Then(std::shared_ptr<Run_> run, void (ArManager::*next)(std::shared_ptr<Run_>)) {
  pipeline_.WhenIdle([this, run, next] {
    if (run->gen == gen_) (this->*next)(run);
  });
}

size_t ArManager::Stop() {
  if (!running_) return 0;
  running_ = false;
  ++gen_;
  return pipeline_.Abandon(this);
}

void ArManager::ShareFabric(std::shared_ptr<const Fabric> fabric) {
  if (!snapshot_ || !snapshot_->fabric || !fabric || snapshot_->fabric == fabric) return;
  const Fabric& a = *snapshot_->fabric;
  const Fabric& b = *fabric;
  if (a.node_count() != b.node_count() || a.port_count() != b.port_count()) return;
  for (NodeId n = 0; n < a.node_count(); ++n)
    if (a.node(n).guid != b.node(n).guid) return;
  for (PortId p = 0; p < a.port_count(); ++p)
    if (a.port(p).lid != b.port(p).lid || a.port(p).peer != b.port(p).peer) return;
  auto snap = std::make_shared<ArSnapshot>(*snapshot_);
  snap->fabric = std::move(fabric);
  snapshot_ = std::move(snap);
}

void ArManager::Finish(std::shared_ptr<Run_> run) {
  const Fabric& f = *run->fabric;
  auto snap = std::make_shared<ArSnapshot>();
  snap->fabric = run->fabric;
  snap->lids = run->lids;
  snap->tables = run->tables;
  snap->ar = run->ar;
  snap->config = run->config;
  snap->engine = run->tables ? run->tables->engine : "";
  size_t enabled = 0, incapable = 0;
  std::vector<std::string> not_running;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    ArSwitchStatus st;
    st.guid = f.node(n).guid;
    st.name = NodeName(f, n);
    auto it = state_.find(st.guid);
    if (it != state_.end()) {
      const SwitchState& s = it->second;
      st.capable = s.capable.value_or(false);
      st.enabled = s.enabled && run->ar && !s.failed;
      st.group_cap = s.caps_valid ? s.caps.group_cap : 0;
      if (st.enabled) {
        st.sl_mask = s.info.by_sl_enabled ? s.info.enable_by_sl_mask : 0xFFFF;
        st.mode = std::string(routing::ArLidModeName(run->config.lid_mode));
        st.groups = s.programmed_groups;
      } else {
        st.why_not = !run->refused.empty() && st.capable ? run->refused : s.why_not;
      }
    } else {
      st.why_not = run->refused.empty() ? "not asked" : run->refused;
    }
    if (it != state_.end() && it->second.capable.has_value() && !*it->second.capable)
      ++incapable;
    if (st.enabled) {
      ++enabled;
    } else if (st.why_not != run->refused) {  // the run-wide reason is said once
      not_running.push_back(fmt::format("{} ({}): {}", st.name, ToString(st.guid), st.why_not));
    }
    snap->switches.push_back(std::move(st));
  }
  const size_t total = snap->switches.size();
  std::string listed;
  for (size_t i = 0; i < not_running.size() && i < kMaxListed; ++i)
    listed += (i ? "; " : "") + not_running[i];
  if (not_running.size() > kMaxListed)
    listed += fmt::format("; and {} more", not_running.size() - kMaxListed);
  snap->summary = fmt::format(
      "AR enabled on {} of {} switches, SLs {:#06x}, mode {}, engine {}; {} switches not "
      "capable{}{}",
      enabled, total, run->config.sl_mask, routing::ArLidModeName(run->config.lid_mode),
      snap->engine.empty() ? "-" : snap->engine, incapable,
      run->refused.empty() ? "" : "; " + run->refused,
      not_running.empty() ? "" : "; not running AR: " + listed);
  if (!run->config.on()) {
    Log(LogName::kSm).debug("{}", snap->summary);
  } else if (enabled == total) {
    Log(LogName::kSm).info("{}", snap->summary);
  } else {
    Log(LogName::kSm).warn("SM-AR-002 {}", snap->summary);
  }
  snapshot_ = std::move(snap);
  running_ = false;
  if (run->done) run->done();
}

}  // namespace ibsm::sm
