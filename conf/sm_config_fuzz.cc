// Fuzz target: opensm.conf text. Any bytes give a config or a file:line error, never a crash;
// and what was accepted writes back out (ibsmd -c) as text that reads back to the same config
// and writes out unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "conf/sm_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = ibsm::conf::ParseConfig(text, "fuzz.conf");
  if (!r.ok()) return 0;
  // What ibsm does not honour is written as a comment, so the first write-back may drop
  // values; from the second on, the text must stay the same.
  auto once = ibsm::conf::ParseConfig(ibsm::conf::WriteConfig(r->config), "once.conf");
  if (!once.ok()) {
    std::fprintf(stderr, "opensm.conf written back does not parse: %s\n",
                 once.status().ToString().c_str());
    std::abort();
  }
  const std::string written = ibsm::conf::WriteConfig(once->config);
  auto again = ibsm::conf::ParseConfig(written, "written.conf");
  if (!again.ok() || ibsm::conf::WriteConfig(again->config) != written) {
    std::fprintf(stderr, "opensm.conf round trip broke: %s\n",
                 again.ok() ? "the text changed" : again.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
