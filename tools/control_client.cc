#include "tools/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/json.h"

namespace ibsm::tools {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

using Clock = std::chrono::steady_clock;

int MsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

Result<std::string> ControlExchange(const std::string& socket_path, const std::string& line,
                                    std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path)
    return InvalidArgument(fmt::format("socket path '{}' is too long", socket_path));
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return IoError(fmt::format("socket: {}", std::strerror(errno)));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    if (err == EACCES)
      return PermissionDenied(fmt::format("{}: {} (is this user in the socket's group?)",
                                          socket_path, std::strerror(err)));
    return Unavailable(fmt::format("{}: {} (is ibsmd running with this control_socket?)",
                                   socket_path, std::strerror(err)));
  }
  const auto deadline = Clock::now() + timeout;
  std::string out = line + "\n";
  size_t sent = 0;
  while (sent < out.size()) {
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, MsLeft(deadline)) <= 0)
      return Timeout(fmt::format("{}: the daemon did not take the request", socket_path));
    ssize_t n = ::send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Unavailable(fmt::format("{}: {}", socket_path, std::strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[65536];
  for (;;) {
    size_t nl = reply.find('\n');
    if (nl != std::string::npos) {
      reply.resize(nl);
      return reply;
    }
    pollfd p{fd.get(), POLLIN, 0};
    int pr = ::poll(&p, 1, MsLeft(deadline));
    if (pr == 0) return Timeout(fmt::format("{}: no reply in {} ms", socket_path, timeout.count()));
    if (pr < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("poll: {}", std::strerror(errno)));
    }
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Unavailable(fmt::format("{}: {}", socket_path, std::strerror(errno)));
    }
    if (n == 0) return Unavailable(fmt::format("{}: the daemon closed the connection", socket_path));
    reply.append(buf, static_cast<size_t>(n));
  }
}

Result<nlohmann::json> CallControl(const std::string& socket_path, const std::string& cmd,
                                   const nlohmann::json& args, std::chrono::milliseconds timeout) {
  nlohmann::json req{{"cmd", cmd}, {"args", args}};
  IBSM_ASSIGN_OR_RETURN(std::string line, ControlExchange(socket_path, DumpJson(req), timeout));
  nlohmann::json reply = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok"))
    return Corrupt(fmt::format("{}: the reply is not a control reply: {}", socket_path,
                               line.substr(0, 200)));
  if (reply["ok"] == true) return reply.contains("result") ? reply["result"] : nlohmann::json();
  auto text = [&](const char* key, std::string fallback) {
    auto it = reply.find(key);
    return it != reply.end() && it->is_string() ? it->get<std::string>() : fallback;
  };
  std::string code = text("code", "");
  std::string message = text("error", "the daemon refused the request");
  if (code == "permission_denied") return PermissionDenied(message);
  if (code == "bad_request" || code == "unknown_command" || code == "too_large")
    return InvalidArgument(message);
  return Unavailable(message);
}

}  // namespace ibsm::tools
