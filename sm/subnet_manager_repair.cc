// SubnetManager, repair sweeps: a switch that reported a port change (trap 128, or
// PortStateChange seen by a light sweep) has its ports re-read; cables that went down are
// taken out of the last sweep's model and the sweep's later stages run on it, without a
// rediscovery of the fabric (ARCHITECTURE.md "Repair sweep"). Whatever a re-read cannot
// account for falls back to a heavy sweep.
#include "sm/subnet_manager.h"

#include <deque>
#include <set>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/log.h"

namespace ibsm::sm {

struct RepairReads {
  struct Switch {
    NodeId node = kNoNode;
    bool failed = false;
    mad::SwitchInfo switch_info;
    std::vector<mad::PortInfo> ports;  // index = port number (0 unused)
  };
  std::vector<Switch> switches;
  std::chrono::steady_clock::time_point started;
  uint64_t smps = 0;
};

void SubnetManager::RequestRepair(Guid guid, const std::string& reason) {
  if (stopped_) return;
  if (!options_.incremental_repair || !discovered_ || state() != mad::SmState::kMaster ||
      sm_port_ == kNoPort || !discovered_->fabric.FindNode(guid)) {
    RequestHeavySweep(reason);
    return;
  }
  if (repair_pending_.empty()) repair_reason_ = reason;
  repair_pending_.insert(guid);
  // A sweep running or posted ends with a look at repair_pending_ (FinishHeavySweep).
  if (sweeping_ || repair_posted_) return;
  repair_posted_ = true;
  sweeping_ = true;
  boost::asio::post(io_, [this] { BeginRepair(); });
}

void SubnetManager::BeginRepair() {
  repair_posted_ = false;
  if (stopped_) return;
  std::set<Guid> guids;
  guids.swap(repair_pending_);
  if (state() != mad::SmState::kMaster || !discovered_ || sm_port_ == kNoPort) {
    sweeping_ = false;
    RequestHeavySweep(repair_reason_);
    return;
  }
  StartSweepStats(/*repair=*/true);
  ++counters_.repair_sweeps;
  const Fabric& f = discovered_->fabric;
  std::string names;
  for (Guid g : guids) names += (names.empty() ? "" : ", ") + f.node(*f.FindNode(g)).description;
  Log(LogName::kSm).info("Entering repair sweep {} ({}; re-reading {})", current_.number,
                         repair_reason_, names);
  auto reads = std::make_shared<RepairReads>();
  reads->started = std::chrono::steady_clock::now();
  for (Guid g : guids) {
    const NodeId n = *f.FindNode(g);
    if (!f.node(n).is_switch()) continue;
    RepairReads::Switch sw;
    sw.node = n;
    sw.ports.resize(f.node(n).num_ports + 1);
    reads->switches.push_back(std::move(sw));
  }
  for (size_t i = 0; i < reads->switches.size(); ++i) {
    const NodeId n = reads->switches[i].node;
    const DrPath& path = discovered_->nodes[n].path;
    ++reads->smps;
    pipeline_.Get(path, mad::attr::kSwitchInfo, 0, [reads, i](Result<mad::Smp> r) {
      auto si = r.ok() ? mad::Decode<mad::SwitchInfo>(r->data) : Result<mad::SwitchInfo>(r.status());
      if (si.ok()) {
        reads->switches[i].switch_info = *si;
      } else {
        reads->switches[i].failed = true;
      }
    });
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      ++reads->smps;
      pipeline_.Get(path, mad::attr::kPortInfo, p, [reads, i, p](Result<mad::Smp> r) {
        auto pi = r.ok() ? mad::Decode<mad::PortInfo>(r->data) : Result<mad::PortInfo>(r.status());
        if (pi.ok()) {
          reads->switches[i].ports[p] = *pi;
        } else {
          reads->switches[i].failed = true;
        }
      });
    }
  }
  pipeline_.WhenIdle([this, reads] {
    if (!stopped_) FinishRepairReads(reads);
  });
}

