// SubnetManager, programming ports as OpenSM's link manager does: P_Key tables and
// enforcement, switch ports (docs/port-programming.md), and the links stage that takes links
// INIT -> ARMED -> ACTIVE (sm/sweep/link_stage.h).
#include "sm/sweep/subnet_manager.h"

#include <algorithm>
#include <unordered_set>

#include <boost/asio/executor_work_guard.hpp>
#include <fmt/format.h>

#include "base/log.h"

namespace ibsm::sm {

// The partition stage (sm/sweep/partition_programmer.h): reads the tables not known, sets the
// blocks that differ from the plan, then the switches' enforcement.
void SubnetManager::ProgramPKeys() {
  // A repair that took out cables and no node: every port the plan names is still there
  // with the table and enforcement the last (clean) sweep wrote, so the plan and the caches
  // stand as they are. One that took out switches alone (a dead spine): the same, by the
  // ports' new numbers.
  if (RepairIsLocal() && partitions_.plan() &&
      (current_.repair_nodes_lost == 0 ||
       partitions_.KeepPlanRenumbered(sweep_.renumbered.ports,
                                      sweep_.renumbered.switches_only))) {
    NextStage();
    return;
  }
  PartitionProgrammer::Sweep sweep;
  sweep.number = current_.number;
  sweep.sm_port = sm_port_;
  sweep.policy = options_.partitions;
  sweep.reread_assumed = !current_.repair;
  sweep.leave_active_enforcement = warm_takeover_;
  sweep.top = [this](Guid g) { return lfts_.top(g); };
  partitions_.Run(std::move(sweep), [this] {
    current_.pkey_blocks_read = partitions_.run().read;
    current_.pkey_blocks_sent = partitions_.run().sent;
    current_.enforcement_sets = partitions_.run().enforcement_sets;
    NextStage();
  });
}

std::vector<bool> SubnetManager::LocalNodes() const {
  if (!RepairIsLocal()) return {};
  const Fabric& f = discovered_->fabric;
  std::vector<bool> local(f.node_count(), false);
  for (Guid g : sweep_.touched)
    if (auto n = f.FindNode(g)) local[*n] = true;  // not found: left with what the cut took
  return local;
}

DrPath SubnetManager::PortInfoPath(PortId p) const {
  auto path = sm::PathToPort(discovered_->fabric, discovered_->nodes, p);
  return path ? std::move(*path) : discovered_->nodes[discovered_->fabric.port(p).node].path;
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
void SubnetManager::ConfigureSwitchPorts() {
  const Fabric& f = discovered_->fabric;
  const std::vector<bool> local = LocalNodes();
  size_t left_for_later = 0;
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& port = f.port(p);
    if (port.num.value() == 0 || !port.connected() || !f.node(port.node).is_switch()) continue;
    if (!local.empty() && !local[port.node]) continue;
    if (port.state < PortState::kArmed) continue;
    const DiscoveredNode& dn = discovered_->nodes[port.node];
    const uint8_t num = port.num.value();
    if (!dn.port_info_valid[num]) continue;
    const mad::PortInfo& now = dn.port_info[num];
    mad::PortInfo want = ports_.Desired(p);
    if (!ports_.LinkFieldsDiffer(p, now, want)) continue;
    if (warm_takeover_ && port.state == PortState::kActive) {
      ++left_for_later;
      continue;
    }
    std::array<uint8_t, 64> data{};
    mad::EncodeTo(want, data);
    ++current_.portinfo_sets;
    NodeId node = port.node;
    pipeline_.Set(dn.path, mad::attr::kPortInfo, ports_.SetModifier(p), data,
                  [this, node, num, p](Result<mad::Smp> r) {
                    if (!r.ok()) {
                      Issue("SM-LINK-002",
                            fmt::format("PortInfo Set (link fields) on {} port {} failed: {}",
                                        ToString(discovered_->fabric.node(node).guid), num,
                                        r.status().ToString()));
                      return;
                    }
                    auto pi = mad::Decode<mad::PortInfo>(r->data);
                    if (!pi.ok()) return;
                    MutableDiscovered().nodes[node].port_info[num] = *pi;
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

// The links stage (sm/sweep/link_stage.h); SHARP follows where it is enabled.
void SubnetManager::ActivateAllLinks() {
  links_.Run(sweep_, [this] {
    if (options_.sharp_enable && discovered_ && state() == mad::SmState::kMaster) {
      NextStage();
    } else {
      JumpTo(Stage::kFinish);
    }
  });
}

}  // namespace ibsm::sm
