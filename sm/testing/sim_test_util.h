// Checks tests make of a fabric the SM programmed on the in-process simulator, by reading
// back what the simulated switches and ports hold (not what the SM believes).
#pragma once

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/fabric.h"
#include "sim/simulator.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm::simcheck {

using testutil::FirstCaPort;

// `f` with every node's description as its device answers it (the strict profile gives some
// CAs hostile NodeDescriptions), for comparing what discovery read with the fabric.
inline Fabric AsDevicesReportIt(const Fabric& f, const sim::Simulator& sim) {
  Fabric out = f;
  for (NodeId n = 0; n < out.node_count(); ++n)
    out.mutable_node(n).description = sim.node_description(n);
  return out;
}

// Follows the simulator's LFTs from `src` (a CA port of `f`) toward `dlid`; true when the
// walk ends at the port owning `dlid`.
inline bool Reaches(const Fabric& f, const sim::Simulator& sim, PortId src, uint16_t dlid) {
  PortId at = f.port(src).peer;
  for (int hops = 0; hops < 64 && at != kNoPort; ++hops) {
    NodeId n = f.port(at).node;
    if (!f.node(n).is_switch()) {
      const mad::PortInfo& pi = sim.port_info(at);
      return dlid >= pi.lid && dlid < pi.lid + (1u << pi.lmc);
    }
    uint8_t out = sim.lft_entry(n, Lid{dlid});
    if (out == 0) return sim.port_info(f.port_id(n, PortNum{0})).lid == dlid;
    if (out > f.node(n).num_ports) return false;
    PortId egress = f.port_id(n, PortNum{out});
    if (sim.port_info(egress).port_state != 4) return false;
    at = f.port(egress).peer;
  }
  return false;
}

// The LID of every end port and switch port 0, by port GUID, as the simulator holds them.
inline std::vector<std::pair<uint64_t, uint16_t>> PortLids(const Fabric& f,
                                                           const sim::Simulator& sim) {
  std::vector<std::pair<uint64_t, uint16_t>> out;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    for (uint32_t p = node.is_switch() ? 0 : 1; p <= (node.is_switch() ? 0u : node.num_ports); ++p) {
      PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
      out.emplace_back(f.port(id).guid.value(), sim.port_info(id).lid);
    }
  }
  return out;
}

// Every LID unique and non-zero, every cabled port ACTIVE, and every CA reaching every CA
// through the programmed tables. `skip`: nodes left out (dead or removed).
inline void ExpectFabricUp(const Fabric& f, const sim::Simulator& sim,
                           const std::set<NodeId>& skip = {}) {
  std::set<uint16_t> lids;
  std::vector<std::pair<PortId, uint16_t>> cas;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (skip.count(n)) continue;
    const Node& node = f.node(n);
    for (uint32_t p = node.is_switch() ? 0 : 1; p <= node.num_ports; ++p) {
      PortId id = f.port_id(n, PortNum{static_cast<uint8_t>(p)});
      const mad::PortInfo& pi = sim.port_info(id);
      if (p == 0 || !node.is_switch()) {
        EXPECT_NE(pi.lid, 0) << node.name << " port " << p << " has no LID";
        EXPECT_TRUE(lids.insert(pi.lid).second) << "LID " << pi.lid << " assigned twice";
      }
      const bool peer_alive = f.port(id).connected() && !skip.count(f.port(f.port(id).peer).node);
      if (p != 0 && peer_alive) {
        EXPECT_EQ(pi.port_state, 4) << node.name << " port " << p << " is not ACTIVE";
      }
      if (!node.is_switch() && p == 1 && peer_alive) cas.emplace_back(id, pi.lid);
    }
  }
  for (const auto& [src, own] : cas)
    for (const auto& [dst, lid] : cas)
      if (lid != own) {
        EXPECT_TRUE(Reaches(f, sim, src, lid))
            << f.node(f.port(src).node).name << " cannot reach LID " << lid;
      }
}

}  // namespace ibsm::sm::simcheck
