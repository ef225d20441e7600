#include "sm/net/control_server.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <istream>

#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "base/json.h"
#include "base/log.h"
#include "base/log_limit.h"

namespace ibsm::sm {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;
using nlohmann::json;

class ControlServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ControlServer* server, Local::socket socket, uid_t uid)
      : server_(server),
        alive_(server->alive_),
        socket_(std::move(socket)),
        buf_(server->options_.max_request_bytes + 1),
        timer_(server->io_),
        uid_(uid) {}

  void Start() { ReadNext(); }

  void Close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
  }

  bool open() const { return socket_.is_open(); }
  uid_t uid() const { return uid_; }

 private:
  void ArmTimer() {
    timer_.expires_after(server_->options_.idle_timeout);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || !*self->alive_ || !self->socket_.is_open()) return;
      ++self->server_->counters_.idle_closed;
      self->Close();
    });
  }

  // `rearm`: restart the idle timer. Only a request or a reply does; a blank line leaves the
  // running one alone, so blank lines cannot hold a slot for ever.
  void ReadNext(bool rearm = true) {
    if (rearm) ArmTimer();
    asio::async_read_until(
        socket_, buf_, '\n',
        [self = shared_from_this()](boost::system::error_code ec, size_t n) {
          if (!*self->alive_) return;
          self->OnRead(ec, n);
        });
  }

  void OnRead(boost::system::error_code ec, size_t n) {
    if (ec == asio::error::not_found) {
      // The line is longer than a request may be: answer once and hang up, since the rest of
      // the line cannot be told apart from the next request.
      ++server_->counters_.too_large;
      Write(ErrorLine("too_large", fmt::format("a request is at most {} bytes",
                                               server_->options_.max_request_bytes)),
            /*then_close=*/true);
      return;
    }
    if (ec) {
      Close();
      return;
    }
    std::string line(n, '\0');
    std::istream in(&buf_);
    in.read(line.data(), static_cast<std::streamsize>(n));
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {  // tolerated (socat users hit return), but not activity
      ReadNext(/*rearm=*/false);
      return;
    }
    timer_.cancel();
    server_->Dispatch(line, uid_, [self = shared_from_this()](std::string reply) {
      if (!*self->alive_ || !self->socket_.is_open()) return;
      self->Write(std::move(reply), /*then_close=*/false);
    });
  }

  void Write(std::string line, bool then_close) {
    auto out = std::make_shared<std::string>(std::move(line));
    out->push_back('\n');
    ArmTimer();  // a client that stops reading is dropped after idle_timeout
    asio::async_write(socket_, asio::buffer(*out),
                      [self = shared_from_this(), out, then_close](boost::system::error_code ec,
                                                                   size_t) {
                        if (!*self->alive_) return;
                        if (ec || then_close) {
                          self->Close();
                          return;
                        }
                        self->ReadNext();
                      });
  }

  ControlServer* server_;  // valid while *alive_
  std::shared_ptr<bool> alive_;
  Local::socket socket_;
  asio::streambuf buf_;
  asio::steady_timer timer_;
  uid_t uid_;
};

ControlServer::ControlServer(asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)), acceptor_(io) {
  if (options_.change_uids.empty()) options_.change_uids = {0, geteuid()};
  Register("help", ControlAccess::kRead, "the commands this daemon serves",
           [this](const json&) -> Result<json> {
             json list = json::array();
             for (const auto& [name, c] : commands_)
               list.push_back({{"cmd", name},
                               {"access", c.access == ControlAccess::kRead ? "read" : "change"},
                               {"summary", c.summary}});
             return json{{"commands", list}};
           });
}

