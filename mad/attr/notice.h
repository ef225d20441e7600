// Notice (IBA 14.2.5.1 for SMPs, 13.4.8.2 as the SA's Report payload), attribute 0x0002.
// The layout is 80 bytes; an SMP Trap carries only the first 64 (no issuer_gid), so SMP
// traffic goes through EncodeSmpNotice / DecodeSmpNotice.
//
// The 54-byte data_details depend on the trap number (IBA 14.2.5.1 table "Notice DataDetails
// for generic traps"); each variant is its own struct with a Layout over those 54 bytes,
// read and written through TrapDetails / SetTrapDetails, never by hand.
#pragma once

#include <cstring>

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

inline constexpr size_t kNoticeDataDetailsSize = 54;
inline constexpr size_t kSmpNoticeSize = 64;

// Notice type (IsGeneric = 1).
enum class NoticeType : uint8_t {
  kFatal = 0,
  kUrgent = 1,
  kSecurity = 2,
  kSubnetManagement = 3,
  kInfo = 4,
  kEmpty = 0x7F,
};

// ProducerType of generic notices: the node type, or 4 for a class manager (the SM).
namespace producer {
inline constexpr uint32_t kCa = 1;
inline constexpr uint32_t kSwitch = 2;
inline constexpr uint32_t kRouter = 3;
inline constexpr uint32_t kClassManager = 4;
}  // namespace producer

namespace trap {
inline constexpr uint16_t kGidInService = 64;
inline constexpr uint16_t kGidOutOfService = 65;
inline constexpr uint16_t kMcastGroupCreated = 66;
inline constexpr uint16_t kMcastGroupDeleted = 67;
inline constexpr uint16_t kLinkStateChanged = 128;
inline constexpr uint16_t kLinkIntegrityThreshold = 129;
inline constexpr uint16_t kBufferOverrunThreshold = 130;
inline constexpr uint16_t kWatchdogTimerExpired = 131;
inline constexpr uint16_t kLocalChanges = 144;
inline constexpr uint16_t kSystemImageGuidChanged = 145;
inline constexpr uint16_t kBadMKey = 256;
inline constexpr uint16_t kBadPKey = 257;
inline constexpr uint16_t kBadQKey = 258;
inline constexpr uint16_t kSwitchBadPKey = 259;
}  // namespace trap

// Trap 144 change_flags (IBA 14.2.5.1; bit 0 the LSB).
namespace trap144_flag {
inline constexpr uint16_t kNodeDescriptionChange = 1u << 0;
inline constexpr uint16_t kLinkWidthEnabledChange = 1u << 1;
inline constexpr uint16_t kLinkSpeedEnabledChange = 1u << 2;
inline constexpr uint16_t kSmPriorityChange = 1u << 3;
inline constexpr uint16_t kHierarchyInfoChange = 1u << 4;
inline constexpr uint16_t kCapabilityMask2Change = 1u << 5;
}  // namespace trap144_flag

struct Notice {
  static constexpr uint16_t kAttrId = attr::kNotice;
  uint8_t is_generic = 1;
  uint8_t type = 0;                         // NoticeType when generic; 7 bits
  uint32_t producer_type_or_vendor_id = 0;  // 24 bits
  uint16_t trap_number_or_device_id = 0;
  uint16_t issuer_lid = 0;
  uint8_t notice_toggle = 0;
  uint16_t notice_count = 0;  // 15 bits
  std::array<uint8_t, kNoticeDataDetailsSize> data_details{};
  std::array<uint8_t, 16> issuer_gid{};
};

template <>
struct Layout<Notice> {
  static constexpr std::string_view kName = "Notice";
  static constexpr size_t kSize = 80;
  static constexpr std::array kFields = {
      F<&Notice::is_generic>("is_generic", 0, 1),
      F<&Notice::type>("type", 1, 7),
      F<&Notice::producer_type_or_vendor_id>("producer_type_or_vendor_id", 8, 24,
                                             FieldFormat::kHex),
      F<&Notice::trap_number_or_device_id>("trap_number_or_device_id", 32, 16),
      F<&Notice::issuer_lid>("issuer_lid", 48, 16),
      F<&Notice::notice_toggle>("notice_toggle", 64, 1),
      F<&Notice::notice_count>("notice_count", 65, 15),
      A<&Notice::data_details>("data_details", 80, 8, 8, FieldFormat::kBytes),
      A<&Notice::issuer_gid>("issuer_gid", 512, 8, 8, FieldFormat::kBytes),
  };
};
static_assert(LayoutIsValid<Notice>());

