// Client side of ibsmd's control socket (sm/net/control_server.h): one request line out, one
// reply line back, with a deadline. Used by ibsmctl and by the tests.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ibsm::tools {

// The socket ibsmd serves when the config names none.
inline constexpr const char* kDefaultControlSocket = "/run/ibsm/ibsmd.sock";

// Sends {"cmd": cmd, "args": args} and returns the reply's "result". A reply with
// "ok": false becomes a Status carrying the daemon's message (PermissionDenied for
// permission_denied, InvalidArgument for bad_request/unknown_command, Unavailable otherwise);
// no daemon listening is Unavailable, no reply within `timeout` is Timeout.
Result<nlohmann::json> CallControl(const std::string& socket_path, const std::string& cmd,
                                   const nlohmann::json& args = nlohmann::json::object(),
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The raw exchange: writes `line` plus a newline and returns the reply line without it.
Result<std::string> ControlExchange(const std::string& socket_path, const std::string& line,
                                    std::chrono::milliseconds timeout);

}  // namespace ibsm::tools
