// The LIDs-and-ports stage alone (sm/sweep/lids_and_ports.h) on the strict simulator: a
// fabric fresh from power-on (every LID 0) gets a LID on every end port, the devices hold it
// and the model's LID index finds it; a second run sends nothing; a restart keeps the LIDs;
// a takeover keeps the LIDs the ports hold; a local run looks at its nodes alone; a port
// that does not answer its Set keeps its own LID and the sweep has an issue.
#include "sm/sweep/lids_and_ports.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sm/testing/port_stage_bed.h"

namespace ibsm::sm {
namespace {

// The port stages' bed, and a LIDs-and-ports stage over its model.
struct LidStageBed : testutil::PortStageBed {
  LidStageBed() { sm_port = *d.fabric.FindPort(built.port(testutil::FirstCaPort(built)).guid); }

  std::unique_ptr<LidsAndPortsStage> MakeStage() {
    return std::make_unique<LidsAndPortsStage>(
        pipeline, options, counters, rereg,
        LidsAndPortsStage::Hooks{[this]() -> const DiscoveryResult& { return d; },
                                 [this]() -> DiscoveryResult& { return d; },
                                 [this](PortId p) { return PathTo(p); },
                                 [this](std::string_view id, std::string m) { Note(id, m); },
                                 [] { return false; }});
  }
  // A stage started with no rows kept, run once over the model: the LIDs assigned.
  std::unique_ptr<LidsAndPortsStage> AssignedStage() {
    auto stage = MakeStage();
    stage->Start(Lid{0}, {});
    Run(*stage, {});
    return stage;
  }
  // Runs `stage` over the model; returns the sweep's figures. ASSERTs that it ended.
  SweepStats Run(LidsAndPortsStage& stage, LidsAndPortsStage::Sweep s) {
    s.sm_port = sm_port;
    SweepContext ctx;
    int done = 0;
    stage.Run(s, ctx, [&] { ++done; });
    io.restart();
    io.run();
    EXPECT_EQ(done, 1);
    return ctx.stats;
  }
  // What the device behind model port `p` holds.
  const mad::PortInfo& Held(PortId p) const {
    const Port& port = d.fabric.port(p);
    return sim.port_info(sim.port_id(*built.FindNode(d.fabric.node(port.node).guid), port.num));
  }

  // The CA ports other than the SM's.
  std::vector<PortId> OtherCaPorts() const {
    std::vector<PortId> out;
    for (PortId p : EndPorts(d.fabric))
      if (!d.fabric.node(d.fabric.port(p).node).is_switch() && p != sm_port) out.push_back(p);
    return out;
  }

