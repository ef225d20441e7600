#include "sm/sweep/lids_and_ports.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "base/log.h"

namespace ibsm::sm {

LidsAndPortsStage::LidsAndPortsStage(SmpPipeline& pipeline, const SubnetManagerOptions& options,
                                     SmCounters& counters, ClientReregister& rereg, Hooks hooks)
    : pipeline_(pipeline),
      options_(options),
      counters_(counters),
      rereg_(rereg),
      hooks_(std::move(hooks)),
      ports_(options, hooks_.model, lids_, sm_lid_) {}

void LidsAndPortsStage::Start(Lid sm_lid, std::unordered_map<Guid, PersistedLid> held) {
  sm_lid_ = sm_lid;
  guid2lid_ = std::move(held);
}

void LidsAndPortsStage::Run(const Sweep& sweep, SweepContext& ctx, std::function<void()> done) {
  const Fabric& f = hooks_.model().fabric;
  if (sweep.took_over && !options_.lids.reassign) {
    // Taking over from another master: the LIDs the ports hold now are the subnet's, so
    // they win over this SM's own (older) guid2lid rows. Clients keep their LIDs.
    const size_t kept = Keep(f, EndPorts(f));
    Log(LogName::kHa).info("takeover: keeping the {} LIDs the ports hold", kept);
  }
  if (!sweep.keep_assignment || !KeepAssignment(f, sweep.renumbered)) {
    lids_ = AssignLids(f, sweep.sm_port, guid2lid_, options_.lids);
    for (const auto& i: lids_.issues) hooks_.issue(i.id, i.message);
  }
  ctx.stats.lid_changes = lids_.changed;
  sm_lid_ = Lid{lids_.base[sweep.sm_port]};
  SetEndPorts(sweep, ctx);
  SetSwitchPorts(sweep, ctx);
  pipeline_.WhenIdle([this, done = std::move(done)] {
    if (hooks_.stopped()) return;
    // The model holds the LIDs the ports accepted; ports whose Set failed keep theirs.
    hooks_.mutable_model().fabric.IndexLids();
    done();
  });
}

// A local repair kept every LID (AssignLids gives each port the one it holds) and has new
// PortInfo answers only from the touched nodes: their ports are compared, no other's changed.
void LidsAndPortsStage::SetEndPorts(const Sweep& sweep, SweepContext& ctx) {
  const DiscoveryResult& d = hooks_.model();
  const Fabric& f = d.fabric;
  for (PortId p: lids_.end_ports) {
    if (lids_.base[p] == 0) continue;
    const Port& port = f.port(p);
    if (!sweep.local.empty() && !sweep.local[port.node]) continue;
    const DiscoveredNode& dn = d.nodes[port.node];
    if (!dn.port_info_valid[port.num.value()]) continue;
    const mad::PortInfo& now = dn.port_info[port.num.value()];
    mad::PortInfo want = ports_.Desired(p);
    bool is_ca = !f.node(port.node).is_switch();
    // ClientReregister only where SA state was lost (sm/sweep/client_reregister.h).
    bool rereg = is_ca && !options_.no_clients_rereg &&
                 rereg_.ShouldTell(port.guid, sweep.first_master_sweep, sweep.took_over,
                                   now.master_sm_base_lid, sm_lid_.value());
    want.client_reregister = rereg ? 1 : 0;
    if (rereg) ++ctx.stats.client_reregisters, ++counters_.client_reregisters;
    // Some agents (ibsim's among them) do not keep SubnetTimeout or M_KeyLeasePeriod; what
    // they answered to our last Set counts as in sync, or every sweep would Set again.
    bool differs = now.lid != want.lid || now.lmc != want.lmc ||
                   now.master_sm_base_lid != want.master_sm_base_lid ||
                   now.gid_prefix != want.gid_prefix || now.m_key != want.m_key ||
                   !ports_.TimeoutAndLeaseInSync(port.guid, now, want) ||
                   now.m_key_protect_bits != want.m_key_protect_bits ||
                   ports_.LinkFieldsDiffer(p, now, want);
    if (!differs && !rereg) continue;
    std::array<uint8_t, 64> data{};
    mad::EncodeTo(want, data);
    ++ctx.stats.portinfo_sets;
    NodeId node = port.node;
    uint8_t num = port.num.value();
    pipeline_.Set(hooks_.end_port_path(p), mad::attr::kPortInfo, ports_.SetModifier(p), data,
                  [this, node, num, p, want](Result<mad::Smp> r) {
                    if (!r.ok()) {
                      hooks_.issue("SM-LID-004",
                                   fmt::format("PortInfo Set (LID {}) on {} port {} failed: {}",
                                               lids_.base[p],
                                               ToString(hooks_.model().fabric.node(node).guid),
                                               num, r.status().ToString()));
                      return;
                    }
                    auto pi = mad::Decode<mad::PortInfo>(r->data);
                    if (!pi.ok()) return;
                    ports_.NoteLinkEcho(p, *pi);
                    DiscoveryResult& m = hooks_.mutable_model();
                    m.nodes[node].port_info[num] = *pi;
                    Port& mp = m.fabric.mutable_port(p);
                    ports_.NoteEndPortEcho(mp.guid, *pi, want);
                    if (want.client_reregister) rereg_.NoteTold(mp.guid);
                    mp.lid = Lid{pi->lid};
                    mp.lmc = pi->lmc;
                  });
  }
}

// HOQLife and VLStallCount of switch external ports that hold other values; ports still
// coming up get them with their ARMED Set (the links stage, LinkStage).
//
// A warm takeover leaves the ACTIVE ports to the heavy sweep that follows SUBNET UP: their
// links carry traffic under what the old master set a moment ago, and what differs is either
// that master's other settings or a field the device does not keep (ibsim's switch ports keep
// no VLStallCount, NeighborMTU, LinkDownDefaultState or error thresholds; they read back what
// they held at power-on), which the old master knew from the echo of its own Sets and a new
// master cannot know yet: at 3-tier k=32 that was 40,960 Sets before SUBNET UP.
void LidsAndPortsStage::SetSwitchPorts(const Sweep& sweep, SweepContext& ctx) {
  const DiscoveryResult& d = hooks_.model();
  const Fabric& f = d.fabric;
  size_t left_for_later = 0;
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& port = f.port(p);
    if (port.num.value() == 0 || !port.connected() || !f.node(port.node).is_switch()) continue;
    if (!sweep.local.empty() && !sweep.local[port.node]) continue;
    if (port.state < PortState::kArmed) continue;
    const DiscoveredNode& dn = d.nodes[port.node];
    const uint8_t num = port.num.value();
    if (!dn.port_info_valid[num]) continue;
    const mad::PortInfo& now = dn.port_info[num];
    mad::PortInfo want = ports_.Desired(p);
    if (!ports_.LinkFieldsDiffer(p, now, want)) continue;
    if (sweep.warm_takeover && port.state == PortState::kActive) {
      ++left_for_later;
      continue;
    }
    std::array<uint8_t, 64> data{};
    mad::EncodeTo(want, data);
    ++ctx.stats.portinfo_sets;
    NodeId node = port.node;
    pipeline_.Set(dn.path, mad::attr::kPortInfo, ports_.SetModifier(p), data,
                  [this, node, num, p](Result<mad::Smp> r) {
                    if (!r.ok()) {
                      hooks_.issue("SM-LINK-002",
                                   fmt::format("PortInfo Set (link fields) on {} port {} failed: {}",
                                               ToString(hooks_.model().fabric.node(node).guid),
                                               num, r.status().ToString()));
                      return;
                    }
                    auto pi = mad::Decode<mad::PortInfo>(r->data);
                    if (!pi.ok()) return;
                    hooks_.mutable_model().nodes[node].port_info[num] = *pi;
                    ports_.NoteLinkEcho(p, *pi);
                  });
  }
  if (left_for_later > 0) {
    Log(LogName::kSm).info("takeover: {} active switch ports hold other link settings "
                           "(HOQLife, VLStallCount, NeighborMTU, thresholds); the heavy sweep "
                           "that follows the takeover sets them",
                           left_for_later);
  }
}

