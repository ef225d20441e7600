// Helpers shared by the routing tests (header-only, test code only).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "fabric/fabric.h"
#include "fabric/generators.h"
#include "routing/ftree_engine.h"
#include "routing/hop_table.h"
#include "routing/routing_engine.h"
#include "routing/updown_proof.h"

namespace ibsm::routing::testing {

// Gives every switch port 0 one LID and every CA/router port 2^lmc aligned LIDs, in NodeId
// order from LID 1, then re-indexes the fabric's LIDs.
inline void AssignLids(Fabric& fabric, uint8_t lmc = 0) {
  uint32_t next = 1;
  const uint32_t step = 1u << lmc;
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    const Node& node = fabric.node(n);
    if (node.is_switch()) {
      Port& p0 = fabric.mutable_port(node.first_port);
      p0.lid = Lid(static_cast<uint16_t>(next++));
      p0.lmc = 0;
      continue;
    }
    for (uint32_t num = 1; num <= node.num_ports; ++num) {
      next = (next + step - 1) / step * step;
      Port& p = fabric.mutable_port(node.first_port + num);
      p.lid = Lid(static_cast<uint16_t>(next));
      p.lmc = lmc;
      next += step;
    }
  }
  fabric.IndexLids();
}

// Follows the tables from switch `from` towards `lid`. Returns the number of switches the
// packet crosses before it is delivered (1 = `from` delivers it), or -1 if it is not
// delivered to the LID's owner within 64 switches.
inline int SwitchesOnPath(const Fabric& fabric, const LidMap& lids, const RoutingTables& tables,
                          NodeId from, Lid lid) {
  const PortId owner = lids.owner(lid);
  NodeId cur = from;
  for (int n = 1; n <= 64; ++n) {
    const SwitchTable* t = tables.table(cur);
    if (!t || lid.value() >= t->lft.size()) return -1;
    const uint8_t port = t->lft[lid.value()];
    if (port == 0) return fabric.port_id(cur, PortNum(0)) == owner ? n : -1;
    if (port > fabric.node(cur).num_ports) return -1;
    const Port& out = fabric.port(cur, PortNum(port));
    if (!out.connected()) return -1;
    if (out.peer == owner) return n;
    const NodeId next = fabric.port(out.peer).node;
    if (!fabric.node(next).is_switch()) return -1;
    cur = next;
  }
  return -1;
}

// The switch that delivers `end_port` (its own node for a switch port 0), or kNoNode.
inline NodeId AttachNode(const Fabric& fabric, PortId end_port) {
  const Port& p = fabric.port(end_port);
  if (fabric.node(p.node).is_switch()) return p.node;
  if (!p.connected()) return kNoNode;
  const NodeId peer = fabric.port(p.peer).node;
  return fabric.node(peer).is_switch() ? peer : kNoNode;
}

// Entries of `a` and `b` (switches by NodeId; both tables route the same fabric's nodes)
// that differ.
inline size_t Differences(const RoutingTables& a, const RoutingTables& b) {
  size_t diff = 0;
  for (const SwitchTable& st : a.switches) {
    const SwitchTable* other = b.table(st.node);
    for (size_t lid = 1; lid < st.lft.size(); ++lid)
      diff += !other || lid >= other->lft.size() || other->lft[lid] != st.lft[lid];
  }
  return diff;
}

// The first cable from a switch of tier `tier` (LeafDistanceRanks) to one a tier above.
inline PortId Uplink(const Fabric& f, uint32_t tier) {
  const auto rank = LeafDistanceRanks(f);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (rank[n] != tier) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      const PortId id = f.port_id(n, PortNum(static_cast<uint8_t>(p)));
      if (f.port(id).connected() && rank[f.port(f.port(id).peer).node] == tier + 1) return id;
    }
  }
  return kNoPort;
}

// A 3-tier fat tree of radix k, LIDs in node order (LMC `lmc`), routed by ftree: the tables
// a repair starts from (the re-route and proof tests).
class FtreeFatTreeTest : public ::testing::Test {
 protected:
  void Build(int k, uint8_t lmc = 0) {
    auto f = FatTree3(k);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    before_ = std::move(*f);
    AssignLids(before_, lmc);
    lids_ = std::make_unique<LidMap>(before_);
    RoutingOptions o;
    o.lmc = lmc;
    auto t = FTreeEngine().Route(before_, *lids_, o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    old_ = std::move(*t);
  }
  Fabric before_;
  std::unique_ptr<LidMap> lids_;
  RoutingTables old_;
};

}  // namespace ibsm::routing::testing
