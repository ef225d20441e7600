// Named loggers from a closed list. Every warning and error carries a
// stable ID ("SM-LID-012") as the first word of its message; per-MAD lines are trace only.
#pragma once

#include <cstdint>

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace ibsm {

enum class LogName { kSm, kSa, kMad, kRouting, kHa, kConf, kSim };

// Returns the logger for `name`; created on first use with the process's sinks.
// Thread-safe (spdlog's registry and *_mt sinks).
spdlog::logger& Log(LogName name);

// How a log file is kept (OpenSM's accum_log_file / -e and log_max_size / -L).
struct LogFileOptions {
  bool append = true;      // false: the file is emptied when opened
  uint64_t max_bytes = 0;  // 0: no limit; else the file is truncated when a line would pass it
};

// Points every logger at stderr ("", "-", "stderr"), stdout ("stdout") or the file
// `path`. Applies `level` to all.
// Lines at or above `flush_level` are flushed at once so scripts can wait on them.
// A file that reaches `file.max_bytes` is emptied and starts again with a line saying so, as
// OpenSM's log_max_size does: a flood of lines costs disk space up to the limit, never more.
// Returns false with an error printed to stderr if the file cannot be opened.
bool ConfigureLogging(const std::string& path, spdlog::level::level_enum level,
                      spdlog::level::level_enum flush_level = spdlog::level::info,
                      LogFileOptions file = {});

// Times a log file was emptied on reaching its limit (the count since start).
uint64_t LogTruncations();

void SetLogLevel(spdlog::level::level_enum level);

}  // namespace ibsm
