// The subnet manager's sweep engine (ARCHITECTURE.md): discovery, LIDs, PortInfo, routing,
// LFT push by diff, link activation, the SA snapshot and dumps, then "SUBNET UP", then the
// state rows; light sweeps between heavy ones; traps; the SMInfo answer that tells other SMs
// and tools (sminfo) who is master.
//
// Threading: every method runs on the io_context thread that owns the transport. Routing
// runs on a worker thread over an immutable fabric snapshot and posts its result back.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "ha/sm_state_machine.h"
#include "mad/attr/pkey_table.h"
#include "mad/attr/sm_info.h"
#include "mad/transport.h"
#include "routing/quality.h"
#include "routing/reroute.h"
#include "routing/routing_engine.h"
#include "routing/verify.h"
#include "sm/vendor/ar_manager.h"
#include "sm/model/discovery.h"
#include "sm/model/lid_manager.h"
#include "sm/sweep/client_reregister.h"
#include "sm/sweep/lft_programmer.h"
#include "sm/sweep/link_damping.h"
#include "sm/sweep/link_stage.h"
#include "sm/sweep/lids_and_ports.h"
#include "sm/sweep/model_spare.h"
#include "sm/sweep/partition_programmer.h"
#include "sm/sweep/port_settings.h"
#include "sm/sweep/route_worker.h"
#include "sm/sweep/sm_options.h"
#include "sm/sweep/switch_info_stage.h"
#include "sm/sweep/sweep_engine.h"
#include "sm/model/pkey_manager.h"
#include "sm/sweep/mft_programmer.h"
#include "sm/model/multicast.h"
#include "sm/sweep/qos_stage.h"
#include "sm/model/qos_tables.h"
#include "sm/sa/sa_server.h"
#include "sm/vendor/sharp_manager.h"
#include "sm/record/state_writer.h"
#include "sm/sweep/ha_agent.h"
#include "sm/sweep/trap_handler.h"
#include "sm/sweep/sm_counters.h"
#include "sm/model/smp_pipeline.h"

namespace ibsm::ha {
class StateFile;
}

namespace ibsm::sm {

class PerfManager;

// The HA counters in one line, as logged on every SM state change (log ID SM-HA-010) and
// shown by the control socket: "state changes 3, handovers sent 0 received 1, ...".
std::string HaCounterSummary(const SmCounters& c);

class SubnetManager : private HaAgent::Host, private TrapHandler::Host {
 public:
  // REQUIRES: io, transport, clock outlive this; `store` may be null (no state file).
  SubnetManager(boost::asio::io_context& io, mad::Transport& transport, const Clock& clock,
                ha::StateFile* store, SubnetManagerOptions options);
  ~SubnetManager();

  // Starts as MASTER: the first heavy sweep now, light sweeps every sweep_interval.
  // `on_sweep` (optional) runs after every heavy sweep with its figures.
  void Start(std::function<void(const SweepStats&)> on_sweep = {});
  // Queues a heavy sweep (after the one running, if any). `reason` goes to the log.
  void RequestHeavySweep(const std::string& reason);
  void Stop();
  // Writes the SA changes not yet in the state file (ServiceRecords, multicast groups) now,
  // in one transaction each. Changes are otherwise written at most once per
  // kStateFlushInterval (so a join or registration storm costs a bounded number of
  // fsyncs); Stop, the destructor and every SM state change (a takeover, a handover) flush.
  void FlushState();
  static constexpr std::chrono::milliseconds kStateFlushInterval{200};
  // A handler on the io thread threw (the daemon's loop caught it): counted and logged; the
  // sweep it may have broken is abandoned once idle and a heavy sweep starts afresh.
  void NoteInternalError(const std::string& what);
  // No SMP queued or in flight (after Stop: the last answers are in). The daemon waits for
  // this before closing the port: libumad2sim (ibsim) crashes in its own thread when a port
  // is closed with MADs in flight.
  bool quiescent() const {
    return pipeline_.idle() && qos_pipeline_.idle() && standby_pipeline_.idle();
  }
  // A repair holds the optional SL2VL and VLArb reads back until its last LFT block is out.
  bool optional_reads_held() const { return qos_pipeline_.held(); }
  // The heavy sweep running now, for progress displays: number, start, SMPs sent so far and
  // nodes found (0 until discovery ends). Empty between sweeps.
  struct SweepProgress {
    uint64_t number = 0;
    std::chrono::steady_clock::time_point started;
    uint64_t smps = 0;
    size_t nodes = 0;
  };
  std::optional<SweepProgress> sweep_in_progress() const;
  // Takes the settings that may change while running (SIGHUP): those whose option row says
  // Reloads (conf/sm_config.cc); every other one keeps its start-up value until restart.
  // Applies from the next sweep.
  void Reconfigure(const SubnetManagerOptions& o);

