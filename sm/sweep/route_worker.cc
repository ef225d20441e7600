// The routing stage's job on the worker (sm/sweep/route_worker.h).
#include "sm/sweep/route_worker.h"

#include <chrono>
#include <exception>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

namespace ibsm::sm {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// Verification and the deadlock proof, the same for an engine's tables and a repair's
// re-route; route_s runs from t0. True when both pass. `changed`: a re-route's examined LIDs,
// when the old tables carry a proof: every other LID's routes are the old ones, over cables
// still there, so only those are verified, and the proof is renewed from them
// (routing/updown_proof.h) instead of a whole-fabric credit-loop check; `changes` says, LID by
// LID, which switches' entries the re-route can have changed, and both read only those.
bool Check(const RouteRequest& q, Routed& routed, SteadyClock::time_point t0,
           const routing::RoutingTables& tables, const std::vector<uint32_t>* changed,
           const routing::EntryChanges* changes) {
  const Fabric& fabric = *q.fabric;
  const unsigned threads = q.options.threads;
  const auto t1 = SteadyClock::now();
  routed.route_s = std::chrono::duration<double>(t1 - t0).count();
  routed.verify = routing::VerifyTables(fabric, *routed.lids, tables, /*max_problems=*/20,
                                        threads, changed, changes);
  routed.verified_lids = changed ? changed->size() : 0;
  const auto t2 = SteadyClock::now();
  routed.verify_s = std::chrono::duration<double>(t2 - t1).count();
  routed.proof.reset();
  routed.proof_refused.clear();
  routed.loops_proven = false;
  routed.loops = routing::CreditLoopReport{};
  if (changed && routed.verify.ok) {
    auto p = routing::ReproveUpDown(fabric, *routed.lids, tables, *q.before, *q.proof, *changed,
                                    threads, changes);
    if (p.ok()) {
      routed.proof = std::make_shared<const routing::UpDownProof>(std::move(*p));
      routed.loops_proven = true;
    } else {
      routed.proof_refused = p.status().message();
    }
  }
  if (!routed.loops_proven)
    routed.loops = routing::CheckCreditLoops(fabric, *routed.lids, tables, threads);
  routed.loops_s = Since(t2);
  return routed.verify.ok && routed.loops.acyclic;
}

}  // namespace

Routed RouteSnapshot(const RouteRequest& q, std::unique_ptr<routing::RoutingTables> spare) {
  Routed routed;
  routed.fabric = q.fabric;
  routed.chain = q.chain;
  const Fabric& fabric = *q.fabric;
  auto t0 = SteadyClock::now();
  // An exception here would end the process (the worker has no handler): it becomes a
  // routing failure, and the caller keeps its last good tables.
  try {
    routed.lids = std::make_unique<routing::LidMap>(fabric);
    if (q.old) {
      const routing::UpDownProof* proof = q.proof.get();
      auto rr = routing::RerouteAround(fabric, *routed.lids, *q.before, *q.old, q.options,
                                       /*examine_all=*/false, proof, spare.get());
      if (!rr.ok()) {
        routed.reroute_refused = rr.status().message();
      } else if (!Check(q, routed, t0, rr->tables, proof ? &rr->examined : nullptr,
                        proof ? &rr->changes : nullptr)) {
        routed.reroute_refused =
            !routed.verify.ok ? "its tables failed verification" : "it has a credit loop";
      } else {
        routed.rerouted = true;
        routed.reroute = rr->stats;
        routed.rerouted_from = q.old;
        routed.blocks_changed = std::move(rr->blocks_changed);
        routing::ChainResult chosen;
        chosen.tables = std::move(rr->tables);
        routed.result = std::move(chosen);
      }
      t0 = SteadyClock::now();
    }
    if (!routed.rerouted) {
      routed.result = routing::RouteChain(q.chain, fabric, *routed.lids, q.options);
      if (routed.result.ok()) Check(q, routed, t0, routed.result->tables, nullptr, nullptr);
      else routed.route_s = Since(t0);
    }
    // Tables that passed both checks without a proof get one now, for the next repair
    // (whole-fabric, once, here on the worker: a repair never waits for it).
    if (q.want_proof && routed.passed() && routed.verified_lids == 0 && !routed.proof &&
        routed.result->tables.engine != "minhop") {
      auto p = routing::ProveUpDown(fabric, *routed.lids, routed.result->tables,
                                    routing::UpDownRanks(fabric, q.options.root_guids),
                                    q.options.threads);
      if (p.ok()) routed.proof = std::make_shared<const routing::UpDownProof>(std::move(*p));
      else routed.proof_refused = p.status().message();
    }
  } catch (const std::exception& e) {
    routed.result = Status(StatusCode::kInternal, std::string("routing threw: ") + e.what());
  }
  return routed;
}

void RouteWorker::Route(RouteRequest request, boost::asio::io_context& io,
                        std::function<void(Routed)> done) {
  auto work = std::make_shared<
      boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
      io.get_executor());
  boost::asio::post(pool_, [this, request = std::move(request), &io, work,
                            done = std::move(done)]() mutable {
    std::unique_ptr<routing::RoutingTables> start;
    if (request.old && spare_of_ == request.old) start = std::move(spare_);
    if (request.old) {
      spare_.reset();
      spare_of_.reset();
    }
    const bool from_spare = start != nullptr;
    auto routed = std::make_shared<Routed>(RouteSnapshot(request, std::move(start)));
    routed->from_spare = from_spare && routed->rerouted;
    boost::asio::post(io, [work, routed, done = std::move(done)]() mutable {
      work->reset();
      done(std::move(*routed));
    });
  });
}

void RouteWorker::KeepSpare(std::shared_ptr<const routing::RoutingTables> tables,
                            unsigned threads) {
  boost::asio::post(pool_, [this, src = std::move(tables), threads] {
    if (spare_ && spare_of_ == src) return;  // asked again for the copy it holds
    spare_ = std::make_unique<routing::RoutingTables>(routing::CopyTables(*src, threads));
    spare_of_ = src;
    ++spares_made_;
  });
}

}  // namespace ibsm::sm
