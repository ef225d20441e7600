// SubnetManager, repair sweeps: a switch that reported a port change (trap 128, or
// PortStateChange seen by a light sweep) has its ports re-read; cables that went down are
// taken out of the last sweep's model, with the nodes no longer reachable through the rest;
// behind ports that came up (a cable back, a switch that returned or rebooted) only what is
// new or changed is read (Discovery::Grow); and the sweep's later stages run on that model
// without a rediscovery of the fabric (ARCHITECTURE.md "Repair sweep"). Whatever a re-read
// cannot account for falls back to a heavy sweep.
#include "sm/sweep/subnet_manager.h"

#include <deque>
#include <optional>
#include <set>
#include <unordered_set>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/log.h"

namespace ibsm::sm {

struct RepairReads {
  struct Switch {
    NodeId node = kNoNode;
    bool failed = false;
    uint32_t pending = 0;  // reads not answered yet
    // Its reads were abandoned: their DR path crosses a cable another re-read switch
    // answered DOWN (PathCrossesLostCable), so no answer can come.
    bool cut_off = false;
    mad::SwitchInfo switch_info;
    std::vector<mad::PortInfo> ports;  // index = port number (0 unused)
  };
  // A deque: a switch that reports while the first round reads joins it (ReadInRepair), and
  // each switch's address is its reads' pipeline group.
  std::deque<Switch> switches;
  std::unordered_map<NodeId, size_t> index;  // into `switches`, by node
  // Re-read switches that could not be read over their path (cut off, or not answered with
  // their path over a lost cable): their cables are checked from the far side instead.
  std::vector<NodeId> unread;
  std::chrono::steady_clock::time_point started;
  uint64_t smps = 0;
  // After the first round: the model with the re-read switches' lost cables taken out, and
  // the second round's reads, one PortInfo per cable of each far end of a lost cable.
  std::optional<DiscoveryResult> model;
  bool spare_awaited = false;  // the model's spare copy was still being made: waited for once
  std::chrono::steady_clock::time_point spare_wait_began;
  size_t lost = 0;
  struct Probe {
    PortId port = kNoPort;  // in `model`: the neighbour's port facing the far end
    bool failed = false;
    mad::PortInfo info;
  };
  std::vector<Probe> probes;
  bool probed = false;
  // The re-read switches, their neighbours and the far ends checked: the only nodes whose
  // PortInfo the repair has new answers for, or whose neighbour's port changed.
  std::unordered_set<Guid> touched;
  size_t damped_ups = 0;  // damped cables found up again, left out of the model
  // Ports of re-read switches up where the model has no cable, or trained again (INIT where
  // the model had the cable up): what is behind them is read after the two rounds.
  std::vector<GrowFrom> grow_from;
  std::vector<std::pair<Guid, uint8_t>> grow_ports;  // grow_from by node GUID (Grow renumbers)
  bool grown = false;
  GrowStats grow;
  uint64_t grow_failed = 0;  // SMPs of the growth not answered
  bool probes_taken = false;
};

namespace {

bool AnsweredDown(const RepairReads& reads, NodeId n, uint8_t port) {
  auto it = reads.index.find(n);
  if (it == reads.index.end()) return false;
  const RepairReads::Switch& sw = reads.switches[it->second];
  return sw.pending == 0 && !sw.failed && !sw.cut_off && port < sw.ports.size() &&
         sw.ports[port].port_state == static_cast<uint8_t>(PortState::kDown);
}

// Whether the DR path from `root` crosses a cable that a re-read switch answered DOWN at its
// end: an SMP sent over it cannot arrive, nor its answer come back.
bool PathCrossesLostCable(const Fabric& f, NodeId root, const DrPath& path,
                          const RepairReads& reads) {
  NodeId x = root;
  for (uint8_t out : path) {
    if (out == 0 || out > f.node(x).num_ports) return false;
    const Port& p = f.port(f.port_id(x, PortNum{out}));
    if (!p.connected()) return true;
    const Port& q = f.port(p.peer);
    if (AnsweredDown(reads, x, out) || AnsweredDown(reads, q.node, q.num.value())) return true;
    x = q.node;
  }
  return false;
}

}  // namespace

void SubnetManager::RequestRepair(Guid guid, const std::string& reason) {
  if (stopped_) return;
  if (!options_.incremental_repair || !discovered_ || state() != mad::SmState::kMaster ||
      sm_port_ == kNoPort || !discovered_->fabric.FindNode(guid)) {
    RequestHeavySweep(reason);
    return;
  }
  // A repair still in its first round of reads reads this switch too, at once: most often a
  // neighbour of a switch that reported and died, whose answer ends the wait for that one's.
  // A switch already in the round waits for the next repair, even while its reads are out:
  // a read answered before this report may miss what it reports (a trap sent twice costs
  // that repair a few SMPs).
  if (auto round = repair_round_.lock(); round && current_.repair && sweeping_) {
    const NodeId n = *discovered_->fabric.FindNode(guid);
    if (discovered_->fabric.node(n).is_switch() && !round->index.count(n)) {
      Log(LogName::kSm).info("repair sweep {}: {} reported while it read; read in this round",
                             current_.number, discovered_->fabric.node(n).description);
      ReadInRepair(round, n);
      return;
    }
  }
  if (repair_pending_.empty()) repair_reason_ = reason;
  repair_pending_.insert(guid);
  // A sweep running or posted ends with a look at repair_pending_ (FinishHeavySweep); one
  // that only waits for the optional SL2VL and VLArb reads ends now.
  if (qos_.StopWaiting()) {
    boost::asio::post(io_, [this] {
      if (!stopped_) FinishHeavySweep();
    });
    return;
  }
  if (repair_posted_) return;
  if (sweeping_) {
    if (!CutDiscoveryShort()) CutProgrammingShort();
    return;
  }
  repair_posted_ = true;
  sweeping_ = true;
  boost::asio::post(io_, [this] { BeginRepair(); });
}

// A switch reported while a heavy sweep walks the fabric: the rest of the walk (about half a
// second at 3-tier k=32) would delay the repair, and its model is not routed yet. The walk
// stops, the repair runs now on the last model (the one the programmed tables are for), and
// the heavy sweep runs again after it (RequestHeavySweep while sweeping queues it). Not on
// the first sweep as master nor before any tables exist: there is no model to repair.
bool SubnetManager::CutDiscoveryShort() {
  if (current_.repair || stage() != Stage::kDiscovery || sweep_posted_ || !discovery_ ||
      !discovery_->running() || first_master_sweep_ || !tables_ || !discovered_ ||
      warm_takeover_ || state() != mad::SmState::kMaster)
    return false;
  discovery_->Cancel();
  ++counters_.heavy_sweeps_cut_short;
  Log(LogName::kSm).info("heavy sweep {}: {} switches reported link changes during its "
                         "discovery; the walk stops, a repair sweep runs on the last model, "
                         "and the heavy sweep runs again after it",
                         current_.number, repair_pending_.size());
  const std::string reason = pending_reason_;
  repair_posted_ = true;
  boost::asio::post(io_, [this] { BeginRepair(); });
  RequestHeavySweep(reason);  // queued: sweeping_ stays true through the repair
  return true;
}

// A switch reported while a sweep (heavy, or a repair) pushes its LFT blocks, programs
// adaptive routing (its AR LFT blocks outnumber the plain ones), brings the links up or
// configures SHARP: the SMPs of those stages by DR paths over a cut cable (SHARP's class
// 0x0B MADs by LID routes over it) (to every switch or port behind it) would
// each wait for every timeout before the sweep ended and the repair began (a minute and
// more). The stage stops, sending nothing more and no longer waiting for what is in flight,
// and the repair takes over now (HandSweepToRepair); it writes the blocks this push did not
// (their Sets unanswered, they are not known held), runs adaptive routing again, brings
// up the links this stage left, and configures SHARP again (reading back what it holds). The other programming stages (switch info, multicast) are
// short and their answers change the model: they end first, and the sweep is handed over
// before the next (StageRows).
bool SubnetManager::CutProgrammingShort() {
  const Stage s = stage();
  const bool links = s == Stage::kLinks && links_.running();
  const bool ar = s == Stage::kAdaptiveRouting && ar_.running();
  const bool sharp = s == Stage::kSharp && sharp_ && sharp_->running();
  if (s != Stage::kLftBlocks && !links && !ar && !sharp) return false;
  if (!HandSweepToRepair(links   ? "while it brought the links up"
                         : ar    ? "while it programmed adaptive routing"
                         : sharp ? "while it configured SHARP"
                                 : "while it pushed its LFT blocks"))
    return false;
  pipeline_.WhenIdle({});  // the stage's end never comes
  const size_t let_go = links   ? links_.Stop()
                        : ar    ? ar_.Stop()
                        : sharp ? sharp_->Stop()
                                : lfts_.Stop();
  Log(LogName::kSm).info("{} sweep {}: its {} stage stops ({} MADs in flight no longer "
                         "waited for)",
                         current_.repair ? "repair" : "heavy", current_.number,
                         links ? "link" : ar ? "adaptive routing" : sharp ? "SHARP" : "LFT",
                         let_go);
  return true;
}

void SubnetManager::BeginRepair() {
  repair_posted_ = false;
  if (stopped_) return;
  std::set<Guid> guids;
  guids.swap(repair_pending_);
  // A takeover from the standby's model runs as a repair before the election says MASTER.
  const bool may_write = state() == mad::SmState::kMaster ||
                         (warm_takeover_ && state() == mad::SmState::kDiscovering);
  if (!may_write || !discovered_ || sm_port_ == kNoPort) {
    sweeping_ = false;
    qos_pipeline_.set_held(false);
    RequestHeavySweep(repair_reason_);
    return;
  }
  StartSweepStats(/*repair=*/true);
  ++counters_.repair_sweeps;
  const Fabric& f = discovered_->fabric;
  std::string names;
  size_t named = 0;
  for (Guid g : guids) {
    if (named++ == 8) {
      names += fmt::format(", ... ({} switches)", guids.size());
      break;
    }
    names += (names.empty() ? "" : ", ") + f.node(*f.FindNode(g)).description;
  }
  Log(LogName::kSm).info("Entering repair sweep {} ({}; re-reading {})", current_.number,
                         repair_reason_, names);
  auto reads = std::make_shared<RepairReads>();
  reads->started = clock_.Now();
  repair_round_ = reads;
  for (Guid g : guids) {
    const NodeId n = *f.FindNode(g);
    if (f.node(n).is_switch()) ReadInRepair(reads, n);
  }
  pipeline_.WhenIdle([this, reads] {
    if (!stopped_) FinishRepairReads(reads);
  });
}

// Queues the first round's reads of switch `n`: SwitchInfo and every PortInfo. Each switch's
// reads are one pipeline group: the reads of a switch found cut off are abandoned
// (OnRepairSwitchRead), not waited for.
void SubnetManager::ReadInRepair(const std::shared_ptr<RepairReads>& reads, NodeId n) {
  const Fabric& f = discovered_->fabric;
  RepairReads::Switch sw;
  sw.node = n;
  sw.ports.resize(f.node(n).num_ports + 1);
  sw.pending = f.node(n).num_ports + 2;  // SwitchInfo, PortInfo 0..N
  const size_t i = reads->switches.size();
  reads->index.emplace(n, i);
  reads->switches.push_back(std::move(sw));
  const DrPath& path = discovered_->nodes[n].path;
  const void* group = &reads->switches[i];
  ++reads->smps;
  pipeline_.Get(
      path, mad::attr::kSwitchInfo, 0,
      [this, reads, i](Result<mad::Smp> r) {
        if (reads->switches[i].cut_off) return;
        auto si = r.ok() ? mad::Decode<mad::SwitchInfo>(r->data)
                         : Result<mad::SwitchInfo>(r.status());
        if (si.ok()) {
          reads->switches[i].switch_info = *si;
        } else {
          reads->switches[i].failed = true;
        }
        OnRepairSwitchRead(reads, i);
      },
      group, /*abandonable=*/true);
  // Port 0 too: a switch that rebooted answers with LID 0 there.
  for (uint32_t p = 0; p <= f.node(n).num_ports; ++p) {
    ++reads->smps;
    pipeline_.Get(
        path, mad::attr::kPortInfo, p,
        [this, reads, i, p](Result<mad::Smp> r) {
          if (reads->switches[i].cut_off) return;
          auto pi = r.ok() ? mad::Decode<mad::PortInfo>(r->data)
                           : Result<mad::PortInfo>(r.status());
          if (pi.ok()) {
            reads->switches[i].ports[p] = *pi;
          } else {
            reads->switches[i].failed = true;
          }
          OnRepairSwitchRead(reads, i);
        },
        group, /*abandonable=*/true);
  }
}

// One read of re-read switch `i` answered (or failed). Once all of a switch's are in and it
// answered a port DOWN, the reads of every other re-read switch whose DR path crosses that
// cable are abandoned: they cannot be answered, and waiting for their timeouts (with every
// retry, over a second) would delay the repair of the very fault they report. A switch
// that died after its trap left (its neighbours report its cables down) is the usual case.
void SubnetManager::OnRepairSwitchRead(const std::shared_ptr<RepairReads>& reads, size_t i) {
  RepairReads::Switch& sw = reads->switches[i];
  if (sw.pending > 0) --sw.pending;
  if (sw.pending > 0 || sw.failed) return;
  bool lost_cable = false;
  for (size_t p = 1; p < sw.ports.size() && !lost_cable; ++p)
    lost_cable = sw.ports[p].port_state == static_cast<uint8_t>(PortState::kDown);
  if (!lost_cable || !discovered_ || sm_port_ == kNoPort) return;
  const Fabric& f = discovered_->fabric;
  const NodeId root = f.port(sm_port_).node;
  for (RepairReads::Switch& other : reads->switches) {
    if (other.pending == 0 || other.cut_off || other.node >= discovered_->nodes.size()) continue;
    if (!PathCrossesLostCable(f, root, discovered_->nodes[other.node].path, *reads)) continue;
    other.cut_off = true;
    const size_t gone = pipeline_.Abandon(&other);
    ++counters_.repair_reads_abandoned;
    Log(LogName::kSm).debug("repair sweep {}: {} is read over a cable found down: its reads "
                            "are abandoned ({} were in flight)",
                            current_.number, f.node(other.node).description, gone);
  }
}

namespace {

// What a breadth-first walk from `root` meets without entering a node of `avoid` (CAs do
// not forward, but the root does): for each node, the node and port it was first reached
// from. Paths are spelled out only for the few nodes a repair sends to (Path).
struct Reach {
  static constexpr NodeId kUnreached = kNoNode;
  std::vector<NodeId> from;    // kUnreached: not met; the root: itself
  std::vector<uint8_t> port;   // egress port of `from`
  std::vector<uint8_t> hops;

