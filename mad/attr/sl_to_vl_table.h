// SLtoVLMappingTable (IBA 14.2.5.8), attribute 0x0017: the VL (4 bits) for each of 16 SLs,
// SL0 in the high nibble of byte 0. Modifier on a switch: bits 15-8 input port, bits 7-0
// output port; on a CA or router port it is ignored.
#pragma once

#include "mad/field.h"
#include "mad/attr/modifiers.h"
#include "mad/mad.h"

namespace ibsm::mad {

struct SlToVlTable {
  static constexpr uint16_t kAttrId = attr::kSlToVlTable;
  std::array<uint8_t, 16> vl{};
};

template <>
struct Layout<SlToVlTable> {
  static constexpr std::string_view kName = "SLtoVLMappingTable";
  static constexpr size_t kSize = 8;
  static constexpr std::array kFields = {
      A<&SlToVlTable::vl>("vl", 0, 4, 4),
  };
};
static_assert(LayoutIsValid<SlToVlTable>());



}  // namespace ibsm::mad
