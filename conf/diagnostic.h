// A warning about an input file that did not stop it from loading: an unknown key, a bad
// line skipped in a guid2lid file. The caller logs each one (logger "conf") and counts them.
#pragma once

#include <string>
#include <string_view>

namespace ibsm::conf {

struct Diagnostic {
  std::string id;       // stable, greppable: "CONF-001"
  std::string file;     // as the caller named it
  int line = 0;         // 1-based; 0 when the diagnostic is about the whole file
  std::string message;  // printable ASCII only, whatever the input held

  // "opensm.conf:12: CONF-001 unknown option 'foo' ignored"
  std::string ToString() const;

  bool operator==(const Diagnostic&) const = default;
};

// Stable IDs (frozen: operators grep for them).
inline constexpr char kConfUnknownKey[] = "CONF-001";
inline constexpr char kConfDuplicateKey[] = "CONF-002";
inline constexpr char kConfTooManyWarnings[] = "CONF-003";
inline constexpr char kConfGuidFileBadLine[] = "CONF-010";
inline constexpr char kConfNotHonoured[] = "CONF-030";
inline constexpr char kConfGuid2LidBadLine[] = "CONF-020";
inline constexpr char kConfGuid2LidOverlap[] = "CONF-021";
inline constexpr char kConfGuid2LidDuplicateGuid[] = "CONF-022";

// Bytes from an untrusted file as they may appear in a log line: non-printable bytes become
// "\xNN", and the result is cut at `max_len` characters with "..." appended.
std::string Printable(std::string_view bytes, size_t max_len = 64);

}  // namespace ibsm::conf
