// MulticastForwardingTable (IBA 14.2.5.12), attribute 0x001B: one block of 32 MLIDs by one
// group of 16 ports. Entry i is the port mask of MLID 0xC000 + 32 * block + i; bit p of the
// mask (p = 0 the LSB) is port 16 * position + p.
#pragma once

#include "mad/field.h"
#include "mad/attr/modifiers.h"
#include "mad/mad.h"

namespace ibsm::mad {

inline constexpr size_t kMftBlockSize = 32;
inline constexpr size_t kMftPortsPerPosition = 16;
inline constexpr uint16_t kMulticastLidBase = 0xC000;

struct MulticastForwardingTable {
  static constexpr uint16_t kAttrId = attr::kMulticastForwardingTable;
  std::array<uint16_t, kMftBlockSize> port_mask{};
};

template <>
struct Layout<MulticastForwardingTable> {
  static constexpr std::string_view kName = "MulticastForwardingTable";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&MulticastForwardingTable::port_mask>("port_mask", 0, 16, 16, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<MulticastForwardingTable>());


}  // namespace ibsm::mad
