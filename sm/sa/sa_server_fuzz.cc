// Fuzz target: the SA request handler end to end, on the snapshot of a live (simulated)
// fabric. Any bytes in: a well-formed answer or a drop out, counted, never a crash.
// Byte 0 = 0xff: the input is the whole MAD as received (any length); otherwise the input is
// laid over a 256-byte MAD whose first three bytes are forced to an SA request header
// (base version 1, class 0x03, class version 2), so most inputs reach the record handlers.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "sm/sa/sa_server.h"
#include "tests/fuzz/fuzz_world.h"

namespace {

struct SaWorld {
  SaWorld() : sa(out, {}, ibsm::fuzz::TheWorld().clock) {
    sa.Publish(ibsm::fuzz::TheWorld().sm->sa().snapshot());
  }
  ibsm::fuzz::NullTransport out;
  ibsm::sm::SaServer sa;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static SaWorld* w = new SaWorld();
  ibsm::mad::MadMessage msg;
  if (size > 0 && data[0] == 0xff) {
    msg.bytes.assign(data + 1, data + std::min<size_t>(size, 4096));
  } else {
    msg.bytes.assign(256, 0);
    std::memcpy(msg.bytes.data(), data, std::min<size_t>(size, 256));
    msg.bytes[0] = 1;
    msg.bytes[1] = 3;
    msg.bytes[2] = 2;
  }
  msg.addr.lid = ibsm::Lid{static_cast<uint16_t>(size > 4 ? 1 + data[3] % 24 : 2)};
  w->sa.OnRequest(std::move(msg));
  return 0;
}
