// Named loggers from a closed list (STYLE.md rule 9). Every warning and error carries a
// stable ID ("SM-LID-012") as the first word of its message; per-MAD lines are trace only.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace ibsm {

enum class LogName { kSm, kSa, kMad, kRouting, kHa, kConf, kSim };

// Returns the logger for `name`; created on first use with the process's sinks.
// Thread-safe (spdlog's registry and *_mt sinks).
spdlog::logger& Log(LogName name);

// Points every logger at stderr ("", "-", "stderr"), stdout ("stdout") or the file
// `path` (appending). Applies `level` to all.
// Lines at or above `flush_level` are flushed at once so scripts can wait on them.
// Returns false with an error printed to stderr if the file cannot be opened.
bool ConfigureLogging(const std::string& path, spdlog::level::level_enum level,
                      spdlog::level::level_enum flush_level = spdlog::level::info);

void SetLogLevel(spdlog::level::level_enum level);

}  // namespace ibsm
