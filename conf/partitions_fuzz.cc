// Fuzz target: partitions.conf text. Any bytes give a partition set or per-line errors.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "conf/partitions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = ibsm::conf::ParsePartitions(text, "fuzz-partitions.conf");
  for (const auto& d : r.errors) (void)d.ToString();
  return 0;
}
