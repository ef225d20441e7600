// VLArbitrationTable (IBA 14.2.5.9), attribute 0x0018: 32 entries of 16 bits, each 4 reserved
// bits, a 4-bit VL and an 8-bit weight. Modifier bits 31-16 select the block (1 = low
// priority entries 0-31, 2 = low 32-63, 3 = high 0-31, 4 = high 32-63); bits 7-0 = output
// port on a switch.
#pragma once

#include "mad/field.h"
#include "mad/attr/modifiers.h"
#include "mad/mad.h"

namespace ibsm::mad {

inline constexpr size_t kVlArbBlockSize = 32;

namespace vlarb_block {
inline constexpr uint32_t kLowLower = 1;
inline constexpr uint32_t kLowUpper = 2;
inline constexpr uint32_t kHighLower = 3;
inline constexpr uint32_t kHighUpper = 4;
}  // namespace vlarb_block

struct VlArbitrationTable {
  static constexpr uint16_t kAttrId = attr::kVlArbitrationTable;
  std::array<uint8_t, kVlArbBlockSize> vl{};
  std::array<uint8_t, kVlArbBlockSize> weight{};
};

// The two arrays interleave (entry i: vl at bit 16i+4, weight at 16i+8), which
// LayoutIsValid's extent check rejects by design; LayoutBitsAreDisjoint checks every element.
template <>
struct Layout<VlArbitrationTable> {
  static constexpr std::string_view kName = "VLArbitrationTable";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&VlArbitrationTable::vl>("vl", 4, 4, 16),
      A<&VlArbitrationTable::weight>("weight", 8, 8, 16),
  };
};

// Element-exact layout check: every bit of every element inside kSize, no bit claimed twice.
template <typename S>
constexpr bool LayoutBitsAreDisjoint() {
  constexpr auto& f = Layout<S>::kFields;
  constexpr size_t bits = Layout<S>::kSize * 8;
  std::array<bool, bits> used{};
  for (const auto& x : f) {
    if (x.bit_width == 0 || x.bit_width > 64 || x.count == 0) return false;
    for (size_t i = 0; i < x.count; ++i) {
      for (size_t b = 0; b < x.bit_width; ++b) {
        size_t bit = x.bit_offset + i * size_t{x.stride} + b;
        if (bit >= bits || used[bit]) return false;
        used[bit] = true;
      }
    }
  }
  return true;
}
static_assert(LayoutBitsAreDisjoint<VlArbitrationTable>());



}  // namespace ibsm::mad