  const SmCounters& counters() const { return counters_; }
  const PipelineCounters& smp_counters() const { return pipeline_.counters(); }
  // Every MAD of the daemon goes through this transport (the PerfMgr's too).
  const mad::TransportCounters& transport_counters() const { return transport_.counters(); }
  const SweepStats& last_sweep() const { return last_; }
  // The engine's own model, which a running sweep changes as it goes (LIDs as programmed so
  // far); for the SM's stages and tests. Observers read published() instead.
  const Fabric* fabric() const { return discovered_ ? &discovered_->fabric : nullptr; }
  Lid sm_lid() const { return lids_and_ports_.sm_lid(); }
  Guid port_guid() const { return sm_port_guid_; }
  const SubnetManagerOptions& options() const { return options_; }
  // The clock the SM times its sweeps with (SweepStats::started, sweep_in_progress()).
  const Clock& clock() const { return clock_; }
  // What discovery read, as the engine holds it now (PortInfo of every port), or null; as
  // fabric(), for the SM's stages and tests.
  const DiscoveryResult* discovered() const { return discovered_.get(); }
  // The subnet as this SM last published it, immutable (ARCHITECTURE.md "the published
  // snapshot"): the snapshot of the last sweep that ended (the SA's), or, while STANDBY, one
  // of its latest refresh (a model without tables). Null before any. What ibsmctl nodes,
  // links and health, and the metrics, read: never the model a running sweep is changing.
  std::shared_ptr<const SubnetSnapshot> published() const { return published_; }
  // Verification and deadlock proof of the last routing the SM computed (accepted or not).
  struct RoutingCheck {
    std::string engine;
    bool accepted = false;
    routing::VerifyReport verify;
    routing::CreditLoopReport loops;
    double route_s = 0, verify_s = 0, loops_s = 0;
    // A repair's re-route checked from the LIDs it changed: those verified, and the credit
    // loops excluded by the up*/down* proof instead of CheckCreditLoops (loops then holds no
    // channel or dependency count).
    size_t verified_lids = 0;  // 0: every LID
    bool loops_proven = false;
    size_t turns = 0;  // of the proof: down-then-up turns, related and found to close no loop
  };
  const std::optional<RoutingCheck>& last_routing_check() const { return last_check_; }
  mad::SmState state() const { return ha_.state(); }
  // The SM this one polls while STANDBY (port GUID), 0 otherwise.
  Guid polled_master() const { return ha_.polled_master(); }
  // A STANDBY's model of the fabric (ARCHITECTURE.md "Warm standby"): how old it is, and
  // whether a takeover now would start from it. nullopt in any other state, or before the
  // standby has a model.
  struct StandbyModel {
    double age_s = 0;  // since its last refresh
    size_t nodes = 0, links = 0;
    bool tables_read = false;  // the LFT blocks and P_Key tables were read on this model
    double tables_age_s = 0;
    bool usable = false;  // a takeover now would start from it
  };
  std::optional<StandbyModel> standby_model() const;
  // Whether each other SM this one asked SMInfo of answered the last time (`ibsmctl ha`).
  const std::map<Guid, PeerLiveness>& peer_liveness() const { return ha_.peer_liveness(); }
  // The SA, answering class 0x03 requests from the snapshot of the last heavy sweep.
  const SaServer& sa() const { return sa_; }
  // Event subscriptions; Publish a notice there to Report it to its subscribers.
  InformManager& inform() { return sa_.inform(); }
  // Trap 66 (created) / 67 (deleted) for multicast group `mgid`, to the subscribers: the
  // multicast manager's entry point.
  void ReportMulticastGroup(bool created, const std::array<uint8_t, 16>& mgid);
  // Multicast groups (joined through the SA) and the MFT programming that follows them.
  MulticastManager& multicast() { return mcast_; }
  const MulticastManager& multicast() const { return mcast_; }
  const MftCounters& mft_counters() const { return mft_.counters(); }
  // Adaptive routing: what each switch runs, the tables behind it (sm/vendor/ar_manager.h).
  const ArManager& ar() const { return ar_; }
  // SHARP trees (sharp_enable): what the last heavy sweep built and programmed.
  const SharpManager& sharp() const { return *sharp_; }

