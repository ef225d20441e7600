// The LFT stage alone (sm/sweep/lft_programmer.h) against the strict simulator: a first push
// writes what the switches lack, a second writes nothing, a switch that forgot its tables is
// written again, and after a cut the blocks that sent LIDs into the dead cable go first.
#include "sm/sweep/lft_programmer.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "routing/routing_test_util.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/model/discovery.h"
#include "sm/testing/sim_test_util.h"

namespace ibsm::sm {
namespace {

using simcheck::FirstCaPort;

struct LftBed {
  LftBed()
      : built(FatTree3(4).value()), sim(built), t(io, sim, FirstCaPort(built)),
        pipeline(t, 16, mad::SendOptions{std::chrono::milliseconds(20), 3}, 0),
        lfts(pipeline, [this](std::string_view id, std::string message) {
          issues.push_back(std::string(id) + " " + message);
        }) {
    Discovery disc(pipeline);
    disc.Run([&](DiscoveryResult r) { d = std::move(r); });
    io.run();
    routing::testing::AssignLids(d.fabric);
    model = std::make_shared<const Fabric>(d.fabric);
    tables = Route(*model);
  }

  static std::shared_ptr<const routing::RoutingTables> Route(const Fabric& f) {
    const routing::LidMap lids(f);
    auto r = routing::RouteChain("ftree", f, lids, {});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::make_shared<const routing::RoutingTables>(std::move(r->tables));
  }
  uint16_t Top(const routing::RoutingTables& t) const {
    size_t top = 0;
    for (const auto& s : t.switches) top = std::max(top, s.lft.size() - 1);
    return static_cast<uint16_t>(top);
  }
  // One sweep's LFT stage: compare every switch (each reporting the top `reported(guid)`),
  // then push `t` on `f`.
  void Sweep(const Fabric& f, std::shared_ptr<const routing::RoutingTables> t,
             const std::function<uint16_t(Guid)>& reported, const LftHint* hint = nullptr) {
    lfts.BeginSweep();
    const uint16_t top = Top(*t);
    for (NodeId n = 0; n < f.node_count(); ++n) {
      if (!f.node(n).is_switch() || !t->table(n)) continue;
      if (lfts.Compare(f.node(n).guid, n, d.nodes[n].path, reported(f.node(n).guid), top, t,
                       /*reread_assumed=*/true, {}))
        forgotten.insert(f.node(n).guid);
    }
    io.restart();
    io.run();
    lfts.Push(
        f, t, top, [this](NodeId n) -> const DrPath& { return d.nodes[n].path; }, hint);
    io.restart();
    io.run();
  }
  // The simulator's switch that model node `n` is.
  NodeId SimNode(NodeId n) const { return *built.FindNode(d.fabric.node(n).guid); }
  // Every switch of `f` holds `t` for every LID up to the top.
  void ExpectHeld(const Fabric& f, const routing::RoutingTables& t) const {
    for (NodeId n = 0; n < f.node_count(); ++n) {
      const routing::SwitchTable* s = t.table(n);
      if (!s) continue;
      for (uint32_t lid = 1; lid < s->lft.size(); ++lid)
        ASSERT_EQ(sim.lft_entry(SimNode(n), Lid{static_cast<uint16_t>(lid)}), s->lft[lid])
            << f.node(n).name << " LID " << lid;
    }
  }

