// The SMInfo protocol of one SM (ARCHITECTURE.md section 2, "HA"): answering SMInfo Gets and
// Sets, the election after each discovery, polling the master while STANDBY, handover and
// acknowledge, trap 144 to a worse master, and what this SM knows of the other SMs. It owns
// the SM state (ha::SmStateMachine, the pure transition table) and ActCount.
//
// The sweep engine hosts it (HaAgent::Host): the agent decides, the host does what a decision
// asks of the sweeps (fence the writers, stop or start sweeping, flush SA state). Every call
// runs on the io thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/status.h"
#include "ha/sm_state_machine.h"
#include "mad/attr/sa_records.h"
#include "mad/attr/sm_info.h"
#include "mad/transport.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"
#include "sm/sweep/sm_counters.h"

namespace ibsm::ha {
class SmStateRows;
class HistoryRows;
}

namespace ibsm::sm {

struct SubnetManagerOptions;

// Another SM, as its SMInfo answered, and the path it answered on.
struct PeerSm {
  Guid guid{0};
  DrPath path;
  mad::SmInfo info;
};

// Whether each other SM this one asked SMInfo of answered the last time (`ibsmctl ha`): a
// master that missed one poll is "not answering" from that poll on, not MASTER. Kept in the
// state file as well ("peers_not_answering", PeersNotAnsweringJson).
struct PeerLiveness {
  int64_t last_answer_us = 0;  // 0: not since this SM started
  int64_t first_miss_us = 0;   // 0: answering
  uint32_t misses = 0;         // in a row
  std::string why;             // the last miss
};

// The peers not answering only, as kept in the state file (kPeersNotAnsweringKey,
// sm/answers/answers.h).
nlohmann::json PeersNotAnsweringJson(const std::map<Guid, PeerLiveness>& peers);

class HaAgent {
 public:
  // What the agent asks of the sweep engine.
  class Host {
   public:
    // The subnet as the last discovery left it; null before the first.
    virtual const DiscoveryResult* HaDiscovered() const = 0;
    virtual bool HaStopped() const = 0;
    // The state changed (or a Set was obeyed): the pipelines that write are fenced unless
    // this SM is MASTER.
    virtual void HaFence(bool fenced) = 0;
    // A transition's actions other than kStopPolling (the agent's own): kFence (another SM
    // writes the switches: forget what they hold, stop sweeping), kFirstMasterSweep,
    // kHeavySweep.
    virtual void HaApplyActions(uint32_t actions, const std::string& why) = 0;
    // The state left MASTER: another SM serves the SA from now on.
    virtual void HaLeftMaster() = 0;
    // SA registrations not yet in the state file, written now.
    virtual void HaFlushState() = 0;
    // STANDBY, polling a master: no sweep runs, what the switches hold is forgotten.
    virtual void HaStandby() = 0;
    // The election left this SM MASTER: the sweep goes on to write (with the optional QoS
    // reads when `qos_reads`).
    virtual void HaContinueSweep(bool qos_reads) = 0;
    // The election ended in a state that does not write: the sweep ends here.
    virtual void HaEndSweep() = 0;
    // The SA's SMInfoRecords.
    virtual void HaPublishOtherSms(std::vector<mad::SmInfoRecord> records) = 0;
    // A state-file write's outcome, counted and logged by the host. Returns s.ok().
    virtual bool HaNoteStateWrite(const char* id, const Status& s, std::string_view what) = 0;

   protected:
    ~Host() = default;
  };

  // REQUIRES: every argument outlives this; `options` is the host's (read at each use, so
  // a reconfiguration applies); `store` (the SM state and peers) and `events` may be null
  // (no state file).
  HaAgent(boost::asio::io_context& io, mad::Transport& transport, SmpPipeline& pipeline,
          const Clock& clock, ha::SmStateRows* store, ha::HistoryRows* events,
          const SubnetManagerOptions& options, SmCounters& counters, Host& host);

  mad::SmState state() const { return fsm_.state(); }
  uint32_t act_count() const { return act_count_; }
  // The next master sweep follows another master's (this SM took over or was handed over).
  bool took_over() const { return took_over_; }
  void SweepFollowedTakeover() { took_over_ = false; }
  // The SM this one polls while STANDBY (port GUID), 0 otherwise.
  Guid polled_master() const { return polled_ ? polled_->guid : Guid{0}; }
  const std::map<Guid, PeerLiveness>& peer_liveness() const { return peer_liveness_; }
  void set_port_guid(Guid g) { port_guid_ = g; }

  // The SMInfo this SM shows, in state `shown`; the SM_Key only `with_key`.
  mad::SmInfo OwnSmInfo(mad::SmState shown, bool with_key) const;
  // An SMInfo Get or Set to this SM: answered, and a legal Set obeyed.
  void AnswerSmInfo(const mad::Smp& req, const mad::MadMessage& msg);
  // An event of the state table (start, discovery's outcome, a lost master, ...).
  void SetSmState(ha::SmEvent event, const std::string& why);
  // After discovery: SMInfo Get to every port that claims IsSM, then the election, which
  // ends in HaContinueSweep, HaEndSweep or standing by.
  void QueryOtherSms();
  // The light sweep's look at the SMs it knows: SMInfo Get to each. Sets `*change` to why a
  // heavy sweep is needed (a better SM came up, or another master) when one is.
  void CheckKnownSms(const std::shared_ptr<std::string>& change);
  // Hands the SA the other SMs (SMInfoRecord), LIDs from the last sweep.
  void PublishKnownSms();
  void Stop();

 private:
  void DecideRole();
  void SendHandover(const PeerSm& to);
  void ApplyActions(uint32_t actions, const std::string& why);
  void EnterStandby(const PeerSm& master);
  void SchedulePoll();
  void Poll();
  void SendTrap144(const PeerSm& master);
  void SendAcknowledge(Guid to);
  // State file: the SM state (key "sm_state") and a state_change event row.
  void RecordStateChange(mad::SmState before, const std::string& why);
  void RecordPeer(const mad::SmInfo& info, bool key_match);
  void NotePeerAnswered(Guid guid);
  // Counted only for an SM this one knows (answered before, or a peer row of the state file).
  void NotePeerMissed(Guid guid, const std::string& why);
  void SavePeerLiveness();
  std::optional<DrPath> PathToPort(Guid port_guid) const;

  mad::Transport& transport_;
  SmpPipeline& pipeline_;
  const Clock& clock_;
  ha::SmStateRows* store_;
  ha::HistoryRows* events_;
  const SubnetManagerOptions& options_;
  SmCounters& counters_;
  Host& host_;
  Guid port_guid_{0};

  ha::SmStateMachine fsm_;
  uint32_t act_count_ = 0;
  bool took_over_ = false;
  std::map<Guid, PeerLiveness> peer_liveness_;
  std::map<Guid, PeerSm> peers_;  // other SMs (matching key) seen by the last sweep
  std::optional<PeerSm> polled_;  // the master polled while STANDBY
  uint32_t poll_misses_ = 0;
  bool poll_in_flight_ = false;
  boost::asio::steady_timer poll_timer_;
};

}  // namespace ibsm::sm
