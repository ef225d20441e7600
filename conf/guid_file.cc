#include "conf/guid_file.h"

#include <map>
#include <unordered_set>

#include <fmt/format.h>

#include "conf/text_file.h"

namespace ibsm::conf {
namespace {


// Hex with or without 0x (GUIDs and guid2lid LIDs are always hex in these files).
bool ParseHex(std::string_view s, uint64_t* out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  for (char ch : s) {
    unsigned d;
    if (ch >= '0' && ch <= '9') d = static_cast<unsigned>(ch - '0');
    else if (ch >= 'a' && ch <= 'f') d = static_cast<unsigned>(ch - 'a' + 10);
    else if (ch >= 'A' && ch <= 'F') d = static_cast<unsigned>(ch - 'A' + 10);
    else return false;
    v = (v << 4) | d;
  }
  *out = v;
  return true;
}

// Calls fn(line_no, content) for each line with comments and surrounding space removed.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = TrimSpace(line);
    if (!line.empty() && !fn(line_no, line)) return;
  }
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  while (!line.empty()) {
    size_t sp = line.find_first_of(kConfSpace);
    out.push_back(line.substr(0, sp));
    if (sp == std::string_view::npos) break;
    line = TrimSpace(line.substr(sp));
  }
  return out;
}

}  // namespace

Result<GuidList> ParseGuidList(std::string_view text, std::string_view file_name) {
  GuidList out;
  std::unordered_set<uint64_t> seen;
  Status error;
  ForEachLine(text, [&](int line_no, std::string_view line) {
    uint64_t g = 0;
    if (!ParseHex(line, &g) || g == 0) {
      error = InvalidArgument(fmt::format("{}:{}: '{}' is not a GUID (16 hex digits, 0x optional)",
                                          file_name, line_no, Printable(line)));
      return false;
    }
    if (!seen.insert(g).second) {
      if (out.warnings.size() < kMaxConfWarnings) {
        out.warnings.push_back({kConfGuidFileBadLine, std::string(file_name), line_no,
                                fmt::format("{} listed again; ignored", ToString(Guid{g}))});
      }
      return true;
    }
    out.guids.push_back(Guid{g});
    return true;
  });
  if (!error.ok()) return error;
  return out;
}

Result<GuidList> LoadGuidListFile(const std::string& path) {
  IBSM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseGuidList(text, path);
}

Guid2LidLoad ParseGuid2Lid(std::string_view text, std::string_view file_name) {
  Guid2LidLoad out;
  std::unordered_set<uint64_t> guids;
  std::map<uint16_t, uint16_t> ranges;  // min -> max of accepted lines
  auto warn = [&](int line_no, const char* id, std::string msg) {
    if (out.warnings.size() < kMaxConfWarnings) {
      out.warnings.push_back({id, std::string(file_name), line_no, std::move(msg)});
    } else if (out.warnings.size() == kMaxConfWarnings) {
      out.warnings.push_back({kConfTooManyWarnings, std::string(file_name), line_no,
                              "too many bad lines; the rest are not shown"});
    }
  };
  ForEachLine(text, [&](int line_no, std::string_view line) {
    std::vector<std::string_view> f = Fields(line);
    uint64_t g = 0, lo = 0, hi = 0;
    if (f.size() != 3 || !ParseHex(f[0], &g) || g == 0 || !ParseHex(f[1], &lo) ||
        !ParseHex(f[2], &hi)) {
      warn(line_no, kConfGuid2LidBadLine,
           fmt::format("'{}' is not '0xGUID 0xMINLID 0xMAXLID'; line skipped", Printable(line)));
      return true;
    }
    if (lo < 1 || hi > kMaxUnicastLid || lo > hi) {
      warn(line_no, kConfGuid2LidBadLine,
           fmt::format("{}: LIDs {}..{} are not a unicast range (1..{}); line skipped",
                       ToString(Guid{g}), lo, hi, kMaxUnicastLid));
      return true;
    }
    if (guids.count(g) != 0) {
      warn(line_no, kConfGuid2LidDuplicateGuid,
           fmt::format("{} listed again; the first line wins", ToString(Guid{g})));
      return true;
    }
    // Overlap with an accepted range: the nearest range starting at or below hi.
    auto it = ranges.upper_bound(static_cast<uint16_t>(hi));
    if (it != ranges.begin() && std::prev(it)->second >= lo) {
      auto other = std::prev(it);
      warn(line_no, kConfGuid2LidOverlap,
           fmt::format("{}: LIDs {}..{} overlap {}..{} of an earlier line; line skipped",
                       ToString(Guid{g}), lo, hi, other->first, other->second));
      return true;
    }
    guids.insert(g);
    ranges.emplace(static_cast<uint16_t>(lo), static_cast<uint16_t>(hi));
    out.entries.push_back({Guid{g}, Lid{static_cast<uint16_t>(lo)}, Lid{static_cast<uint16_t>(hi)}});
    return true;
  });
  return out;
}

Result<Guid2LidLoad> LoadGuid2LidFile(const std::string& path) {
  IBSM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseGuid2Lid(text, path);
}

std::string WriteGuid2Lid(const std::vector<Guid2LidEntry>& entries) {
  std::string out;
  for (const Guid2LidEntry& e : entries) {
    out += fmt::format("0x{:016x} 0x{:x} 0x{:x}\n", e.guid.value(), e.min_lid.value(),
                       e.max_lid.value());
  }
  return out;
}

Status SaveGuid2LidFile(const std::string& path, const std::vector<Guid2LidEntry>& entries) {
  return WriteFileAtomically(path, WriteGuid2Lid(entries));
}

}  // namespace ibsm::conf
