#include "base/log.h"

#include <array>
#include <mutex>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "base/text.h"

namespace ibsm {
namespace {

constexpr std::array<const char*, 7> kNames = {"sm", "sa", "mad", "routing", "ha", "conf", "sim"};

struct Registry {
  std::mutex mu;
  std::vector<spdlog::sink_ptr> sinks{std::make_shared<spdlog::sinks::stderr_sink_mt>()};
  std::array<std::shared_ptr<spdlog::logger>, kNames.size()> loggers;
  spdlog::level::level_enum level = spdlog::level::info;
  spdlog::level::level_enum flush_level = spdlog::level::info;
};

// The message part of a line (%v), with control bytes and bytes that are not UTF-8 written
// as \xNN (base/text.h): messages quote NodeDescriptions and other text hosts choose, and a
// log line must never carry a forged line break or a terminal escape.
class SafeMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view v(msg.payload.data(), msg.payload.size());
    if (IsPrintableAscii(v)) {
      dest.append(v.data(), v.data() + v.size());
      return;
    }
    const std::string safe = EscapeControls(v);
    dest.append(safe.data(), safe.data() + safe.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SafeMessageFlag>();
  }
};

std::atomic<uint64_t> g_truncations{0};

// A log file with OpenSM's size limit. Written with write(2) on an O_APPEND descriptor so that
// each line lands whole even when logrotate's copytruncate empties the file under us; its
// size is re-read from the descriptor when a line would pass the limit, so a file emptied
// from outside is not truncated again for nothing.
class LimitedFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  static std::shared_ptr<LimitedFileSink> Open(const std::string& path, LogFileOptions o,
                                               std::string* error) {
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
    if (!o.append) flags |= O_TRUNC;
    int fd = ::open(path.c_str(), flags, 0640);
    if (fd < 0) {
      *error = std::strerror(errno);
      return nullptr;
    }
    return std::shared_ptr<LimitedFileSink>(new LimitedFileSink(fd, o.max_bytes));
  }
  ~LimitedFileSink() override { ::close(fd_); }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    if (max_bytes_ != 0 && size_ + line.size() > max_bytes_) {
      off_t now = ::lseek(fd_, 0, SEEK_END);
      size_ = now < 0 ? size_ : static_cast<uint64_t>(now);
      if (size_ + line.size() > max_bytes_ && ::ftruncate(fd_, 0) == 0) {
        size_ = 0;
        g_truncations.fetch_add(1);
        spdlog::details::log_msg note(msg.time, msg.source, msg.logger_name,
                                      spdlog::level::warn, kTruncatedNote);
        spdlog::memory_buf_t first;
        formatter_->format(note, first);
        Write(first);
      }
    }
    Write(line);
  }
  void flush_() override {}  // write(2) leaves nothing buffered in this process

 private:
  static constexpr std::string_view kTruncatedNote =
      "LOG-001 the log file reached log_max_size and was emptied; older lines are gone";

  LimitedFileSink(int fd, uint64_t max_bytes) : fd_(fd), max_bytes_(max_bytes) {
    off_t now = ::lseek(fd_, 0, SEEK_END);
    size_ = now < 0 ? 0 : static_cast<uint64_t>(now);
  }
  void Write(const spdlog::memory_buf_t& b) {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::write(fd_, b.data() + done, b.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // a full disk loses the line, never the daemon
      done += static_cast<size_t>(n);
    }
    size_ += done;
  }

  int fd_;
  uint64_t max_bytes_;
  uint64_t size_ = 0;
};

Registry& Reg() {
  static Registry* r = new Registry();  // never destroyed: loggers outlive static teardown
  return *r;
}

std::shared_ptr<spdlog::logger> Make(Registry& r, size_t i) {
  auto l = std::make_shared<spdlog::logger>(kNames[i], r.sinks.begin(), r.sinks.end());
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<SafeMessageFlag>('*').set_pattern("%Y-%m-%d %H:%M:%S.%f [%n] %l: %*");
  l->set_formatter(std::move(formatter));
  l->set_level(r.level);
  l->flush_on(r.flush_level);
  return l;
}

}  // namespace

spdlog::logger& Log(LogName name) {
  Registry& r = Reg();
  size_t i = static_cast<size_t>(name);
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.loggers[i]) r.loggers[i] = Make(r, i);
  return *r.loggers[i];
}

bool ConfigureLogging(const std::string& path, spdlog::level::level_enum level,
                      spdlog::level::level_enum flush_level, LogFileOptions file) {
  Registry& r = Reg();
  std::vector<spdlog::sink_ptr> sinks;
  if (path.empty() || path == "-" || path == "stderr") {
    sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  } else if (path == "stdout") {
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
  } else {
    std::string error;
    auto sink = LimitedFileSink::Open(path, file, &error);
    if (!sink) {
      fmt::print(stderr, "cannot open log file {}: {}\n", path, error);
      return false;
    }
    sinks.push_back(std::move(sink));
  }
  std::lock_guard<std::mutex> lock(r.mu);
  r.sinks = std::move(sinks);
  r.level = level;
  r.flush_level = flush_level;
  for (size_t i = 0; i < kNames.size(); ++i) r.loggers[i] = Make(r, i);
  return true;
}

uint64_t LogTruncations() { return g_truncations.load(); }

void SetLogLevel(spdlog::level::level_enum level) {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  r.level = level;
  for (auto& l : r.loggers)
    if (l) l->set_level(level);
}

}  // namespace ibsm
