// Attribute modifiers with sub-fields (IBA 14.2.5.7-14.2.5.12), as layouts of the 32-bit
// modifier word (bit 0 = its most significant bit), so the SM builds them and the SMA reads
// them through the codec like any other wire field.
#pragma once

#include <array>
#include <cstdint>

#include "mad/field.h"

namespace ibsm::mad {

struct MftModifier {  // 14.2.5.12: ports 16*position .. 16*position+15, MLID block of 32
  uint8_t position = 0;
  uint16_t block = 0;
};
struct PKeyModifier {  // 14.2.5.7: switch port (0 on a CA), block of 32 P_Keys
  uint16_t port = 0;
  uint16_t block = 0;
};
struct SlToVlModifier {  // 14.2.5.8: switch input and output port
  uint8_t in_port = 0;
  uint8_t out_port = 0;
};
struct VlArbModifier {  // 14.2.5.9: block 1..4 (low/high), output port
  uint16_t block = 0;
  uint16_t port = 0;
};

template <>
struct Layout<MftModifier> {
  static constexpr std::string_view kName = "MftAttrMod";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {F<&MftModifier::position>("position", 0, 4),
                                         F<&MftModifier::block>("block", 23, 9)};
};
template <>
struct Layout<PKeyModifier> {
  static constexpr std::string_view kName = "PKeyAttrMod";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {F<&PKeyModifier::port>("port", 0, 16),
                                         F<&PKeyModifier::block>("block", 16, 16)};
};
template <>
struct Layout<SlToVlModifier> {
  static constexpr std::string_view kName = "SlToVlAttrMod";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {F<&SlToVlModifier::in_port>("in_port", 16, 8),
                                         F<&SlToVlModifier::out_port>("out_port", 24, 8)};
};
template <>
struct Layout<VlArbModifier> {
  static constexpr std::string_view kName = "VlArbAttrMod";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {F<&VlArbModifier::block>("block", 0, 16),
                                         F<&VlArbModifier::port>("port", 16, 16)};
};
static_assert(LayoutIsValid<MftModifier>() && LayoutIsValid<PKeyModifier>() &&
              LayoutIsValid<SlToVlModifier>() && LayoutIsValid<VlArbModifier>());

template <typename M>
M DecodeModifier(uint32_t mod) {
  std::array<uint8_t, 4> w{};
  SetBits(w, 0, 32, mod);
  M m{};
  (void)DecodeFrom(std::span<const uint8_t>(w), &m);  // 4 bytes always suffice
  return m;
}

template <typename M>
uint32_t EncodeModifier(const M& m) {
  std::array<uint8_t, 4> w{};
  EncodeTo(m, w);
  return static_cast<uint32_t>(GetBits(w, 0, 32));
}

// Fields wider than their place are cut to it (the codec keeps the low bits).
inline uint32_t MftAttrMod(uint32_t position, uint32_t block) {
  return EncodeModifier(MftModifier{static_cast<uint8_t>(position), static_cast<uint16_t>(block)});
}
inline uint32_t PKeyAttrMod(uint32_t block, uint32_t port = 0) {
  return EncodeModifier(PKeyModifier{static_cast<uint16_t>(port), static_cast<uint16_t>(block)});
}
inline uint32_t SlToVlAttrMod(uint32_t in_port, uint32_t out_port) {
  return EncodeModifier(
      SlToVlModifier{static_cast<uint8_t>(in_port), static_cast<uint8_t>(out_port)});
}
inline uint32_t VlArbAttrMod(uint32_t block, uint32_t out_port = 0) {
  return EncodeModifier(VlArbModifier{static_cast<uint16_t>(block), static_cast<uint16_t>(out_port)});
}

}  // namespace ibsm::mad
