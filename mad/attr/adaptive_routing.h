// Adaptive routing SMP attributes (vendor class range, ar-sharp.md "Adaptive routing"):
// AdaptiveRoutingInfo 0xFF20, ARGroupTable 0xFF21, ARLinearForwardingTable_SX 0xFF23 and
// ARGroupTableCopy 0xFFBD. Byte offsets are the facts page's; where no public source fixes an
// encoding (modifiers, port-mask bit order) this is "ibsm encoding v1", kept here so a
// hardware quirk changes one place.
//
// ARLFT entries and copy ranges are 4-byte records repeated 16 times; the codec's arrays do
// not interleave, so each record is its own 4-byte layout (as the modifiers are) and the block
// holds the raw words.
#pragma once

#include <array>
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "mad/attr/modifiers.h"
#include "mad/field.h"

namespace ibsm::mad {

namespace attr {
inline constexpr uint16_t kArInfo = 0xFF20;
inline constexpr uint16_t kArGroupTable = 0xFF21;
inline constexpr uint16_t kArLinearForwardingTable = 0xFF23;
inline constexpr uint16_t kArGroupTableCopy = 0xFFBD;
}  // namespace attr

// ---- AdaptiveRoutingInfo (bytes 0-19 decoded; 20-35 carried as read) ----
inline constexpr size_t kArInfoUnmanagedFirst = 20;
inline constexpr size_t kArInfoUnmanagedBytes = 64 - kArInfoUnmanagedFirst;

struct ArInfo {
  static constexpr uint16_t kAttrId = attr::kArInfo;
  uint8_t dyn_cap_calc_sup = 0;    // byte 0 bit 6
  uint8_t by_transport_cap = 0;    // byte 0 bit 5: by_transport_disable means something
  uint8_t by_sl_enabled = 0;       // byte 0 bit 4
  uint8_t by_sl_cap = 0;           // byte 0 bit 3
  uint8_t glb_groups = 0;          // byte 0 bit 2
  uint8_t is4_mode = 0;            // byte 0 bit 1
  uint8_t no_fallback = 0;         // byte 0 bit 0: LFT Set keeps AR on when 1
  uint8_t num_directions = 0;      // byte 1
  uint8_t group_table_copy_sup = 0;  // byte 2 bits 7-4
  uint8_t sub_grps_active = 0;     // byte 2 bits 3-0
  uint8_t rn_xmit_enabled = 0;     // byte 3 bit 5
  uint8_t fr_enabled = 0;          // byte 3 bit 4
  uint8_t fr_sup = 0;              // byte 3 bit 3
  uint8_t frn_sup = 0;             // byte 3 bit 2
  uint8_t arn_sup = 0;             // byte 3 bit 1
  uint8_t e = 0;                   // byte 3 bit 0: AR enabled (read/write)
  uint8_t string_width_cap = 0;    // bytes 4-7 bits 31-28
  uint8_t group_table_cap = 0;     // bits 27-24
  uint16_t group_top = 0;          // bits 23-12: highest group in use
  uint16_t group_cap = 0;          // bits 11-0: groups supported; 0 = no AR
  uint16_t enable_by_sl_mask = 0;  // bytes 8-9
  uint8_t rn_version_cap = 0;      // byte 11 bits 7-4
  uint8_t ar_version_cap = 0;      // byte 11 bits 3-0
  uint8_t by_transport_disable = 0;  // byte 15 bits 3-0: bit 0 UD, 1 RC, 2 UC, 3 DC
  uint32_t ageing_time = 0;        // bytes 16-19, microseconds (bounded mode burst end)
  // Bytes 20-63: hash-based forwarding, pFRN and by-VL capabilities and enables (byte 20
  // cap_fields1, 22 enable_features1, 24, 26-27) that ibsm does not manage; kept so a Set
  // carries back what the switch answered (docs/ar-sharp.md "Attributes").
  std::array<uint8_t, kArInfoUnmanagedBytes> unmanaged{};
};

template <>
struct Layout<ArInfo> {
  using S = ArInfo;
  static constexpr std::string_view kName = "AdaptiveRoutingInfo";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      F<&S::dyn_cap_calc_sup>("dyn_cap_calc_sup", 1, 1),
      F<&S::by_transport_cap>("by_transport_cap", 2, 1),
      F<&S::by_sl_enabled>("by_sl_enabled", 3, 1),
      F<&S::by_sl_cap>("by_sl_cap", 4, 1),
      F<&S::glb_groups>("glb_groups", 5, 1),
      F<&S::is4_mode>("is4_mode", 6, 1),
      F<&S::no_fallback>("no_fallback", 7, 1),
      F<&S::num_directions>("num_directions", 8, 8),
      F<&S::group_table_copy_sup>("group_table_copy_sup", 16, 4),
      F<&S::sub_grps_active>("sub_grps_active", 20, 4),
      F<&S::rn_xmit_enabled>("rn_xmit_enabled", 26, 1),
      F<&S::fr_enabled>("fr_enabled", 27, 1),
      F<&S::fr_sup>("fr_sup", 28, 1),
      F<&S::frn_sup>("frn_sup", 29, 1),
      F<&S::arn_sup>("arn_sup", 30, 1),
      F<&S::e>("e", 31, 1),
      F<&S::string_width_cap>("string_width_cap", 32, 4),
      F<&S::group_table_cap>("group_table_cap", 36, 4),
      F<&S::group_top>("group_top", 40, 12),
      F<&S::group_cap>("group_cap", 52, 12),
      F<&S::enable_by_sl_mask>("enable_by_sl_mask", 64, 16, FieldFormat::kHex),
      F<&S::rn_version_cap>("rn_version_cap", 88, 4),
      F<&S::ar_version_cap>("ar_version_cap", 92, 4),
      F<&S::by_transport_disable>("by_transport_disable", 124, 4, FieldFormat::kHex),
      F<&S::ageing_time>("ageing_time", 128, 32),
      A<&S::unmanaged>("unmanaged", kArInfoUnmanagedFirst * 8, 8, 8, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<ArInfo>());

// What ibsm writes in an ARInfo Set; everything else is the switch's.
struct ArInfoSettings {
  uint8_t e = 0;
  uint8_t no_fallback = 0;
  uint8_t by_sl_enabled = 0;
  uint16_t enable_by_sl_mask = 0;
  uint16_t group_top = 0;
  uint8_t by_transport_disable = 0;  // written only when `read` says by-transport capable
  uint32_t ageing_time = 0;
};

// The data of an ARInfo Set as a read-modify-write of `read`, the answer to a plain Get: only
// the fields of `s` change, every other byte and reserved bit goes back as the switch gave it
// (docs/ar-sharp.md "Attributes"). by_transport_disable is left as read unless
// `by_transport_cap` (byte 0 bit 5 of the capability Get) is set.
inline std::array<uint8_t, 64> ArInfoSetData(std::span<const uint8_t, 64> read,
                                             const ArInfoSettings& s, bool by_transport_cap) {
  std::array<uint8_t, 64> out;
  std::copy(read.begin(), read.end(), out.begin());
  SetBits(out, 7, 1, s.no_fallback);
  SetBits(out, 3, 1, s.by_sl_enabled);
  SetBits(out, 31, 1, s.e);
  SetBits(out, 40, 12, s.group_top);
  SetBits(out, 64, 16, s.enable_by_sl_mask);
  if (by_transport_cap) SetBits(out, 124, 4, s.by_transport_disable);
  SetBits(out, 128, 32, s.ageing_time);
  return out;
}

// ibsm encoding v1: modifier bit 31 asks for the capabilities (a Get); 0 reads the settings.
struct ArInfoModifier {
  uint8_t get_cap = 0;
};
template <>
struct Layout<ArInfoModifier> {
  static constexpr std::string_view kName = "ArInfoAttrMod";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {F<&ArInfoModifier::get_cap>("get_cap", 0, 1)};
};
static_assert(LayoutIsValid<ArInfoModifier>());

// Transport bits as ar_transport_mask and by_transport_disable count them.
namespace ar_transport {
inline constexpr uint8_t kUd = 1 << 0;
inline constexpr uint8_t kRc = 1 << 1;
inline constexpr uint8_t kUc = 1 << 2;
inline constexpr uint8_t kDc = 1 << 3;
}  // namespace ar_transport

// ---- ARGroupTable: 2 groups x 256-bit port mask per block ----
inline constexpr size_t kArGroupsPerBlock = 2;

// A group's member ports; ibsm encoding v1: bit n of the big-endian 256-bit mask is port n,
// so port 0 is the last byte's low bit. words[0] holds ports 0-63 (the wire's last 8 bytes).
struct ArPortMask {
  std::array<uint64_t, 4> words{};

