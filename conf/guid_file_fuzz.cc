// Fuzz target: the GUID list files (root_guid_file, cn_guid_file, ...) and OpenSM's guid2lid
// file, which ibsmd reads at start from whatever OpenSM or an operator left there.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "conf/guid_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ibsm::conf::ParseGuidList(text, "fuzz-guids");
  (void)ibsm::conf::ParseGuid2Lid(text, "fuzz-guid2lid");
  return 0;
}
