#include "sm/net/accept_retry.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "base/log_limit.h"

namespace ibsm::sm {

AcceptRetry::AcceptRetry(boost::asio::io_context& io, std::string what,
                         AcceptCounters& counters)
    : timer_(io), what_(std::move(what)), counters_(counters) {
  OpenSpare();
}

AcceptRetry::~AcceptRetry() {
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

void AcceptRetry::OpenSpare() {
  if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void AcceptRetry::Failed(const boost::system::error_code& ec, int listen_fd,
                         std::function<void()> retry) {
  const uint64_t n = ++counters_.failures;
  const bool out_of_fds = ec.value() == EMFILE || ec.value() == ENFILE;
  uint64_t shed_now = 0;
  if (out_of_fds && spare_fd_ >= 0) {
    ::close(spare_fd_);
    spare_fd_ = -1;
    // The listening socket is non-blocking (Asio sets it so for async accepts): this never
    // waits, and finds nothing when the client has gone meanwhile.
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      ::close(fd);
      ++counters_.shed;
      shed_now = 1;
    }
    OpenSpare();
  }
  const auto wait = backoff_;
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  if (ShouldLogOccurrence(n))
    Log(LogName::kSm).warn("{}: {} ({} so far); {}retrying in {} ms", what_, ec.message(), n,
                           shed_now ? "closed one waiting connection, " : "", wait.count());
  timer_.expires_after(wait);
  // A destroyed timer calls this with operation_aborted: `this` is gone then, and is never
  // touched here.
  timer_.async_wait([retry = std::move(retry)](boost::system::error_code tec) {
    if (!tec) retry();
  });
}

}  // namespace ibsm::sm