  bool Has(unsigned port) const { return port < 256 && (words[port / 64] >> (port % 64) & 1) != 0; }
  void Add(unsigned port) {
    if (port < 256) words[port / 64] |= uint64_t{1} << (port % 64);
  }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  std::vector<uint8_t> Ports() const {
    std::vector<uint8_t> out;
    for (unsigned p = 0; p < 256; ++p)
      if (Has(p)) out.push_back(static_cast<uint8_t>(p));
    return out;
  }
  friend bool operator==(const ArPortMask&, const ArPortMask&) = default;
};

struct ArGroupTable {
  static constexpr uint16_t kAttrId = attr::kArGroupTable;
  // Big-endian 64-bit words in wire order: [4g] holds group g's ports 255..192, [4g + 3]
  // ports 63..0. Use Group/SetGroup.
  std::array<uint64_t, 8> mask_word{};

  ArPortMask Group(size_t g) const {
    ArPortMask m;
    for (size_t w = 0; w < 4; ++w) m.words[w] = mask_word[g * 4 + 3 - w];
    return m;
  }
  void SetGroup(size_t g, const ArPortMask& m) {
    for (size_t w = 0; w < 4; ++w) mask_word[g * 4 + 3 - w] = m.words[w];
  }
};

template <>
struct Layout<ArGroupTable> {
  static constexpr std::string_view kName = "ARGroupTable";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&ArGroupTable::mask_word>("sub_group_mask", 0, 64, 64, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<ArGroupTable>());

// ibsm encoding v1: bits 19-16 table, 15-0 block (groups 2 * block and 2 * block + 1).
struct ArGroupTableModifier {
  uint8_t table = 0;
  uint16_t block = 0;
};
template <>
struct Layout<ArGroupTableModifier> {
  static constexpr std::string_view kName = "ARGroupTableAttrMod";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {F<&ArGroupTableModifier::table>("table", 12, 4),
                                         F<&ArGroupTableModifier::block>("block", 16, 16)};
};
static_assert(LayoutIsValid<ArGroupTableModifier>());

// ---- ARLinearForwardingTable_SX: 16 LIDs x 4 bytes per block ----
inline constexpr size_t kArLftBlockSize = 16;

// 3 is hash-based forwarding (HBF): the port is picked by a flow hash over the group.
enum class ArLidState : uint8_t { kBounded = 0, kFree = 1, kStatic = 2, kHashBased = 3 };

struct ArLftEntry {
  uint8_t lid_state = static_cast<uint8_t>(ArLidState::kStatic);  // byte 0 bits 7-6
  uint8_t table_number = 0;  // byte 0 bits 3-0
  uint8_t default_port = 0;  // byte 1: the static route, used while AR is off
  uint16_t group_number = 0;  // bytes 2-3 bits 11-0; the port for a static entry
  friend bool operator==(const ArLftEntry&, const ArLftEntry&) = default;
};
template <>
struct Layout<ArLftEntry> {
  using S = ArLftEntry;
  static constexpr std::string_view kName = "ARLFTEntry";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {
      F<&S::lid_state>("lid_state", 0, 2),
      F<&S::table_number>("table_number", 4, 4),
      F<&S::default_port>("default_port", 8, 8),
      F<&S::group_number>("group_number", 20, 12),
  };
};
static_assert(LayoutIsValid<ArLftEntry>());

struct ArLinearForwardingTable {
  static constexpr uint16_t kAttrId = attr::kArLinearForwardingTable;
  std::array<uint32_t, kArLftBlockSize> entry_word{};  // use Entry/SetEntry

