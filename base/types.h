// Strong types for the identifiers that travel on the wire: a LID is not a port number.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

#include <fmt/format.h>

namespace ibsm {

template <typename Tag, typename Rep>
class StrongInt {
 public:
  using rep_type = Rep;
  constexpr StrongInt() = default;
  constexpr explicit StrongInt(Rep v) : v_(v) {}
  constexpr Rep value() const { return v_; }
  constexpr auto operator<=>(const StrongInt&) const = default;

 private:
  Rep v_{};
};

struct LidTag {};
struct GuidTag {};
struct PortNumTag {};

// 16-bit local identifier. 0 = unassigned, 0x0001-0xBFFF unicast, 0xC000-0xFFFE multicast,
// 0xFFFF permissive (IBA 4.1.3).
using Lid = StrongInt<LidTag, uint16_t>;
// 64-bit EUI-64 (node, port or system image GUID).
using Guid = StrongInt<GuidTag, uint64_t>;
// Physical port number; 0 is a switch's management port.
using PortNum = StrongInt<PortNumTag, uint8_t>;

inline constexpr Lid kPermissiveLid{0xFFFF};
inline constexpr uint16_t kMaxUnicastLid = 0xBFFF;
inline constexpr uint16_t kMulticastLidBase = 0xC000;

constexpr bool IsUnicast(Lid lid) { return lid.value() >= 1 && lid.value() <= kMaxUnicastLid; }
constexpr bool IsMulticast(Lid lid) {
  return lid.value() >= kMulticastLidBase && lid.value() < 0xFFFF;
}

// "0x0002c90300000011": GUIDs in hex (logs and dumps), LIDs in decimal.
inline std::string ToString(Guid g) { return fmt::format("{:#018x}", g.value()); }
inline std::string ToString(Lid l) { return std::to_string(l.value()); }
inline std::string ToString(PortNum p) { return std::to_string(p.value()); }

}  // namespace ibsm

template <typename Tag, typename Rep>
struct std::hash<ibsm::StrongInt<Tag, Rep>> {
  size_t operator()(const ibsm::StrongInt<Tag, Rep>& v) const noexcept {
    return std::hash<Rep>{}(v.value());
  }
};

template <>
struct fmt::formatter<ibsm::Guid> : fmt::formatter<std::string> {
  auto format(ibsm::Guid g, format_context& ctx) const {
    return fmt::formatter<std::string>::format(ibsm::ToString(g), ctx);
  }
};
template <>
struct fmt::formatter<ibsm::Lid> : fmt::formatter<unsigned> {
  auto format(ibsm::Lid l, format_context& ctx) const {
    return fmt::formatter<unsigned>::format(l.value(), ctx);
  }
};
template <>
struct fmt::formatter<ibsm::PortNum> : fmt::formatter<unsigned> {
  auto format(ibsm::PortNum p, format_context& ctx) const {
    return fmt::formatter<unsigned>::format(p.value(), ctx);
  }
};
