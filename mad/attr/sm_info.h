// SMInfo (IBA 14.2.5.13), attribute 0x0020. Modifier on Set: 1 HANDOVER, 2 ACKNOWLEDGE,
// 3 DISABLE, 4 STANDBY, 5 DISCOVER.
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

enum class SmState : uint8_t { kNotActive = 0, kDiscovering = 1, kStandby = 2, kMaster = 3 };

namespace sminfo_mod {
inline constexpr uint32_t kHandover = 1;
inline constexpr uint32_t kAcknowledge = 2;
inline constexpr uint32_t kDisable = 3;
inline constexpr uint32_t kStandby = 4;
inline constexpr uint32_t kDiscover = 5;
}  // namespace sminfo_mod

struct SmInfo {
  static constexpr uint16_t kAttrId = attr::kSmInfo;
  uint64_t guid = 0;
  uint64_t sm_key = 0;
  uint32_t act_count = 0;
  uint8_t priority = 0;  // 4 bits
  SmState sm_state = SmState::kNotActive;
};

template <>
struct Layout<SmInfo> {
  static constexpr std::string_view kName = "SMInfo";
  static constexpr size_t kSize = 21;
  static constexpr std::array kFields = {
      F<&SmInfo::guid>("guid", 0, 64, FieldFormat::kGuid),
      F<&SmInfo::sm_key>("sm_key", 64, 64, FieldFormat::kHex),
      F<&SmInfo::act_count>("act_count", 128, 32),
      F<&SmInfo::priority>("priority", 160, 4),
      F<&SmInfo::sm_state>("sm_state", 164, 4),
  };
};
static_assert(LayoutIsValid<SmInfo>());

}  // namespace ibsm::mad