// The re-read ports against the model: a cabled port now DOWN is a lost cable (taken out);
// a port up where the model has no cable, a switch that did not answer, or a node the SM
// can no longer reach means the model cannot be patched: a heavy sweep instead.
void SubnetManager::FinishRepairReads(std::shared_ptr<RepairReads> reads) {
  auto fall_back = [this](const std::string& why) {
    Log(LogName::kSm).info("repair sweep {}: {}; heavy sweep instead", current_.number, why);
    ++counters_.repair_fallbacks;
    sweeping_ = false;
    RequestHeavySweep(fmt::format("{} ({})", repair_reason_, why));
  };
  if (state() != mad::SmState::kMaster) return fall_back("no longer master");
  DiscoveryResult r = *discovered_;
  r.issues.clear();
  Fabric& f = r.fabric;
  size_t lost = 0;
  for (const RepairReads::Switch& sw : reads->switches) {
    const Node& node = f.node(sw.node);
    if (sw.failed) return fall_back(fmt::format("{} did not answer", node.description));
    DiscoveredNode& dn = r.nodes[sw.node];
    dn.switch_info = sw.switch_info;
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const PortId id = f.port_id(sw.node, PortNum{static_cast<uint8_t>(p)});
      const mad::PortInfo& now = sw.ports[p];
      const bool down = now.port_state == static_cast<uint8_t>(PortState::kDown);
      if (f.port(id).connected() && down) {
        const PortId peer = f.port(id).peer;
        const Port& pp = f.port(peer);
        Log(LogName::kSm).info("repair sweep {}: cable {} port {} - {} port {} is down",
                               current_.number, node.description, p,
                               f.node(pp.node).description, pp.num.value());
        DiscoveredNode& far = r.nodes[pp.node];
        if (pp.num.value() < far.port_info.size())
          far.port_info[pp.num.value()].port_state = static_cast<uint8_t>(PortState::kDown);
        f.mutable_port(peer).state = PortState::kDown;
        f.Disconnect(id);
        ++lost;
      } else if (!f.port(id).connected() && !down) {
        return fall_back(fmt::format("{} port {} is up where the model has no cable",
                                     node.description, p));
      }
      if (p < dn.port_info.size()) {
        dn.port_info[p] = now;
        if (p < dn.port_info_valid.size()) dn.port_info_valid[p] = true;
      }
      f.mutable_port(id).state = static_cast<PortState>(now.port_state);
    }
  }
  // Every node must still be reachable from the SM's; one that is not left the fabric, which
  // a heavy sweep handles (its LIDs, SA records and traps 65).
  const NodeId root = f.port(sm_port_).node;
  std::vector<bool> seen(f.node_count(), false);
  std::deque<NodeId> queue{root};
  seen[root] = true;
  size_t reached = 1;
  while (!queue.empty()) {
    const NodeId n = queue.front();
    queue.pop_front();
    if (!f.node(n).is_switch() && n != root) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      const Port& port = f.port(f.port_id(n, PortNum{static_cast<uint8_t>(p)}));
      if (!port.connected()) continue;
      const NodeId m = f.port(port.peer).node;
      if (seen[m]) continue;
      seen[m] = true;
      ++reached;
      queue.push_back(m);
    }
  }
  if (reached != f.node_count())
    return fall_back(fmt::format("{} nodes are no longer reachable", f.node_count() - reached));
  CanonicalPaths(r);
  r.smps_sent = reads->smps;
  r.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - reads->started);
  current_.repair_links_lost = lost;
  Log(LogName::kSm).info("repair sweep {}: {} switches re-read with {} SMPs, {} cables taken "
                         "out of the model",
                         current_.number, reads->switches.size(), reads->smps, lost);
  OnDiscovered(std::move(r));
}

}  // namespace ibsm::sm
