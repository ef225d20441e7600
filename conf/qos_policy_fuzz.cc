// Fuzz target: QoS policy file text. Any bytes give a policy or errors with lines.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "conf/qos_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = ibsm::conf::ParseQosPolicy(text, "fuzz-qos-policy.conf");
  for (const auto& d : r.errors) (void)d.ToString();
  if (r.ok()) (void)r.policy.SlFor({});
  return 0;
}