  ArLftEntry Entry(size_t i) const { return DecodeModifier<ArLftEntry>(entry_word[i]); }
  void SetEntry(size_t i, const ArLftEntry& e) { entry_word[i] = EncodeModifier(e); }
};
template <>
struct Layout<ArLinearForwardingTable> {
  static constexpr std::string_view kName = "ARLinearForwardingTable_SX";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&ArLinearForwardingTable::entry_word>("entry", 0, 32, 32, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<ArLinearForwardingTable>());

// ibsm encoding v1: bits 15-0 = LID block (LIDs 16 * block .. 16 * block + 15).
struct ArLftModifier {
  uint16_t block = 0;
};
template <>
struct Layout<ArLftModifier> {
  static constexpr std::string_view kName = "ARLFTAttrMod";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {F<&ArLftModifier::block>("block", 16, 16)};
};
static_assert(LayoutIsValid<ArLftModifier>());

// ---- ARGroupTableCopy: copy one group into up to 16 ranges of groups ----
inline constexpr size_t kArCopyRanges = 16;

struct ArCopyRange {
  uint16_t last = 0;   // bytes 0-1
  uint16_t first = 0;  // bytes 2-3; a range with first > last (or both 0) is unused
  friend bool operator==(const ArCopyRange&, const ArCopyRange&) = default;
};
template <>
struct Layout<ArCopyRange> {
  static constexpr std::string_view kName = "ARCopyRange";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {F<&ArCopyRange::last>("last", 0, 16),
                                         F<&ArCopyRange::first>("first", 16, 16)};
};
static_assert(LayoutIsValid<ArCopyRange>());

struct ArGroupTableCopy {
  static constexpr uint16_t kAttrId = attr::kArGroupTableCopy;
  std::array<uint32_t, kArCopyRanges> range_word{};  // use Range/SetRange

