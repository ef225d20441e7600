// The routing stage's work off the io thread (ARCHITECTURE.md "Heavy sweep", routing): an
// engine run, or a repair's incremental re-route, of one immutable model snapshot, then its
// verification and its credit-loop check or proof, on one worker thread. The heavy sweep, a
// repair and a standby routing its model ahead of a takeover all route this one way.
//
// Threading: RouteWorker::Route and KeepSpare are called on the io thread; the job runs on
// the worker, and its answer is posted back to the io_context it was given. What only the
// worker touches (the spare copy of the last good tables a re-route builds in) lives here.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "base/status.h"
#include "fabric/fabric.h"
#include "routing/quality.h"
#include "routing/reroute.h"
#include "routing/routing_engine.h"
#include "routing/updown_proof.h"
#include "routing/verify.h"

namespace ibsm::sm {

// What to route.
struct RouteRequest {
  std::shared_ptr<const Fabric> fabric;  // the model the tables are for
  std::string chain;                     // the engines to ask, in order
  routing::RoutingOptions options;
  // Engine tables that pass both checks get an up*/down* proof, for a later repair's re-route
  // (minhop's never do: they are never a re-route's start).
  bool want_proof = false;
  // A repair's re-route (routing::RerouteAround) from the last good tables, routed on
  // `before`, with their proof when they have one; the engine routes when it is refused.
  std::shared_ptr<const routing::RoutingTables> old;
  std::shared_ptr<const Fabric> before;
  std::shared_ptr<const routing::UpDownProof> proof;
};

// A routing job's answer.
struct Routed {
  Result<routing::ChainResult> result = Status(StatusCode::kInternal, "not routed");
  std::unique_ptr<routing::LidMap> lids;
  routing::VerifyReport verify;
  routing::CreditLoopReport loops;
  double route_s = 0, verify_s = 0, loops_s = 0;
  std::shared_ptr<const Fabric> fabric;  // the model the tables are for
  std::string chain;                     // the engines asked
  // Tables taken again from the engine's last ones (`result` then holds none): made,
  // verified and proven at sweep `reused_from` for a model with the same routing inputs.
  std::shared_ptr<const routing::RoutingTables> reused;
  uint64_t reused_from = 0;
  // A repair's incremental re-route (routing::RerouteAround): used, or why not.
  bool rerouted = false;
  bool from_spare = false;  // built in the copy KeepSpare made
  routing::RerouteStats reroute;
  // Used: the tables it started from, and the blocks it changed of them (the LFT push
  // compares only those, LftHint).
  std::shared_ptr<const routing::RoutingTables> rerouted_from;
  routing::BlockSet blocks_changed;
  std::string reroute_refused;
  // The proof that the tables have no credit loop (routing/updown_proof.h), when one was
  // had; loops_proven: it stood in for CheckCreditLoops. verified_lids: the LIDs verified
  // when only a re-route's changed ones were (0: every LID).
  std::shared_ptr<const routing::UpDownProof> proof;
  bool loops_proven = false;
  size_t verified_lids = 0;
  std::string proof_refused;

  // Tables were made and passed verification and the credit-loop check.
  bool passed() const { return result.ok() && verify.ok && loops.acyclic; }
};

// Routes `request` on the calling thread: the re-route first when it names old tables (built
// in `spare`, a copy of them, when given), else or when that is refused the engine chain;
// then verification and the credit-loop check (or, for a re-route from proven tables, only
// the LIDs it changed, and the proof renewed from them); then the proof for engine tables
// when asked. Never throws: an exception becomes a routing failure.
Routed RouteSnapshot(const RouteRequest& request,
                     std::unique_ptr<routing::RoutingTables> spare = nullptr);

class RouteWorker {
 public:
  RouteWorker() = default;
  RouteWorker(const RouteWorker&) = delete;
  RouteWorker& operator=(const RouteWorker&) = delete;
  ~RouteWorker() { Join(); }

  // Routes `request` on the worker, then posts `done` with the answer to `io` (keeping `io`
  // from running out of work meanwhile).
  void Route(RouteRequest request, boost::asio::io_context& io,
             std::function<void(Routed)> done);
  // Copies `tables` on the worker (when it is idle) for the next re-route from them to build
  // in, instead of copying them then. Asked again for the tables it holds a copy of: nothing
  // to do.
  void KeepSpare(std::shared_ptr<const routing::RoutingTables> tables, unsigned threads);
  // Copies KeepSpare made so far (tests).
  uint64_t spares_made() const { return spares_made_.load(); }
  // Waits for the jobs queued; none may be queued after.
  void Join() { pool_.join(); }

 private:
  boost::asio::thread_pool pool_{1};
  // Touched only on pool_ (one thread): a copy of spare_of_.
  std::unique_ptr<routing::RoutingTables> spare_;
  std::shared_ptr<const routing::RoutingTables> spare_of_;
  std::atomic<uint64_t> spares_made_{0};
};

}  // namespace ibsm::sm
