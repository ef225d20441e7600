#include "tests/e2e/ibsim_harness.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

extern char** environ;

namespace ibsm::test {
namespace {

namespace fs = std::filesystem;

std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(s.size() - n);
}

// A unique file in `dir` named prefix-XXXXXX.suffix; returns its path (the file exists).
std::string MakeTempFile(const std::string& dir, const std::string& prefix) {
  std::string tmpl = dir + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0) return {};
  close(fd);
  return buf.data();
}

struct CStrings {
  explicit CStrings(const std::vector<std::string>& v) {
    for (const auto& s : v) ptrs.push_back(const_cast<char*>(s.c_str()));
    ptrs.push_back(nullptr);
  }
  std::vector<char*> ptrs;
};

// fork + exec with stdin from `stdin_fd` (or /dev/null), stdout/stderr to files.
Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& cwd,
                    const std::vector<std::string>& env, const std::string& out_path,
                    const std::string& err_path, int stdin_fd, int close_in_child) {
  if (argv.empty()) return InvalidArgument("empty argv");
  CStrings args(argv);
  CStrings envs(env);
  pid_t pid = fork();
  if (pid < 0) return IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    int in = stdin_fd >= 0 ? stdin_fd : open("/dev/null", O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (close_in_child >= 0) close(close_in_child);
    if (env.empty()) {
      execvp(args.ptrs[0], args.ptrs.data());
    } else {
      execvpe(args.ptrs[0], args.ptrs.data(), envs.ptrs.data());
    }
    _exit(127);
  }
  return pid;
}

// Waits for `pid` until `deadline`; SIGKILLs it after. Returns the wait status.
int WaitOrKill(pid_t pid, std::chrono::steady_clock::time_point deadline, bool* killed) {
  int status = 0;
  *killed = false;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      *killed = true;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string BinDir() {
  const char* b = std::getenv("IBSM_BIN_DIR");
  return b ? b : IBSM_BIN_DIR;
}

std::string Bin(const std::string& name) { return BinDir() + "/" + name; }

bool WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

std::vector<std::string> DumpValues(const std::string& out, const std::string& key) {
  std::regex re("(^|\\s)" + key + ":?\\.+:?(.*)$");
  std::vector<std::string> v;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    std::string s = m[2];
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
    v.push_back(s);
  }
  return v;
}

std::string Hex16(uint64_t v) { return fmt::format("{:#018x}", v); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t CountOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool WaitForCount(const std::string& path, const std::string& what, size_t times,
                  std::chrono::milliseconds timeout) {
  for (auto end = std::chrono::steady_clock::now() + timeout;;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    if (CountOf(ReadFile(path), what) >= times) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
  }
}

std::string Describe(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") +
         "\nstdout:\n" + r.out.substr(0, 4000) + "\nstderr:\n" + r.err.substr(0, 4000);
}

// ---------------------------------------------------------------------------------------------

Result<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                         const std::string& cwd,
                                         const std::vector<std::string>& env) {
  std::string dir = cwd.empty() ? fs::current_path().string() : cwd;
  ChildProcess c;
  c.out_path_ = MakeTempFile(dir, "child-out");
  c.err_path_ = MakeTempFile(dir, "child-err");
  if (c.out_path_.empty() || c.err_path_.empty()) {
    return IoError("cannot create output files in " + dir + ": " + std::strerror(errno));
  }
  auto pid = Spawn(argv, dir, env, c.out_path_, c.err_path_, -1, -1);
  if (!pid.ok()) return pid.status();
  c.pid_ = *pid;
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), out_path_(std::move(other.out_path_)),
      err_path_(std::move(other.err_path_)) {
  other.pid_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

std::string ChildProcess::PeekStdout() const { return ReadFile(out_path_); }

Result<CommandResult> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return FailedPrecondition("child already waited for");
  CommandResult r;
  int status = WaitOrKill(pid_, std::chrono::steady_clock::now() + timeout, &r.timed_out);
  pid_ = -1;
  r.exit_code = ExitCodeOf(status);
  r.out = ReadFile(out_path_);
  r.err = ReadFile(err_path_);
  std::error_code ec;
  fs::remove(out_path_, ec);
  fs::remove(err_path_, ec);
  return r;
}