  // The PerfMgr whose error counters and findings the state file's links and health
  // snapshots carry (ha::kSnapshot*); null: none (perfmgr FALSE). REQUIRES: outlives this,
  // or is reset to null first.
  void set_perf(const PerfManager* perf) { perf_ = perf; }
  // Told the model each time the SM publishes one to the SA as master (the end of a sweep,
  // the optional reads' records), and null when the SM leaves MASTER or publishes while not
  // master: the immutable model an observer such as the PerfMgr works from, without asking
  // the engine. On the io thread; add before Start.
  using ModelObserver = std::function<void(std::shared_ptr<const DiscoveryResult>)>;
  void AddModelObserver(ModelObserver o) { model_observers_.push_back(std::move(o)); }
  // After a PerfMgr sweep: stores the health and links answers in the state file when they
  // changed (heavy sweeps store nodes, links and health themselves).
  // From the last sweep's published snapshot, not the model a running sweep is changing.
  void SaveSweepSnapshots() {
    const std::shared_ptr<const SaSnapshot> s = sa_.snapshot();
    writer_.SaveSweepSnapshots(s ? s->discovery : nullptr, ViewOfPerf(perf_));
  }
  // Runs a write of another part of the SM on the state writer (its thread in the daemon).
  void RunOnStateWriter(std::function<void()> job) { writer_.Write(std::move(job)); }

 private:

