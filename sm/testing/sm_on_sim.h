// One SubnetManager on the in-process simulator, as the sweep tests drive it: attached at the
// first host of the fabric, its own io_context, SMPs timing out after 200 ms and no sweep
// but those the traps and the test ask for (QuietOptions).
#pragma once

#include <chrono>
#include <functional>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "fabric/fabric.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm::testutil {

inline SubnetManagerOptions QuietOptions() {
  SubnetManagerOptions o;
  o.send.timeout = std::chrono::milliseconds(200);
  o.sweep_interval = std::chrono::seconds(0);  // only traps (and the test) start sweeps
  return o;
}

struct SmOnSim {
  SmOnSim(sim::Simulator& sim, const Fabric& f, SubnetManagerOptions o)
      : t(io, sim, FirstCaPort(f)), sm(io, t, clock, nullptr, std::move(o)) {
    EXPECT_TRUE(t.bind_status().ok());
  }
  // Runs until Stop(); `on_sweep` sees every sweep's figures.
  void Run(std::function<void(const SweepStats&)> on_sweep) {
    sm.Start(std::move(on_sweep));
    io.run();
  }
  void Stop() {
    sm.Stop();
    t.Close();
    io.stop();
  }
  boost::asio::io_context io;
  sim::SimTransport t;
  SystemClock clock;
  SubnetManager sm;
};

}  // namespace ibsm::sm::testutil
