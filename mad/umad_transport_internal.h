// Internal to the UmadTransport files: the MAD records its receive and write paths keep, and
// the errno text and log throttle its setup, write and receive paths share.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mad/umad_transport.h"

namespace ibsm::mad {
namespace {

inline std::string Errno(int e) { return std::strerror(e < 0 ? -e : e); }

// The first ten, then every thousandth: a wedged medium must not
// flood the log.
inline bool BacklogLogWorthy(uint64_t n) { return n <= 10 || n % 1000 == 0; }

}  // namespace

// One MAD read by the receiver thread, handed to the io_context thread.
struct UmadTransport::Inbound {
  std::vector<uint8_t> bytes;
  uint32_t status = 0;  // umad status: non-zero = our own send came back undelivered
  MadAddress from;
};

// One MAD the medium refused, waiting in the backlog exactly as it is to be written.
struct UmadTransport::Outbound {
  std::vector<uint8_t> umad;
  int agent = -1;
  int length = 0;
  int timeout_ms = 0;
};

}  // namespace ibsm::mad
