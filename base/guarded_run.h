// The daemon's io loop with an exception boundary. Every input from outside (MADs, SA
// queries, traps, socket requests) is handled inside io_context::run(); a handler that
// throws is a bug that must cost that one request or step, never the daemon. Asio lets
// run() be called again after a handler's exception escaped it: the handler is gone, every
// other queued handler and timer is still there.
#pragma once

#include <exception>
#include <string>

#include <boost/asio/io_context.hpp>

namespace ibsm {

// Runs `io` until it runs out of work or is stopped. Each exception a handler throws goes
// to on_error(what) (which must not throw), and the loop goes on.
template <typename OnError>
void RunGuarded(boost::asio::io_context& io, OnError&& on_error) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      on_error(std::string(e.what()));
    } catch (...) {
      on_error(std::string("an exception of unknown type"));
    }
  }
}

}  // namespace ibsm
