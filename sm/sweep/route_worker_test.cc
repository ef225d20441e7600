// The routing stage's worker job (sm/sweep/route_worker.h), without an SM around it: an
// engine run, a repair's re-route from proven tables, and the spare copy the worker keeps.
#include "sm/sweep/route_worker.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "routing/routing_test_util.h"

namespace ibsm::sm {
namespace {

std::shared_ptr<const Fabric> Tree() {
  auto f = FatTree3(4);
  EXPECT_TRUE(f.ok());
  routing::testing::AssignLids(*f);
  return std::make_shared<const Fabric>(std::move(*f));
}

RouteRequest Request(std::shared_ptr<const Fabric> f) {
  RouteRequest q;
  q.fabric = std::move(f);
  q.chain = std::string(routing::kDefaultChain);
  q.want_proof = true;
  return q;
}

// A switch-to-switch cable of `f` and `f` without it.
std::pair<PortId, std::shared_ptr<const Fabric>> Cut(const Fabric& f) {
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& port = f.port(p);
    if (!port.connected() || !f.node(port.node).is_switch() ||
        !f.node(f.port(port.peer).node).is_switch())
      continue;
    Fabric cut = f;
    cut.Disconnect(p);
    return {p, std::make_shared<const Fabric>(std::move(cut))};
  }
  return {kNoPort, nullptr};
}

// A repair's request: the engine's proven tables of a tree, and the tree without one of its
// switch-to-switch cables (`cut`).
struct Repair {
  RouteRequest q;
  PortId cut = kNoPort;
};
Repair CutAfterAnEngineRun() {
  Repair r;
  const auto before = Tree();
  Routed engine = RouteSnapshot(Request(before));
  EXPECT_TRUE(engine.passed() && engine.proof);
  if (!engine.passed() || !engine.proof) return r;
  auto [cut, after] = Cut(*before);
  EXPECT_NE(cut, kNoPort);
  r.cut = cut;
  r.q = Request(std::move(after));
  r.q.old = std::make_shared<const routing::RoutingTables>(std::move(engine.result->tables));
  r.q.before = before;
  r.q.proof = engine.proof;
  return r;
}

TEST(RouteWorkerTest, AnEngineRunIsVerifiedCheckedAndProven) {
  const Routed r = RouteSnapshot(Request(Tree()));
  ASSERT_TRUE(r.result.ok()) << r.result.status().ToString();
  EXPECT_EQ(r.result->tables.engine, "ftree");
  EXPECT_TRUE(r.passed());
  EXPECT_FALSE(r.rerouted);
  EXPECT_EQ(r.verified_lids, 0u);  // every LID
  EXPECT_GT(r.loops.channels, 0u);  // the whole-fabric check ran
  EXPECT_TRUE(r.proof) << r.proof_refused;
  EXPECT_FALSE(r.loops_proven);
}

// From proven tables, a cut is re-routed, only the LIDs it touched are verified, and the
// proof is renewed from them; no entry of the result sends a LID into the cut cable.
TEST(RouteWorkerTest, ARepairReroutesFromProvenTablesAndRenewsTheProof) {
  const Repair repair = CutAfterAnEngineRun();
  ASSERT_TRUE(repair.q.old && repair.q.proof);
  const RouteRequest& q = repair.q;
  const PortId cut = repair.cut;
  const std::shared_ptr<const Fabric>& before = repair.q.before;
  const Routed r = RouteSnapshot(q);
  ASSERT_TRUE(r.result.ok()) << r.result.status().ToString();
  EXPECT_TRUE(r.rerouted) << r.reroute_refused;
  EXPECT_TRUE(r.passed());
  EXPECT_TRUE(r.loops_proven);
  EXPECT_TRUE(r.proof);
  EXPECT_GT(r.verified_lids, 0u);
  EXPECT_LT(r.verified_lids, r.lids->max_lid());
  for (PortId end : {cut, before->port(cut).peer}) {
    const routing::SwitchTable* t = r.result->tables.table(before->port(end).node);
    ASSERT_NE(t, nullptr);
    for (uint8_t out : t->lft) EXPECT_NE(out, before->port(end).num.value());
  }
}

// The worker answers on the io_context, and a re-route that builds in the spare copy it kept
// of the old tables makes the same tables as one that copies them then. Asked twice for a
// copy of the same tables (at a sweep's finish and when it publishes), it makes one.
TEST(RouteWorkerTest, TheSpareCopyChangesNothingButWhereTheRerouteBuilds) {
  const Repair repair = CutAfterAnEngineRun();
  ASSERT_TRUE(repair.q.old && repair.q.proof);
  const RouteRequest& q = repair.q;
  const Routed copied = RouteSnapshot(q);
  ASSERT_TRUE(copied.rerouted);

  boost::asio::io_context io;
  RouteWorker worker;
  worker.KeepSpare(q.old, 1);
  worker.KeepSpare(q.old, 1);
  std::optional<Routed> answered;
  worker.Route(q, io, [&](Routed r) { answered.emplace(std::move(r)); });
  io.run();  // returns once the answer ran: the worker kept io from running out of work
  ASSERT_TRUE(answered.has_value());
  ASSERT_TRUE(answered->rerouted) << answered->reroute_refused;
  EXPECT_TRUE(answered->from_spare);
  EXPECT_EQ(worker.spares_made(), 1u);
  ASSERT_EQ(answered->result->tables.switches.size(), copied.result->tables.switches.size());
  for (size_t i = 0; i < copied.result->tables.switches.size(); ++i)
    EXPECT_EQ(answered->result->tables.switches[i].lft, copied.result->tables.switches[i].lft);
  EXPECT_EQ(answered->reroute.entries_changed, copied.reroute.entries_changed);
}

// An unknown engine: the job answers with the chain's failure, not an exception.
TEST(RouteWorkerTest, AChainThatRoutesNothingIsAFailureNotAThrow) {
  RouteRequest q = Request(Tree());
  q.chain = "no-such-engine,no_fallback";
  const Routed r = RouteSnapshot(q);
  EXPECT_FALSE(r.result.ok());
  EXPECT_FALSE(r.passed());
}

}  // namespace
}  // namespace ibsm::sm
