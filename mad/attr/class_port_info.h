// ClassPortInfo (IBA 13.4.8.1), attribute 0x0001 of every GMP class (SA, PerfMgt, ...):
// 72 bytes. GIDs are raw network-order bytes.
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

using GidBytes = std::array<uint8_t, 16>;

struct ClassPortInfo {
  static constexpr uint16_t kAttrId = attr::kClassPortInfo;
  uint8_t base_version = 1;
  uint8_t class_version = 0;
  uint16_t capability_mask = 0;
  uint32_t capability_mask2 = 0;  // 27 bits
  uint8_t resp_time_value = 0;    // 5 bits
  GidBytes redirect_gid{};
  uint8_t redirect_tc = 0;
  uint8_t redirect_sl = 0;   // 4 bits
  uint32_t redirect_fl = 0;  // 20 bits
  uint16_t redirect_lid = 0;
  uint16_t redirect_pkey = 0;
  uint32_t redirect_qp = 0;  // 24 bits
  uint32_t redirect_qkey = 0;
  GidBytes trap_gid{};
  uint8_t trap_tc = 0;
  uint8_t trap_sl = 0;   // 4 bits
  uint32_t trap_fl = 0;  // 20 bits
  uint16_t trap_lid = 0;
  uint16_t trap_pkey = 0;
  uint8_t trap_hl = 0;
  uint32_t trap_qp = 0;  // 24 bits
  uint32_t trap_qkey = 0;
};

template <>
struct Layout<ClassPortInfo> {
  using C = ClassPortInfo;
  static constexpr std::string_view kName = "ClassPortInfo";
  static constexpr size_t kSize = 72;
  static constexpr std::array kFields = {
      F<&C::base_version>("base_version", 0, 8),
      F<&C::class_version>("class_version", 8, 8),
      F<&C::capability_mask>("capability_mask", 16, 16, FieldFormat::kHex),
      F<&C::capability_mask2>("capability_mask2", 32, 27, FieldFormat::kHex),
      F<&C::resp_time_value>("resp_time_value", 59, 5),
      A<&C::redirect_gid>("redirect_gid", 64, 8, 8, FieldFormat::kBytes),
      F<&C::redirect_tc>("redirect_tc", 192, 8, FieldFormat::kHex),
      F<&C::redirect_sl>("redirect_sl", 200, 4),
      F<&C::redirect_fl>("redirect_fl", 204, 20, FieldFormat::kHex),
      F<&C::redirect_lid>("redirect_lid", 224, 16),
      F<&C::redirect_pkey>("redirect_pkey", 240, 16, FieldFormat::kHex),
      F<&C::redirect_qp>("redirect_qp", 264, 24, FieldFormat::kHex),
      F<&C::redirect_qkey>("redirect_qkey", 288, 32, FieldFormat::kHex),
      A<&C::trap_gid>("trap_gid", 320, 8, 8, FieldFormat::kBytes),
      F<&C::trap_tc>("trap_tc", 448, 8, FieldFormat::kHex),
      F<&C::trap_sl>("trap_sl", 456, 4),
      F<&C::trap_fl>("trap_fl", 460, 20, FieldFormat::kHex),
      F<&C::trap_lid>("trap_lid", 480, 16),
      F<&C::trap_pkey>("trap_pkey", 496, 16, FieldFormat::kHex),
      F<&C::trap_hl>("trap_hl", 512, 8),
      F<&C::trap_qp>("trap_qp", 520, 24, FieldFormat::kHex),
      F<&C::trap_qkey>("trap_qkey", 544, 32, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<ClassPortInfo>());

}  // namespace ibsm::mad