  bool operator[](NodeId n) const { return from[n] != kUnreached; }
  DrPath Path(NodeId n) const {
    DrPath p(hops[n]);
    for (NodeId x = n; hops[x] > 0; x = from[x]) p[hops[x] - 1] = port[x];
    return p;
  }
};

Reach PathsAvoiding(const Fabric& f, NodeId root, const std::set<NodeId>& avoid) {
  Reach r;
  r.from.assign(f.node_count(), Reach::kUnreached);
  r.port.assign(f.node_count(), 0);
  r.hops.assign(f.node_count(), 0);
  r.from[root] = root;
  std::vector<NodeId> queue{root};
  for (size_t i = 0; i < queue.size(); ++i) {
    const NodeId n = queue[i];
    if (n != root && !f.node(n).is_switch()) continue;
    if (r.hops[n] >= mad::kMaxDrHops) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      const Port& port = f.port(f.port_id(n, PortNum{static_cast<uint8_t>(p)}));
      if (!port.connected()) continue;
      const NodeId m = f.port(port.peer).node;
      if (r[m] || avoid.count(m)) continue;
      r.from[m] = n;
      r.port[m] = static_cast<uint8_t>(p);
      r.hops[m] = static_cast<uint8_t>(r.hops[n] + 1);
      queue.push_back(m);
    }
  }
  return r;
}

// Takes the cable at `id` out of `r`: both ends DOWN in the model.
void TakeOut(DiscoveryResult& r, PortId id) {
  Fabric& f = r.fabric;
  for (PortId end : {id, f.port(id).peer}) {
    const Port& e = f.port(end);
    DiscoveredNode& dn = r.nodes[e.node];
    if (e.num.value() < dn.port_info.size())
      dn.port_info[e.num.value()].port_state = static_cast<uint8_t>(PortState::kDown);
    f.mutable_port(end).state = PortState::kDown;
  }
  f.Disconnect(id);
}

}  // namespace

