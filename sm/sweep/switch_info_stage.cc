#include "sm/sweep/switch_info_stage.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "mad/attr/switch_info.h"

namespace ibsm::sm {

void SwitchInfoStage::Run(Sweep sweep, SweepContext& ctx, std::function<void()> done) {
  const DiscoveryResult& d = hooks_.model();
  const Fabric& f = d.fabric;
  const uint16_t top = sweep.top;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch() || !sweep.tables->table(n)) continue;
    const DiscoveredNode& dn = d.nodes[n];
    std::function<std::vector<bool>(size_t)> warm_held;
    if (sweep.warm_held)
      warm_held = [&sweep, n](size_t blocks) { return sweep.warm_held(n, blocks); };
    if (lfts_.Compare(f.node(n).guid, n, dn.path, dn.switch_info.linear_fdb_top, top,
                      sweep.tables, sweep.reread_assumed, warm_held))
      mfts_.Forget(f.node(n).guid);  // a switch that holds tables nobody knows
    // LinearFDBTop, and LifeTimeValue from packet_life_time as OpenSM's unicast manager
    // writes it.
    if (dn.switch_info.linear_fdb_top == top && !dn.switch_info.port_state_change &&
        dn.switch_info.life_time_value == options_.packet_life_time)
      continue;
    mad::SwitchInfo si = dn.switch_info;
    si.linear_fdb_top = top;
    si.life_time_value = options_.packet_life_time;
    // PortStateChange is write-1-to-clear (IBA 14.2.5.4): clear it now that we swept.
    si.port_state_change = dn.switch_info.port_state_change;
    std::array<uint8_t, 64> data{};
    mad::EncodeTo(si, data);
    ++ctx.stats.switchinfo_sets;
    pipeline_.Set(dn.path, mad::attr::kSwitchInfo, 0, data, [this, n, top](Result<mad::Smp> r) {
      if (!r.ok()) {
        hooks_.issue("SM-LFT-001",
                     fmt::format("SwitchInfo Set (LinearFDBTop {}) on {} failed: {}", top,
                                 ToString(hooks_.model().fabric.node(n).guid),
                                 r.status().ToString()));
        return;
      }
      auto answered = mad::Decode<mad::SwitchInfo>(r->data);
      if (answered.ok()) hooks_.mutable_model().nodes[n].switch_info = *answered;
    });
  }
  pipeline_.WhenIdle([this, &ctx, done = std::move(done)] {
    ctx.stats.lft_blocks_read = lfts_.run().read;
    if (!hooks_.stopped()) done();
  });
}

}  // namespace ibsm::sm
