// Internal to the UmadTransport files: its private MAD, request and transfer records, and
// the errno text, log throttle and attempt deadline the setup, send and receive paths share.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "mad/rmpp.h"
#include "mad/umad_transport.h"

namespace ibsm::mad {
namespace {

inline std::string Errno(int e) { return std::strerror(e < 0 ? -e : e); }

// The first ten, then every thousandth: a wedged medium must not
// flood the log.
inline bool BacklogLogWorthy(uint64_t n) { return n <= 10 || n % 1000 == 0; }

// Our own timer waits a little longer than the timeout handed to the kernel, so that on real
// hardware the kernel's ETIMEDOUT return of the send arrives first and one attempt ends once.
inline std::chrono::milliseconds AttemptDeadline(std::chrono::milliseconds t) {
  return t + t / 4 + std::chrono::milliseconds(5);
}

}  // namespace

// One MAD read by the receiver thread, handed to the io_context thread.
struct UmadTransport::Inbound {
  std::vector<uint8_t> bytes;
  uint32_t status = 0;  // umad status: non-zero = our own send came back undelivered
  MadAddress from;
};

struct UmadTransport::Pending {
  explicit Pending(boost::asio::io_context& io) : timer(io) {}
  MadMessage request;
  SendOptions options;
  ResponseHandler done;
  uint64_t attempt = 0;
  bool started = false;  // holds a slot of the in-flight budget
  boost::asio::steady_timer timer;
  std::optional<RmppSender> sender;     // request sent as RMPP
  std::optional<RmppReceiver> receiver;  // response arriving as RMPP
};

struct UmadTransport::OutTransfer {
  explicit OutTransfer(boost::asio::io_context& io, RmppSender s) : sender(std::move(s)), timer(io) {}
  RmppSender sender;
  MadAddress to;
  int attempts = 0;
  boost::asio::steady_timer timer;
};

// One MAD the medium refused, waiting in the backlog exactly as it is to be written.
struct UmadTransport::Outbound {
  std::vector<uint8_t> umad;
  int agent = -1;
  int length = 0;
  int timeout_ms = 0;
};

}  // namespace ibsm::mad
