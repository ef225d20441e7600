// Programs multicast forwarding tables by difference: an MFT block (32 MLIDs by one 16-port
// position, SMP attribute 0x001B, modifier position << 28 | block) is sent only when what
// the plan wants differs from what the SM last wrote to that switch. A switch the SM has
// not written yet (first sweep, a restart, a reboot: Forget) gets every block up to the
// highest MLID in use, zeros included, so stale entries from an earlier SM are cleared.
//
// Threading: the io_context thread that owns the pipeline.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sm/model/discovery.h"
#include "sm/model/multicast_tree.h"
#include "sm/model/smp_pipeline.h"

namespace ibsm::sm {

struct MftCounters {
  uint64_t pushes = 0;         // Push calls
  uint64_t blocks_sent = 0;    // MFT block Sets sent
  uint64_t blocks_failed = 0;  // Sets that failed (retried on the next push)
};

class MftProgrammer {
 public:
  // REQUIRES: `pipeline` outlives this.
  explicit MftProgrammer(SmpPipeline& pipeline) : pipeline_(pipeline) {}

  // Queues the Sets that bring every switch of `fabric` to `plan` (paths from `nodes`).
  // Returns how many blocks were queued. `on_error` (optional) hears of each failed Set.
  size_t Push(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes,
              const MftPlan& plan,
              std::function<void(Guid, uint32_t position, uint32_t block, const Status&)>
                  on_error = {});

  // The switch's tables are unknown again (rebooted, or programmed by someone else).
  void Forget(Guid switch_guid) { written_.erase(switch_guid); }
  void ForgetAll() { written_.clear(); }

  const MftCounters& counters() const { return counters_; }

 private:
  using Block = std::array<uint16_t, 32>;
  // (position << 16 | block) -> what the switch holds after our last successful Set;
  // nullopt while a Set is in flight or after one failed (resent on the next push).
  using Written = std::map<uint32_t, std::optional<Block>>;
  SmpPipeline& pipeline_;
  std::unordered_map<Guid, Written> written_;
  MftCounters counters_;
};

}  // namespace ibsm::sm
