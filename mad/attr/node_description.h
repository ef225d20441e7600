// NodeDescription (IBA 14.2.5.2), attribute 0x0010: 64 bytes of UTF-8, NUL-padded.
#pragma once

#include <string>

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

struct NodeDescription {
  static constexpr uint16_t kAttrId = attr::kNodeDescription;
  std::array<uint8_t, 64> text{};

  // The text up to the first NUL.
  std::string str() const;
  // Truncates to 64 bytes.
  static NodeDescription From(std::string_view s);
};

template <>
struct Layout<NodeDescription> {
  static constexpr std::string_view kName = "NodeDescription";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&NodeDescription::text>("text", 0, 8, 8, FieldFormat::kString),
  };
};
static_assert(LayoutIsValid<NodeDescription>());

inline std::string NodeDescription::str() const {
  size_t n = 0;
  while (n < text.size() && text[n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(text.data()), n);
}

inline NodeDescription NodeDescription::From(std::string_view s) {
  NodeDescription d;
  for (size_t i = 0; i < s.size() && i < d.text.size(); ++i) d.text[i] = static_cast<uint8_t>(s[i]);
  return d;
}

}  // namespace ibsm::mad
