// Fuzz target: the control socket's request lines, through the real ibsmd commands on a live
// (simulated) fabric. Any line in: one JSON reply out (an error or a result), never a crash.
// The peer is root half of the time (byte 0's low bit), so change commands run too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "sm/ctl/control_commands.h"
#include "sm/net/control_server.h"
#include "tests/fuzz/fuzz_world.h"

namespace {

struct CtlWorld {
  CtlWorld() {
    ibsm::fuzz::World& w = ibsm::fuzz::TheWorld();
    ibsm::sm::ControlServer::Options o;
    o.path = "/tmp/ibsm-fuzz-ctl-" + std::to_string(getpid()) + ".sock";
    auto s = ibsm::sm::ControlServer::Start(w.io, o);
    if (!s.ok()) std::abort();
    server = std::move(*s);
    ibsm::sm::ControlContext ctx;
    ctx.sm = w.sm.get();
    ctx.set_log_level = [](spdlog::level::level_enum) {};  // keep the fuzzer's output quiet
    commands = std::make_unique<ibsm::sm::ControlCommands>(w.io, *server, ctx);
  }
  std::unique_ptr<ibsm::sm::ControlServer> server;
  std::unique_ptr<ibsm::sm::ControlCommands> commands;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static CtlWorld* w = new CtlWorld();
  if (size == 0) return 0;
  const uid_t uid = (data[0] & 1) ? 0 : 4242;
  std::string line(reinterpret_cast<const char*>(data + 1), size - 1);
  // `check` answers from a worker thread; the fuzzer does not wait for it (it is refused while
  // one runs), but every synchronous reply must be one JSON object with "ok".
  w->server->Dispatch(line, uid, [](std::string reply) {
    auto j = nlohmann::json::parse(reply, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("ok")) std::abort();
  });
  ibsm::fuzz::TheWorld().io.poll();
  return 0;
}
