#include "base/log.h"

#include <array>
#include <mutex>
#include <vector>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
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
                      spdlog::level::level_enum flush_level) {
  Registry& r = Reg();
  std::vector<spdlog::sink_ptr> sinks;
  if (path.empty() || path == "-" || path == "stderr") {
    sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  } else if (path == "stdout") {
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
  } else {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false));
    } catch (const spdlog::spdlog_ex& e) {
      fmt::print(stderr, "cannot open log file {}: {}\n", path, e.what());
      return false;
    }
  }
  std::lock_guard<std::mutex> lock(r.mu);
  r.sinks = std::move(sinks);
  r.level = level;
  r.flush_level = flush_level;
  for (size_t i = 0; i < kNames.size(); ++i) r.loggers[i] = Make(r, i);
  return true;
}

void SetLogLevel(spdlog::level::level_enum level) {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  r.level = level;
  for (auto& l : r.loggers)
    if (l) l->set_level(level);
}

}  // namespace ibsm
