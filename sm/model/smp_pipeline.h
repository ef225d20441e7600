// A window of SMPs in flight (opensm.conf max_wire_smps): every sweep stage queues its
// Gets and Sets here and waits for the pipeline to drain, which is the barrier between
// configuration stages (OpenSM: "each a barrier").
//
// Threading: the transport's io_context thread only. Callbacks run on it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "mad/mad.h"
#include "mad/transport.h"

namespace ibsm::sm {

using DrPath = std::vector<uint8_t>;  // egress port per hop; empty = the SM's own node

struct PipelineCounters {
  uint64_t gets = 0;
  uint64_t sets = 0;
  uint64_t failed = 0;  // no answer after every retry, bad status, or undecodable
  uint64_t fenced = 0;  // Sets refused because the SM is not master (never sent)
  uint64_t resent = 0;  // requests sent round again after every transport attempt timed out
  uint64_t abandoned = 0;  // in flight when their owner stopped waiting (Abandon)
};

// Every PipelineCounters field once, for the control answer's "smp_pipeline" object and the
// metrics (ARCHITECTURE.md "Where to add ... A counter"); rows of one family are adjacent.
struct PipelineCounterRow {
  uint64_t PipelineCounters::*member;
  std::string_view key;          // control answer key
  std::string_view family;       // metric family
  std::string_view label_name;   // "" when the family has one sample
  std::string_view label_value;
  std::string_view help;         // the family's help text (its first row's)
};

inline constexpr PipelineCounterRow kPipelineCounterRows[] = {
    {&PipelineCounters::gets, "gets", "ibsm_smps_total", "method", "get", "SMPs sent, by method"},
    {&PipelineCounters::sets, "sets", "ibsm_smps_total", "method", "set", ""},
    {&PipelineCounters::failed, "failed", "ibsm_smps_failed_total", "", "",
     "SMPs with no valid answer after every retry (timeouts, bad status)"},
    {&PipelineCounters::fenced, "fenced", "ibsm_smps_fenced_total", "", "",
     "Sets not sent because the SM is not master"},
    {&PipelineCounters::resent, "resent", "ibsm_smps_resent_total", "", "",
     "SMPs sent round again after every transport attempt timed out"},
    {&PipelineCounters::abandoned, "abandoned", "ibsm_smps_abandoned_total", "", "",
     "SMPs in flight whose answer was no longer waited for (a repair found their path cut)"},
};
static_assert(std::size(kPipelineCounterRows) == sizeof(PipelineCounters) / sizeof(uint64_t));

class SmpPipeline {
 public:
  using Callback = std::function<void(Result<mad::Smp>)>;

  SmpPipeline(mad::Transport& transport, size_t max_in_flight, mad::SendOptions send,
              uint64_t m_key);

  // DR Get/Set of `attr_id` at `path`. `data` (Set) is the 64-byte attribute payload.
  // The callback sees the decoded response, or an error: kTimeout, kCorrupt (undecodable or
  // wrong attribute), kFailedPrecondition (MAD status non-zero; message has the status).
  // `group` names the requests one owner may take back with DropQueued (nullptr: none);
  // with `abandonable`, also those it may stop waiting for with Abandon (tracked while in
  // flight, a little work per request: discovery's groups are not).
  void Get(const DrPath& path, uint16_t attr_id, uint32_t attr_mod, Callback cb,
           const void* group = nullptr, bool abandonable = false);
  void Set(const DrPath& path, uint16_t attr_id, uint32_t attr_mod,
           std::span<const uint8_t> data, Callback cb, const void* group = nullptr,
           bool abandonable = false);

  // Requests produced on demand, so a stage with 190,000 LFT blocks does not queue them all
  // at once: `next` runs whenever the window has room and nothing is queued; it queues
  // requests (Get/Set) and returns false when it has no more. One feeder at a time.
  void Feed(std::function<bool()> next);

  // Runs `fn` once nothing is queued, fed or in flight (at once if idle now). One waiter at
  // a time; a second call replaces the first.
  void WhenIdle(std::function<void()> fn);
  bool idle() const { return queue_.empty() && in_flight_ == 0 && !feeder_; }
  // Takes back the requests of `group` not sent yet: each callback runs once, at once, with
  // kUnavailable ("dropped"), and none is counted as failed. Those in flight complete as
  // usual. Returns how many were dropped.
  size_t DropQueued(const void* group);
  // DropQueued, and those of `group` in flight (queued as abandonable) are no longer waited
  // for: they stop counting
  // towards the window and idle() at once, and whatever becomes of them later (an answer, a
  // timeout) is ignored; their callbacks never run. For requests that cannot be answered (a
  // DR path over a cable known to be down), so nothing waits for their timeouts. The
  // transport may then hold up to that many more than the window for a while. Returns how
  // many were in flight.
  size_t Abandon(const void* group);

  // Held, nothing queued or fed goes on the wire (what is in flight completes, and its
  // transport retries go on); released, the window fills again. For optional work that
  // must not take the wire from a repair (the SL2VL and VLArb reads).
  void set_held(bool held);
  bool held() const { return held_; }

  void set_m_key(uint64_t k) { m_key_ = k; }
  // Fencing (HA): while fenced, every Set except SMInfo (the SM protocol itself) fails at
  // once with kFailedPrecondition and is never sent, so an SM that is not master cannot
  // write to the fabric whatever stage of a sweep it was in.
  void set_fenced(bool f) { fenced_ = f; }
  bool fenced() const { return fenced_; }
  const PipelineCounters& counters() const { return counters_; }
  // How many times a request that timed out (after the transport's own retries) is sent in
  // all: 2 by default, so a sweep survives a lossy link; 1 for reads that may go unanswered
  // by design (optional attributes), which must cost one timeout only.
  void set_rounds(int rounds) { rounds_ = rounds < 1 ? 1 : rounds; }

 private:
  // The in-flight requests of one group, while any is: Abandon marks them.
  struct GroupInFlight {
    size_t count = 0;
    bool abandoned = false;
  };
  struct Request {
    mad::Smp smp;
    Callback cb;
    int round = 0;
    const void* group = nullptr;
    bool abandonable = false;
    std::shared_ptr<GroupInFlight> flight;  // set while in flight, if abandonable
  };
  void Enqueue(mad::Smp smp, Callback cb, const void* group = nullptr,
               bool abandonable = false);
  void Pump();
  void Send(Request req);
  void CheckIdle();

  mad::Transport& transport_;
  size_t max_in_flight_;
  mad::SendOptions send_;
  uint64_t m_key_;
  std::deque<Request> queue_;
  size_t in_flight_ = 0;
  std::function<void()> idle_fn_;
  std::function<bool()> feeder_;
  std::unordered_map<const void*, std::shared_ptr<GroupInFlight>> flights_;
  bool pumping_ = false;
  bool held_ = false;
  bool fenced_ = false;
  int rounds_ = 2;
  PipelineCounters counters_;
};

std::string PathString(const DrPath& p);  // "0,1,3" as infiniband-diags writes DR paths

}  // namespace ibsm::sm