// ---- Data details, bit offsets relative to the first byte of data_details. ----

// Traps 64-67: the GID that came into/went out of service, or the multicast group.
struct Trap64Details {
  std::array<uint8_t, 16> gid{};
};
template <>
struct Layout<Trap64Details> {
  static constexpr std::string_view kName = "Trap64Details";
  static constexpr size_t kSize = kNoticeDataDetailsSize;
  static constexpr std::array kFields = {
      A<&Trap64Details::gid>("gid", 48, 8, 8, FieldFormat::kBytes),
  };
};
static_assert(LayoutIsValid<Trap64Details>());

// Trap 128: link state of at least one port of the switch at `lid` changed.
struct Trap128Details {
  uint16_t lid = 0;
};
template <>
struct Layout<Trap128Details> {
  static constexpr std::string_view kName = "Trap128Details";
  static constexpr size_t kSize = kNoticeDataDetailsSize;
  static constexpr std::array kFields = {
      F<&Trap128Details::lid>("lid", 0, 16),
  };
};
static_assert(LayoutIsValid<Trap128Details>());

// Traps 129-131: error threshold / watchdog on port `port_num` of the node at `lid`.
struct Trap129Details {
  uint16_t lid = 0;
  uint8_t port_num = 0;
};
template <>
struct Layout<Trap129Details> {
  static constexpr std::string_view kName = "Trap129Details";
  static constexpr size_t kSize = kNoticeDataDetailsSize;
  static constexpr std::array kFields = {
      F<&Trap129Details::lid>("lid", 16, 16),
      F<&Trap129Details::port_num>("port_num", 32, 8),
  };
};
static_assert(LayoutIsValid<Trap129Details>());