  void WarnAboutDefaultKeys();
  void BeginHeavySweep();
  void StartSweepStats(bool repair);
  // --- the heavy sweep as a table of stages (kStages, run by engine_; ARCHITECTURE.md
  // "Heavy sweep") ---
  // A repair sweep runs the same rows after its re-reads, which take discovery's place.
  enum class Stage : uint8_t {
    kDiscovery,
    kElection,
    kPartitions,
    kLidsAndPorts,
    kRouting,
    kSwitchInfo,
    kLftBlocks,
    kAdaptiveRouting,
    kMulticast,
    kLinks,
    kSharp,
    kFinish,
  };
  struct StageRow {
    Stage stage;
    std::string_view name;         // in the log line "sweep N stages"
    void (SubnetManager::*run)();  // null: entered by BeginHeavySweep or BeginRepair
  };
  static const StageRow kStages[];
  std::vector<SweepEngine::Row> StageRows();
  // The running stage ends (its wall time goes to the sweep's stage times) and the next row
  // runs. Each stage calls it once, when its requests are answered.
  void NextStage() { engine_.Next(); }
  // The same to a later row: routing refused, or nothing to program (the links, the finish).
  void JumpTo(Stage next) { engine_.JumpTo(static_cast<size_t>(next)); }
  Stage stage() const { return static_cast<Stage>(engine_.row()); }
  // Rows that are one call each.
  void Elect();
  void RunAr();
  void PushMulticast();
  void ActivateAllLinks();
  void RunSharp();
  // A repair whose port stages need to look only at sweep_.touched: the last sweep left
  // nothing to retry, and nothing but the touched nodes' ports changed.
  bool RepairIsLocal() const { return current_.repair && !sweep_.touched.empty(); }
  // By NodeId: the nodes whose ports a local repair compares; empty: every node's.
  std::vector<bool> LocalNodes() const;
  // Repair sweeps (sm/sweep/subnet_manager_repair.cc): the switch at `guid` reported a port change.
  void RequestRepair(Guid guid, const std::string& reason);
  void BeginRepair();
  void FinishRepairReads(std::shared_ptr<struct RepairReads> reads);
  bool CablesBackOnly(struct RepairReads& reads, const DiscoveryResult& r) const;
  void OnRepairSwitchRead(const std::shared_ptr<struct RepairReads>& reads, size_t i);
  void ReadInRepair(const std::shared_ptr<struct RepairReads>& reads, NodeId n);
  // Link flap damping (sm/sweep/link_damping.h): notes that the cable at `p` of `f` went down;
  // takes damped cables out of a discovered model (and what they alone connected); arms the
  // release timer, whose expiry brings released cables back with a heavy sweep.
  void NoteCableDown(const Fabric& f, PortId p);
  // A trap 128 from switch `g` (acted on or ignored as a repeat): its damped cables' holds
  // restart, and each of its cables out of the model after a recent down counts a change.
  void NoteSwitchReport(Guid g);
  std::optional<Guid> SwitchOfLid(uint16_t lid) const;
  void OnCableDamped(const std::string& a, uint8_t pa, const std::string& b, uint8_t pb);
  size_t TakeOutDampedCables(DiscoveryResult& r);
  void ArmDampingTimer();
  void OnDiscovered(DiscoveryResult r);
  void ProgramPKeys();
  void ConfigureLids();
  // The engines a sweep asks (routing_engine, updn added as OpenSM adds minhop) and their
  // options.
  std::string RoutingChain() const;
  routing::RoutingOptions RoutingOpts() const;
  void Route();
  // A standby routes its model once the blocks are read on it (on the worker, as a sweep
  // does) into engine_tables_, so a takeover whose model has the same routing inputs does
  // not route (sm/sweep/subnet_manager_standby.cc).
  void RouteStandbyModel();
  bool standby_routing_ = false;
  // What the routing pool hands back to the io thread.
  // Abandons this heavy sweep for a repair of the switches that reported meanwhile; false
  // when it may not (see the definitions). CutDiscoveryShort: during its discovery (the
  // heavy sweep runs again after the repair); HandSweepToRepair: after it (a repair too,
  // to the next repair, from its routing on);
  // CutProgrammingShort: during its LFT push or link stage.
  bool CutDiscoveryShort();
  bool CutProgrammingShort();  // during its LFT push or link stage (subnet_manager_repair.cc)
  bool HandSweepToRepair(std::string_view when);
  void OnRouted(Routed routed);
  void ProgramSwitches();
  void PushLfts();
  // Prunes members the sweep no longer sees and programs the MFTs, then runs `then`.
  void PushMfts(std::function<void()> then);
  // A join or leave changed a group: program the MFTs now, or after the running sweep.
  void OnMulticastChange();
  // False when the state file's groups could not be read.
  bool LoadMulticastGroups();
  void FinishHeavySweep();
  // The finish's parts, in order (subnet_manager_sweep.cc).
  void CloseSweep();
  void PublishSweep(const std::vector<Guid>& ports_before);
  void ContinueAfterSweep(bool verify);
  void ScheduleLightSweep();
  void LightSweep();
  // --- HA: what the SMInfo protocol (ha_) asks of the sweeps (sm/sweep/ha_agent.h) ---
  const DiscoveryResult* HaDiscovered() const override { return discovered_.get(); }
  bool HaStopped() const override { return stopped_; }
  void HaFence(bool fenced) override;
  void HaApplyActions(uint32_t actions, const std::string& why) override;
  void HaLeftMaster() override {
    rereg_.LeftMaster();
    for (const auto& o : model_observers_) o(nullptr);
  }
  void HaFlushState() override { FlushState(); }
  void HaStandby() override;
  void HaContinueSweep(bool qos_reads) override;
  void HaEndSweep() override { sweeping_ = false; }
  void HaPublishOtherSms(std::vector<mad::SmInfoRecord> records) override;
  bool HaNoteStateWrite(const char* id, const Status& s, std::string_view what) override {
    return NoteStateWrite(id, s, what);
  }
  void OnUnsolicited(mad::MadMessage msg);
  // --- traps: what the trap handler (traps_) asks of the sweeps (sm/sweep/trap_handler.h) ---
  const DiscoveryResult* TrapDiscovered() const override { return discovered_.get(); }
  mad::SmState TrapSmState() const override { return state(); }
  Lid TrapSmLid() const override { return lids_and_ports_.sm_lid(); }
  std::optional<Guid> TrapSwitchOfLid(uint16_t lid) const override { return SwitchOfLid(lid); }
  void TrapSwitchReported(Guid sw, bool repair, const std::string& why) override;
  void TrapRequestHeavySweep(const std::string& why) override { RequestHeavySweep(why); }
  DrPath TrapPortInfoPath(PortId p) const override { return PortInfoPath(p); }
  void TrapPublish(const mad::Notice& notice) override;
  std::array<uint8_t, 16> PortGid(Guid port_guid) const;
  void PublishSmNotice(uint16_t trap, const std::array<uint8_t, 16>& gid);
  void ReportPortChanges(const std::vector<Guid>& before);
  void PublishSaSnapshot();
  std::shared_ptr<const routing::RoutingTables> TablesOfModel() const;
  // What this heavy sweep left, for the state writer (writer_).
  SweepRecord RecordOfSweep() const;
  // A state-file write's outcome, counted and logged by the writer. Returns s.ok().
  bool NoteStateWrite(const char* id, const Status& s, std::string_view what) {
    return writer_.NoteStateWrite(id, s, what);
  }
  void Issue(const std::string& id, const std::string& message);
  // The DR path a PortInfo Set for `p` takes: one that arrives on `p` itself, since a CA
  // refuses a Set of any other port than the one the SMP came in by (IBA 14.2.5.6, ibsim).
  DrPath PortInfoPath(PortId p) const;

