// What a listening server (the control socket, the metrics port) does when accept(2) fails.
//
// A failed accept leaves the connection in the listen queue, so the socket stays readable:
// accepting again at once spins the io thread and writes a log line per turn for as long as
// the cause lasts. The common cause is running out of descriptors (EMFILE/ENFILE; each
// metrics connection lives up to 5 s, so one local user reopening them can get there). So:
//   - one spare descriptor is kept open; on EMFILE/ENFILE it is closed, one pending
//     connection is accepted and closed at once (its client sees the connection closed
//     instead of waiting), and the spare is opened again;
//   - the next accept waits a back-off: 50 ms, doubling to 1 s, back to 50 ms after an accept
//     that works;
//   - failures are counted and logged under the server's log ID, the first ten and then every
//     thousandth (base/log_limit.h).
//
// Threading: io thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

namespace ibsm::sm {

struct AcceptCounters {
  uint64_t failures = 0;  // accepts that failed
  uint64_t shed = 0;      // waiting connections closed unread when out of descriptors
};

class AcceptRetry {
 public:
  static constexpr std::chrono::milliseconds kFirstBackoff{50};
  static constexpr std::chrono::milliseconds kMaxBackoff{1000};

  // `what` starts each log line: the log ID and the server, "SM-MET-001 metrics accept".
  // REQUIRES: `counters` (the server's) outlives this.
  AcceptRetry(boost::asio::io_context& io, std::string what, AcceptCounters& counters);
  ~AcceptRetry();  // closes the spare; a pending retry never runs
  AcceptRetry(const AcceptRetry&) = delete;
  AcceptRetry& operator=(const AcceptRetry&) = delete;

  // After an accept on `listen_fd` failed with `ec` (not operation_aborted): sheds one
  // pending connection when out of descriptors, then runs `retry` after the back-off.
  // REQUIRES: `retry` checks that its server still exists (a wait that completed just before
  // this object was destroyed still runs it).
  void Failed(const boost::system::error_code& ec, int listen_fd, std::function<void()> retry);
  // After an accept that worked.
  void Succeeded() { backoff_ = kFirstBackoff; }

 private:
  void OpenSpare();

  boost::asio::steady_timer timer_;
  std::string what_;
  int spare_fd_ = -1;
  std::chrono::milliseconds backoff_ = kFirstBackoff;
  AcceptCounters& counters_;
};

}  // namespace ibsm::sm