bool LidsAndPortsStage::KeepAssignment(const Fabric& f, const std::vector<PortId>* renumbered) {
  const bool renumber = renumbered && !renumbered->empty();
  const size_t before = renumber ? renumbered->size() : f.port_count();
  if (lids_.base.size() != before || lids_.lmc.size() != before) return false;
  LidAssignment kept;
  if (renumber) {
    kept.base.assign(f.port_count(), 0);
    kept.lmc.assign(f.port_count(), 0);
    for (PortId old = 0; old < before; ++old) {
      const PortId now = (*renumbered)[old];
      if (now == kNoPort) continue;
      if (now >= f.port_count()) return false;
      kept.base[now] = lids_.base[old];
      kept.lmc[now] = lids_.lmc[old];
    }
    kept.end_ports.reserve(lids_.end_ports.size());
    for (PortId old : lids_.end_ports)
      if ((*renumbered)[old] != kNoPort) kept.end_ports.push_back((*renumbered)[old]);
  }
  const LidAssignment& a = renumber ? kept : lids_;
  // Every end port of the model has its LID in the assignment, and holds it.
  const std::vector<PortId> ends = EndPorts(f);
  if (ends.size() != a.end_ports.size()) return false;
  for (PortId p : ends) {
    const Port& port = f.port(p);
    if (a.base[p] == 0 || a.base[p] != port.lid.value() || a.lmc[p] != port.lmc) return false;
  }
  if (renumber) lids_ = std::move(kept);
  lids_.changed = lids_.from_persisted = lids_.fresh = lids_.unassigned = 0;
  lids_.from_current = static_cast<uint32_t>(lids_.end_ports.size());
  lids_.issues.clear();
  return true;
}

void LidsAndPortsStage::Remember(const Fabric& f) { Keep(f, lids_.end_ports); }

size_t LidsAndPortsStage::Keep(const Fabric& f, const std::vector<PortId>& end_ports) {
  size_t kept = 0;
  for (PortId p: end_ports) {
    const Port& port = f.port(p);
    if (port.lid.value() == 0) continue;
    const auto count = static_cast<uint16_t>(1u << port.lmc);
    guid2lid_[port.guid] = {port.lid.value(), static_cast<uint16_t>(port.lid.value() + count - 1)};
    ++kept;
  }
  return kept;
}

}  // namespace ibsm::sm
