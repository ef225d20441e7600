// MAD framing (IBA 13.4): the 24-byte common header, the SMP (14.2.1) in LID-routed and
// directed-route form, and the GMP headers for SA (15.2.1, with the RMPP header of 13.6.2)
// and PerfMgt (16.1.1). Numbers here are frozen wire values.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "mad/field.h"
#include "base/types.h"

namespace ibsm::mad {

inline constexpr size_t kMadSize = 256;
using MadBytes = std::array<uint8_t, kMadSize>;

// Management classes.
enum class MgmtClass : uint8_t {
  kSubnLid = 0x01,
  kSubnAdm = 0x03,
  kPerfMgt = 0x04,
  kAggMgmt = 0x0B,  // SHARP aggregation management (ar-sharp.md)
  kSubnDirected = 0x81,
};

// Methods (13.4.5); the response bit is 0x80.
namespace method {
inline constexpr uint8_t kGet = 0x01;
inline constexpr uint8_t kSet = 0x02;
inline constexpr uint8_t kSend = 0x03;
inline constexpr uint8_t kTrap = 0x05;
inline constexpr uint8_t kReport = 0x06;
inline constexpr uint8_t kTrapRepress = 0x07;
inline constexpr uint8_t kGetTable = 0x12;
inline constexpr uint8_t kGetTraceTable = 0x13;
inline constexpr uint8_t kGetMulti = 0x14;
inline constexpr uint8_t kDelete = 0x15;
inline constexpr uint8_t kResponseBit = 0x80;
inline constexpr uint8_t kGetResp = 0x81;
inline constexpr uint8_t kReportResp = 0x86;
inline constexpr uint8_t kGetTableResp = 0x92;
inline constexpr uint8_t kDeleteResp = 0x95;
}  // namespace method

// Attribute IDs (SMP: 14.2.5; PerfMgt: 16.1.3).
namespace attr {
inline constexpr uint16_t kClassPortInfo = 0x0001;
inline constexpr uint16_t kNotice = 0x0002;
inline constexpr uint16_t kInformInfo = 0x0003;
inline constexpr uint16_t kNodeDescription = 0x0010;
inline constexpr uint16_t kNodeInfo = 0x0011;
inline constexpr uint16_t kSwitchInfo = 0x0012;
inline constexpr uint16_t kGuidInfo = 0x0014;
inline constexpr uint16_t kPortInfo = 0x0015;
inline constexpr uint16_t kPKeyTable = 0x0016;
inline constexpr uint16_t kSlToVlTable = 0x0017;
inline constexpr uint16_t kVlArbitrationTable = 0x0018;
inline constexpr uint16_t kLinearForwardingTable = 0x0019;
inline constexpr uint16_t kRandomForwardingTable = 0x001A;
inline constexpr uint16_t kMulticastForwardingTable = 0x001B;
inline constexpr uint16_t kSmInfo = 0x0020;
inline constexpr uint16_t kVendorDiag = 0x0030;
inline constexpr uint16_t kLedInfo = 0x0031;
inline constexpr uint16_t kPortCounters = 0x0012;          // PerfMgt class
inline constexpr uint16_t kPortCountersExtended = 0x001D;  // PerfMgt class
}  // namespace attr

// MAD status (13.4.7), in the low 15 bits of the status field.
namespace mad_status {
inline constexpr uint16_t kOk = 0x0000;
inline constexpr uint16_t kBusy = 0x0001;
inline constexpr uint16_t kRedirect = 0x0002;
inline constexpr uint16_t kBadVersion = 0x0004;
inline constexpr uint16_t kMethodUnsupported = 0x0008;
inline constexpr uint16_t kMethodAttrUnsupported = 0x000C;
inline constexpr uint16_t kInvalidField = 0x001C;
}  // namespace mad_status

// The common MAD header, bytes 0-23. For directed-route SMPs the status word's top bit is
// the D (direction) bit and class_specific holds hop pointer (high byte) and hop count.
struct MadHeader {
  uint8_t base_version = 1;
  uint8_t mgmt_class = 0;
  uint8_t class_version = 1;
  uint8_t method = 0;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;