// Trap 144: CapabilityMask, NodeDescription, link width/speed enabled, ... changed at `lid`.
struct Trap144Details {
  uint16_t lid = 0;
  uint8_t local_changes = 0;  // 1: a change not covered by change_flags
  uint32_t capability_mask = 0;
  uint16_t change_flags = 0;  // trap144_flag
  uint16_t capability_mask2 = 0;
};
template <>
struct Layout<Trap144Details> {
  static constexpr std::string_view kName = "Trap144Details";
  static constexpr size_t kSize = kNoticeDataDetailsSize;
  static constexpr std::array kFields = {
      F<&Trap144Details::lid>("lid", 16, 16),
      F<&Trap144Details::local_changes>("local_changes", 47, 1),
      F<&Trap144Details::capability_mask>("capability_mask", 48, 32, FieldFormat::kHex),
      F<&Trap144Details::change_flags>("change_flags", 80, 16, FieldFormat::kHex),
      F<&Trap144Details::capability_mask2>("capability_mask2", 96, 16, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<Trap144Details>());

// Trap 145: SystemImageGUID of the node at `lid` changed.
struct Trap145Details {
  uint16_t lid = 0;
  uint64_t system_image_guid = 0;
};
template <>
struct Layout<Trap145Details> {
  static constexpr std::string_view kName = "Trap145Details";
  static constexpr size_t kSize = kNoticeDataDetailsSize;
  static constexpr std::array kFields = {
      F<&Trap145Details::lid>("lid", 16, 16),
      F<&Trap145Details::system_image_guid>("system_image_guid", 48, 64, FieldFormat::kGuid),
  };
};
static_assert(LayoutIsValid<Trap145Details>());

// Trap 256: bad M_Key. The DR fields describe the offending SMP when it was directed-route.
struct Trap256Details {
  uint16_t lid = 0;
  uint16_t dr_slid = 0;
  uint8_t method = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;
  uint64_t m_key = 0;
  uint8_t dr_notice = 0;
  uint8_t dr_path_truncated = 0;
  uint8_t dr_hop_count = 0;  // 6 bits
  std::array<uint8_t, 30> dr_return_path{};
};
template <>
struct Layout<Trap256Details> {
  using T = Trap256Details;
  static constexpr std::string_view kName = "Trap256Details";
  static constexpr size_t kSize = kNoticeDataDetailsSize;
  static constexpr std::array kFields = {
      F<&T::lid>("lid", 16, 16),
      F<&T::dr_slid>("dr_slid", 32, 16),
      F<&T::method>("method", 48, 8, FieldFormat::kHex),
      F<&T::attr_id>("attr_id", 64, 16, FieldFormat::kHex),
      F<&T::attr_mod>("attr_mod", 80, 32, FieldFormat::kHex),
      F<&T::m_key>("m_key", 112, 64, FieldFormat::kHex),
      F<&T::dr_notice>("dr_notice", 184, 1),
      F<&T::dr_path_truncated>("dr_path_truncated", 185, 1),
      F<&T::dr_hop_count>("dr_hop_count", 186, 6),
      A<&T::dr_return_path>("dr_return_path", 192, 8, 8, FieldFormat::kBytes),
  };
};
static_assert(LayoutIsValid<Trap256Details>());

// Traps 257 (bad P_Key) and 258 (bad Q_Key) at a CA.
struct Trap257Details {
  uint16_t lid1 = 0;
  uint16_t lid2 = 0;
  uint32_t key = 0;
  uint8_t sl = 0;     // 4 bits
  uint32_t qp1 = 0;   // 24 bits
  uint32_t qp2 = 0;   // 24 bits
  std::array<uint8_t, 16> gid1{};
  std::array<uint8_t, 16> gid2{};
};
template <>
struct Layout<Trap257Details> {
  using T = Trap257Details;
  static constexpr std::string_view kName = "Trap257Details";
  static constexpr size_t kSize = kNoticeDataDetailsSize;
  static constexpr std::array kFields = {
      F<&T::lid1>("lid1", 16, 16),
      F<&T::lid2>("lid2", 32, 16),
      F<&T::key>("key", 48, 32, FieldFormat::kHex),
      F<&T::sl>("sl", 80, 4),
      F<&T::qp1>("qp1", 88, 24, FieldFormat::kHex),
      F<&T::qp2>("qp2", 120, 24, FieldFormat::kHex),
      A<&T::gid1>("gid1", 144, 8, 8, FieldFormat::kBytes),
      A<&T::gid2>("gid2", 272, 8, 8, FieldFormat::kBytes),
  };
};
static_assert(LayoutIsValid<Trap257Details>());

// Trap 259: bad P_Key at a switch external port.
struct Trap259Details {
  uint16_t data_valid = 0;
  uint16_t lid1 = 0;
  uint16_t lid2 = 0;
  uint16_t pkey = 0;
  uint8_t sl = 0;    // 4 bits
  uint32_t qp1 = 0;  // 24 bits
  uint32_t qp2 = 0;  // 24 bits
  std::array<uint8_t, 16> gid1{};
  std::array<uint8_t, 16> gid2{};
  uint16_t sw_lid = 0;
  uint8_t port_num = 0;
};
template <>
struct Layout<Trap259Details> {
  using T = Trap259Details;
  static constexpr std::string_view kName = "Trap259Details";
  static constexpr size_t kSize = kNoticeDataDetailsSize;
  static constexpr std::array kFields = {
      F<&T::data_valid>("data_valid", 0, 16, FieldFormat::kHex),
      F<&T::lid1>("lid1", 16, 16),
      F<&T::lid2>("lid2", 32, 16),
      F<&T::pkey>("pkey", 48, 16, FieldFormat::kHex),
      F<&T::sl>("sl", 64, 4),
      F<&T::qp1>("qp1", 72, 24, FieldFormat::kHex),
      F<&T::qp2>("qp2", 104, 24, FieldFormat::kHex),
      A<&T::gid1>("gid1", 128, 8, 8, FieldFormat::kBytes),
      A<&T::gid2>("gid2", 256, 8, 8, FieldFormat::kBytes),
      F<&T::sw_lid>("sw_lid", 384, 16),
      F<&T::port_num>("port_num", 400, 8),
  };
};
static_assert(LayoutIsValid<Trap259Details>());

// ---- Helpers. ----

// Interprets n.data_details as trap variant D. The caller picks D from the trap number;
// any 54 bytes decode, so this cannot fail.
template <typename D>
D TrapDetails(const Notice& n) {
  D d{};
  static_assert(Layout<D>::kSize == kNoticeDataDetailsSize);
  (void)DecodeFrom(std::span<const uint8_t>(n.data_details), &d);
  return d;
}

// Replaces n->data_details with `d` (reserved bits zero).
template <typename D>
void SetTrapDetails(const D& d, Notice* n) {
  EncodeTo(d, std::span<uint8_t>(n->data_details));
}

// A generic notice with empty details.
inline Notice MakeGenericNotice(NoticeType type, uint32_t producer_type, uint16_t trap_number,
                                uint16_t issuer_lid) {
  Notice n;
  n.is_generic = 1;
  n.type = static_cast<uint8_t>(type);
  n.producer_type_or_vendor_id = producer_type;
  n.trap_number_or_device_id = trap_number;
  n.issuer_lid = issuer_lid;
  return n;
}

inline bool IsGenericTrap(const Notice& n, uint16_t trap_number) {
  return n.is_generic == 1 && n.trap_number_or_device_id == trap_number;
}

// Trap 64/65 (the SM reports a GID in/out of service; type SubnetManagement, producer SM).
inline Notice MakeTrap64(uint16_t trap_number, const std::array<uint8_t, 16>& gid,
                         uint16_t sm_lid) {
  Notice n = MakeGenericNotice(NoticeType::kSubnetManagement, producer::kClassManager,
                               trap_number, sm_lid);
  SetTrapDetails(Trap64Details{gid}, &n);
  return n;
}
inline std::array<uint8_t, 16> Trap64Gid(const Notice& n) {
  return TrapDetails<Trap64Details>(n).gid;
}

// Trap 128 from a switch whose port changed state.
inline Notice MakeTrap128(uint16_t switch_lid) {
  Notice n = MakeGenericNotice(NoticeType::kUrgent, producer::kSwitch,
                               trap::kLinkStateChanged, switch_lid);
  SetTrapDetails(Trap128Details{switch_lid}, &n);
  return n;
}
inline uint16_t Trap128Lid(const Notice& n) { return TrapDetails<Trap128Details>(n).lid; }

// Trap 144 from the port at `lid` of a node of type `producer_type`.
inline Notice MakeTrap144(uint32_t producer_type, uint16_t lid, const Trap144Details& d) {
  Notice n = MakeGenericNotice(NoticeType::kInfo, producer_type, trap::kLocalChanges, lid);
  SetTrapDetails(d, &n);
  return n;
}

inline Notice MakeTrap145(uint32_t producer_type, uint16_t lid, uint64_t system_image_guid) {
  Notice n =
      MakeGenericNotice(NoticeType::kInfo, producer_type, trap::kSystemImageGuidChanged, lid);
  SetTrapDetails(Trap145Details{lid, system_image_guid}, &n);
  return n;
}

// SMP Trap/TrapRepress payload: the first 64 bytes of the Notice (no issuer_gid).
// REQUIRES: out.size() >= kSmpNoticeSize.
inline void EncodeSmpNotice(const Notice& n, std::span<uint8_t> out) {
  std::array<uint8_t, Layout<Notice>::kSize> full{};
  EncodeTo(n, full);
  std::memcpy(out.data(), full.data(), kSmpNoticeSize);
}

// Corrupt if `in` is shorter than 64 bytes; issuer_gid comes back zero.
inline Status DecodeSmpNotice(std::span<const uint8_t> in, Notice* n) {
  if (in.size() < kSmpNoticeSize) {
    return Corrupt("SMP Notice needs 64 bytes, got " + std::to_string(in.size()));
  }
  std::array<uint8_t, Layout<Notice>::kSize> full{};
  std::memcpy(full.data(), in.data(), kSmpNoticeSize);
  return DecodeFrom(std::span<const uint8_t>(full), n);
}

}  // namespace ibsm::mad
