// A FatTree2(4) read by discovery from the strict simulator, with a LID for every end port and
// the port settings over it: what the port stages' own tests (PortSettings, LinkStage) start
// from. The model is as read: every link INIT, as at power-on.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"
#include "sm/sweep/port_settings.h"
#include "sm/sweep/sm_counters.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm::testutil {

struct PortStageBed {
  PortStageBed()
      : built(FatTree2(4).value()), sim(built), t(io, sim, FirstCaPort(built)),
        pipeline(t, 16, mad::SendOptions{std::chrono::milliseconds(20), 3}, 0),
        ports(options, [this]() -> const DiscoveryResult& { return d; }, lids, sm_lid) {
    Discovery disc(pipeline);
    disc.Run([&](DiscoveryResult r) { d = std::move(r); });
    io.run();
    lids.base.assign(d.fabric.port_count(), 0);
    lids.lmc.assign(d.fabric.port_count(), 0);
    uint16_t next = 1;
    for (NodeId n = 0; n < d.fabric.node_count(); ++n) {
      const Node& node = d.fabric.node(n);
      if (node.is_switch()) {
        lids.base[d.fabric.port_id(n, PortNum{0})] = next++;
      } else {
        for (uint8_t p = 1; p <= node.num_ports; ++p)
          lids.base[d.fabric.port_id(n, PortNum{p})] = next++;
      }
    }
  }
  // Where a PortInfo Set for port `p` goes: a path that arrives on `p` itself, where there
  // is one (the SM's PortInfoPath).
  DrPath PathTo(PortId p) const {
    auto path = PathToPort(d.fabric, d.nodes, p);
    return path ? *path : d.nodes[d.fabric.port(p).node].path;
  }
  // A stage's issue hook: kept in `issues` as "ID message".
  void Note(std::string_view id, const std::string& message) {
    issues.push_back(std::string(id) + " " + message);
  }
  // The first switch port cabled to a CA (`to_ca`) or to a switch.
  PortId SwitchPort(bool to_ca) const {
    for (PortId p = 0; p < d.fabric.port_count(); ++p) {
      const Port& port = d.fabric.port(p);
      if (port.num.value() == 0 || !port.connected() || !d.fabric.node(port.node).is_switch())
        continue;
      if (d.fabric.node(d.fabric.port(port.peer).node).is_switch() != to_ca) return p;
    }
    return kNoPort;
  }

  Fabric built;
  sim::Simulator sim;
  boost::asio::io_context io;
  sim::SimTransport t;
  SmpPipeline pipeline;
  SubnetManagerOptions options;
  SmCounters counters;
  DiscoveryResult d;
  LidAssignment lids;
  Lid sm_lid{1};
  PortSettings ports;
  std::vector<std::string> issues;
};

}  // namespace ibsm::sm::testutil