  boost::asio::io_context& io_;
  mad::Transport& transport_;
  const Clock& clock_;
  ha::StateFile* store_;
  SubnetManagerOptions options_;
  // Before every member that binds it (the partition stage, the state writer, HA, traps).
  SmCounters counters_;
  // The heavy and repair sweeps' stages (kStages) and the running sweep's context: its
  // figures (current_), the nodes a repair touched, how it renumbered ports.
  SweepEngine engine_{clock_, StageRows()};
  SweepContext& sweep_ = engine_.context();
  SweepStats& current_ = sweep_.stats;
  SmpPipeline pipeline_;
  // A standby's reads of the fabric (Gets only; always fenced), beside the sweep's pipeline
  // so a takeover never waits behind them (sm/sweep/subnet_manager_standby.cc).
  SmpPipeline standby_pipeline_;
  // Optional reads (SL2VL, VLArb) on a pipeline of their own, never the sweep's.
  SmpPipeline qos_pipeline_;
  // The SL2VL and VLArb reads on it, the finish's wait for them, the QoS Sets.
  QosStage qos_{io_, qos_pipeline_, options_, counters_, sweep_,
                {[this] { return discovered_; },
                 [this](Guid g) { return lfts_.top(g); },
                 [this] { return state() == mad::SmState::kMaster; },
                 [this] { return sweeping_; },
                 [this] { return repair_pending_.size(); },
                 [this] { return tables_ != nullptr; },
                 [this] {
                   if (discovered_ && sm_port_ != kNoPort) PublishSaSnapshot();
                 },
                 [this] {
                   if (sa_.snapshot()) PublishSaSnapshot();
                 },
                 [this] { FinishHeavySweep(); },
                 [this](std::string_view id, std::string message) {
                   Issue(std::string(id), message);
                 },
                 [this](std::string_view name) { engine_.OpenStage(name); },
                 [this] { return stopped_; }}};
  bool repair_follows_cut_short_ = false;  // a heavy sweep handed its model to the repair
  // A repair that handed over to the running one (HandSweepToRepair): its figures, added to
  // this one's when it closes, and the nodes it touched (empty: it looked at every node).
  std::optional<SweepContext> handed_over_;
  SaServer sa_;
  MulticastManager mcast_;
  MftProgrammer mft_{pipeline_};
  LftProgrammer lfts_{pipeline_, [this](std::string_view id, std::string message) {
                        Issue(std::string(id), message);
                      }};
  ClientReregister rereg_;  // which CA ports a sweep tells to re-register
  SwitchInfoStage switch_info_{
      pipeline_, options_, lfts_, mft_,
      {[this]() -> const DiscoveryResult& { return *discovered_; },
       [this]() -> DiscoveryResult& { return MutableDiscovered(); },
       [this](std::string_view id, std::string message) { Issue(std::string(id), message); },
       [this] { return stopped_; }}};
  // The LIDs, and what each port should hold and answered to our PortInfo Sets (ports()).
  LidsAndPortsStage lids_and_ports_{
      pipeline_, options_, counters_, rereg_,
      {[this]() -> const DiscoveryResult& { return *discovered_; },
       [this]() -> DiscoveryResult& { return MutableDiscovered(); },
       [this](PortId p) { return PortInfoPath(p); },
       [this](std::string_view id, std::string message) { Issue(std::string(id), message); },
       [this] { return stopped_; }}};
  LinkStage links_{pipeline_, lids_and_ports_.ports(), counters_,
                   {[this]() -> const DiscoveryResult& { return *discovered_; },
                    [this]() -> DiscoveryResult& { return MutableDiscovered(); },
                    [this](PortId p) { return PortInfoPath(p); },
                    [this](std::string_view id, std::string message) {
                      Issue(std::string(id), message);
                    },
                    [this] { return state() == mad::SmState::kMaster; },
                    [this] { return stopped_; }}};
  PartitionProgrammer partitions_{
      pipeline_, counters_,
      {[this]() -> const DiscoveryResult& { return *discovered_; },
       [this](std::string_view id, std::string message) { Issue(std::string(id), message); },
       [this](PortId p) { return lids_and_ports_.ports().Desired(p); },
       [this](NodeId n, uint8_t port, const mad::PortInfo& pi) {
         MutableDiscovered().nodes[n].port_info[port] = pi;
       },
       [this] { return stopped_; }}};
  ArManager ar_{pipeline_, store_};
  std::unique_ptr<SharpManager> sharp_;
  bool mcast_dirty_ = false;  // groups changed since the MFTs were last planned
  boost::asio::steady_timer light_timer_;
  LinkDamper damper_;
  boost::asio::steady_timer damping_timer_;  // the next damped cable's release
  RouteWorker route_worker_;  // routing, off the io thread
  ModelSpare model_spare_;    // the next repair's copy of discovered_, made while idle

