// A private ibsim for end-to-end tests, and child processes run against it.
//
// ibsim's facts this relies on (ibsim 0.10-0.12 source, umad2sim/umad2sim.c, ibsim/ibsim.c):
// - Clients attach through LD_PRELOAD=libumad2sim.so; IBSIM_SOCKNAME names the abstract unix
//   sockets ("@<name>:ctl", ":out0-9"), so a unique name per instance keeps runs apart.
//   SIM_HOST=<node id> picks the node a client attaches to (default: the first in the file).
// - ibsim binds its sockets only after parsing the net file, so "out9 appears in
//   /proc/net/unix" means ready.
// - With -n ibsim has no console at all. Without -n it select()s on stdin; at EOF (a closed
//   or /dev/null stdin) that spins a core, but a pipe we keep open blocks properly. So the
//   console (link/unlink/Error/...) is supported by starting without -n and feeding commands
//   through a pipe: IbsimOptions::console.
// - libumad2sim writes ./sys-<pid>/ into the client's cwd: children run in work_dir().
// - No MAD timeouts under ibsim: a client may block forever, so every child has a hard
//   timeout and is killed (SIGKILL, by PID) when it passes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ibsm::test {

inline constexpr char kUmad2SimLib[] = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";
inline constexpr char kIbsimBinary[] = "/usr/bin/ibsim";

struct CommandResult {
  int exit_code = -1;      // exit status, or 128 + signal when killed by one
  bool timed_out = false;  // killed because the hard timeout passed
  std::string out;
  std::string err;
};

// Where the project's binaries are: $IBSM_BIN_DIR, else the build's bin directory.
std::string BinDir();
std::string Bin(const std::string& name);

// The whole file; empty if it cannot be read.
std::string ReadFile(const std::string& path);

// Writes `text` as the whole file; false when it could not be written.
bool WriteTextFile(const std::string& path, const std::string& text);

// The ibsmd binary under test.
inline std::string Ibsmd() { return Bin("ibsmd"); }

// How long a diag tool (saquery, smpquery, ibnetdiscover, ...) may run against ibsim.
inline constexpr std::chrono::seconds kToolTimeout{20};

// The values of `key` in a "key......value" dump (saquery, smpquery), one per line printed.
std::vector<std::string> DumpValues(const std::string& out, const std::string& key);

// "0x0002c90300000011": a GUID as the diags print it.
std::string Hex16(uint64_t v);

// How often `what` occurs in `text` (overlapping matches counted).
size_t CountOf(const std::string& text, const std::string& what);

// Polls the file until `what` occurs in it `times` times; false when `timeout` passes first.
bool WaitForCount(const std::string& path, const std::string& what, size_t times,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Exit status and the heads of both outputs, for failure messages.
std::string Describe(const CommandResult& r);

// A started child. Output goes to files in the child's cwd (read by Wait).
class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) in `cwd` with `env` (KEY=VALUE; empty = inherit).
  static Result<ChildProcess> Start(const std::vector<std::string>& argv, const std::string& cwd,
                                    const std::vector<std::string>& env);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess();  // kills the child by PID if still running

  pid_t pid() const { return pid_; }
  const std::string& stdout_path() const { return out_path_; }
  // Waits at most `timeout`, then SIGKILLs it. Collects output. Call once.
  Result<CommandResult> Wait(std::chrono::milliseconds timeout);
  // Current contents of the child's stdout so far.
  std::string PeekStdout() const;

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  std::string out_path_, err_path_;
};

// A new private directory under the system temp dir, named `prefix` plus a unique suffix
// (mkdtemp). IoError with errno's text when it cannot be made.
Result<std::string> MakeTempDir(std::string_view prefix);

// Runs a child to completion with a hard timeout (fork/exec; killed by PID on timeout).
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout, const std::string& cwd,
                                 const std::vector<std::string>& env = {});

struct IbsimOptions {
  // Keep a console pipe for SendConsoleCommand (ibsim then runs without -n).
  bool console = false;
  std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
};

class IbsimInstance {
 public:
  // True when ibsim and libumad2sim are installed (tests GTEST_SKIP otherwise).
  static bool Available();

  // Starts `ibsim -s [-n] -N -S -P (sized from the file) -L 49152 net_file` with a unique
  // IBSIM_SOCKNAME in a fresh temp work dir, and waits until its sockets appear. The error
  // carries ibsim's log tail if it dies or does not come up in time.
  static Result<std::unique_ptr<IbsimInstance>> Start(const std::string& net_file,
                                                      const IbsimOptions& options = {});
  ~IbsimInstance();  // stops ibsim by PID (SIGTERM, then SIGKILL), removes the work dir
  IbsimInstance(const IbsimInstance&) = delete;
  IbsimInstance& operator=(const IbsimInstance&) = delete;

  const std::string& sock_name() const { return sock_name_; }
  const std::string& work_dir() const { return work_dir_; }
  pid_t pid() const { return pid_; }
  bool running() const;

  // The current environment plus LD_PRELOAD, IBSIM_SOCKNAME, and SIM_HOST if not empty
  // (an inherited SIM_HOST is removed otherwise).
  std::vector<std::string> Environment(const std::string& sim_host = "") const;

  // RunCommand under the preload, in work_dir() unless `cwd` is given.
  Result<CommandResult> Run(const std::vector<std::string>& argv,
                            std::chrono::milliseconds timeout, const std::string& sim_host = "",
                            const std::string& cwd = "") const;
  Result<ChildProcess> StartChild(const std::vector<std::string>& argv,
                                  const std::string& sim_host = "") const;

  // Feeds one console line ("unlink \"leaf-001\"[3]", "link ...") to ibsim. REQUIRES: started
  // with IbsimOptions::console. FailedPrecondition otherwise.
  Status SendConsoleCommand(const std::string& line);
  // Everything ibsim printed so far (its console output and warnings).
  std::string Log() const;

 private:
  IbsimInstance() = default;
  pid_t pid_ = -1;
  int console_fd_ = -1;
  std::string sock_name_;
  std::string work_dir_;
  std::string log_path_;
};

}  // namespace ibsm::test
