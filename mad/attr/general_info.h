// GeneralInfo (vendor SMP attribute 0xFF17, ar-sharp.md "Adaptive routing"): with modifier 4
// a switch answers its capability bits. Bit N sits in big-endian dword N / 32 under mask
// 1 << (N % 32). Legacy switches (and ibsim) drop vendor attributes without an answer, so a
// timeout means "no capability".
#pragma once

#include <array>
#include <cstdint>

#include "mad/field.h"

namespace ibsm::mad {

namespace attr {
inline constexpr uint16_t kGeneralInfo = 0xFF17;
}  // namespace attr

inline constexpr uint32_t kGeneralInfoCapabilityModifier = 4;

// Capability bit numbers (frozen: wire values).
namespace general_cap {
// Pre-SwitchX AR (the legacy 0xFF22 LFT format, which ibsm does not program).
inline constexpr unsigned kAdaptiveRoutingLegacy = 1;
// "AdaptiveRoutingRev1Supported": SwitchX-and-later AR with ARLFT_SX 0xFF23, the format ibsm
// programs; devices report it instead of bit 1, never with it (docs/ar-sharp.md "Discovery").
inline constexpr unsigned kAdaptiveRoutingRev1 = 2;
inline constexpr unsigned kSharpAggregationNode = 18;
// "IsSpecialPortsMarkingSupported" (ibdiagnet's capability enum, OpenIB BSD): the switch
// marks a port that leads to an aggregation node, a router or a gateway in
// MlnxExtendedPortInfo byte 47 (mad/attr/sharp.h).
inline constexpr unsigned kSpecialPortsMarking = 21;
}  // namespace general_cap

struct GeneralInfoCapabilities {
  static constexpr uint16_t kAttrId = attr::kGeneralInfo;
  std::array<uint32_t, 4> capability{};  // dword i holds bits 32i .. 32i + 31

  bool Has(unsigned bit) const {
    return bit < 128 && (capability[bit / 32] >> (bit % 32) & 1u) != 0;
  }
  void Set(unsigned bit) {
    if (bit < 128) capability[bit / 32] |= uint32_t{1} << (bit % 32);
  }
};

template <>
struct Layout<GeneralInfoCapabilities> {
  static constexpr std::string_view kName = "GeneralInfoCapabilities";
  static constexpr size_t kSize = 16;
  static constexpr std::array kFields = {
      A<&GeneralInfoCapabilities::capability>("capability", 0, 32, 32, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<GeneralInfoCapabilities>());

}  // namespace ibsm::mad
