// The table-driven wire codec. Each attribute layout is declared once as a
// constexpr table of fields at the spec's bit offsets; EncodeTo, DecodeFrom and Dump below are
// the only code that turns wire bytes into values. No hand-written shifts elsewhere.
//
// Bit numbering follows the IBA spec's layout figures: bit offset 0 is the most significant
// bit of byte 0, fields are big-endian, and a field of width w at offset o covers bits
// o .. o+w-1 in that order.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.h"

namespace ibsm::mad {

// Reads `width` (1..64) bits at `bit_offset`. REQUIRES: the bits lie inside `buf`.
uint64_t GetBits(std::span<const uint8_t> buf, uint32_t bit_offset, uint32_t width);
// Writes the low `width` bits of `value`; other bits of `buf` are untouched.
void SetBits(std::span<uint8_t> buf, uint32_t bit_offset, uint32_t width, uint64_t value);

enum class FieldFormat : uint8_t {
  kUint,    // decimal
  kHex,     // 0x-prefixed, width-padded
  kGuid,    // 0x%016x
  kString,  // array of bytes shown as NUL-terminated text
  kBytes,   // array shown as hex bytes
};

// One field of struct S. Arrays (count > 1) place element i at bit_offset + i * stride.
template <typename S>
struct Field {
  std::string_view name;
  uint32_t bit_offset;
  uint16_t bit_width;
  uint16_t count;
  uint32_t stride;
  FieldFormat format;
  uint64_t (*get)(const S&, size_t index);
  void (*set)(S&, size_t index, uint64_t value);
  // A byte array laid out byte for byte (8-bit elements 8 bits apart, on a byte boundary:
  // DR paths, SMP data, LFT blocks): copied whole instead of element by element. Null for
  // every other field. Same bytes either way (field_test.cc checks both).
  void (*get_bytes)(const S&, uint8_t* out) = nullptr;
  void (*set_bytes)(S&, const uint8_t* in) = nullptr;
};

namespace detail {
template <typename T>
struct MemberTraits;
template <typename C, typename M>
struct MemberTraits<M C::*> {
  using Class = C;
  using Member = M;
};
template <typename T>
struct ArrayElem {
  using type = void;
};
template <typename T, size_t N>
struct ArrayElem<std::array<T, N>> {
  using type = T;
  static constexpr size_t size = N;
};
}  // namespace detail

// A scalar field bound to data member `M` (an integral or enum member).
template <auto M>
constexpr Field<typename detail::MemberTraits<decltype(M)>::Class> F(
    std::string_view name, uint32_t bit_offset, uint16_t bit_width,
    FieldFormat format = FieldFormat::kUint) {
  using C = typename detail::MemberTraits<decltype(M)>::Class;
  using T = typename detail::MemberTraits<decltype(M)>::Member;
  static_assert(std::is_integral_v<T> || std::is_enum_v<T>, "scalar field needs an integer");
  return Field<C>{name,
                  bit_offset,
                  bit_width,
                  1,
                  0,
                  format,
                  [](const C& s, size_t) { return static_cast<uint64_t>(s.*M); },
                  [](C& s, size_t, uint64_t v) { s.*M = static_cast<T>(v); }};
}

// An array field bound to std::array member `M`: `count` elements `stride` bits apart.
template <auto M>
constexpr Field<typename detail::MemberTraits<decltype(M)>::Class> A(
    std::string_view name, uint32_t bit_offset, uint16_t bit_width, uint32_t stride,
    FieldFormat format = FieldFormat::kUint) {
  using C = typename detail::MemberTraits<decltype(M)>::Class;
  using Arr = typename detail::MemberTraits<decltype(M)>::Member;
  using T = typename detail::ArrayElem<Arr>::type;
  static_assert(!std::is_void_v<T>, "array field needs a std::array member");
  Field<C> f{name,
             bit_offset,
             bit_width,
             static_cast<uint16_t>(detail::ArrayElem<Arr>::size),
             stride,
             format,
             [](const C& s, size_t i) { return static_cast<uint64_t>((s.*M)[i]); },
             [](C& s, size_t i, uint64_t v) { (s.*M)[i] = static_cast<T>(v); }};
  if constexpr (std::is_same_v<T, uint8_t>) {
    if (bit_width == 8 && stride == 8 && bit_offset % 8 == 0) {
      f.get_bytes = [](const C& s, uint8_t* out) {
        std::copy((s.*M).begin(), (s.*M).end(), out);
      };
      f.set_bytes = [](C& s, const uint8_t* in) {
        std::copy(in, in + detail::ArrayElem<Arr>::size, (s.*M).begin());
      };
    }
  }
  return f;
}

// Every attribute type specialises Layout<S> with:
//   static constexpr std::string_view kName;   // "NodeInfo"
//   static constexpr size_t kSize;             // bytes on the wire
//   static constexpr std::array<Field<S>, N> kFields;
template <typename S>
struct Layout;

// Compile-time checks a layout must pass: every field inside kSize, widths 1..64, and no two
// fields overlapping. Use as static_assert(LayoutIsValid<S>()).
template <typename S>
constexpr bool LayoutIsValid() {
  constexpr auto& f = Layout<S>::kFields;
  constexpr size_t bits = Layout<S>::kSize * 8;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i].bit_width == 0 || f[i].bit_width > 64 || f[i].count == 0) return false;
    if (f[i].count > 1 && f[i].stride < f[i].bit_width) return false;
    size_t end = f[i].bit_offset + (f[i].count - 1) * size_t{f[i].stride} + f[i].bit_width;
    if (end > bits) return false;
  }
  for (size_t i = 0; i < f.size(); ++i) {
    for (size_t j = i + 1; j < f.size(); ++j) {
      // Arrays are checked by their overall extent; interleaved arrays are not used.
      size_t ai = f[i].bit_offset, bi = ai + (f[i].count - 1) * size_t{f[i].stride} + f[i].bit_width;
      size_t aj = f[j].bit_offset, bj = aj + (f[j].count - 1) * size_t{f[j].stride} + f[j].bit_width;
      if (ai < bj && aj < bi) return false;
    }
  }
  return true;
}

