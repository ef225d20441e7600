// The daemon's local control API: a Unix stream socket carrying one JSON object per line.
//
//   request:  {"cmd": "status", "args": {...}, "id": <any>}      ("args" and "id" optional)
//   reply:    {"ok": true,  "result": <json>, "id": <echoed>}
//             {"ok": false, "error": "text", "code": "bad_request", "id": <echoed>}
//
// Error codes: bad_request (not JSON, not an object, nested deeper than kMaxRequestDepth,
// no "cmd", bad args), too_large, unknown_command, permission_denied, failed (the command ran
// and could not do it), busy (no connection slot for this peer; the connection is closed).
// Every request is untrusted: each error is a reply and a counter, never a crash.
//
// Access: the socket file's mode and group decide who may connect at all (read-only commands
// for that group); commands registered as kChange run only for peers whose uid (SO_PEERCRED)
// is in Options::change_uids (default: root and the daemon's own uid).
//
// Connection slots: at most max_connections at once, of which the uids not in change_uids
// hold at most max_connections - reserved_change_slots together and
// max_connections_per_uid each, so members of the socket group can neither lock root out
// nor crowd each other out. A peer
// with no free slot gets one `busy` line and is closed (counted, SM-CTL-004 rate-limited).
//
// Threading: everything runs on the io_context's thread; handlers run there too and must not
// block it for long (long work goes to a worker, which replies through the Reply callback
// after posting back to the io_context). A slow client never blocks the daemon: each
// connection reads its next request only after its reply is written, and a connection that
// sends nothing or reads nothing for `idle_timeout` is closed. A failing accept backs off
// and sheds a waiting connection when descriptors run out (sm/net/accept_retry.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sm/net/accept_retry.h"

namespace ibsm::sm {

enum class ControlAccess { kRead, kChange };

struct ControlCounters {
  uint64_t connections = 0;
  uint64_t connections_refused = 0;  // no slot for the peer (see Connection slots above)
  uint64_t requests = 0;             // complete lines received
  uint64_t bad_requests = 0;
  uint64_t too_large = 0;
  uint64_t unknown_commands = 0;
  uint64_t denied = 0;
  uint64_t failed = 0;               // handlers that returned an error
  uint64_t idle_closed = 0;          // connections closed for idling or not reading
  AcceptCounters accept;             // failed accepts (SM-CTL-001), connections shed
};

// Every ControlCounters value once, for the status answer's "control_server" object and the
// metrics (ARCHITECTURE.md "Where to add ... A counter"): one sample of `family` with
// outcome="<outcome>". Rows of one family are together.
struct ControlCounterRow {
  std::string_view key;      // status answer key
  std::string_view family;   // ibsm_control_requests_total or ibsm_control_connections_total
  std::string_view outcome;  // the sample's label
  uint64_t (*get)(const ControlCounters&);
};
inline constexpr ControlCounterRow kControlCounterRows[] = {
    {"requests", "ibsm_control_requests_total", "all",
     [](const ControlCounters& c) { return c.requests; }},
    {"bad_requests", "ibsm_control_requests_total", "bad_request",
     [](const ControlCounters& c) { return c.bad_requests; }},
    {"unknown_commands", "ibsm_control_requests_total", "unknown_command",
     [](const ControlCounters& c) { return c.unknown_commands; }},
    {"denied", "ibsm_control_requests_total", "denied",
     [](const ControlCounters& c) { return c.denied; }},
    {"too_large", "ibsm_control_requests_total", "too_large",
     [](const ControlCounters& c) { return c.too_large; }},
    {"failed", "ibsm_control_requests_total", "failed",
     [](const ControlCounters& c) { return c.failed; }},
    {"connections", "ibsm_control_connections_total", "served",
     [](const ControlCounters& c) { return c.connections; }},
    {"connections_refused", "ibsm_control_connections_total", "busy",
     [](const ControlCounters& c) { return c.connections_refused; }},
    {"idle_closed", "ibsm_control_connections_total", "idle_closed",
     [](const ControlCounters& c) { return c.idle_closed; }},
    {"accept_failures", "ibsm_control_connections_total", "accept_failed",
     [](const ControlCounters& c) { return c.accept.failures; }},
    {"accept_shed", "ibsm_control_connections_total", "shed",
     [](const ControlCounters& c) { return c.accept.shed; }},
};
// A field without a row fails to build.
static_assert(std::size(kControlCounterRows) == sizeof(ControlCounters) / sizeof(uint64_t));

class ControlServer {
 public:
  // Arrays and objects nest at most this deep in a request (the request object is level 1);
  // a deeper one is a bad_request.
  static constexpr size_t kMaxRequestDepth = 32;

