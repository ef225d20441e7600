#include "sm/sweep/link_stage.h"

#include <array>
#include <memory>

#include <fmt/format.h>

namespace ibsm::sm {

namespace {
uint8_t ToWire(PortState s) { return static_cast<uint8_t>(s); }
}  // namespace

void LinkStage::Run(SweepContext& sweep, std::function<void()> done) {
  sweep_ = &sweep;
  done_ = std::move(done);
  ++run_;
  Pass(0);
}

size_t LinkStage::Stop() {
  if (!done_) return 0;
  done_ = nullptr;
  ++run_;  // the feeder and the idle callback of the stopped run see it and end
  return pipeline_.Abandon(this);
}

// Ports whose link is up at both ends go INIT -> ARMED (pass 0), then ARMED -> ACTIVE
// (pass 1). Switch port 0 has no link.
void LinkStage::Pass(int pass) {
  PortState from = pass == 0 ? PortState::kInit : PortState::kArmed;
  PortState to = pass == 0 ? PortState::kArmed : PortState::kActive;
  if (!hooks_.master()) return;
  auto next = std::make_shared<PortId>(0);
  const uint64_t run = run_;
  pipeline_.Feed([this, next, from, to, run]() -> bool {
    if (run != run_) return false;
    const DiscoveryResult& d = hooks_.model();
    const Fabric& f = d.fabric;
    while (*next < f.port_count()) {
      PortId p = (*next)++;
      const Port& port = f.port(p);
      if (port.num.value() == 0 || !port.connected() || port.state != from) continue;
      const DiscoveredNode& dn = d.nodes[port.node];
      if (!dn.port_info_valid[port.num.value()]) continue;
      if (f.port(port.peer).state < PortState::kInit) continue;
      mad::PortInfo want = ports_.Desired(p);
      want.port_state = ToWire(to);
      std::array<uint8_t, 64> data{};
      mad::EncodeTo(want, data);
      uint8_t num = port.num.value();
      NodeId node = port.node;
      DrPath path = hooks_.path(p);
      pipeline_.Set(path, mad::attr::kPortInfo, ports_.SetModifier(p), data,
                    [this, p, node, num, to, path, run](Result<mad::Smp> r) {
                      if (run != run_) return;  // stopped: taken back before it was sent
                      if (r.ok()) {
                        if (auto pi = mad::Decode<mad::PortInfo>(r->data); pi.ok())
                          OnPortStateSet(p, node, num, to, *pi);
                        return;
                      }
                      // Not idempotent (above): the port, read, tells whether it got there.
                      ++sweep_->stats.port_state_readbacks;
                      pipeline_.Get(path, mad::attr::kPortInfo, num,
                                    [this, p, node, num, to, run, failed = r.status()](
                                        Result<mad::Smp> g) {
                                      if (run != run_) return;
                                      auto pi = g.ok() ? mad::Decode<mad::PortInfo>(g->data)
                                                       : Result<mad::PortInfo>(g.status());
                                      if (pi.ok() && pi->port_state == ToWire(to)) {
                                        ++counters_.sets_confirmed_by_readback;
                                        OnPortStateSet(p, node, num, to, *pi);
                                        return;
                                      }
                                      hooks_.issue(
                                          "SM-LINK-001",
                                          fmt::format(
                                              "PortInfo Set (state {}) on {} port {} failed: {}",
                                              ToWire(to),
                                              ToString(hooks_.model().fabric.node(node).guid),
                                              num, failed.ToString()));
                                    },
                                    this, /*abandonable=*/true);
                    },
                    this, /*abandonable=*/true);
      return true;
    }
    return false;
  });
  pipeline_.WhenIdle([this, pass, run] {
    if (hooks_.stopped() || run != run_) return;
    if (pass == 0) {
      Pass(1);
      return;
    }
    auto done = std::move(done_);
    done_ = nullptr;
    if (done) done();
  });
}

// What a port answered once it reached `to` (ARMED or ACTIVE): the model follows it.
void LinkStage::OnPortStateSet(PortId p, NodeId node, uint8_t num, PortState to,
                               const mad::PortInfo& pi) {
  ports_.NoteLinkEcho(p, pi);
  DiscoveryResult& d = hooks_.mutable_model();
  d.nodes[node].port_info[num] = pi;
  d.fabric.mutable_port(p).state = static_cast<PortState>(pi.port_state <= 4 ? pi.port_state : 0);
  if (to == PortState::kArmed) {
    ++sweep_->stats.ports_armed;
  } else {
    ++sweep_->stats.ports_activated;
  }
}

}  // namespace ibsm::sm
