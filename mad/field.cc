#include "mad/field.h"

#include <fmt/format.h>

namespace ibsm::mad {

uint64_t GetBits(std::span<const uint8_t> buf, uint32_t bit_offset, uint32_t width) {
  uint64_t v = 0;
  if (((bit_offset | width) & 7u) == 0) {
    // Byte-aligned fast path (most header fields, DR paths, attribute arrays): same result
    // as the bit loop below, a byte per step instead of a bit-run per step.
    const uint8_t* p = buf.data() + bit_offset / 8;
    for (uint32_t i = 0; i < width / 8; ++i) v = (v << 8) | p[i];
    return v;
  }
  uint32_t bit = bit_offset;
  uint32_t left = width;
  while (left > 0) {
    uint32_t byte = bit / 8;
    uint32_t in_byte = bit % 8;           // 0 = MSB
    uint32_t take = std::min(8 - in_byte, left);
    uint32_t shift = 8 - in_byte - take;  // from the LSB of this byte
    uint64_t part = (buf[byte] >> shift) & ((1u << take) - 1);
    v = (v << take) | part;
    bit += take;
    left -= take;
  }
  return v;
}

void SetBits(std::span<uint8_t> buf, uint32_t bit_offset, uint32_t width, uint64_t value) {
  if (((bit_offset | width) & 7u) == 0) {
    uint8_t* p = buf.data() + bit_offset / 8;
    for (uint32_t i = width / 8; i > 0; --i) {
      p[i - 1] = static_cast<uint8_t>(value);
      value >>= 8;
    }
    return;
  }
  uint32_t bit = bit_offset + width;  // write from the least significant end
  uint32_t left = width;
  while (left > 0) {
    uint32_t end = bit;  // exclusive
    uint32_t byte = (end - 1) / 8;
    uint32_t end_in_byte = (end - 1) % 8 + 1;  // bits used in this byte, from MSB
    uint32_t take = std::min(end_in_byte, left);
    uint32_t shift = 8 - end_in_byte;
    uint8_t mask = static_cast<uint8_t>(((1u << take) - 1) << shift);
    buf[byte] = static_cast<uint8_t>((buf[byte] & ~mask) | ((value << shift) & mask));
    value >>= take;
    bit -= take;
    left -= take;
  }
}

std::string FormatValue(FieldFormat format, uint16_t width, const uint64_t* values,
                        size_t count) {
  switch (format) {
    case FieldFormat::kString: {
      std::string s;
      for (size_t i = 0; i < count && values[i] != 0; ++i) {
        char c = static_cast<char>(values[i]);
        s += (c >= 0x20 && c < 0x7f) ? c : '.';
      }
      return s;
    }
    case FieldFormat::kBytes: {
      std::string s;
      for (size_t i = 0; i < count; ++i) s += fmt::format("{:02x}", values[i]);
      return s;
    }
    default:
      break;
  }
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    if (i) out += ' ';
    switch (format) {
      case FieldFormat::kHex:
        out += fmt::format("0x{:0{}x}", values[i], (width + 3) / 4);
        break;
      case FieldFormat::kGuid:
        out += fmt::format("{:#018x}", values[i]);
        break;
      default:
        out += std::to_string(values[i]);
    }
  }
  return out;
}

}  // namespace ibsm::mad
