// GUIDInfo (IBA 14.2.5.5), attribute 0x0014: one block of 8 port GUIDs; modifier = block.
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

inline constexpr size_t kGuidInfoBlockSize = 8;

struct GuidInfo {
  static constexpr uint16_t kAttrId = attr::kGuidInfo;
  std::array<uint64_t, kGuidInfoBlockSize> guid{};
};

template <>
struct Layout<GuidInfo> {
  static constexpr std::string_view kName = "GUIDInfo";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&GuidInfo::guid>("guid", 0, 64, 64, FieldFormat::kGuid),
  };
};
static_assert(LayoutIsValid<GuidInfo>());

}  // namespace ibsm::mad