// The re-read ports against the model, in two rounds. First the reporting switches: a
// cabled port now DOWN is a lost cable, taken out. Then the far end of each lost cable that
// is a switch not re-read itself: it may have died, and the traps of its other neighbours
// may be lost on routes through it, so each of its other cables is checked from the
// neighbour's side, one PortInfo Get by a path that avoids those far ends (a dead switch is
// never asked, so no read waits for a timeout). Then a node no longer reachable from the
// SM's has left, and is taken out. A port up where the model has no cable, a switch or a
// neighbour that did not answer, or one that cannot be reached but through a suspect means
// the model cannot be patched: a heavy sweep instead. A port up where the model has no cable,
// or one trained again, is looked behind (Discovery::Grow) before the nodes cut off leave.
void SubnetManager::FinishRepairReads(std::shared_ptr<RepairReads> reads) {
  repair_round_.reset();  // the first round is over: later reports wait for the next repair
  auto fall_back = [this](const std::string& why) {
    Log(LogName::kSm).info("repair sweep {}: {}; heavy sweep instead", current_.number, why);
    ++counters_.repair_fallbacks;
    qos_pipeline_.set_held(false);
    repair_restarts_ = 0;
    repair_noted_.clear();
    sweeping_ = false;
    RequestHeavySweep(fmt::format("{} ({})", repair_reason_, why));
  };
  // A check from a far end's neighbour that was not answered, while other switches reported
  // meanwhile (a burst: 16 cables at once, traps from both ends): its path most likely
  // crossed a cable they report. The repair begins again with them and the switches it
  // re-read, so the next round's paths avoid what they lost; a heavy sweep only when that
  // does not settle it.
  constexpr uint32_t kMaxRepairRestarts = 3;
  auto restart_or_fall_back = [this, &reads, &fall_back](const std::string& why) {
    if (repair_pending_.empty() || repair_restarts_ >= kMaxRepairRestarts) return fall_back(why);
    ++repair_restarts_;
    ++counters_.repair_restarts;
    Log(LogName::kSm).info("repair sweep {}: {}; {} more switches reported meanwhile, begun "
                           "again with them",
                           current_.number, why, repair_pending_.size());
    sweeping_ = false;
    const Fabric& before = discovered_->fabric;
    for (const RepairReads::Switch& sw : reads->switches)
      RequestRepair(before.node(sw.node).guid, repair_reason_);
  };
  if (state() != mad::SmState::kMaster &&
      !(warm_takeover_ && state() == mad::SmState::kDiscovering))
    return fall_back("no longer master");
  if (!reads->model) {
    // Right after SUBNET UP the spare copy of the model is still being made: the repair takes
    // it when it is ready rather than copying the model beside it, on the io thread, at once.
    if (!reads->spare_awaited) {
      reads->spare_awaited = true;
      reads->spare_wait_began = clock_.Now();
      if (model_spare_.WhenReady(discovered_, model_version_, io_, [this, reads] {
            if (stopped_) return;
            Log(LogName::kSm).info(
                "repair sweep {}: waited {:.1f} ms for the model's spare copy", current_.number,
                std::chrono::duration<double, std::milli>(clock_.Now() - reads->spare_wait_began)
                    .count());
            FinishRepairReads(reads);
          })) {
        ++counters_.repair_spare_awaited;
        return;
      }
    }
    const NodeId root = discovered_->fabric.port(sm_port_).node;
    const uint64_t kept = model_spare_.taken();
    reads->model.emplace(model_spare_.Take(discovered_, model_version_));
    if (model_spare_.taken() != kept) ++counters_.repair_models_kept;
    DiscoveryResult& r = *reads->model;
    r.issues.clear();
    Fabric& f = r.fabric;
    std::set<NodeId> reread, far_ends;
    // A switch not read (its reads abandoned, or not answered) is checked as a far end is,
    // its cables from their other ends: most often it died after its trap left, before
    // its neighbours' traps came (or theirs were lost on routes through it). Below, if those
    // checks leave it cabled, it is alive and its own ports are not known: a heavy sweep.
    for (RepairReads::Switch& sw : reads->switches) {
      if (!sw.failed && !sw.cut_off) {
        reread.insert(sw.node);
        continue;
      }
      if (sw.node == root)
        return fall_back(fmt::format("{} did not answer", f.node(sw.node).description));
      Log(LogName::kSm).info("repair sweep {}: {} {}; its cables are checked from their far "
                             "ends",
                             current_.number, f.node(sw.node).description,
                             sw.cut_off ? "is read over a cable found down" : "did not answer");
      reads->unread.push_back(sw.node);
      far_ends.insert(sw.node);
    }
    for (const RepairReads::Switch& sw : reads->switches) {
      if (!reread.count(sw.node)) continue;
      const Node& node = f.node(sw.node);
      DiscoveredNode& dn = r.nodes[sw.node];
      dn.switch_info = sw.switch_info;
      reads->touched.insert(node.guid);
      {
        const PortId p0 = f.port_id(sw.node, PortNum{0});
        if (!dn.port_info.empty()) {
          dn.port_info[0] = sw.ports[0];
          if (!dn.port_info_valid.empty()) dn.port_info_valid[0] = true;
        }
        f.mutable_port(p0).lid = Lid{sw.ports[0].lid};
        f.mutable_port(p0).lmc = sw.ports[0].lmc;
      }
      for (uint32_t p = 1; p <= node.num_ports; ++p) {
        const PortId id = f.port_id(sw.node, PortNum{static_cast<uint8_t>(p)});
        if (f.port(id).connected())
          reads->touched.insert(f.node(f.port(f.port(id).peer).node).guid);
        const mad::PortInfo& now = sw.ports[p];
        const bool down = now.port_state == static_cast<uint8_t>(PortState::kDown);
        if (f.port(id).connected() && down) {
          const Port& pp = f.port(f.port(id).peer);
          Log(LogName::kSm).info("repair sweep {}: cable {} port {} - {} port {} is down",
                                 current_.number, node.description, p,
                                 f.node(pp.node).description, pp.num.value());
          if (f.node(pp.node).is_switch() && !reread.count(pp.node) && pp.node != root)
            far_ends.insert(pp.node);
          if (repair_noted_.emplace(node.guid, static_cast<uint8_t>(p)).second) NoteCableDown(f, id);
          TakeOut(r, id);
          ++reads->lost;
        } else if (!f.port(id).connected() &&
                   damper_.Damped({node.guid, static_cast<uint8_t>(p)})) {
          // A damped cable stays out of the model until its hold runs out; a change of its
          // state means it still flaps, and starts the hold again.
          damper_.NoteState({node.guid, static_cast<uint8_t>(p)}, !down, clock_.Now());
          if (!down) ++reads->damped_ups;
          ArmDampingTimer();
        } else if (!f.port(id).connected() && !down) {
          reads->grow_from.push_back({sw.node, static_cast<uint8_t>(p)});
        } else if (f.port(id).connected() &&
                   now.port_state == static_cast<uint8_t>(PortState::kInit) &&
                   f.port(id).state != PortState::kInit) {
          // Down and up again since the model was made (a switch that rebooted, a cable
          // pulled and put back, maybe elsewhere): who is behind it is asked again.
          reads->grow_from.push_back({sw.node, static_cast<uint8_t>(p)});
        }
        if (p < dn.port_info.size()) {
          dn.port_info[p] = now;
          if (p < dn.port_info_valid.size()) dn.port_info_valid[p] = true;
        }
        f.mutable_port(id).state = static_cast<PortState>(now.port_state);
      }
    }
    if (!far_ends.empty()) {
      // A far end or neighbour the SM no longer reaches at all leaves with the rest of what
      // is cut off (below); only the reachable ones are asked.
      const auto reachable = PathsAvoiding(f, root, {});
      const auto paths = PathsAvoiding(f, root, far_ends);
      for (NodeId far : far_ends) {
        if (!reachable[far]) continue;
        for (uint32_t p = 1; p <= f.node(far).num_ports; ++p) {
          const Port& port = f.port(f.port_id(far, PortNum{static_cast<uint8_t>(p)}));
          if (!port.connected()) continue;
          const Port& nb = f.port(port.peer);
          // A CA behind a dead switch leaves with it; a switch already re-read was seen.
          if (!f.node(nb.node).is_switch() || reread.count(nb.node) ||
              far_ends.count(nb.node) || !reachable[nb.node])
            continue;
          if (!paths[nb.node]) {
            return fall_back(fmt::format("{} is reachable only through {}",
                                         f.node(nb.node).description, f.node(far).description));
          }
          reads->probes.push_back({port.peer, false, {}});
        }
      }
      reads->probed = true;
      for (size_t i = 0; i < reads->probes.size(); ++i) {
        const Port& nb = f.port(reads->probes[i].port);
        ++reads->smps;
        pipeline_.Get(paths.Path(nb.node), mad::attr::kPortInfo, nb.num.value(),
                      [reads, i](Result<mad::Smp> got) {
                        auto pi = got.ok() ? mad::Decode<mad::PortInfo>(got->data)
                                           : Result<mad::PortInfo>(got.status());
                        if (pi.ok()) {
                          reads->probes[i].info = *pi;
                        } else {
                          reads->probes[i].failed = true;
                        }
                      });
      }
      pipeline_.WhenIdle([this, reads] {
        if (!stopped_) FinishRepairReads(reads);
      });
      return;
    }
  }
  DiscoveryResult& r = *reads->model;
  Fabric& f = r.fabric;
  if (!reads->probes_taken) {
    reads->probes_taken = true;
    for (const RepairReads::Probe& probe : reads->probes) {
      const Port& nb = f.port(probe.port);
      if (probe.failed)
        return restart_or_fall_back(fmt::format("{} did not answer", f.node(nb.node).description));
      reads->touched.insert(f.node(nb.node).guid);
      if (nb.connected()) reads->touched.insert(f.node(f.port(nb.peer).node).guid);
      if (probe.info.port_state != static_cast<uint8_t>(PortState::kDown)) continue;
      const Port& pp = f.port(nb.peer);
      Log(LogName::kSm).info("repair sweep {}: cable {} port {} - {} port {} is down (checked "
                             "from its far end)",
                             current_.number, f.node(nb.node).description, nb.num.value(),
                             f.node(pp.node).description, pp.num.value());
      DiscoveredNode& dn = r.nodes[nb.node];
      if (nb.num.value() < dn.port_info.size()) dn.port_info[nb.num.value()] = probe.info;
      NoteCableDown(f, probe.port);
      TakeOut(r, probe.port);
      ++reads->lost;
    }
  }
  if (!reads->unread.empty() && !reads->grown) {
    // A switch not read that the checks left cabled is alive: what its own ports say is not
    // known, so the model cannot be patched. (Before the growth: it renumbers the nodes.)
    const auto reach = PathsAvoiding(f, discovered_->fabric.port(sm_port_).node, {});
    for (NodeId u : reads->unread)
      if (reach[u])
        return fall_back(fmt::format("{} was not read and is still cabled",
                                     f.node(u).description));
  }
  if (!reads->grown && !reads->grow_from.empty()) {
    // Behind the ports that came up, before what is cut off leaves: a node met there may be
    // one the model still holds (a switch that rebooted, the far end of a cable put back).
    reads->grown = true;
    for (const GrowFrom& g : reads->grow_from)
      reads->grow_ports.emplace_back(f.node(g.node).guid, g.port);
    discovery_ = std::make_unique<Discovery>(pipeline_);
    DiscoveryResult base = std::move(r);
    reads->model.reset();
    discovery_->Grow(std::move(base), reads->grow_from,
                     [this, reads](DiscoveryResult grown, GrowStats stats) {
                       if (stopped_) return;
                       reads->smps += grown.smps_sent;
                       reads->grow = stats;
                       reads->grow_failed = grown.smps_failed;
                       reads->model.emplace(std::move(grown));
                       FinishRepairReads(reads);
                     });
    return;
  }
  if (reads->grow_failed > 0) {
    return fall_back(fmt::format("{} reads behind the ports that came up were not answered",
                                 reads->grow_failed));
  }
  if (reads->grown) {
    const GrowStats& g = reads->grow;
    Log(LogName::kSm).info("repair sweep {}: behind {} ports that came up: {} cables put in "
                           "({} moved), {} nodes joined, {} read again ({} no longer held what "
                           "the model said), {} cables found down",
                           current_.number, reads->grow_from.size(), g.cables_added,
                           g.cables_moved, g.nodes_added, g.nodes_reread, g.forgot,
                           g.cables_down);
    reads->lost += g.cables_down + g.cables_moved;
  }
  repair_restarts_ = 0;
  repair_noted_.clear();
  // The growth renumbered the nodes (GUID order): the SM's node is the one with no path.
  NodeId root = kNoNode;
  for (NodeId n = 0; n < r.nodes.size() && root == kNoNode; ++n)
    if (r.nodes[n].path.empty()) root = n;
  if (root == kNoNode) return fall_back("the SM's own node is not in the repaired model");
  // A node the SM can no longer reach left the subnet (a switch that died, a host whose
  // cable was cut, everything behind a leaf that lost its uplinks): it is taken out of the
  // model as a discovery that did not find it would leave it. What follows OnDiscovered
  // treats it as a heavy sweep does: its LIDs kept for its return in guid2lid, its SA
  // records and multicast memberships dropped, trap 65 for its ports.
  const auto reach = PathsAvoiding(f, root, {});
  std::vector<bool> seen(f.node_count(), false);
  size_t left = 0;
  std::string names;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    seen[n] = reach[n];
    if (seen[n]) continue;
    if (left < 8) names += (left ? ", " : "") + f.node(n).description;
    ++left;
  }
  if (left > 0) {
    Log(LogName::kSm).info("repair sweep {}: {} nodes no longer reachable, taken out of the "
                           "model ({}{})",
                           current_.number, left, names, left > 8 ? ", ..." : "");
    // KeepNodes keeps the nodes left in their order, each with its ports in a row.
    std::vector<std::pair<PortId, uint32_t>> kept;  // old first port, port count
    kept.reserve(f.node_count() - left);
    for (NodeId n = 0; n < f.node_count(); ++n) {
      if (seen[n]) kept.emplace_back(f.node(n).first_port, f.node(n).num_ports);
      else if (!f.node(n).is_switch()) sweep_.renumbered.switches_only = false;
    }
    sweep_.renumbered.ports.assign(f.port_count(), kNoPort);
    KeepNodes(r, seen);
    for (NodeId n = 0; n < kept.size(); ++n)
      for (uint32_t i = 0; i <= kept[n].second; ++i)
        sweep_.renumbered.ports[kept[n].first + i] = r.fabric.node(n).first_port + i;
  } else {
    CanonicalPaths(r);
  }
  r.smps_sent = reads->smps;
  r.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      clock_.Now() - reads->started);
  current_.repair_links_lost = reads->lost;
  current_.repair_nodes_lost = left;
  if (warm_takeover_ && (reads->lost > 0 || reads->grown) && !warm_lfts_.empty()) {
    // The fabric changed since the standby's last refresh: the master may have written
    // blocks since the standby read them. Every block is read back instead.
    Log(LogName::kHa).info("takeover: the fabric changed since the standby's model; LFT "
                           "blocks and P_Key tables are read back, not taken from the "
                           "standby's reads");
    warm_lfts_.clear();
    partitions_.ForgetAssumed();
  }
  current_.repair_links_up = reads->grow.cables_added;
  current_.repair_nodes_joined = reads->grow.nodes_added;
  if (reads->grown) ++counters_.repair_sweeps_grown;
  // The later stages may look at these nodes alone (RepairIsLocal) only when the sweep before
  // left nothing to retry: it ended SUBNET UP, and it was not a heavy sweep cut short for
  // this repair (whose fresh discovery may hold ports no stage has configured yet); and only
  // when what came up is cables between switches the model holds, with the ends of each
  // touched (CablesBackOnly). New nodes, a switch that rebooted (its P_Key tables cleared),
  // a cable moved, or an end port back need every stage, as after a discovery.
  sweep_.touched.clear();
  // A repair that handed over to this one: the nodes it touched too, or the whole fabric if
  // it looked at the whole fabric (its stages may have left any of them half done).
  const bool carried_whole = handed_over_ && handed_over_->touched.empty();
  const bool grown_local = reads->grown && left == 0 && CablesBackOnly(*reads, r);
  if (last_.subnet_up && !repair_follows_cut_short_ && !first_master_sweep_ &&
      !ha_.took_over() && (!reads->grown || grown_local) && !carried_whole) {
    sweep_.touched = std::move(reads->touched);
    if (handed_over_)
      sweep_.touched.insert(handed_over_->touched.begin(), handed_over_->touched.end());
  }
  if (!sweep_.touched.empty()) ++counters_.repair_sweeps_local;
  repair_follows_cut_short_ = false;
  Log(LogName::kSm).info("repair sweep {}: {} switches re-read and {} far-end cables checked "
                         "with {} SMPs; {} cables and {} nodes taken out of the model",
                         current_.number, reads->switches.size(), reads->probes.size(),
                         reads->smps, reads->lost, left);
  DiscoveryResult done = std::move(r);
  reads->model.reset();
  OnDiscovered(std::move(done));
}

