// Whole-file reads and crash-safe whole-file writes for the small text files conf handles.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ibsm::conf {

inline constexpr size_t kMaxConfFileBytes = 16u << 20;

// Whitespace in OpenSM's text formats (opensm.conf, guid files): blank, tab, CR, VT, FF.
inline constexpr std::string_view kConfSpace = " \t\r\v\f";
// A file of garbage must not flood the log: after this many warnings one more says so.
inline constexpr size_t kMaxConfWarnings = 100;

// `s` without leading and trailing kConfSpace.
inline std::string_view TrimSpace(std::string_view s) {
  size_t b = s.find_first_not_of(kConfSpace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kConfSpace);
  return s.substr(b, e - b + 1);
}

// NotFound when `path` does not exist, IoError when it cannot be read or is larger than
// `max_bytes` (a config file that large is a mistake, not a config).
Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes = kMaxConfFileBytes);

// A new, empty file beside `path`, to be written and renamed over it: "<path>.tmp.XXXXXXXX"
// (a fresh random name per try), created with O_CREAT|O_EXCL|O_NOFOLLOW and `mode` (less
// the umask). Whatever someone planted under a temp name (a symlink to /etc/shadow, say) is
// never opened: the name is taken, and another is tried. The caller owns `fd` (close it) and
// the file (rename it into place or unlink it).
struct TempFile {
  int fd = -1;
  std::string path;
};
Result<TempFile> CreateTempFileBeside(const std::string& path, mode_t mode = 0644);

// Writes a temporary file beside `path` (CreateTempFileBeside), fsyncs it, renames it over
// `path` and fsyncs the directory, so a crash leaves either the old file or the new one, never
// a mix. Mode 0644 (less the umask). A symlink at `path` itself is replaced, not followed.
Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace ibsm::conf
