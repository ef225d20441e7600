// Traps from the fabric (ARCHITECTURE.md section 2, "Traps"): each is repressed, checked
// against the LID it came from, counted by the trap tracker (repeats ignored, babbling ports
// disabled under babbling_port_policy), turned into a repair or a heavy sweep when it says
// the fabric changed, and, on the master, published to InformInfo subscribers.
//
// The sweep engine hosts it (TrapHandler::Host): the handler decides, the host sweeps and
// publishes. Every call runs on the io thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "base/clock.h"
#include "mad/attr/notice.h"
#include "mad/attr/sm_info.h"
#include "mad/mad.h"
#include "mad/transport.h"
#include "sm/model/discovery.h"
#include "sm/model/smp_pipeline.h"
#include "sm/sweep/sm_counters.h"
#include "sm/sweep/trap_tracker.h"

namespace ibsm::sm {

struct SubnetManagerOptions;

class TrapHandler {
 public:
  // What the handler asks of the sweep engine.
  class Host {
   public:
    // The subnet as the engine models it now; null before the first discovery.
    virtual const DiscoveryResult* TrapDiscovered() const = 0;
    virtual mad::SmState TrapSmState() const = 0;
    virtual Lid TrapSmLid() const = 0;
    // The switch of the model whose port 0 has `lid`, if any.
    virtual std::optional<Guid> TrapSwitchOfLid(uint16_t lid) const = 0;
    // A known switch reported a link change: counted for link flap damping, and repaired
    // from that switch's ports when `repair`.
    virtual void TrapSwitchReported(Guid sw, bool repair, const std::string& why) = 0;
    virtual void TrapRequestHeavySweep(const std::string& why) = 0;
    // The directed route to the SMA that holds port `p`'s PortInfo.
    virtual DrPath TrapPortInfoPath(PortId p) const = 0;
    // To the InformInfo subscribers, as a Report.
    virtual void TrapPublish(const mad::Notice& notice) = 0;

   protected:
    ~Host() = default;
  };

  // REQUIRES: every argument outlives this; `options` is the host's (read at each trap).
  TrapHandler(mad::Transport& transport, SmpPipeline& pipeline, const Clock& clock,
              const SubnetManagerOptions& options, SmCounters& counters, Host& host);

  // A Trap (SMP, method 0x05) that came in as `msg`.
  void HandleTrap(const mad::Smp& req, const mad::MadMessage& msg);

 private:
  void DisableBabblingPort(const TrapKey& key, uint32_t count);

  mad::Transport& transport_;
  SmpPipeline& pipeline_;
  const Clock& clock_;
  const SubnetManagerOptions& options_;
  SmCounters& counters_;
  Host& host_;
  TrapTracker tracker_;
};

}  // namespace ibsm::sm
