// JSON text out of the daemon and the tools. nlohmann's plain dump() throws
// (type_error.316) on a string that is not UTF-8, and strings here carry bytes from the
// fabric (NodeDescriptions): every dump goes through DumpJson, which writes U+FFFD for
// such bytes (base/text.h ValidUtf8 gives the same text) and never throws.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ibsm {

inline std::string DumpJson(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ibsm