  boost::asio::steady_timer recovery_timer_;


  // --- warm standby (sm/sweep/subnet_manager_standby.cc) ---------------------------------
  // What a STANDBY keeps of the fabric with Gets alone, refreshed every sweep_interval: the
  // model its last discovery found, and the LFT blocks every switch held when the model had
  // not changed since the refresh before (the master had done writing). A takeover starts
  // from it (BeginWarmTakeover) instead of a discovery and a read-back of every block.
  struct WarmLft {
    uint16_t top = 0;  // LinearFDBTop when read
    std::vector<std::array<uint8_t, 64>> blocks;
    std::vector<bool> known;  // per block: its Get was answered
  };
  struct WarmModel {
    std::shared_ptr<const DiscoveryResult> model;
    std::chrono::steady_clock::time_point at;  // when its discovery ended
    std::string signature;                     // ModelSignature(*model)
    std::unordered_map<Guid, WarmLft> lfts;    // by switch GUID; read after `at`'s model
    bool lfts_current = false;                 // `lfts` were read on this model
    std::chrono::steady_clock::time_point lfts_at;
    // The P_Key tables of the ports the partition stage reads, read with the LFT blocks.
    std::map<std::pair<Guid, uint8_t>, PKeyCache> pkeys;
  };
  std::optional<WarmModel> warm_;
  std::unique_ptr<Discovery> standby_discovery_;
  boost::asio::steady_timer standby_timer_{io_};
  bool standby_refreshing_ = false;
  // The takeover sweep started from warm_ runs (a repair of every switch over its model);
  // its ProgramSwitches takes warm_lfts_ as what the switches hold.
  bool warm_takeover_ = false;
  std::unordered_map<Guid, WarmLft> warm_lfts_;
  // The takeover sweep ended SUBNET UP: a heavy sweep follows that re-reads what it assumed.
  bool verify_after_takeover_ = false;
  void ScheduleStandbyRefresh();
  void RefreshStandbyModel();
  void ReadStandbyLfts();
  bool WarmUsable() const;
  void BeginWarmTakeover();
  // Blocks of the switch at `n` the standby saw holding what `table` wants: true per block.
  // Empty when the standby has nothing current for it. (In subnet_manager_sweep.cc, beside
  // LftBlock.)
  std::vector<bool> WarmHeld(NodeId n, const routing::SwitchTable& table, size_t blocks) const;

  bool routing_in_flight_ = false;
  Guid sm_port_guid_{0};
  bool sweeping_ = false;
  bool sweep_again_ = false;
  bool sweep_posted_ = false;
  bool repair_posted_ = false;
  // Repairs begun again in a row for switches that reported while one read (at most
  // kMaxRepairRestarts, then a heavy sweep); 0 once a repair's reads all answer.
  uint32_t repair_restarts_ = 0;
  // The cables those repairs found down (switch GUID and port of the end re-read): each is
  // one change for link flap damping, however often a repair begun again finds it.
  std::set<std::pair<Guid, uint8_t>> repair_noted_;
  std::set<Guid> repair_pending_;  // switches that reported a change, not yet re-read
  // The running repair's reads while it runs (its first round takes in switches that report
  // meanwhile: RequestRepair).
  std::weak_ptr<struct RepairReads> repair_round_;
  std::string repair_reason_;
  int failed_sweeps_in_a_row_ = 0;  // heavy sweeps without SUBNET UP since the last good one  // a heavy sweep is requested and has not begun yet
  std::string pending_reason_;
  std::string queued_reason_;  // why sweep_again_ was set (the first request while sweeping)
  bool first_master_sweep_ = true;
  bool stopped_ = false;
  std::function<void(const SweepStats&)> on_sweep_;

