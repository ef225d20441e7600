// The adaptive-routing agent of one simulated AR-capable switch: it
// answers GeneralInfo capabilities, ARInfo, ARGroupTable, ARLinearForwardingTable_SX and
// ARGroupTableCopy as docs/ar-sharp.md says ("ibsm encoding v1" where no public source
// fixes the encoding), and holds the state a test reads back. Switches without this agent
// drop vendor attributes without an answer, as ibsim and legacy switches do.
//
// Threading: owned by the Simulator; the same single thread.
// Untrusted input: every request is bytes from the fabric; a bad block, group or port is
// an InvalidField status and changes nothing.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "fabric/fabric.h"
#include "mad/attr/adaptive_routing.h"
#include "mad/attr/general_info.h"

namespace ibsm::sim {

struct ArSwitchCaps {
  uint16_t group_cap = 2048;  // groups in the one group table
  uint8_t by_sl_cap = 1;
  uint8_t group_table_copy_sup = 1;
  uint8_t ar_version_cap = 1;
  uint8_t by_transport_cap = 1;  // ARInfo byte 0 bit 5
  uint8_t sub_grps_active = 0;   // ARInfo byte 2 bits 3-0 (> 0: sub-group masks)
  // GeneralInfo bit 1 (pre-SwitchX format) instead of bit 2, as a pre-SwitchX switch reports.
  bool legacy_format = false;
  // ARInfo E already 1 at start: AR left on by another SM (or firmware) with groups it wrote.
  bool enabled_at_start = false;
};

// What a simulated switch holds in ARInfo bytes 20-63 (HBF, pFRN, by-VL fields ibsm does not
// manage) after a reset: non-zero, so a Set that writes them as zeros shows in a test.
inline constexpr std::array<uint8_t, mad::kArInfoUnmanagedBytes> kSimArInfoUnmanaged = {
    0x5A, 0x00, 0x03, 0x00, 0x81, 0x00, 0x12, 0x34};

class ArSwitch {
 public:
  // `num_ports`: the switch's physical ports; `lft_cap`: its LinearFDBCap (AR LFT size).
  ArSwitch(uint8_t num_ports, uint16_t lft_cap, ArSwitchCaps caps = {});

  // Answers a Get/Set of an AR attribute (or GeneralInfo) in place in the 64-byte `data`;
  // returns the MAD status. `method` is mad::method::kGet or kSet.
  uint16_t Handle(uint16_t attr_id, uint8_t method, uint32_t mod, std::span<uint8_t> data);

  // An ordinary LinearForwardingTable Set reached the switch: with no_fallback 0 the switch
  // falls back to the plain LFT (E cleared), as the facts page says.
  void OnLftSet();
  // Power cycle: settings and tables back to their defaults; capabilities stay.
  void Reset();
  // Its GeneralInfo capability bits (the simulator merges those of every agent on the node).
  void AddCapabilities(mad::GeneralInfoCapabilities& caps) const;

  // --- inspection (tests) ---
  const mad::ArInfo& info() const { return info_; }
  mad::ArPortMask group(uint16_t g) const {
    return g < groups_.size() ? groups_[g] : mad::ArPortMask{};
  }
  // The AR LFT entry for `lid`; never-written entries read static to port 255.
  mad::ArLftEntry lft_entry(Lid lid) const;
  uint64_t lft_sets_seen() const { return lft_sets_seen_; }
  uint64_t info_sets_seen() const { return info_sets_seen_; }  // ARInfo Sets accepted
  size_t state_bytes() const;

 private:
  uint16_t HandleInfo(uint8_t method, uint32_t mod, std::span<uint8_t> data);
  uint16_t HandleGroupTable(uint8_t method, uint32_t mod, std::span<uint8_t> data);
  uint16_t HandleLft(uint8_t method, uint32_t mod, std::span<uint8_t> data);
  uint16_t HandleCopy(uint8_t method, uint32_t mod, std::span<uint8_t> data);
  bool ValidMask(const mad::ArPortMask& m) const;

  uint8_t num_ports_;
  uint16_t lft_cap_;
  ArSwitchCaps caps_;
  mad::ArInfo info_;
  std::vector<mad::ArPortMask> groups_;  // grows to the highest group written
  std::vector<mad::ArLftEntry> lft_;     // grows to the highest block written
  uint64_t lft_sets_seen_ = 0;
  uint64_t info_sets_seen_ = 0;
};

// The switches an `ibsmd --sim-ar-switches` (or --sim-sharp-switches) value names: "all",
// "none", a comma-separated list of node GUIDs, or the path of a file with one GUID per line
// ('#' comments). InvalidArgument for a GUID that names no switch or a file that cannot be
// read; the value is operator input, never trusted.
Result<std::vector<NodeId>> SelectSwitches(const Fabric& fabric, std::string_view spec);

}  // namespace ibsm::sim
