#include "conf/diagnostic.h"

#include <fmt/format.h>

namespace ibsm::conf {

std::string Diagnostic::ToString() const {
  if (line > 0) return fmt::format("{}:{}: {} {}", file, line, id, message);
  return fmt::format("{}: {} {}", file, id, message);
}

std::string Printable(std::string_view bytes, size_t max_len) {
  std::string out;
  for (unsigned char c : bytes) {
    if (out.size() >= max_len) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

}  // namespace ibsm::conf
