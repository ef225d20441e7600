#include "sim/device_profile.h"

#include <array>

#include "base/split_mix.h"

namespace ibsm::sim {

DeviceQuirks QuirksFor(SimProfile profile, uint64_t seed, Guid node_guid, NodeKind kind) {
  DeviceQuirks q;
  if (profile == SimProfile::kKind) return q;
  SplitMix64 rng(seed * 0x9E3779B97F4A7C15ull ^ node_guid.value());
  const uint32_t qos = rng.Below(30);
  const uint32_t pce = rng.Below(3);
  const uint32_t desc = rng.Below(5);
  if (kind == NodeKind::kSwitch) {
    if (qos < 5) q.vlarb = OptionalAnswer::kSilent;
    q.drops_port_tuning = rng.Below(3) == 0;
    q.drops_partition_enforcement = rng.Below(4) == 0;
    return q;
  }
  if (qos < 6) {
    q.sl2vl = q.vlarb = OptionalAnswer::kSilent;
  } else if (qos < 12) {
    q.sl2vl = q.vlarb = OptionalAnswer::kUnsupported;
  }
  q.no_extended_counters = pce == 0;
  q.hostile_description = desc == 0;
  return q;
}

std::string HostileDescription(std::string_view base, uint64_t salt) {
  // Latin-1 bytes, a lone continuation byte, an overlong form, a terminal escape, a forged
  // log line, markup and quotes: what a Latin-1 hostname or a host's root can write.
  static constexpr std::array<std::string_view, 4> kTails = {
      " caf\xE9 \x1b[2J\x1b]0;pwn\x07 <svg onload=x>\"'&",
      "\n2026-01-01 00:00:00.000000 [sm] info: SUBNET UP\r\x7f",
      " \xC0\xAF\x80\xFF\xFE</text><script>alert(1)</script>",
      " \xC2\x9B" "31m\t{\"ok\":true}\\u0000 %s%n %{} \x01\x02",
  };
  std::string out(base.substr(0, 40));
  out += ' ';
  std::string_view tail = kTails[salt % kTails.size()];
  while (out.size() < 64) out += tail.substr(0, 64 - out.size());
  for (char& c : out)
    if (c == '\0') c = '\x01';
  return out;
}

}  // namespace ibsm::sim