// A repair that grew found nothing behind the ports that came up but switches the model
// holds, each as it was (no node joined, none forgot its tables, no cable moved or found
// down), over cables between switches only; the nodes keep their NodeIds (the same GUIDs in
// the same order as the model before). Then every port that changed is a port of a re-read
// switch or of the far end of a cable that came back: those far ends join `touched`, and the
// stages may look at the touched nodes alone. A switch-to-switch cable carries no P_Key
// table the plan names (end ports and the switch ports facing them), and its ends get their
// link fields with their ARMED Set (LinkStage).
bool SubnetManager::CablesBackOnly(RepairReads& reads, const DiscoveryResult& r) const {
  const GrowStats& g = reads.grow;
  if (g.nodes_added != 0 || g.forgot != 0 || g.cables_moved != 0 || g.cables_down != 0)
    return false;
  const Fabric& f = r.fabric;
  const Fabric& was = discovered_->fabric;
  if (f.node_count() != was.node_count()) return false;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).guid != was.node(n).guid) return false;
  std::vector<Guid> ends;
  for (const auto& [guid, num] : reads.grow_ports) {
    const std::optional<NodeId> n = f.FindNode(guid);
    if (!n || num == 0 || num > f.node(*n).num_ports || !f.node(*n).is_switch()) return false;
    const Port& port = f.port(f.port_id(*n, PortNum{num}));
    if (!port.connected()) continue;  // not up after all: nothing put in there
    const NodeId peer = f.port(port.peer).node;
    if (!f.node(peer).is_switch()) return false;
    ends.push_back(guid);
    ends.push_back(f.node(peer).guid);
  }
  reads.touched.insert(ends.begin(), ends.end());
  return true;
}