  std::unique_ptr<Discovery> discovery_;
  // The last heavy sweep's result, shared with the SA snapshot (and the AR and SHARP stages)
  // until the SM changes it: every change goes through MutableDiscovered(), which copies it
  // first when anyone else holds it.
  std::shared_ptr<const DiscoveryResult> discovered_;
  uint64_t model_version_ = 1;  // moves on at every MutableDiscovered (ModelSpare)
  std::vector<ModelObserver> model_observers_;
  std::shared_ptr<const SubnetSnapshot> published_;  // published()
  // While STANDBY: publishes the snapshot of warm_'s model (published()).
  void PublishStandbyModel();
  DiscoveryResult& MutableDiscovered();
  void KeepSpares();  // the copies the next repair starts from (ModelSpare, RouteWorker)
  PortId sm_port_ = kNoPort;
  bool mcast_save_pending_ = false;  // multicast groups changed but not yet saved
  // The multicast rows as last written, by MGID: a save writes only the groups that differ.
  std::map<std::array<uint8_t, 16>, ha::McGroupRow> saved_mcast_;
  bool mcast_saved_whole_ = false;  // saved_mcast_ is what the file holds
  boost::asio::steady_timer state_flush_timer_{io_};
  bool state_flush_armed_ = false;
  void ScheduleStateFlush();
  Status SaveMulticastChanges();
  std::shared_ptr<const routing::RoutingTables> tables_;  // last good tables
  std::shared_ptr<const Fabric> tables_fabric_;            // the model they were routed on
  // A re-route's account of which blocks of tables_ it changed, for their push (LftHint).
  std::optional<LftHint> lft_hint_;
  // They passed verification on tables_fabric_, and have no credit loop by this proof (null
  // when none was had): a repair's re-route then needs only its changed LIDs checked.
  std::shared_ptr<const routing::UpDownProof> tables_proof_;
  // The last tables a routing engine made that passed (not a re-route's), with the model they
  // were made for and their checks. A repair whose model has the same routing inputs again
  // (routing::SameRoutingInputs: a cable or a switch came back as it was) takes them instead
  // of routing: they passed on exactly those inputs. While the tables in force are a
  // re-route's this is a second set (about 12 MB at 3-tier k=32). A standby fills it for its
  // model (RouteStandbyModel; `sweep` 0). Reconfigure drops it.
  struct EngineTables {
    std::shared_ptr<const Fabric> fabric;
    std::shared_ptr<const routing::RoutingTables> tables;
    std::shared_ptr<const routing::UpDownProof> proof;
    std::string chain;
    routing::VerifyReport verify;
    routing::CreditLoopReport loops;
    uint64_t sweep = 0;
  };
  std::optional<EngineTables> engine_tables_;
  std::unique_ptr<routing::LidMap> lid_map_;
  std::optional<RoutingCheck> last_check_;
  SweepStats last_;
  uint64_t sweep_number_ = 0;
  // The SMInfo protocol and the SM state; last, as it refers to the members above.
  // What sweeps leave on disk (sm/record/state_writer.h).
  StateWriter writer_{store_, clock_, WriterOptions(options_),
                      {&counters_.state_write_failures, &counters_.dump_write_failures,
                       &counters_.issues_by_id}};
  static StateWriterOptions WriterOptions(const SubnetManagerOptions& o) {
    return {o.dump_dir, o.dump_lfts, o.health_degraded_links, o.keep_sweeps, o.keep_events};
  }
  const PerfManager* perf_ = nullptr;  // set_perf
  HaAgent ha_{io_, transport_, pipeline_, clock_, store_, store_, options_, counters_, *this};
  TrapHandler traps_{transport_, pipeline_, clock_, options_, counters_, *this};
};


}  // namespace ibsm::sm
