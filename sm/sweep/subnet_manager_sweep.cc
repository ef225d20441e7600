// SubnetManager, the heavy sweep's stages after discovery: LIDs, routing, LFT and MFT
// pushes, link activation, QoS, and the end of the sweep (ARCHITECTURE.md section 2).
#include "sm/sweep/subnet_manager.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_set>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/log.h"
#include "routing/reroute.h"

namespace ibsm::sm {

// The heavy sweep, top to bottom. Each row's function queues its requests and, once they are
// answered, calls NextStage (or JumpTo a later row); the name is the stage's in the log line
// "sweep N stages". The finish (FinishHeavySweep) names its own parts: the optional reads it
// may wait for, the QoS Sets, publishing.
constexpr SubnetManager::StageRow SubnetManager::kStages[] = {
    {Stage::kDiscovery, "discovery", nullptr},  // a repair's re-reads in its place
    {Stage::kElection, "election", &SubnetManager::Elect},
    {Stage::kPartitions, "partitions", &SubnetManager::ProgramPKeys},
    {Stage::kLidsAndPorts, "lids and ports", &SubnetManager::ConfigureLids},
    {Stage::kRouting, "routing", &SubnetManager::Route},
    {Stage::kSwitchInfo, "switch info", &SubnetManager::ProgramSwitches},
    {Stage::kLftBlocks, "lft blocks", &SubnetManager::PushLfts},
    {Stage::kAdaptiveRouting, "adaptive routing", &SubnetManager::RunAr},
    {Stage::kMulticast, "multicast", &SubnetManager::PushMulticast},
    {Stage::kLinks, "links", &SubnetManager::ActivateAllLinks},
    {Stage::kSharp, "sharp", &SubnetManager::RunSharp},
    {Stage::kFinish, "", &SubnetManager::FinishHeavySweep},
};
std::vector<SweepEngine::Row> SubnetManager::StageRows() {
  static_assert(std::size(kStages) == static_cast<size_t>(Stage::kFinish) + 1);
  static_assert([] {  // row i runs Stage i
    for (size_t i = 0; i < std::size(kStages); ++i)
      if (static_cast<size_t>(kStages[i].stage) != i) return false;
    return true;
  }());
  std::vector<SweepEngine::Row> rows;
  for (const StageRow& r : kStages) {
    const auto run = r.run;
    // Between the programming stages a heavy sweep hands over to a repair of the switches
    // that reported meanwhile (HandSweepToRepair): the next stage's Sets may cross
    // their cut cables. Switch info follows routing's own look.
    const bool look = r.stage >= Stage::kLftBlocks && r.stage <= Stage::kLinks;
    const std::string when = fmt::format("before its {} stage", r.name);
    // A repair holds the optional SL2VL and VLArb reads off the wire until its last LFT
    // block is out (their window is half the SMPs'); every later stage, and any sweep that
    // is not a repair, lets them go on.
    const bool repair_critical = r.stage <= Stage::kLftBlocks;
    rows.push_back({r.name, run ? std::function<void()>([this, run, look, when, repair_critical] {
                                    qos_pipeline_.set_held(current_.repair && repair_critical);
                                    if (look && HandSweepToRepair(when)) return;
                                    (this->*run)();
                                  })
                                : std::function<void()>()});
  }
  return rows;
}

void SubnetManager::ConfigureLids() {
  LidsAndPortsStage::Sweep sweep;
  sweep.sm_port = sm_port_;
  sweep.took_over = ha_.took_over();
  sweep.first_master_sweep = first_master_sweep_;
  sweep.warm_takeover = warm_takeover_;
  sweep.local = LocalNodes();
  sweep.keep_assignment = !sweep.local.empty() && current_.repair_nodes_joined == 0;
  sweep.renumbered = &sweep_.renumbered.ports;
  lids_and_ports_.Run(sweep, sweep_, [this] { NextStage(); });
}

std::string SubnetManager::RoutingChain() const {
  std::string chain = options_.routing_engine.empty() ? std::string(routing::kDefaultChain)
                                                      : options_.routing_engine;
  // OpenSM falls back to minhop when the chain declines; ibsm tries updn first, which routes
  // any connected fabric without a credit loop, so minhop is reached only when updn declines
  // too (and its loops are then refused unless the operator named minhop).
  if (chain.find("no_fallback") == std::string::npos && !routing::ChainNamesMinHop(chain) &&
      chain.find("updn") == std::string::npos) {
    chain += ",updn";
  }
  return chain;
}

routing::RoutingOptions SubnetManager::RoutingOpts() const {
  routing::RoutingOptions ro = options_.routing;
  ro.lmc = options_.lids.lmc;
  return ro;
}

void SubnetManager::Route() {
  if (HandSweepToRepair("before it routed")) return;
  auto snapshot = std::make_shared<const Fabric>(discovered_->fabric);
  const std::string chain = RoutingChain();
  // A repair first keeps what still delivers and re-routes only what the fault broke
  // (routing/reroute.h), from the last good tables and the model they were routed on; not
  // from minhop's, whose routes it would mostly rebuild.
  std::shared_ptr<const routing::RoutingTables> old;
  std::shared_ptr<const Fabric> before;
  std::shared_ptr<const routing::UpDownProof> proof;
  // A repair that put cables or nodes in routes with the engine, as a heavy sweep does: the
  // old routes still deliver, and only a new spread uses what came up.
  if (current_.repair && options_.incremental_reroute && tables_ && tables_fabric_ &&
      tables_->engine != "minhop" && current_.repair_links_up == 0 &&
      current_.repair_nodes_joined == 0 && !warm_takeover_) {
    old = tables_;
    before = tables_fabric_;
    proof = tables_proof_;
  }
  // A repair that brought the model back to the inputs of the engine's last tables (a cable
  // or a switch came back as it was), or a takeover from the standby's model that its
  // standby routed (RouteStandbyModel), takes those tables: the engine would route the same
  // inputs again, and they passed verification and the credit-loop check on them. Only the
  // blocks that differ from what the switches hold are written.
  if (!old && current_.repair && engine_tables_ &&
      engine_tables_->chain == chain &&
      routing::SameRoutingInputs(*engine_tables_->fabric, *snapshot)) {
    auto routed = std::make_shared<Routed>();
    routed->fabric = snapshot;
    routed->chain = chain;
    routed->lids = std::make_unique<routing::LidMap>(*snapshot);
    routed->result = routing::ChainResult{};
    routed->reused = engine_tables_->tables;
    routed->reused_from = engine_tables_->sweep;
    routed->verify = engine_tables_->verify;
    routed->loops = engine_tables_->loops;
    routed->proof = engine_tables_->proof;
    boost::asio::post(io_, [this, routed]() mutable {
      if (!stopped_) OnRouted(std::move(*routed));
    });
    return;
  }
  // Routing, verification and the deadlock proof all run off the io thread, on the snapshot
  // (sm/sweep/route_worker.h). The proof is for a later repair's re-route: without repair
  // sweeps nothing would read it.
  RouteRequest request;
  request.fabric = snapshot;
  request.chain = chain;
  request.options = RoutingOpts();
  request.want_proof = options_.incremental_repair && options_.incremental_reroute;
  request.old = std::move(old);
  request.before = std::move(before);
  request.proof = std::move(proof);
  routing_in_flight_ = true;
  route_worker_.Route(std::move(request), io_, [this](Routed routed) {
    routing_in_flight_ = false;
    if (!stopped_) OnRouted(std::move(routed));
  });
}

// Switches reported link changes during this sweep, before it routed (`when`: "before it
// routed"), while it routed, or while it programmed the switches (CutProgrammingShort, and
// between those stages): its tables would be for a fabric that is gone, and Sets sent by a
// DR path over a cut cable wait for every timeout. Routing them, pushing them, or waiting for
// those Sets would delay the repair by the routing, the push, or minutes of timeouts; the
// repair sweep starts now instead, on this sweep's model, and does everything the rest of
// this sweep would have. The first sweep as master too: the LIDs stage is behind it, and the
// repair's does not tell a port to re-register twice (ClientReregister). Not before any
// tables exist.
//
// A repair hands over to the next repair the same way, from its routing on (its model is the
// one the next re-reads against): a second cut while it pushes is the case, a cable or switch
// that fails while the fabric is being repaired. The next repair carries its figures
// (handed_over_, added when it closes) and the nodes it touched, and writes what it left.
bool SubnetManager::HandSweepToRepair(std::string_view when) {
  if (repair_pending_.empty() || !options_.incremental_repair || !tables_ || repair_posted_ ||
      state() != mad::SmState::kMaster)
    return false;
  if (current_.repair) {
    // Before its routing the repair is still reading (its first round takes reports in,
    // RequestRepair) or setting ports on its model; a takeover's repair runs once.
    if (stage() < Stage::kRouting || warm_takeover_) return false;
    ++counters_.repairs_handed_over;
    Log(LogName::kSm).info("repair sweep {}: {} switches reported link changes {}; {}the "
                           "next repair sweep takes over",
                           current_.number, repair_pending_.size(), when,
                           stage() <= Stage::kRouting ? "its tables are not pushed, " : "");
    engine_.EndStage(kStages[static_cast<size_t>(stage())].name);  // cut short, or 0 ms
    SweepContext dropped = sweep_;
    const PipelineCounters& c = pipeline_.counters();
    dropped.stats.smps = c.gets + c.sets - sweep_.smps_at_start;
    dropped.stats.smps_failed = c.failed - sweep_.failed_at_start;
    // A push cut short never reaches the end that counts its blocks (0 before it began).
    dropped.stats.lft_blocks_sent = lfts_.run().sent;
    dropped.stats.lft_blocks_urgent = lfts_.run().urgent;
    // Its touched nodes already include those of a repair before it (FinishRepairReads).
    if (handed_over_) AddHandedOver(dropped.stats, handed_over_->stats);
    handed_over_ = std::move(dropped);
  } else {
    ++counters_.heavy_sweeps_cut_short;
    Log(LogName::kSm).info("heavy sweep {}: {} switches reported link changes {}; {}a repair "
                           "sweep takes over",
                           current_.number, repair_pending_.size(), when,
                           stage() <= Stage::kRouting ? "its tables are not pushed, " : "");
    repair_follows_cut_short_ = true;
  }
  repair_posted_ = true;
  boost::asio::post(io_, [this] { BeginRepair(); });
  return true;
}

void SubnetManager::OnRouted(Routed routed) {
  if (state() != mad::SmState::kMaster) return;  // stepped down while routing: no writes
  if (HandSweepToRepair("while it routed")) return;
  if (!routed.reroute_refused.empty()) {
    ++counters_.repair_reroutes_refused;
    Log(LogName::kRouting)
        .info("repair sweep {}: incremental re-route refused ({}); the routing engine routes "
              "it",
              current_.number, routed.reroute_refused);
  }
  auto& result = routed.result;
  if (!result.ok()) {
    ++counters_.routing_failures;
    Issue("SM-ROUTE-001", "routing failed: " + result.status().ToString() +
                              (tables_ ? "; keeping the last good tables" : ""));
    JumpTo(Stage::kLinks);
    return;
  }
  for (const auto& [name, why] : result->declined) {
    current_.declined.push_back(name + ": " + why.message());
    Log(LogName::kRouting).info("routing engine {} declined: {}", name, why.message());
  }
  const routing::RoutingTables& made = routed.reused ? *routed.reused : result->tables;
  const std::string& engine = made.engine;
  const routing::VerifyReport& report = routed.verify;
  const routing::CreditLoopReport& loops = routed.loops;
  last_check_ = RoutingCheck{engine,          false,          report,        loops,
                             routed.route_s, routed.verify_s, routed.loops_s};
  last_check_->verified_lids = routed.verified_lids;
  last_check_->loops_proven = routed.loops_proven;
  last_check_->turns = routed.loops_proven && routed.proof ? routed.proof->turns.size() : 0;
  // minhop promises shortest paths, not deadlock freedom (OpenSM's too): its credit loops are
  // reported when the operator chose minhop. Every other engine promises up*/down* routes, so
  // a cycle is a bug, and minhop reached only as the last resort after them must not program
  // a deadlock the operator did not ask for: refused, the last good tables stay.
  const bool minhop_chosen = routing::ChainNamesMinHop(options_.routing_engine);
  const bool loops_refused = !loops.acyclic && !(engine == "minhop" && minhop_chosen);
  if (!loops.acyclic) {
    std::string cycle;
    for (const auto& hop: loops.cycle) cycle += (cycle.empty() ? "" : " -> ") + hop;
    ++counters_.credit_loops_found;
    if (loops_refused) ++counters_.routing_failures;
    Log(LogName::kRouting)
        .warn("SM-ROUTE-005 {} routes have a credit loop (channel dependency cycle of {} "
              "channels){}: {}",
              engine, loops.cycle.size(),
              loops_refused ? (engine == "minhop" ? "; minhop was only the last resort: refused"
                                                  : "")
                            : "; minhop does not avoid them (use updn or ftree)",
              cycle);
    if (loops_refused) ++counters_.issues_by_id["SM-ROUTE-005"], ++sweep_.issues;
  }
  if (!report.ok || loops_refused) {
    if (!report.ok) {
      ++counters_.routing_failures;
      for (const auto& p: report.problems) Log(LogName::kRouting).warn("SM-ROUTE-003 {}", p);
    }
    Issue("SM-ROUTE-002",
          fmt::format("{} tables failed verification ({} missing entries, {} loops, {} "
                      "unreachable pairs, {}); {}",
                      engine, report.missing_entries, report.loops, report.unreachable_pairs,
                      loops.acyclic ? "no credit loop" : "a credit loop",
                      tables_ ? "keeping the last good tables"
                      : loops_refused ? "programming nothing"
                                      : "programming them anyway"));
    // Tables with a credit loop the operator did not accept are never programmed, not even
    // on the first sweep: a fabric that can deadlock is worse than one not yet routed.
    if (tables_ || loops_refused) {
      JumpTo(Stage::kLinks);
      return;
    }
  }
  current_.engine = engine;
  last_check_->accepted = true;
  if (routed.reused) {
    ++counters_.engine_tables_reused;
    Log(LogName::kRouting)
        .info("{} tables configured: {} switches, max LID {}; {} taken again (this model has "
              "the routing inputs they were made, verified and checked for credit loops on)",
              engine, made.switches.size(), routed.lids->max_lid(),
              routed.reused_from == 0 ? std::string("the tables the standby made for its model")
                                      : fmt::format("the tables of sweep {}",
                                                    routed.reused_from));
  } else if (routed.loops_proven) {
    Log(LogName::kRouting)
        .info("{} tables configured: {} switches, max LID {}; re-routed in {:.3f} s, the {} "
              "LIDs it changed verified in {:.3f} s, proven free of credit loops from them in "
              "{:.3f} s ({} down-then-up turns, none closing a loop)",
              engine, made.switches.size(), routed.lids->max_lid(), routed.route_s,
              routed.verified_lids, routed.verify_s, routed.loops_s,
              routed.proof ? routed.proof->turns.size() : 0);
  } else {
    Log(LogName::kRouting)
        .info("{} tables configured: {} switches, max LID {}; routed in {:.3f} s, verified in "
              "{:.3f} s, credit loops checked in {:.3f} s ({} channels, {} dependencies, {})",
              engine, made.switches.size(), routed.lids->max_lid(), routed.route_s,
              routed.verify_s, routed.loops_s, loops.channels, loops.dependencies,
              loops.acyclic ? "acyclic" : "CYCLE");
  }
  if (!routed.proof_refused.empty()) {
    Log(LogName::kRouting)
        .info("no up*/down* proof for these tables ({}); a repair re-route checks the whole "
              "fabric",
              routed.proof_refused);
  }
  if (routed.rerouted) {
    ++counters_.repair_reroutes;
    if (routed.loops_proven) ++counters_.repair_reroutes_proven;
    if (routed.from_spare) ++counters_.repair_tables_kept;
    Log(LogName::kRouting)
        .info("repair sweep {}: re-routed incrementally: {} of the {} LIDs whose routes the "
              "fault touched changed ({} entries); every other route kept",
              current_.number, routed.reroute.lids_rerouted, routed.reroute.lids_examined,
              routed.reroute.entries_changed);
  }
  tables_ = routed.reused ? routed.reused
                          : std::make_shared<const routing::RoutingTables>(std::move(result->tables));
  tables_fabric_ = std::move(routed.fabric);
  tables_proof_ = std::move(routed.proof);
  lft_hint_.reset();
  if (routed.rerouted && routed.rerouted_from)
    lft_hint_ = LftHint{routed.rerouted_from, tables_, std::move(routed.blocks_changed)};
  if (!routed.rerouted && !routed.reused && report.ok && loops.acyclic) {
    engine_tables_ = EngineTables{tables_fabric_, tables_,     tables_proof_, routed.chain,
                                  report,         loops,       current_.number};
  }
  lid_map_ = std::move(routed.lids);
  NextStage();
}

// Blocks of the switch at `n` that the standby saw holding what `table` wants (a takeover
// from its model, sm/sweep/subnet_manager_standby.cc): true per block. Empty when the standby
// read nothing of it, or its LinearFDBTop is no longer the one read.
std::vector<bool> SubnetManager::WarmHeld(NodeId n, const routing::SwitchTable& table,
                                          size_t blocks) const {
  const DiscoveredNode& dn = discovered_->nodes[n];
  auto it = warm_lfts_.find(discovered_->fabric.node(n).guid);
  if (it == warm_lfts_.end() || it->second.top != dn.switch_info.linear_fdb_top) return {};
  const WarmLft& w = it->second;
  std::vector<bool> held(blocks, false);
  for (size_t b = 0; b < blocks && b < w.known.size(); ++b)
    held[b] = w.known[b] && LftBlock(table, b).port == w.blocks[b];
  return held;
}

// The switch-info stage (sm/sweep/switch_info_stage.h).
void SubnetManager::ProgramSwitches() {
  if (state() != mad::SmState::kMaster) return;
  SwitchInfoStage::Sweep sweep;
  sweep.top = lid_map_->max_lid();
  sweep.tables = tables_;
  sweep.reread_assumed = !current_.repair;
  // What a standby read before taking over is read back by the first heavy sweep.
  if (warm_takeover_)
    sweep.warm_held = [this](NodeId n, size_t blocks) {
      return WarmHeld(n, *tables_->table(n), blocks);
    };
  switch_info_.Run(std::move(sweep), sweep_, [this] { NextStage(); });
}

void SubnetManager::PushLfts() {
  if (state() != mad::SmState::kMaster) return;
  lfts_.Push(discovered_->fabric, tables_, lid_map_->max_lid(),
             [this](NodeId n) -> const DrPath& { return discovered_->nodes[n].path; },
             lft_hint_ ? &*lft_hint_ : nullptr);
  lft_hint_.reset();  // another push of these tables (a repair taking over) compares them all
  pipeline_.WhenIdle([this] {
    current_.lft_blocks_sent = lfts_.run().sent;
    current_.lft_blocks_urgent = lfts_.run().urgent;
    if (stopped_) return;
    if (current_.lft_blocks_urgent > 0)
      Log(LogName::kSm).info("sweep {}: {} LFT blocks that sent LIDs to ports without a cable "
                             "written first",
                             current_.number, current_.lft_blocks_urgent);
    NextStage();
  });
}

// Adaptive routing after the plain LFT (an LFT Set turns AR off), before multicast.
void SubnetManager::RunAr() {
  ar_.Run(discovered_->fabric, discovered_->nodes,
          std::make_shared<const routing::LidMap>(*lid_map_), tables_, options_.ar, [this] {
            if (!stopped_) NextStage();
          });
}

void SubnetManager::PushMulticast() {
  PushMfts([this] { NextStage(); });
}

// Multicast (OpenSM: after unicast, before the link manager): members whose port
// this sweep did not find leave their groups, then MFT blocks go out by difference.
void SubnetManager::PushMfts(std::function<void()> then) {
  const Fabric& f = discovered_->fabric;
  mcast_dirty_ = false;
  uint32_t cap = 0;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    uint32_t c = discovered_->nodes[n].switch_info.multicast_fdb_cap;
    if (c != 0 && (cap == 0 || c < cap)) cap = c;
  }
  if (cap != 0) {
    mcast_.set_max_mlid(static_cast<uint16_t>(
        std::min<uint32_t>(0xFFFE, uint32_t{mad::kMulticastLidBase} + cap - 1)));
  }
  mcast_.Prune([&f](Guid g) {
    auto p = f.FindPort(g);
    return p && (f.node(f.port(*p).node).is_switch() || f.port(*p).connected());
  });
  mcast_dirty_ = false;  // the prune's own change is planned below
  MftPlan plan = PlanMfts(f, mcast_.groups());
  size_t queued = mft_.Push(f, discovered_->nodes, plan,
                            [this](Guid g, uint32_t pos, uint32_t block, const Status& st) {
                              Issue("SM-MFT-001",
                                    fmt::format("MFT block {} position {} Set on {} failed: {}",
                                                block, pos, ToString(g), st.ToString()));
                            });
  if (queued) {
    Log(LogName::kSm).info("{} MFT blocks queued for {} multicast trees", queued,
                           plan.trees.size());
  }
  if (then) {
    pipeline_.WhenIdle([this, then] {
      if (!stopped_) then();
    });
  }
}

