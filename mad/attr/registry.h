// Attribute registry: from (management class, attribute ID) to the layout that describes the
// payload, for trace logs and fuzzing. Every input is untrusted: any bytes of any length give
// text, never a crash.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ibsm::mad {

// The layout name ("PortInfo") for a known attribute of `mgmt_class`, or "" if none.
std::string_view AttributeName(uint8_t mgmt_class, uint16_t attr_id);

// Dump() text of the matching layout. A known attribute whose payload is too short gives
// the decode error and a hex dump; an unknown one gives "unknown attribute 0x.... (class
// 0x..), N bytes" and a hex dump. For a generic Notice the trap's data details follow.
std::string DumpAttribute(uint8_t mgmt_class, uint16_t attr_id, std::span<const uint8_t> data);

// 16 bytes per line, offset first: "0000: 01 02 ...". At most `max_bytes` are shown.
std::string HexDump(std::span<const uint8_t> data, size_t max_bytes = 512);

}  // namespace ibsm::mad
