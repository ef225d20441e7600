#include "sm/perf/link_health.h"

#include <fmt/format.h>

namespace ibsm::sm {
namespace {

struct WidthCode {
  uint8_t bit;
  unsigned lanes;
  const char* name;
};
constexpr WidthCode kWidths[] = {{1, 1, "1x"}, {16, 2, "2x"}, {2, 4, "4x"}, {4, 8, "8x"},
                                 {8, 12, "12x"}};

struct SpeedCode {
  bool ext;
  uint8_t bit;
  double gbps;
  const char* name;
};
// IBA 14.2.5.6: LinkSpeedSupported/Active bits 1 SDR, 2 DDR, 4 QDR; LinkSpeedExt bits
// 1 FDR, 2 EDR, 4 HDR, 8 NDR.
constexpr SpeedCode kSpeeds[] = {{false, 1, 2.5, "SDR"},  {false, 2, 5.0, "DDR"},
                                 {false, 4, 10.0, "QDR"}, {true, 1, 14.0625, "FDR"},
                                 {true, 2, 25.78125, "EDR"}, {true, 4, 53.125, "HDR"},
                                 {true, 8, 106.25, "NDR"}};

const WidthCode* BestWidth(uint8_t bits) {
  const WidthCode* best = nullptr;
  for (const auto& w : kWidths)
    if (bits & w.bit) best = &w;
  return best;
}

const SpeedCode* BestSpeed(uint8_t speed_bits, uint8_t ext_bits) {
  const SpeedCode* best = nullptr;
  for (const auto& s : kSpeeds)
    if ((s.ext ? ext_bits : speed_bits) & s.bit) best = &s;
  return best;
}

// Extended speeds count only where the port says it has them (IsExtendedSpeedsSupported);
// an active ext code of 0 means the link runs at LinkSpeedActive.
uint8_t ExtSupported(const mad::PortInfo& p) {
  return (p.capability_mask & mad::port_cap::kIsExtendedSpeedsSupported)
             ? p.link_speed_ext_supported
             : 0;
}

}  // namespace

unsigned WidthLanes(uint8_t width_bits) {
  const WidthCode* w = BestWidth(width_bits);
  return w ? w->lanes : 0;
}

double LaneRate(uint8_t speed_bits, uint8_t ext_bits) {
  const SpeedCode* s = BestSpeed(speed_bits, ext_bits);
  return s ? s->gbps : 0;
}

std::optional<std::string> DegradedReason(const mad::PortInfo& a, const mad::PortInfo& b) {
  std::string why;
  const WidthCode* can_w = BestWidth(a.link_width_supported & b.link_width_supported);
  const WidthCode* is_w = BestWidth(a.link_width_active);
  if (can_w && is_w && is_w->lanes < can_w->lanes)
    why = fmt::format("width {} of {}", is_w->name, can_w->name);
  const SpeedCode* can_s =
      BestSpeed(a.link_speed_supported & b.link_speed_supported, ExtSupported(a) & ExtSupported(b));
  const SpeedCode* is_s = (ExtSupported(a) && a.link_speed_ext_active)
                              ? BestSpeed(0, a.link_speed_ext_active)
                              : BestSpeed(a.link_speed_active, 0);
  if (can_s && is_s && is_s->gbps < can_s->gbps)
    why += fmt::format("{}speed {} of {}", why.empty() ? "" : ", ", is_s->name, can_s->name);
  if (why.empty()) return std::nullopt;
  return why;
}

}  // namespace ibsm::sm