Result<std::string> MakeTempDir(std::string_view prefix) {
  std::string tmpl = (fs::temp_directory_path() / (std::string(prefix) + "XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return IoError(std::string("mkdtemp: ") + std::strerror(errno));
  return std::string(buf.data());
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout, const std::string& cwd,
                                 const std::vector<std::string>& env) {
  auto child = ChildProcess::Start(argv, cwd, env);
  if (!child.ok()) return child.status();
  return child->Wait(timeout);
}

// ---------------------------------------------------------------------------------------------

bool IbsimInstance::Available() {
  return access(kIbsimBinary, X_OK) == 0 && access(kUmad2SimLib, R_OK) == 0;
}

Result<std::unique_ptr<IbsimInstance>> IbsimInstance::Start(const std::string& net_file,
                                                            const IbsimOptions& options) {
  if (!Available()) return Unavailable("ibsim or libumad2sim.so not installed");
  std::ifstream net(net_file);
  if (!net) return NotFound("cannot read net file " + net_file);
  // Size ibsim's tables from the file as ibsim needs for a fabric this size.
  uint64_t nodes = 0, switches = 0, ports = 0;
  for (std::string line; std::getline(net, line);) {
    std::istringstream ls(line);
    std::string kind;
    uint64_t n = 0;
    if (!(ls >> kind >> n)) continue;
    if (kind == "Switch") {
      ++nodes;
      ++switches;
      ports += n + 1;
    } else if (kind == "Ca" || kind == "Hca" || kind == "Rt") {
      ++nodes;
      ports += n;
    }
  }

  std::unique_ptr<IbsimInstance> sim(new IbsimInstance());
  IBSM_ASSIGN_OR_RETURN(sim->work_dir_, MakeTempDir("ibsm-ibsim-"));
  // Unique per process and per instance: the pid plus mkdtemp's suffix.
  sim->sock_name_ = "ibsm-" + std::to_string(getpid()) + "-" +
                    fs::path(sim->work_dir_).filename().string().substr(std::strlen("ibsm-ibsim-"));
  sim->log_path_ = sim->work_dir_ + "/ibsim.log";

  std::vector<std::string> argv = {kIbsimBinary, "-s"};
  if (!options.console) argv.push_back("-n");
  for (const auto& a : {std::string("-N"), std::to_string(nodes + 64), std::string("-S"),
                        std::to_string(switches + 16), std::string("-P"),
                        std::to_string(ports + 1024), std::string("-L"), std::string("49152"),
                        fs::absolute(net_file).string()})
    argv.push_back(a);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "IBSIM_SOCKNAME=", 15) != 0 && std::strncmp(*e, "LD_PRELOAD=", 11) != 0)
      env.emplace_back(*e);
  }
  env.push_back("IBSIM_SOCKNAME=" + sim->sock_name_);

  int pipe_fds[2] = {-1, -1};
  if (options.console) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
  }
  // ibsim writes console output and warnings to stdout and stderr; keep both in one log.
  auto pid = Spawn(argv, sim->work_dir_, env, sim->log_path_, sim->log_path_ + ".err",
                   pipe_fds[0], pipe_fds[1]);
  if (options.console) close(pipe_fds[0]);
  if (!pid.ok()) {
    if (pipe_fds[1] >= 0) close(pipe_fds[1]);
    return pid.status();
  }
  sim->pid_ = *pid;
  sim->console_fd_ = pipe_fds[1];

  const std::string ready = "@" + sim->sock_name_ + ":out9";
  auto deadline = std::chrono::steady_clock::now() + options.start_timeout;
  for (;;) {
    std::string unix_socks = ReadFile("/proc/net/unix");
    size_t at = unix_socks.find(ready);
    if (at != std::string::npos) {
      char next = at + ready.size() < unix_socks.size() ? unix_socks[at + ready.size()] : '\n';
      if (next == '@' || next == '\n') break;
    }
    int status;
    if (waitpid(sim->pid_, &status, WNOHANG) == sim->pid_) {
      sim->pid_ = -1;
      return Unavailable("ibsim exited (" + std::to_string(ExitCodeOf(status)) +
                         ") before its sockets appeared; log:\n" + Tail(sim->Log(), 2000));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Timeout("ibsim did not come up within " +
                     std::to_string(options.start_timeout.count()) + " ms; log:\n" +
                     Tail(sim->Log(), 2000));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return sim;
}

IbsimInstance::~IbsimInstance() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    bool killed;
    WaitOrKill(pid_, std::chrono::steady_clock::now() + std::chrono::seconds(5), &killed);
  }
  // After ibsim is gone: closing the pipe first would make it spin on EOF.
  if (console_fd_ >= 0) close(console_fd_);
  if (!work_dir_.empty() && !std::getenv("IBSM_KEEP_IBSIM_DIR")) {
    std::error_code ec;
    fs::remove_all(work_dir_, ec);
  }
}

bool IbsimInstance::running() const { return pid_ > 0 && kill(pid_, 0) == 0; }

std::vector<std::string> IbsimInstance::Environment(const std::string& sim_host) const {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "IBSIM_SOCKNAME=", 15) != 0 && std::strncmp(*e, "LD_PRELOAD=", 11) != 0 &&
        std::strncmp(*e, "SIM_HOST=", 9) != 0)
      env.emplace_back(*e);
  }
  env.push_back(std::string("LD_PRELOAD=") + kUmad2SimLib);
  env.push_back("IBSIM_SOCKNAME=" + sock_name_);
  if (!sim_host.empty()) env.push_back("SIM_HOST=" + sim_host);
  return env;
}

Result<CommandResult> IbsimInstance::Run(const std::vector<std::string>& argv,
                                         std::chrono::milliseconds timeout,
                                         const std::string& sim_host,
                                         const std::string& cwd) const {
  return RunCommand(argv, timeout, cwd.empty() ? work_dir_ : cwd, Environment(sim_host));
}

Result<ChildProcess> IbsimInstance::StartChild(const std::vector<std::string>& argv,
                                               const std::string& sim_host) const {
  return ChildProcess::Start(argv, work_dir_, Environment(sim_host));
}

Status IbsimInstance::SendConsoleCommand(const std::string& line) {
  if (console_fd_ < 0) {
    return FailedPrecondition("ibsim was started with -n (no console); set IbsimOptions::console");
  }
  std::string l = line + "\n";
  // ibsim reads at most 127 bytes per console line.
  if (l.size() > 127) return InvalidArgument("console line longer than ibsim's 127 bytes");
  ssize_t n = write(console_fd_, l.data(), l.size());
  if (n != static_cast<ssize_t>(l.size())) {
    return IoError(std::string("write to ibsim console: ") + std::strerror(errno));
  }
  return Status::Ok();
}

std::string IbsimInstance::Log() const {
  return ReadFile(log_path_) + ReadFile(log_path_ + ".err");
}

}  // namespace ibsm::test