void SubnetManager::OnMulticastChange() {
  // Saved by the flush timer, not here: a storm of joins costs one transaction per
  // kStateFlushInterval, and only the groups that changed are written.
  if (store_) {
    mcast_save_pending_ = true;
    ScheduleStateFlush();
  }
  if (sweeping_ || !discovered_ || stopped_) {
    mcast_dirty_ = true;
    return;
  }
  if (mcast_dirty_) return;  // a push is already posted
  mcast_dirty_ = true;
  boost::asio::post(io_, [this] {
    if (stopped_ || !mcast_dirty_) return;
    if (sweeping_ || !discovered_) return;  // the sweep (or its end) plans it
    if (state() != mad::SmState::kMaster) return;  // only the master writes MFTs
    PushMfts({});
  });
}

// SHARP needs ACTIVE links (class 0x0B MADs are GMPs); it never delays SUBNET UP's verdict:
// its problems are its own log lines.
void SubnetManager::RunSharp() {
  sharp_->Run(discovered_, [this] {
    if (!stopped_) NextStage();
  });
}

// The next repair patches a copy of this model and builds in a copy of these tables: made
// off the io thread, from the finish on (the model and tables are this sweep's for good
// then, bar a change that moves the model's version on), so that a fault right after SUBNET
// UP finds them made, rather than waiting for them and sharing the cores with them. The
// tables are copied on the routing worker (idle now): not while the LFT blocks go out,
// which it would slow down on a small management host.
void SubnetManager::KeepSpares() {
  if (!discovered_ || sm_port_ == kNoPort || !options_.incremental_repair || options_.once ||
      state() != mad::SmState::kMaster)
    return;
  model_spare_.Keep(discovered_, model_version_);
  if (options_.incremental_reroute && tables_ && tables_->engine != "minhop")
    route_worker_.KeepSpare(tables_, options_.routing.threads);
}