namespace {

// The directory that holds the socket decides who can replace it: whoever may write there can
// swap the socket for a symlink or their own socket between our steps. So it must belong to
// root or to us, and nobody else may write to it, unless it is sticky (as /tmp: then nobody
// else can rename or remove what we create there). Write access for the directory's group is
// accepted when that group is the daemon's own (a user's private group under umask 0002, or
// root's group for a root daemon): its members are as trusted as the daemon.
Status CheckSocketDirectory(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return IoError(fmt::format("control socket directory {}: {}", dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return FailedPrecondition(fmt::format("control socket directory {} is not a directory", dir));
  if (st.st_uid != 0 && st.st_uid != geteuid())
    return FailedPrecondition(fmt::format(
        "control socket directory {} belongs to uid {}, not to root or this daemon: another "
        "user could replace the socket",
        dir, st.st_uid));
  const mode_t others_write = S_IWOTH | (st.st_gid == getegid() ? 0 : S_IWGRP);
  if ((st.st_mode & others_write) != 0 && (st.st_mode & S_ISVTX) == 0)
    return FailedPrecondition(fmt::format(
        "control socket directory {} is writable by {} (mode {:04o}) and not sticky: another "
        "user could replace the socket",
        dir, (st.st_mode & S_IWOTH) ? "everyone" : "its group", st.st_mode & 07777));
  return Status();
}

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::Start(asio::io_context& io,
                                                            Options options) {
  namespace fs = std::filesystem;
  if (options.path.empty()) return InvalidArgument("control socket: no path");
  // sockaddr_un holds 108 bytes including the terminating NUL.
  if (options.path.size() >= sizeof(sockaddr_un::sun_path))
    return InvalidArgument(fmt::format("control socket path '{}' is longer than {} bytes",
                                       options.path, sizeof(sockaddr_un::sun_path) - 1));
  std::error_code fec;
  fs::path parent = fs::path(options.path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, fec);
  if (fec)
    return IoError(fmt::format("control socket directory {}: {}", parent.string(), fec.message()));
  IBSM_RETURN_IF_ERROR(CheckSocketDirectory(parent.empty() ? "." : parent.string()));

  struct stat st {};
  if (lstat(options.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return AlreadyExists(fmt::format("{} exists and is not a socket", options.path));
    Local::socket probe(io);
    boost::system::error_code ec;
    probe.connect(Local::endpoint(options.path), ec);
    if (!ec)
      return AlreadyExists(
          fmt::format("{}: another daemon is serving this control socket", options.path));
    ::unlink(options.path.c_str());  // stale: left by a daemon that was killed
  }

  std::unique_ptr<ControlServer> s(new ControlServer(io, std::move(options)));
  const std::string& path = s->options_.path;
  boost::system::error_code ec;
  s->acceptor_.open(Local(), ec);
  // The socket file bind creates takes the socket's mode (less the umask): set before bind,
  // the file is never more open than `mode`, not even for a moment.
  if (!ec && ::fchmod(s->acceptor_.native_handle(), s->options_.mode) != 0)
    ec.assign(errno, boost::system::system_category());
  if (!ec) s->acceptor_.bind(Local::endpoint(path), ec);
  if (!ec) s->remove_on_exit_ = true;  // from here on the file at `path` is ours
  if (!ec) s->acceptor_.listen(16, ec);
  if (ec) return IoError(fmt::format("control socket {}: {}", path, ec.message()));
  auto fail = [&](const std::string& what, int err) -> Status {
    ::unlink(path.c_str());
    return IoError(fmt::format("control socket {}: {}: {}", path, what, std::strerror(err)));
  };
  // Group and mode go to the file bind made, through a descriptor of it: never through a
  // symlink, and not to a file someone put in its place (it would not be our socket).
  int fd = ::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail("reopen after bind", errno);
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) return fail("fstat", errno);
  if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
    s->remove_on_exit_ = false;  // not ours to remove
    return FailedPrecondition(
        fmt::format("control socket {} was replaced right after it was created", path));
  }
  if (!s->options_.group.empty()) {
    struct group* g = getgrnam(s->options_.group.c_str());
    if (!g) {
      ::unlink(path.c_str());
      return InvalidArgument(fmt::format("control socket group '{}' does not exist",
                                         s->options_.group));
    }
    if (::fchownat(fd, "", static_cast<uid_t>(-1), g->gr_gid, AT_EMPTY_PATH) != 0)
      return fail("chown to group " + s->options_.group, errno);
  }
  // The umask may have taken bits `mode` asks for (UMask=0027 takes the group's write, which
  // a group member needs to connect): give them back, to this inode only.
  if ((st.st_mode & 07777) != s->options_.mode &&
      ::chmod(fmt::format("/proc/self/fd/{}", fd).c_str(), s->options_.mode) != 0)
    return fail("chmod", errno);
  s->Accept();
  return s;
}

ControlServer::~ControlServer() {
  *alive_ = false;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (auto& w : connections_)
    if (auto c = w.lock()) c->Close();
  if (remove_on_exit_) ::unlink(options_.path.c_str());
}

void ControlServer::Register(const std::string& cmd, ControlAccess access, std::string summary,
                             Handler h) {
  RegisterAsync(cmd, access, std::move(summary),
                [h = std::move(h)](const json& args, Reply reply) { reply(h(args)); });
}

void ControlServer::RegisterAsync(const std::string& cmd, ControlAccess access,
                                  std::string summary, AsyncHandler h) {
  commands_[cmd] = Command{access, std::move(summary), std::move(h), {}};
}

void ControlServer::RegisterAsyncText(const std::string& cmd, ControlAccess access,
                                      std::string summary, AsyncTextHandler h) {
  commands_[cmd] = Command{access, std::move(summary), {}, std::move(h)};
}

void ControlServer::Accept() {
  acceptor_.async_accept([this, alive = alive_](boost::system::error_code ec,
                                                Local::socket socket) {
    if (!*alive) return;
    if (ec) {
      if (ec != asio::error::operation_aborted)
        accept_retry_.Failed(ec, acceptor_.native_handle(), [this, alive] {
          if (*alive) Accept();
        });
      return;
    }
    accept_retry_.Succeeded();
    uid_t uid = static_cast<uid_t>(-1);  // unknown peer: read-only
    if (options_.peer_uid) {
      uid = options_.peer_uid(socket.native_handle());
    } else {
      ucred cred{};
      socklen_t len = sizeof cred;
      if (getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
        uid = cred.uid;
    }
    if (std::string why = NoSlotFor(uid); !why.empty()) {
      const uint64_t n = ++counters_.connections_refused;
      if (ShouldLogOccurrence(n))
        Log(LogName::kSm).warn("SM-CTL-004 control connection of uid {} refused: {} ({} so far)",
                               uid, why, n);
      std::string line = ErrorLine("busy", why) + "\n";
      boost::system::error_code ignored;
      socket.non_blocking(true, ignored);
      socket.write_some(asio::buffer(line), ignored);  // best effort; never waits
      socket.close(ignored);
      Accept();
      return;
    }
    ++counters_.connections;
    auto c = std::make_shared<Connection>(this, std::move(socket), uid);
    connections_.push_back(c);
    c->Start();
    Accept();
  });
}

std::string ControlServer::NoSlotFor(uid_t uid) {
  connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                    [](const std::weak_ptr<Connection>& w) {
                                      auto c = w.lock();
                                      return !c || !c->open();
                                    }),
                     connections_.end());
  const size_t open = connections_.size();
  if (open >= options_.max_connections)
    return fmt::format("at most {} control connections", options_.max_connections);
  if (MayChange(uid)) return "";
  size_t others = 0, own = 0;  // open connections of uids that may not change; of `uid`
  for (const auto& w : connections_) {
    auto c = w.lock();
    if (!c) continue;
    others += !MayChange(c->uid());
    own += c->uid() == uid;
  }
  const size_t reserved = std::min(options_.reserved_change_slots, options_.max_connections);
  if (others >= options_.max_connections - reserved)
    return fmt::format("the last {} of {} control connections are kept for root", reserved,
                       options_.max_connections);
  if (own >= options_.max_connections_per_uid)
    return fmt::format("at most {} control connections per user", options_.max_connections_per_uid);
  return "";
}

bool ControlServer::MayChange(uid_t uid) const {
  return std::find(options_.change_uids.begin(), options_.change_uids.end(), uid) !=
         options_.change_uids.end();
}

std::string ControlServer::ErrorLine(const std::string& code, const std::string& message,
                                     const json& id) {
  json r{{"ok", false}, {"code", code}, {"error", message}};
  if (!id.is_null()) r["id"] = id;
  return DumpJson(r);
}

std::string ControlServer::FailedLine(const Status& s, const json& id) {
  const bool bad_args =
      s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound;
  ++(bad_args ? counters_.bad_requests : counters_.failed);
  return ErrorLine(bad_args ? "bad_request" : "failed", s.message(), id);
}

void ControlServer::Dispatch(const std::string& line, uid_t uid,
                             std::function<void(std::string)> reply) {
  ++counters_.requests;
  // Nesting is refused while parsing, before anything copies, dumps or destroys the value:
  // each of those recurses once per level (a 64 KiB line of '[' is 32,000 levels, several
  // MB of stack), and no request needs more than a few levels.
  bool too_deep = false;
  json::parser_callback_t depth_guard = [&too_deep](int depth, json::parse_event_t event,
                                                    json&) {
    if ((event == json::parse_event_t::object_start ||
         event == json::parse_event_t::array_start) &&
        depth >= static_cast<int>(kMaxRequestDepth)) {
      too_deep = true;
      return false;  // the subtree is skipped, not built
    }
    return true;
  };
  json req = json::parse(line, depth_guard, /*allow_exceptions=*/false);
  if (too_deep) {
    ++counters_.bad_requests;
    reply(ErrorLine("bad_request", fmt::format("a request is nested at most {} levels deep",
                                               kMaxRequestDepth)));
    return;
  }
  if (req.is_discarded() || !req.is_object()) {
    ++counters_.bad_requests;
    reply(ErrorLine("bad_request", "a request is one JSON object per line"));
    return;
  }
  json id = req.contains("id") ? req["id"] : json();
  auto cmd_it = req.find("cmd");
  if (cmd_it == req.end() || !cmd_it->is_string()) {
    ++counters_.bad_requests;
    reply(ErrorLine("bad_request", "the request has no \"cmd\" string", id));
    return;
  }
  json args = req.contains("args") ? req["args"] : json::object();
  if (!args.is_object()) {
    ++counters_.bad_requests;
    reply(ErrorLine("bad_request", "\"args\" must be an object", id));
    return;
  }
  const std::string cmd = cmd_it->get<std::string>();
  auto c = commands_.find(cmd);
  if (c == commands_.end()) {
    ++counters_.unknown_commands;
    reply(ErrorLine("unknown_command", fmt::format("no command '{}' (try \"help\")", cmd), id));
    return;
  }
  if (c->second.access == ControlAccess::kChange && !MayChange(uid)) {
    const uint64_t n = ++counters_.denied;
    if (ShouldLogOccurrence(n))
      Log(LogName::kSm).warn("SM-CTL-002 control command '{}' refused for uid {} ({} so far)", cmd,
                             uid, n);
    reply(ErrorLine("permission_denied",
                    fmt::format("'{}' changes the fabric and is for root only", cmd), id));
    return;
  }
  auto once = std::make_shared<bool>(false);
  if (c->second.text_handler) {
    c->second.text_handler(args, [this, alive = alive_, once, id, reply](Result<std::string> r) {
      if (*once) return;
      *once = true;
      if (!*alive) return;
      if (!r.ok()) return reply(FailedLine(r.status(), id));
      // The members in the order a dumped object has them (keys sorted).
      std::string line = id.is_null() ? std::string("{") : "{\"id\":" + DumpJson(id) + ",";
      line += "\"ok\":true,\"result\":";
      line += *r;
      line += '}';
      reply(std::move(line));
    });
    return;
  }
  c->second.handler(args, [this, alive = alive_, once, id, cmd, reply](Result<json> r) {
    if (*once) return;
    *once = true;
    if (!*alive) return;
    if (!r.ok()) return reply(FailedLine(r.status(), id));
    json out{{"ok", true}, {"result", std::move(*r)}};
    if (!id.is_null()) out["id"] = id;
    reply(DumpJson(out));
  });
}

}  // namespace ibsm::sm
