// P_KeyTable (IBA 14.2.5.7), attribute 0x0016: one block of 32 P_Keys. Modifier bits 15-0 =
// block number; on a switch, bits 31-16 = port number (external ports' tables).
// Each entry: bit 15 = membership (1 full, 0 limited), bits 14-0 = the partition key base.
#pragma once

#include "mad/field.h"
#include "mad/attr/modifiers.h"
#include "mad/mad.h"

namespace ibsm::mad {

inline constexpr size_t kPKeyBlockSize = 32;
inline constexpr uint16_t kPKeyFullMemberBit = 0x8000;
inline constexpr uint16_t kDefaultPKey = 0xFFFF;

struct PKeyTable {
  static constexpr uint16_t kAttrId = attr::kPKeyTable;
  std::array<uint16_t, kPKeyBlockSize> pkey{};
};

template <>
struct Layout<PKeyTable> {
  static constexpr std::string_view kName = "PKeyTable";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&PKeyTable::pkey>("pkey", 0, 16, 16, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<PKeyTable>());


}  // namespace ibsm::mad