// --- link flap damping ----------------------------------------------------------------

void SubnetManager::NoteCableDown(const Fabric& f, PortId p) {
  const Port& a = f.port(p);
  if (!a.connected()) return;
  const Port& b = f.port(a.peer);
  const LinkDamper::End ea{f.node(a.node).guid, a.num.value()};
  const LinkDamper::End eb{f.node(b.node).guid, b.num.value()};
  if (damper_.NoteDown(ea, eb, clock_.Now()))
    OnCableDamped(f.node(a.node).description, a.num.value(), f.node(b.node).description,
                  b.num.value());
}

void SubnetManager::NoteSwitchReport(Guid g) {
  if (damper_.options().threshold == 0) return;
  const auto now = clock_.Now();
  damper_.Touch(g, now);
  if (!discovered_) return;
  const Fabric& f = discovered_->fabric;
  auto name = [&f](Guid guid) {
    auto n = f.FindNode(guid);
    return n ? f.node(*n).description : ToString(guid);
  };
  for (const auto& [end, peer] : damper_.RecentCables(g)) {
    auto n = f.FindNode(end.first);
    if (!n || end.second > f.node(*n).num_ports) continue;
    // In the model, a repair reads the cable and counts a down itself.
    if (f.port(f.port_id(*n, PortNum{end.second})).connected()) continue;
    if (damper_.NoteDown(end, peer, now))
      OnCableDamped(name(end.first), end.second, name(peer.first), peer.second);
  }
}

