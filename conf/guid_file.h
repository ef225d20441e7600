// The GUID files OpenSM operators already have: root_guid_file, cn_guid_file, io_guid_file,
// guid_routing_order_file (one GUID per line), and OpenSM's guid2lid cache file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "conf/diagnostic.h"

namespace ibsm::conf {

struct GuidList {
  std::vector<Guid> guids;             // file order (it is the routing order for
                                       // guid_routing_order_file), duplicates dropped
  std::vector<Diagnostic> warnings;    // duplicates (CONF-010)
};

// One GUID per line, hex with or without 0x; '#' starts a comment; blank lines skipped.
// A line that is not a GUID is an error naming file:line: a typo in a root GUID list must
// not silently change the routing (OpenSM fails the engine too). Never crashes on any input.
Result<GuidList> ParseGuidList(std::string_view text, std::string_view file_name);
Result<GuidList> LoadGuidListFile(const std::string& path);

struct Guid2LidEntry {
  Guid guid;
  Lid min_lid;
  Lid max_lid;
  bool operator==(const Guid2LidEntry&) const = default;
};

struct Guid2LidLoad {
  std::vector<Guid2LidEntry> entries;  // file order
  std::vector<Diagnostic> warnings;    // one per skipped line
};

// OpenSM's guid2lid file: lines "0xGUID 0xMINLID 0xMAXLID". OpenSM throws the whole file
// away on one bad line, which costs every LID; ibsm skips the bad line with a warning
// (CONF-020 malformed or not a unicast range, CONF-021 range overlaps an earlier line,
// CONF-022 GUID already listed) and keeps the rest.
Guid2LidLoad ParseGuid2Lid(std::string_view text, std::string_view file_name);
// NotFound when the file does not exist (a first start), IoError when unreadable.
Result<Guid2LidLoad> LoadGuid2LidFile(const std::string& path);

// OpenSM's format, one line per entry in the order given: "0x0002c90300000011 0x1 0x1".
std::string WriteGuid2Lid(const std::vector<Guid2LidEntry>& entries);
// Written to PATH.tmp, fsynced, renamed over PATH.
Status SaveGuid2LidFile(const std::string& path, const std::vector<Guid2LidEntry>& entries);

}  // namespace ibsm::conf
