// InformInfo (IBA 13.4.8.3, attribute 0x0003): an event subscription a port sends to the SA
// with SubnAdmSet, and InformInfoRecord (15.2.5.12, SA attribute 0x00F3), the SA's record of
// one subscription.
//
// InformInfo has a generic form (IsGeneric = 1: TrapNumber, ProducerType) and a vendor form
// (IsGeneric = 0: DeviceID, VendorID) sharing the same bits, as Notice does; the fields are
// named for both. The layout is 36 bytes; an InformInfoRecord carries it at byte 24 after
// the subscriber's GID and Enum, 60 bytes in all, padded to 64 in a GetTable (as OpenSM's
// ib_inform_info_record_t is). libibmad describes neither, so inform_info_test.cc checks
// the offsets against OpenSM's include/iba/ib_types.h structs. Numbers here are frozen wire
// values.
#pragma once

#include <array>
#include <cstdint>

#include "mad/attr/sa_records.h"
#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

// Wildcards of a subscription (13.4.8.3): every value of the field matches.
inline constexpr uint16_t kInformAllLids = 0xFFFF;        // LIDRangeBegin: every end port
inline constexpr uint16_t kInformAnyType = 0xFFFF;        // Type
inline constexpr uint16_t kInformAnyTrap = 0xFFFF;        // TrapNumber / DeviceID
inline constexpr uint32_t kInformAnyProducer = 0xFFFFFF;  // ProducerType / VendorID

struct InformInfo {
  static constexpr uint16_t kAttrId = attr::kInformInfo;
  std::array<uint8_t, 16> gid{};  // network order: prefix, then port GUID; 0 = use LID range
  uint16_t lid_range_begin = 0;
  uint16_t lid_range_end = 0;
  uint8_t is_generic = 0;
  uint8_t subscribe = 0;  // 1 subscribe, 0 unsubscribe
  uint16_t type = 0;      // NoticeType, or kInformAnyType
  uint16_t trap_number_or_device_id = 0;
  uint32_t qpn = 0;              // 24 bits: where Reports go
  uint8_t resp_time_value = 0;   // 5 bits
  uint32_t producer_type_or_vendor_id = 0;  // 24 bits

  bool operator==(const InformInfo&) const = default;
};

template <>
struct Layout<InformInfo> {
  static constexpr std::string_view kName = "InformInfo";
  static constexpr size_t kSize = 36;
  static constexpr std::array kFields = {
      A<&InformInfo::gid>("gid", 0, 8, 8, FieldFormat::kBytes),
      F<&InformInfo::lid_range_begin>("lid_range_begin", 128, 16),
      F<&InformInfo::lid_range_end>("lid_range_end", 144, 16),
      F<&InformInfo::is_generic>("is_generic", 176, 8),
      F<&InformInfo::subscribe>("subscribe", 184, 8),
      F<&InformInfo::type>("type", 192, 16, FieldFormat::kHex),
      F<&InformInfo::trap_number_or_device_id>("trap_number_or_device_id", 208, 16),
      F<&InformInfo::qpn>("qpn", 224, 24, FieldFormat::kHex),
      F<&InformInfo::resp_time_value>("resp_time_value", 251, 5),
      F<&InformInfo::producer_type_or_vendor_id>("producer_type_or_vendor_id", 264, 24,
                                                 FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<InformInfo>());

struct InformInfoRecord {
  std::array<uint8_t, 16> subscriber_gid{};
  uint16_t enum_ = 0;  // distinguishes several subscriptions of one subscriber
  InformInfo inform_info;
};

template <>
struct Layout<InformInfoRecord> {
  static constexpr std::string_view kName = "InformInfoRecord";
  static constexpr size_t kSize = 60;
  static constexpr std::array kFields = {
      A<&InformInfoRecord::subscriber_gid>("subscriber_gid", 0, 8, 8, FieldFormat::kBytes),
      F<&InformInfoRecord::enum_>("enum", 128, 16),
  };
};

template <>
struct SaRecord<InformInfoRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kInformInfoRecord;
  static constexpr uint16_t kAttrOffset = 8;  // 60 bytes padded to 64 as OpenSM sends
  static constexpr std::array kEmbedded = {E<&InformInfoRecord::inform_info>(24)};
  // Component numbers as OpenSM's IB_IIR_COMPMASK_* (0..15); reserved ranges keep theirs.
  static constexpr std::array kComponents = {
      K("subscriber_gid", 0, 128),
      K("enum", 128, 16),
      K("reserved", 144, 48),
      C<InformInfo>("gid", 24),
      C<InformInfo>("lid_range_begin", 24),
      C<InformInfo>("lid_range_end", 24),
      K("reserved", 24 * 8 + 160, 16),
      C<InformInfo>("is_generic", 24),
      C<InformInfo>("subscribe", 24),
      C<InformInfo>("type", 24),
      C<InformInfo>("trap_number_or_device_id", 24),
      C<InformInfo>("qpn", 24),
      K("reserved", 24 * 8 + 248, 3),
      C<InformInfo>("resp_time_value", 24),
      K("reserved", 24 * 8 + 256, 8),
      C<InformInfo>("producer_type_or_vendor_id", 24),
  };
};
static_assert(RecordIsValid<InformInfoRecord>());

// Component numbers the SA server needs by name.
namespace iir_comp {
inline constexpr uint64_t kSubscriberGid = 1ull << 0;
inline constexpr uint64_t kEnum = 1ull << 1;
}  // namespace iir_comp

}  // namespace ibsm::mad