void SubnetManager::OnCableDamped(const std::string& a, uint8_t pa, const std::string& b,
                                  uint8_t pb) {
  ++counters_.links_damped;
  const LinkDampingOptions& o = damper_.options();
  // Logged and counted, but not a sweep issue: the subnet is up without the cable.
  ++counters_.issues_by_id["SM-LINK-010"];
  Log(LogName::kSm).warn("SM-LINK-010 cable {} port {} - {} port {} changed state {} times "
                         "within {} s: kept out of the model until it has been quiet for {} s "
                         "(link_flap_threshold)",
                         a, pa, b, pb, o.threshold, o.window.count(), o.hold.count());
  ArmDampingTimer();
}

// Damped cables out of a freshly discovered model: disconnected, both ends DOWN, as if
// their ports had not come up; what only they connected leaves with them.
size_t SubnetManager::TakeOutDampedCables(DiscoveryResult& r) {
  if (damper_.damped() == 0) return 0;
  Fabric& f = r.fabric;
  size_t out = 0;
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& a = f.port(p);
    if (!a.connected() || a.peer < p) continue;
    const Port& b = f.port(a.peer);
    if (!damper_.Damped({f.node(a.node).guid, a.num.value()},
                        {f.node(b.node).guid, b.num.value()}))
      continue;
    Log(LogName::kSm).info("cable {} port {} - {} port {} is damped: left out of the model",
                           f.node(a.node).description, a.num.value(),
                           f.node(b.node).description, b.num.value());
    TakeOut(r, p);
    ++out;
  }
  if (out == 0) return 0;
  NodeId root = kNoNode;
  for (NodeId n = 0; n < r.nodes.size(); ++n)
    if (r.nodes[n].path.empty()) root = n;
  if (root == kNoNode) return out;
  const auto reach = PathsAvoiding(f, root, {});
  std::vector<bool> keep(f.node_count());
  for (NodeId n = 0; n < f.node_count(); ++n) keep[n] = reach[n];
  KeepNodes(r, keep);
  return out;
}

void SubnetManager::ArmDampingTimer() {
  auto next = damper_.NextRelease();
  if (!next || stopped_) return;
  const auto wait = std::max<std::chrono::steady_clock::duration>(
      *next - clock_.Now(), std::chrono::milliseconds(1));
  damping_timer_.expires_after(wait);
  damping_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_) return;
    auto released = damper_.Release(clock_.Now());
    if (!released.empty()) {
      Log(LogName::kSm).info("{} damped cable ends quiet for {} s: back into the model",
                             released.size(), damper_.options().hold.count());
      // A repair of their switches looks behind the ports (up with no cable in the model);
      // an end the model no longer holds makes it a heavy sweep (RequestRepair).
      for (const LinkDamper::End& end : released) RequestRepair(end.first, "damped cables released");
    }
    ArmDampingTimer();
  });
}

}  // namespace ibsm::sm
