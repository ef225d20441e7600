// For fuzz targets that need a running SM: a 2-tier k=4 fat tree on the in-process simulator,
// brought to SUBNET UP once per process. Header-only; each target is its own program.
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>

#include "base/clock.h"
#include "fabric/generators.h"
#include "mad/testing/fake_transport.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::fuzz {

// A transport that counts what is posted (the fuzzed server's answers), keeps none of it and
// sends nothing.
struct NullTransport : mad::FakeTransport {
  NullTransport() { set_keep_posts(false); }
};

struct World {
  World() {
    auto f = FatTree2(4);
    if (!f.ok()) std::abort();
    fabric = std::make_unique<Fabric>(std::move(*f));
    sim = std::make_unique<sim::Simulator>(*fabric);
    PortId at = kNoPort;
    for (NodeId n = 0; n < fabric->node_count() && at == kNoPort; ++n)
      if (!fabric->node(n).is_switch()) at = fabric->port_id(n, PortNum{1});
    transport = std::make_unique<sim::SimTransport>(io, *sim, at);
    sm::SubnetManagerOptions o;
    o.send.timeout = std::chrono::milliseconds(20);
    o.sweep_interval = std::chrono::seconds(0);
    sm = std::make_unique<sm::SubnetManager>(io, *transport, clock, nullptr, o);
    sm->Start([this](const sm::SweepStats&) { io.stop(); });
    io.run();
    if (!sm->sa().snapshot()) std::abort();
  }
  boost::asio::io_context io;
  SystemClock clock;
  std::unique_ptr<Fabric> fabric;
  std::unique_ptr<sim::Simulator> sim;
  std::unique_ptr<sim::SimTransport> transport;
  std::unique_ptr<sm::SubnetManager> sm;
};

inline World& TheWorld() {
  static World* w = new World();  // never destroyed: fuzzers exit without running destructors
  return *w;
}

}  // namespace ibsm::fuzz
