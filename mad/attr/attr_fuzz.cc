// Fuzz target: every attribute decoder the registry knows (SMP, SA, PerfMgt, vendor ones),
// through DumpAttribute, which decodes with the layout of (class, attribute) and prints it.
// Input: byte 0 the class selector, bytes 1-2 the attribute ID, the rest the payload.
#include <cstddef>
#include <cstdint>
#include <span>

#include "mad/attr/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  static constexpr uint8_t kClasses[] = {0x01, 0x81, 0x03, 0x04, 0x0A, 0x0B};
  const uint8_t mgmt_class = kClasses[data[0] % sizeof kClasses];
  const uint16_t attr = static_cast<uint16_t>(data[1] << 8 | data[2]);
  std::span<const uint8_t> payload(data + 3, size - 3);
  (void)ibsm::mad::DumpAttribute(mgmt_class, attr, payload);
  (void)ibsm::mad::HexDump(payload, 64);
  return 0;
}