  ArCopyRange Range(size_t i) const { return DecodeModifier<ArCopyRange>(range_word[i]); }
  void SetRange(size_t i, const ArCopyRange& r) { range_word[i] = EncodeModifier(r); }
};
template <>
struct Layout<ArGroupTableCopy> {
  static constexpr std::string_view kName = "ARGroupTableCopy";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      A<&ArGroupTableCopy::range_word>("range", 0, 32, 32, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<ArGroupTableCopy>());

// Modifier bits 11-0: the source group.
struct ArGroupTableCopyModifier {
  uint16_t source_group = 0;
};
template <>
struct Layout<ArGroupTableCopyModifier> {
  static constexpr std::string_view kName = "ARGroupTableCopyAttrMod";
  static constexpr size_t kSize = 4;
  static constexpr std::array kFields = {
      F<&ArGroupTableCopyModifier::source_group>("source_group", 20, 12)};
};
static_assert(LayoutIsValid<ArGroupTableCopyModifier>());

inline uint32_t ArGroupTableAttrMod(uint32_t block, uint32_t table = 0) {
  return EncodeModifier(
      ArGroupTableModifier{static_cast<uint8_t>(table), static_cast<uint16_t>(block)});
}
inline uint32_t ArLftAttrMod(uint32_t block) {
  return EncodeModifier(ArLftModifier{static_cast<uint16_t>(block)});
}
inline uint32_t ArGroupTableCopyAttrMod(uint32_t source_group) {
  return EncodeModifier(ArGroupTableCopyModifier{static_cast<uint16_t>(source_group)});
}

}  // namespace ibsm::mad