  Fabric built;
  sim::Simulator sim;
  boost::asio::io_context io;
  sim::SimTransport t;
  SmpPipeline pipeline;
  LftProgrammer lfts;
  DiscoveryResult d;
  std::shared_ptr<const Fabric> model;
  std::shared_ptr<const routing::RoutingTables> tables;
  std::vector<std::string> issues;
  std::set<Guid> forgotten;
};

size_t Switches(const routing::RoutingTables& t) { return t.switches.size(); }

TEST(LftProgrammerTest, AFirstPushWritesEveryBlockAndASecondWritesNothing) {
  LftBed b;
  const uint16_t top = b.Top(*b.tables);
  const size_t blocks = top / 64 + 1;
  // Power-on switches report LinearFDBTop 0: nothing to read, every block to write.
  b.Sweep(*b.model, b.tables, [](Guid) -> uint16_t { return 0; });
  EXPECT_EQ(b.lfts.run().read, 0u);
  EXPECT_EQ(b.lfts.run().sent, Switches(*b.tables) * blocks);
  EXPECT_EQ(b.lfts.run().urgent, 0u);
  b.ExpectHeld(*b.model, *b.tables);
  EXPECT_TRUE(b.issues.empty());
  for (const auto& s : b.tables->switches) EXPECT_EQ(b.lfts.top(b.model->node(s.node).guid), top);

  // The same tables again, every switch reporting the top this SM set: nothing sent or read.
  b.Sweep(*b.model, b.tables, [top](Guid) { return top; });
  EXPECT_EQ(b.lfts.run().read, 0u);
  EXPECT_EQ(b.lfts.run().sent, 0u);
  EXPECT_TRUE(b.forgotten.empty());
}

// `t` with the entry of LID `lid` on its first switch changed to another port that switch uses.
std::shared_ptr<const routing::RoutingTables> WithOneEntryChanged(const routing::RoutingTables& t,
                                                                   uint32_t lid) {
  auto out = std::make_shared<routing::RoutingTables>(t);
  std::vector<uint8_t>& lft = out->switches[0].lft;
  for (uint8_t e : lft) {
    if (e != lft[lid] && e != mad::kLftDropPort && e != 0) {
      lft[lid] = e;
      break;
    }
  }
  EXPECT_NE(lft[lid], t.switches[0].lft[lid]);
  return out;
}

// A re-route's account of the blocks it changed (LftHint): with it the push writes what
// comparing every block writes. It is taken at its word for a switch that holds the tables it
// names as its start (a block it leaves out is not even compared), and not used for one that
// holds others.
TEST(LftProgrammerTest, AReroutesHintNamesTheOnlyBlocksCompared) {
  LftBed b;
  b.Sweep(*b.model, b.tables, [](Guid) -> uint16_t { return 0; });
  const uint16_t top = b.Top(*b.tables);
  auto ours = [top](Guid) { return top; };
  const size_t words = (size_t{top} / 64 + 1 + 63) / 64;
  const size_t last = size_t{top} / 64;

  // Two entries of the first switch changed, in its first and last blocks: the hint lists
  // both, and exactly those are written.
  auto once = WithOneEntryChanged(*b.tables, 1);
  auto twice = WithOneEntryChanged(*once, last == 0 ? 2u : static_cast<uint32_t>(last * 64 + 1));
  LftHint right{b.tables, twice, {}};
  right.blocks.resize(twice->switches.size(), words);
  right.blocks.add(0, 0);
  right.blocks.add(0, last);
  b.Sweep(*b.model, twice, ours, &right);
  EXPECT_EQ(b.lfts.run().sent, last == 0 ? 1u : 2u);
  b.ExpectHeld(*b.model, *twice);

  // A hint that lists nothing, naming as its start tables the switches do not hold: not
  // used, the changed block is found by comparing and written.
  auto third = WithOneEntryChanged(*twice, 2);
  LftHint elsewhere{b.tables, third, {}};
  elsewhere.blocks.resize(third->switches.size(), words);
  b.Sweep(*b.model, third, ours, &elsewhere);
  EXPECT_EQ(b.lfts.run().sent, 1u);
  b.ExpectHeld(*b.model, *third);

  // The same, naming the tables they hold: believed, so nothing is compared or written.
  auto fourth = WithOneEntryChanged(*third, 3);
  LftHint believed{third, fourth, {}};
  believed.blocks.resize(fourth->switches.size(), words);
  b.Sweep(*b.model, fourth, ours, &believed);
  EXPECT_EQ(b.lfts.run().sent, 0u);
}

// A push stopped after its first Sets reached the switches (a repair taking over): nothing
// more is sent, and the next push of the same tables writes exactly the blocks whose Sets
// were not answered before the stop, not those the switches answered.
TEST(LftProgrammerTest, AStoppedPushLeavesTheUnansweredBlocksToTheNext) {
  LftBed b;
  const uint16_t top = b.Top(*b.tables);
  const size_t blocks = Switches(*b.tables) * (top / 64 + 1);
  ASSERT_EQ(blocks, 20u);  // 20 switches, one block each
  size_t taken_in = 0;
  bool stop_posted = false;
  size_t in_flight = 0;
  // 20 blocks, 16 in flight at most: stopped as the simulator takes in the 18th, while the
  // first answers are in.
  b.sim.SetSmpObserver([&](NodeId, uint8_t method, uint16_t attr, uint32_t) {
    if (method != mad::method::kSet || attr != mad::attr::kLinearForwardingTable) return;
    ++taken_in;
    if (taken_in < blocks - 2 || stop_posted) return;
    stop_posted = true;
    in_flight = b.lfts.Stop();
  });
  b.Sweep(*b.model, b.tables, [](Guid) -> uint16_t { return 0; });
  b.sim.SetSmpObserver({});
  ASSERT_TRUE(stop_posted);
  EXPECT_GT(in_flight, 0u);
  EXPECT_TRUE(b.pipeline.idle());
  EXPECT_LT(taken_in, blocks);  // the push ended there
  // Sent by the stopped push (each sent at once: a push queues one block at a time, as the
  // window frees up), less those let go.
  const size_t answered = b.lfts.run().sent - in_flight;
  // The next push (the repair's) writes the rest, the let-go blocks among them.
  b.Sweep(*b.model, b.tables, [top](Guid) { return top; });
  EXPECT_EQ(b.lfts.run().sent, blocks - answered);
  b.ExpectHeld(*b.model, *b.tables);
  EXPECT_TRUE(b.issues.empty()) << b.issues.front();
}

// A switch whose top is not the one set (it rebooted) is forgotten, said so, and written
// whole; a switch of another SM's top is read first and only what differs is written.
TEST(LftProgrammerTest, ASwitchWithAnotherTopIsForgottenAndReadBeforeItIsWritten) {
  LftBed b;
  const uint16_t top = b.Top(*b.tables);
  const size_t blocks = top / 64 + 1;
  b.Sweep(*b.model, b.tables, [](Guid) -> uint16_t { return 0; });
  const Guid rebooted = b.model->node(b.tables->switches[0].node).guid;
  const Guid other = b.model->node(b.tables->switches[1].node).guid;
  b.Sweep(*b.model, b.tables, [&](Guid g) -> uint16_t {
    if (g == rebooted) return 0;
    if (g == other) return top + 1;  // programmed by someone else, with the same entries
    return top;
  });
  EXPECT_EQ(b.forgotten, (std::set<Guid>{rebooted, other}));
  EXPECT_EQ(b.lfts.run().read, blocks);  // the other SM's switch: read, matched
  EXPECT_EQ(b.lfts.run().sent, blocks);  // the rebooted one: written whole
  b.ExpectHeld(*b.model, *b.tables);
}

// After a cut, the blocks whose old entries sent LIDs to a port that lost its cable are
// written before any other, and no entry of the cut switches points at the dead ports.
TEST(LftProgrammerTest, AfterACutTheBlocksIntoTheDeadCableGoFirst) {
  LftBed b;
  const uint16_t top = b.Top(*b.tables);
  b.Sweep(*b.model, b.tables, [](Guid) -> uint16_t { return 0; });
  // A cable between two switches, cut in the model. (The simulator keeps it: the stage reads
  // nothing of the fabric, and the paths of the model before the cut stay good.)
  PortId cut = kNoPort;
  for (PortId p = 0; p < b.model->port_count() && cut == kNoPort; ++p) {
    const Port& port = b.model->port(p);
    if (port.connected() && b.model->node(port.node).is_switch() &&
        b.model->node(b.model->port(port.peer).node).is_switch())
      cut = p;
  }
  ASSERT_NE(cut, kNoPort);
  Fabric after = *b.model;
  after.Disconnect(cut);
  const auto rerouted = LftBed::Route(after);
  // Which (switch, block) held an entry into the cable before.
  std::set<std::pair<NodeId, uint32_t>> into;
  for (PortId e : {cut, b.model->port(cut).peer}) {
    const Port& p = b.model->port(e);
    const routing::SwitchTable* s = b.tables->table(p.node);
    for (size_t lid = 0; lid < s->lft.size(); ++lid)
      if (s->lft[lid] == p.num.value()) into.emplace(b.SimNode(p.node), lid / 64);
  }
  ASSERT_FALSE(into.empty());
  std::vector<std::pair<NodeId, uint32_t>> order;
  b.sim.SetSmpObserver([&](NodeId node, uint8_t method, uint16_t attr, uint32_t mod) {
    if (method == mad::method::kSet && attr == mad::attr::kLinearForwardingTable)
      order.emplace_back(node, mod);
  });
  b.Sweep(after, rerouted, [top](Guid) { return top; });
  b.sim.SetSmpObserver({});
  EXPECT_EQ(b.lfts.run().urgent, into.size());
  ASSERT_GE(order.size(), into.size());
  for (size_t i = 0; i < into.size(); ++i)
    EXPECT_TRUE(into.count(order[i])) << "Set " << i << " was not a block into the cut";
  EXPECT_EQ(b.lfts.run().sent, order.size());
  b.ExpectHeld(after, *rerouted);
}

}  // namespace
}  // namespace ibsm::sm