  ClientReregister rereg;
  PortId sm_port = kNoPort;
};

TEST(LidsAndPortsStageTest, AFreshFabricGetsALidOnEveryEndPortThatTheDevicesHold) {
  LidStageBed b;
  auto stage = b.MakeStage();
  stage->Start(Lid{0}, {});
  const std::vector<PortId> end_ports = EndPorts(b.d.fabric);
  for (PortId p : end_ports) ASSERT_EQ(b.Held(p).lid, 0) << "power-on LID";

  const SweepStats s = b.Run(*stage, {});
  EXPECT_TRUE(b.issues.empty()) << b.issues.front();
  EXPECT_EQ(s.lid_changes, end_ports.size());
  EXPECT_GE(s.portinfo_sets, end_ports.size());
  std::map<uint16_t, PortId> by_lid;
  for (PortId p : end_ports) {
    const uint16_t lid = stage->lids().base[p];
    ASSERT_NE(lid, 0);
    EXPECT_TRUE(by_lid.emplace(lid, p).second) << "LID " << lid << " given twice";
    EXPECT_EQ(b.Held(p).lid, lid);
    EXPECT_EQ(b.Held(p).master_sm_base_lid, stage->sm_lid().value());
    EXPECT_EQ(b.d.fabric.port(p).lid.value(), lid);  // the model follows the answers
    EXPECT_EQ(b.d.fabric.FindPortByLid(Lid{lid}), p);  // and its LID index
  }
  EXPECT_EQ(stage->sm_lid().value(), stage->lids().base[b.sm_port]);

  // Every port holds what it should: a second run Sets nothing.
  const SweepStats again = b.Run(*stage, {});
  EXPECT_EQ(again.lid_changes, 0u);
  EXPECT_EQ(again.portinfo_sets, 0u);
}

TEST(LidsAndPortsStageTest, ARestartKeepsTheLidsItRemembered) {
  LidStageBed b;
  auto first = b.AssignedStage();
  first->Remember(b.d.fabric);
  std::map<Guid, uint16_t> before;
  for (PortId p : EndPorts(b.d.fabric)) before[b.d.fabric.port(p).guid] = first->lids().base[p];

  // A fresh fabric (every port back at LID 0) under an SM started from the rows kept.
  LidStageBed fresh;
  auto second = fresh.MakeStage();
  second->Start(Lid{0}, first->guid2lid());
  const SweepStats s = fresh.Run(*second, {});
  EXPECT_TRUE(fresh.issues.empty()) << fresh.issues.front();
  for (PortId p : EndPorts(fresh.d.fabric)) {
    const Guid g = fresh.d.fabric.port(p).guid;
    EXPECT_EQ(second->lids().base[p], before.at(g)) << ToString(g);
    EXPECT_EQ(fresh.Held(p).lid, before.at(g));
  }
  EXPECT_EQ(s.lid_changes, before.size());  // each port still held 0
}

TEST(LidsAndPortsStageTest, ATakeoverKeepsTheLidsThePortsHoldOverItsOwnRows) {
  LidStageBed b;
  auto old_master = b.AssignedStage();
  // This SM's own rows are of another time: every port at another LID.
  std::unordered_map<Guid, PersistedLid> stale;
  for (PortId p : EndPorts(b.d.fabric)) {
    const uint16_t lid = static_cast<uint16_t>(old_master->lids().base[p] + 100);
    stale[b.d.fabric.port(p).guid] = {lid, lid};
  }
  auto taker = b.MakeStage();
  taker->Start(Lid{0}, stale);
  LidsAndPortsStage::Sweep s;
  s.took_over = true;
  const SweepStats stats = b.Run(*taker, s);
  EXPECT_EQ(stats.lid_changes, 0u);
  for (PortId p : EndPorts(b.d.fabric))
    EXPECT_EQ(taker->lids().base[p], old_master->lids().base[p]);
}

TEST(LidsAndPortsStageTest, ALocalRunComparesTheNodesItIsGivenAlone) {
  LidStageBed b;
  auto stage = b.AssignedStage();
  // Two CA ports lose their LID (a reboot), and the model hears of both; a local run of
  // one of the two nodes Sets that one alone.
  const std::vector<PortId> cas = b.OtherCaPorts();
  ASSERT_GE(cas.size(), 2u);
  for (PortId p : {cas[0], cas[1]}) {
    const Port& port = b.d.fabric.port(p);
    b.d.nodes[port.node].port_info[port.num.value()].lid = 0;
  }
  LidsAndPortsStage::Sweep s;
  s.local.assign(b.d.fabric.node_count(), false);
  s.local[b.d.fabric.port(cas[0]).node] = true;
  const SweepStats stats = b.Run(*stage, s);
  EXPECT_EQ(stats.portinfo_sets, 1u);
  EXPECT_EQ(b.d.nodes[b.d.fabric.port(cas[0]).node].port_info[1].lid,
            stage->lids().base[cas[0]]);
  EXPECT_EQ(b.d.nodes[b.d.fabric.port(cas[1]).node].port_info[1].lid, 0);
  // The whole fabric again: the other one now.
  EXPECT_EQ(b.Run(*stage, {}).portinfo_sets, 1u);
}

TEST(LidsAndPortsStageTest, APortThatDoesNotAnswerItsSetKeepsItsLidAndTheSweepHasAnIssue) {
  LidStageBed b;
  ASSERT_FALSE(b.OtherCaPorts().empty());
  const PortId lost = b.OtherCaPorts().back();
  const NodeId in_sim = *b.built.FindNode(b.d.fabric.node(b.d.fabric.port(lost).node).guid);
  ASSERT_TRUE(b.sim.SetNodeDropRate(in_sim, 1.0).ok());
  auto stage = b.AssignedStage();
  ASSERT_EQ(b.issues.size(), 1u);
  EXPECT_EQ(b.issues[0].rfind("SM-LID-004 ", 0), 0u) << b.issues[0];
  EXPECT_EQ(b.d.fabric.port(lost).lid.value(), 0);  // the model keeps what the port holds
  EXPECT_FALSE(b.d.fabric.FindPortByLid(Lid{stage->lids().base[lost]}).has_value());
  stage->Remember(b.d.fabric);
  EXPECT_EQ(stage->guid2lid().count(b.d.fabric.port(lost).guid), 0u);
}

TEST(LidsAndPortsStageTest, ALocalRepairKeepsTheAssignmentRenumberedAfterANodeLeft) {
  LidStageBed b;
  auto stage = b.AssignedStage();
  std::map<Guid, uint16_t> before;
  for (PortId p : EndPorts(b.d.fabric)) before[b.d.fabric.port(p).guid] = stage->lids().base[p];
  // A repair takes a CA out of the model (it died): the other ports are renumbered.
  NodeId gone = kNoNode;
  for (NodeId n = 0; n < b.d.fabric.node_count(); ++n)
    if (!b.d.fabric.node(n).is_switch() && n != b.d.fabric.port(b.sm_port).node) gone = n;
  ASSERT_NE(gone, kNoNode);
  const Fabric old = b.d.fabric;
  std::vector<bool> keep(old.node_count(), true);
  keep[gone] = false;
  KeepNodes(b.d, keep);
  std::vector<PortId> renumbered(old.port_count(), kNoPort);
  for (PortId p = 0; p < old.port_count(); ++p) {
    const Port& port = old.port(p);
    if (auto n = b.d.fabric.FindNode(old.node(port.node).guid))
      renumbered[p] = b.d.fabric.port_id(*n, port.num);
  }
  b.sm_port = renumbered[b.sm_port];
  LidsAndPortsStage::Sweep s;
  s.local.assign(b.d.fabric.node_count(), false);  // nothing of what is left changed
  s.keep_assignment = true;
  s.renumbered = &renumbered;
  const SweepStats stats = b.Run(*stage, s);
  EXPECT_EQ(stats.lid_changes, 0u);
  EXPECT_EQ(stats.portinfo_sets, 0u);
  EXPECT_EQ(stage->lids().end_ports.size(), before.size() - 1);
  EXPECT_EQ(stage->lids().from_current, before.size() - 1);  // kept, not assigned again
  for (PortId p : EndPorts(b.d.fabric))
    EXPECT_EQ(stage->lids().base[p], before.at(b.d.fabric.port(p).guid));
  EXPECT_EQ(stage->lids().base.size(), b.d.fabric.port_count());
}

TEST(LidsAndPortsStageTest, KeepingAnAssignmentThatDoesNotFitAssignsAfresh) {
  LidStageBed b;
  auto stage = b.MakeStage();
  stage->Start(Lid{0}, {});
  LidsAndPortsStage::Sweep s;
  s.keep_assignment = true;  // but there is none yet
  const SweepStats first = b.Run(*stage, s);
  EXPECT_EQ(first.lid_changes, EndPorts(b.d.fabric).size());
  for (PortId p : EndPorts(b.d.fabric)) EXPECT_NE(b.Held(p).lid, 0);
  // A port the model says holds another LID than the one assigned: assigned again, kept.
  const PortId p = EndPorts(b.d.fabric).back();
  b.d.fabric.mutable_port(p).lid = Lid{0};
  const SweepStats again = b.Run(*stage, s);
  EXPECT_EQ(again.lid_changes, 1u);
  // AssignLids ran: every other port kept the LID it holds, that one got a fresh one.
  EXPECT_EQ(stage->lids().from_current, EndPorts(b.d.fabric).size() - 1);
}

}  // namespace
}  // namespace ibsm::sm