// Writes `s` into the first Layout<S>::kSize bytes of `out`; reserved bits are zero.
// REQUIRES: out.size() >= Layout<S>::kSize.
template <typename S>
void EncodeTo(const S& s, std::span<uint8_t> out) {
  constexpr size_t n = Layout<S>::kSize;
  std::fill(out.begin(), out.begin() + n, uint8_t{0});
  for (const auto& f : Layout<S>::kFields) {
    if (f.get_bytes) {
      f.get_bytes(s, out.data() + f.bit_offset / 8);
      continue;
    }
    for (size_t i = 0; i < f.count; ++i)
      SetBits(out, f.bit_offset + static_cast<uint32_t>(i * f.stride), f.bit_width, f.get(s, i));
  }
}

// Reads `s` from `in`. Corrupt if `in` is shorter than the layout. Reserved bits are ignored.
template <typename S>
Status DecodeFrom(std::span<const uint8_t> in, S* s) {
  constexpr size_t n = Layout<S>::kSize;
  if (in.size() < n) {
    return Corrupt(std::string(Layout<S>::kName) + " needs " + std::to_string(n) +
                   " bytes, got " + std::to_string(in.size()));
  }
  for (const auto& f : Layout<S>::kFields) {
    if (f.set_bytes) {
      f.set_bytes(*s, in.data() + f.bit_offset / 8);
      continue;
    }
    for (size_t i = 0; i < f.count; ++i)
      f.set(*s, i, GetBits(in, f.bit_offset + static_cast<uint32_t>(i * f.stride), f.bit_width));
  }
  return Status::Ok();
}

template <typename S>
Result<S> Decode(std::span<const uint8_t> in) {
  S s{};
  IBSM_RETURN_IF_ERROR(DecodeFrom(in, &s));
  return s;
}

// Looks a field up by name; nullptr if the layout has none.
template <typename S>
const Field<S>* FindField(std::string_view name) {
  for (const auto& f : Layout<S>::kFields)
    if (f.name == name) return &f;
  return nullptr;
}

// Formats one field's value (all elements for an array) as Dump prints it.
std::string FormatValue(FieldFormat format, uint16_t width, const uint64_t* values, size_t count);

// "NodeInfo\n  base_version ........ 1\n ..." one line per field, in table order.
template <typename S>
std::string Dump(const S& s) {
  std::string out(Layout<S>::kName);
  out += '\n';
  uint64_t vals[512];
  for (const auto& f : Layout<S>::kFields) {
    size_t c = f.count < 512 ? f.count : 512;
    for (size_t i = 0; i < c; ++i) vals[i] = f.get(s, i);
    out += "  ";
    out += f.name;
    out.append(f.name.size() < 28 ? 28 - f.name.size() : 1, '.');
    out += ' ';
    out += FormatValue(f.format, f.bit_width, vals, c);
    out += '\n';
  }
  return out;
}

}  // namespace ibsm::mad