  struct Options {
    std::string path;                 // socket file; its directory is created if missing
    mode_t mode = 0660;
    std::string group;                // group owning the socket file; empty = the process's
    size_t max_request_bytes = 64 * 1024;
    size_t max_connections = 32;
    size_t reserved_change_slots = 4;     // of max_connections, for change_uids only
    size_t max_connections_per_uid = 8;   // for a uid not in change_uids
    // Idle means no request: blank lines (which keep socat sessions tidy) do not count.
    std::chrono::milliseconds idle_timeout{60000};
    std::vector<uid_t> change_uids;   // empty = {0, geteuid()}
    // The peer's uid of an accepted socket; empty = SO_PEERCRED (uid_t(-1) when unknown,
    // which is read-only). Tests pass their own to stand in for other users.
    std::function<uid_t(int fd)> peer_uid;
  };

  // Called exactly once, on the io_context's thread.
  using Reply = std::function<void(Result<nlohmann::json>)>;
  using Handler = std::function<Result<nlohmann::json>(const nlohmann::json& args)>;
  using AsyncHandler = std::function<void(const nlohmann::json& args, Reply reply)>;
  // A result already serialized: the JSON text of the "result" value, which the server puts
  // in the reply line as it is (for answers of many megabytes, rendered off the io thread).
  using TextReply = std::function<void(Result<std::string>)>;
  using AsyncTextHandler = std::function<void(const nlohmann::json& args, TextReply reply)>;

  // Binds and listens. A stale socket file (nothing accepting on it) is replaced; a live one
  // (another daemon) is an error, so two daemons never share a socket. The socket's directory
  // (created if missing) must belong to root or this daemon's uid and be writable by nobody
  // else (its group may write when it is the daemon's own group) unless sticky
  // (FailedPrecondition otherwise: whoever can write there could replace the socket). The file never has more than `mode`; its group and mode are set through a
  // descriptor of the socket bind created, never through a symlink.
  static Result<std::unique_ptr<ControlServer>> Start(boost::asio::io_context& io,
                                                      Options options);
  ~ControlServer();  // stops accepting, closes every connection, removes the socket file

  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // `summary` is shown by the built-in "help" command.
  void Register(const std::string& cmd, ControlAccess access, std::string summary, Handler h);
  void RegisterAsync(const std::string& cmd, ControlAccess access, std::string summary,
                     AsyncHandler h);
  void RegisterAsyncText(const std::string& cmd, ControlAccess access, std::string summary,
                         AsyncTextHandler h);

  const ControlCounters& counters() const { return counters_; }
  const std::string& path() const { return options_.path; }

  // Runs one request line as if it came from a peer with `uid`; `reply` gets the reply line
  // (without the newline). For the connection code and for tests of the protocol itself.
  void Dispatch(const std::string& line, uid_t uid, std::function<void(std::string)> reply);

  // Builds an error reply line (used for requests that never reach Dispatch, e.g. too long).
  static std::string ErrorLine(const std::string& code, const std::string& message,
                               const nlohmann::json& id = nullptr);

 private:
  class Connection;
  struct Command {
    ControlAccess access;
    std::string summary;
    AsyncHandler handler;
    AsyncTextHandler text_handler;  // set instead of `handler` (RegisterAsyncText)
  };

  ControlServer(boost::asio::io_context& io, Options options);
  // The error line of a handler's failure, counted (bad_requests or failed).
  std::string FailedLine(const Status& s, const nlohmann::json& id);
  void Accept();
  bool MayChange(uid_t uid) const;
  // Empty when `uid` may open one more connection now, else why not (for the busy line).
  std::string NoSlotFor(uid_t uid);

  boost::asio::io_context& io_;
  Options options_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  std::map<std::string, Command> commands_;
  std::vector<std::weak_ptr<Connection>> connections_;
  ControlCounters counters_;
  AcceptRetry accept_retry_{io_, "SM-CTL-001 control socket accept", counters_.accept};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // replies after destruction
  bool remove_on_exit_ = false;  // the file at options_.path is the socket this one bound
};

}  // namespace ibsm::sm
