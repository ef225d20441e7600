// LinearForwardingTable (IBA 14.2.5.10), attribute 0x0019: one block of 64 LIDs per MAD;
// modifier = block number (LID / 64). Entry = egress port, 255 = drop.
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

inline constexpr uint8_t kLftDropPort = 0xFF;
inline constexpr size_t kLftBlockSize = 64;

struct LinearForwardingTable {
  static constexpr uint16_t kAttrId = attr::kLinearForwardingTable;
  std::array<uint8_t, kLftBlockSize> port{};
};

template <>
struct Layout<LinearForwardingTable> {
  static constexpr std::string_view kName = "LinearForwardingTable";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&LinearForwardingTable::port>("port", 0, 8, 8),
  };
};
static_assert(LayoutIsValid<LinearForwardingTable>());

}  // namespace ibsm::mad
