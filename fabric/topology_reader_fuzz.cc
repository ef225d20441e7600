// Fuzz target: ibnetdiscover / ibsim topology files (ibsmd --sim, ibsm-routecheck). A fabric
// that is read must be self-consistent: every cable's far end points back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fabric/topology_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto f = ibsm::ReadTopology(text, "fuzz.net");
  if (!f.ok()) return 0;
  for (ibsm::PortId p = 0; p < f->port_count(); ++p) {
    const ibsm::Port& port = f->port(p);
    if (port.connected() && f->port(port.peer).peer != p) std::abort();
  }
  return 0;
}