  bool is_response() const { return (method & method::kResponseBit) != 0; }
};

template <>
struct Layout<MadHeader> {
  static constexpr std::string_view kName = "MadHeader";
  static constexpr size_t kSize = 24;
  static constexpr std::array kFields = {
      F<&MadHeader::base_version>("base_version", 0, 8),
      F<&MadHeader::mgmt_class>("mgmt_class", 8, 8, FieldFormat::kHex),
      F<&MadHeader::class_version>("class_version", 16, 8),
      F<&MadHeader::method>("method", 24, 8, FieldFormat::kHex),
      F<&MadHeader::status>("status", 32, 16, FieldFormat::kHex),
      F<&MadHeader::class_specific>("class_specific", 48, 16, FieldFormat::kHex),
      F<&MadHeader::tid>("tid", 64, 64, FieldFormat::kHex),
      F<&MadHeader::attr_id>("attr_id", 128, 16, FieldFormat::kHex),
      F<&MadHeader::attr_mod>("attr_mod", 160, 32, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<MadHeader>());

inline constexpr size_t kSmpDataOffset = 64;
inline constexpr size_t kSmpDataSize = 64;
inline constexpr size_t kMaxDrHops = 63;

// A whole SMP (256 bytes). LID-routed SMPs (class 0x01) use the same layout; their DR fields
// are reserved.
struct Smp {
  uint8_t base_version = 1;
  uint8_t mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnDirected);
  uint8_t class_version = 1;
  uint8_t method = method::kGet;
  uint8_t direction = 0;  // D bit: 0 outbound, 1 returning (DR only)
  uint16_t status = 0;    // 15 bits
  uint8_t hop_pointer = 0;
  uint8_t hop_count = 0;
  uint64_t tid = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;
  uint64_t m_key = 0;
  uint16_t dr_slid = 0xFFFF;
  uint16_t dr_dlid = 0xFFFF;
  std::array<uint8_t, kSmpDataSize> data{};
  std::array<uint8_t, 64> initial_path{};  // [0] unused; [1..hop_count] egress ports
  std::array<uint8_t, 64> return_path{};

  bool is_directed() const {
    return mgmt_class == static_cast<uint8_t>(MgmtClass::kSubnDirected);
  }
  bool is_response() const { return (method & method::kResponseBit) != 0; }
};

template <>
struct Layout<Smp> {
  static constexpr std::string_view kName = "Smp";
  static constexpr size_t kSize = kMadSize;
  static constexpr std::array kFields = {
      F<&Smp::base_version>("base_version", 0, 8),
      F<&Smp::mgmt_class>("mgmt_class", 8, 8, FieldFormat::kHex),
      F<&Smp::class_version>("class_version", 16, 8),
      F<&Smp::method>("method", 24, 8, FieldFormat::kHex),
      F<&Smp::direction>("direction", 32, 1),
      F<&Smp::status>("status", 33, 15, FieldFormat::kHex),
      F<&Smp::hop_pointer>("hop_pointer", 48, 8),
      F<&Smp::hop_count>("hop_count", 56, 8),
      F<&Smp::tid>("tid", 64, 64, FieldFormat::kHex),
      F<&Smp::attr_id>("attr_id", 128, 16, FieldFormat::kHex),
      F<&Smp::attr_mod>("attr_mod", 160, 32, FieldFormat::kHex),
      F<&Smp::m_key>("m_key", 192, 64, FieldFormat::kHex),
      F<&Smp::dr_slid>("dr_slid", 256, 16),
      F<&Smp::dr_dlid>("dr_dlid", 272, 16),
      A<&Smp::data>("data", 512, 8, 8, FieldFormat::kBytes),
      A<&Smp::initial_path>("initial_path", 1024, 8, 8, FieldFormat::kBytes),
      A<&Smp::return_path>("return_path", 1536, 8, 8, FieldFormat::kBytes),
  };
};
static_assert(LayoutIsValid<Smp>());

// RMPP header (13.6.2.1), bytes 24-35 of an RMPP-capable GMP.
namespace rmpp {
inline constexpr uint8_t kTypeData = 1;
inline constexpr uint8_t kTypeAck = 2;
inline constexpr uint8_t kTypeStop = 3;
inline constexpr uint8_t kTypeAbort = 4;
inline constexpr uint8_t kFlagActive = 0x1;
inline constexpr uint8_t kFlagFirst = 0x2;
inline constexpr uint8_t kFlagLast = 0x4;
}  // namespace rmpp

inline constexpr size_t kSaHeaderSize = 56;  // common + RMPP + SA class header
inline constexpr size_t kSaDataSize = kMadSize - kSaHeaderSize;  // 200

// An SA MAD (15.2.1): common header, RMPP header, SM_Key, AttributeOffset (in 8-byte words),
// ComponentMask, then 200 bytes of record data.
struct SaMad {
  MadHeader hdr;
  uint8_t rmpp_version = 0;
  uint8_t rmpp_type = 0;
  uint8_t rmpp_resp_time = 0;
  uint8_t rmpp_flags = 0;
  uint8_t rmpp_status = 0;
  uint32_t rmpp_data1 = 0;  // segment number (DATA) / segment number (ACK)
  uint32_t rmpp_data2 = 0;  // payload length (first/last DATA) / new window last (ACK)
  uint64_t sm_key = 0;
  uint16_t attr_offset = 0;
  uint64_t comp_mask = 0;
  std::array<uint8_t, kSaDataSize> data{};
};

template <>
struct Layout<SaMad> {
  static constexpr std::string_view kName = "SaMad";
  static constexpr size_t kSize = kMadSize;
  static constexpr std::array kFields = {
      F<&SaMad::rmpp_version>("rmpp_version", 192, 8),
      F<&SaMad::rmpp_type>("rmpp_type", 200, 8),
      F<&SaMad::rmpp_resp_time>("rmpp_resp_time", 208, 5),
      F<&SaMad::rmpp_flags>("rmpp_flags", 213, 3, FieldFormat::kHex),
      F<&SaMad::rmpp_status>("rmpp_status", 216, 8),
      F<&SaMad::rmpp_data1>("rmpp_data1", 224, 32),
      F<&SaMad::rmpp_data2>("rmpp_data2", 256, 32),
      F<&SaMad::sm_key>("sm_key", 288, 64, FieldFormat::kHex),
      F<&SaMad::attr_offset>("attr_offset", 352, 16),
      F<&SaMad::comp_mask>("comp_mask", 384, 64, FieldFormat::kHex),
      A<&SaMad::data>("data", 448, 8, 8, FieldFormat::kBytes),
  };
};
static_assert(LayoutIsValid<SaMad>());

inline constexpr size_t kPerfDataOffset = 64;
inline constexpr size_t kPerfDataSize = 192;

// Encodes/decodes a whole SaMad: its MadHeader lives in bytes 0-23, the rest by table.
void EncodeSa(const SaMad& m, std::span<uint8_t> out);
Status DecodeSa(std::span<const uint8_t> in, SaMad* m);

// Where a GMP goes to or came from (the UD address of QP1 traffic). SMPs ignore it: a DR SMP
// carries its path and a LID-routed SMP its destination in `lid`.
struct MadAddress {
  Lid lid{0};
  uint32_t qpn = 1;
  uint32_t qkey = 0x80010000;  // the well-known GSI Q_Key
  uint8_t sl = 0;
  uint16_t pkey_index = 0;
};

// One MAD as a transport carries it. `bytes` is 256 bytes for a single MAD; a reassembled
// RMPP message is the first segment's headers followed by every segment's payload.
struct MadMessage {
  std::vector<uint8_t> bytes;
  MadAddress addr;

  Result<MadHeader> header() const { return Decode<MadHeader>(bytes); }
};

// Helpers for the DR SMP a sweep sends: Get of `attr_id` along `path` (path[i] = egress port
// at hop i+1; empty = the local port).
Smp MakeDrSmp(uint8_t method, uint16_t attr_id, uint32_t attr_mod,
              std::span<const uint8_t> path, uint64_t m_key = 0);
Smp MakeLidSmp(uint8_t method, uint16_t attr_id, uint32_t attr_mod, uint64_t m_key = 0);
MadMessage ToMessage(const Smp& smp, Lid dlid = Lid{0});

}  // namespace ibsm::mad