void SubnetManager::FinishHeavySweep() {
  engine_.CloseOpenStage();
  KeepSpares();
  // SUBNET UP waits for the optional reads, within bounds, and with qos TRUE for this
  // sweep's QoS Sets (sm/sweep/qos_stage.h); the stage enters the finish again.
  if (qos_.HoldsFinish()) return;
  const std::vector<Guid> ports_before = rereg_.known();  // traps 64/65 (PublishSweep)
  CloseSweep();
  PublishSweep(ports_before);
  engine_.EndStage("publish");
  Log(LogName::kSm).info("sweep {} stages: {}", current_.number, engine_.Summary());
  // Joins and leaves during the sweep.
  if (mcast_dirty_ && discovered_ && !stopped_ && state() == mad::SmState::kMaster) PushMfts({});
  last_ = current_;
  sweeping_ = false;
  // A takeover from the standby's model: a heavy sweep follows at once and reads back the
  // LFT blocks it took on trust (and rediscovers what a refresh may have missed).
  const bool verify = warm_takeover_ && current_.subnet_up;
  warm_takeover_ = false;
  warm_lfts_.clear();
  ContinueAfterSweep(verify);
}

// The sweep's figures, what it assigned (kept for a restart and the next sweep), its
// verdict: SUBNET UP, or how many issues kept it from being up.
void SubnetManager::CloseSweep() {
  const PipelineCounters& c = pipeline_.counters();
  current_.smps = c.gets + c.sets - sweep_.smps_at_start;
  current_.smps_failed = c.failed - sweep_.failed_at_start;
  if (handed_over_) {  // the repair that this one took over from (HandSweepToRepair)
    AddHandedOver(current_, handed_over_->stats);
    handed_over_.reset();
  }
  current_.duration = std::chrono::duration_cast<std::chrono::microseconds>(clock_.Now() -
                                                                            current_.started);
  current_.issues = sweep_.issues;
  current_.subnet_up = discovered_ && sm_port_ != kNoPort && tables_ && sweep_.issues == 0;
  // Remember what this sweep assigned so a restart and the next sweep keep it.
  if (discovered_ && sm_port_ != kNoPort) lids_and_ports_.Remember(discovered_->fabric);
  Log(LogName::kSm)
      .info("{} sweep {} done in {:.3f} s: {} nodes ({} switches, {} CAs), {} links; {} "
            "SMPs ({} failed); {} LID changes, {} PortInfo Sets ({} ClientReregister), {} LFT "
            "blocks sent ({} read), "
            "{} P_Key blocks sent ({} read), {} ports armed, {} activated ({} port state Sets "
            "read back); engine {}",
            current_.repair ? "repair" : "heavy", current_.number,
            current_.duration.count() / 1e6, current_.nodes,
            current_.switches, current_.cas, current_.links, current_.smps,
            current_.smps_failed, current_.lid_changes, current_.portinfo_sets,
            current_.client_reregisters,
            current_.lft_blocks_sent, current_.lft_blocks_read, current_.pkey_blocks_sent,
            current_.pkey_blocks_read, current_.ports_armed,
            current_.ports_activated, current_.port_state_readbacks,
            current_.engine.empty() ? "-" : current_.engine);
  if (current_.subnet_up) {
    if (first_master_sweep_) {
      // Counted over the heavy sweep a repair took over from too.
      Log(LogName::kHa).info("first master sweep: ClientReregister on {} CA ports ({})",
                             rereg_.told(),
                             rereg_.state_complete() && !ha_.took_over()
                                 ? "this SM's state file holds the SA registrations of the "
                                   "ports that still name it master"
                                 : "this SM does not hold the SA registrations clients made "
                                   "with the last master");
    }
    failed_sweeps_in_a_row_ = 0;
    first_master_sweep_ = false;
    ha_.SweepFollowedTakeover();
  } else {
    Log(LogName::kSm).warn("SM-SWEEP-001 sweep {} finished with {} issues; the subnet is not "
                           "up yet",
                           current_.number, current_.issues);
  }
  // Clients told to re-register in a sweep that ends up as master register here: from then
  // on this SM holds them all.
  std::vector<Guid> ports;
  const bool found = discovered_ && sm_port_ != kNoPort;
  if (found)
    for (PortId p: lids_and_ports_.lids().end_ports) ports.push_back(discovered_->fabric.port(p).guid);
  rereg_.SweepClosed(std::move(ports), found,
                     current_.subnet_up && state() == mad::SmState::kMaster);
}

