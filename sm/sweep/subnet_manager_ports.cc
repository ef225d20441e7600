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
  if (RepairIsLocal() && partitions_.has_plan() &&
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