void SubnetManager::PublishSweep(const std::vector<Guid>& ports_before) {
  // After the fabric is programmed: files never delay the fabric, nor a trap. The SA answers
  // from this sweep at once; the state writer (on its own thread in the daemon) writes the
  // dump files, then logs SUBNET UP, as OpenSM writes its dumps before it, so a script that
  // waits for the line reads this sweep's files; then the state-file rows and snapshots.
  if (discovered_ && sm_port_ != kNoPort) {
    PublishSaSnapshot();
    KeepSpares();  // asked for at the finish already, unless the model changed since
    ReportPortChanges(ports_before);
    FlushState();  // SA registrations and multicast groups not yet written, and what failed
    SweepPublication p;
    p.record = RecordOfSweep();
    if (options_.dump_lfts && !options_.dump_dir.empty()) p.groups = mcast_.groups();
    p.guid2lid = lids_and_ports_.guid2lid();
    p.perf = ViewOfPerf(perf_);
    if (current_.subnet_up) p.after_dumps = [] { Log(LogName::kSm).info("SUBNET UP"); };
    writer_.Publish(std::move(p));
  }
}

// What follows a sweep: the callback, a heavy sweep asked for meanwhile (or after a failed
// one, after a pause), a repair of the switches that reported during it, or the next light
// sweep. `verify`: it was a takeover from the standby's model that ended up.
void SubnetManager::ContinueAfterSweep(bool verify) {
  if (on_sweep_) on_sweep_(last_);
  if (stopped_ || options_.once) return;
  // The callback asked for a heavy sweep: it re-reads the switches that reported too.
  if (sweeping_) return;
  if (verify) {
    RequestHeavySweep("takeover: a heavy sweep checks the standby's model");
    return;
  }
  if (sweep_again_ || !current_.subnet_up) {
    sweep_again_ = false;
    if (!current_.subnet_up) {
      // Retry after a pause rather than at once, doubling up to a minute while sweeps keep
      // failing, so a dead HCA or a fabric that cannot be routed does not spin the SM.
      const int doublings = std::min(failed_sweeps_in_a_row_, 6);
      ++failed_sweeps_in_a_row_;
      light_timer_.expires_after(std::min(std::chrono::seconds(1 << doublings),
                                          std::chrono::seconds(60)));
      light_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) RequestHeavySweep("previous sweep had errors");
      });
      return;
    }
    // Named by the first request that came while the sweep ran (a SIGHUP, a resweep, a heavy
    // sweep cut short for a repair).
    const std::string why = queued_reason_.empty() ? std::string("change during the last sweep")
                                                   : "queued: " + queued_reason_;
    queued_reason_.clear();
    RequestHeavySweep(why);
    return;
  }
  if (!repair_pending_.empty() && state() == mad::SmState::kMaster) {
    // Switches that reported during this sweep, after it read them.
    repair_posted_ = true;
    sweeping_ = true;
    boost::asio::post(io_, [this] { BeginRepair(); });
    return;
  }
  ScheduleLightSweep();
}

}  // namespace ibsm::sm
