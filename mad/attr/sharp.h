// SHARP (Scalable Hierarchical Aggregation and Reduction Protocol) wire formats: the
// aggregation-management MAD (class 0x0B) and its attributes, and the two SMP attributes the
// SM uses to find and enable aggregation nodes (docs/ar-sharp.md "SHARP").
//
// What the public sources fix is declared at their offsets. Where they fix nothing the
// layouts below are ibsm's own, chosen here and frozen (marked so per field); a hardware
// quirk is added behind these layouts, never at the call sites. The only public source that
// gives the class 0x0B field layouts is marked proprietary, so none of the layouts of
// ANInfo, TreeConfig, QPAllocation, QPCConfig and ResourceCleanup is verified against a
// real aggregation node (docs/ar-sharp.md "SHARP"). The tables below are the only place
// that places their bytes: change a layout here and nowhere else.
//
// ibsm encoding v2 (v1 with QPAllocation, QPCConfig and ResourceCleanup made complete), in
// one place:
//  - TreeConfig parent/child QPNs name the aggregation node's *own* QP for that tree edge
//    (from QPAllocation); the QP's QPCConfig names the far end (LID, QPN, port GUID).
//  - QPAllocation: byte 0 bits 7-4 opcode (0 allocate, 1 release), bytes 2-3 tree id,
//    bytes 4-7 job id, byte 15 count (1..44), bytes 16.. 44 x BE32 QPN (low 24 bits); the
//    response lists the QPNs allocated (release: the QPNs to free, of that job and tree).
//  - QPCConfig, a reliable-connected QP context: bytes 1-3 QPN (the AN's QP), byte 4 bits
//    7-4 state (0 reset, 1 ready) and bits 3-0 transport (1 RC), bytes 5-7 remote QPN (0 =
//    the host's SHARP daemon binds it later), bytes 8-9 remote LID, bytes 10-11 tree id,
//    byte 12 bits 7-4 path MTU (IBA code, 1 = 256 .. 5 = 4096) and bits 3-0 SL, byte 13
//    bits 6-4 retry count and bits 2-0 RNR retry, byte 14 bits 4-0 RNR min timer and
//    byte 15 bits 4-0 local ACK timeout (IBA codes), bytes 16-23 remote port GUID, bytes
//    24-25 P_Key (value, with the membership bit), bytes 28-31 Q_Key, bytes 32-35 send PSN
//    and 36-39 receive PSN (BE32, valid below 2^24), byte 40 RDMA reads/atomics the QP may
//    have outstanding, byte 41 those it accepts as responder.
//  - QPCConfig Get: modifier 0; the request's data names the QPN (bytes 1-3) and the answer
//    is that QP's whole context.
//  - ResourceCleanup: byte 0 bits 7-4 scope (0 everything, 1 one job, 2 one tree, 3 one QP),
//    bytes 2-3 tree id, bytes 4-7 job id, bytes 9-11 QPN.
//  - TreeConfig Get: modifier 0; the request's data names the tree (bytes 2-3) and the
//    index of the first child wanted (byte 1, the record locator: more than 44 children
//    are read 44 at a time); the answer is the tree as the last writes left it (opcode 2,
//    up to 44 children from that index). The open API takes a whole TreeConfig for a Get,
//    as for QPCConfig, and no modifier.
//  - MlnxExtendedPortInfo is addressed to the switch port cabled to the aggregation node
//    (modifier = that port number).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "mad/attr/general_info.h"
#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

// Aggregation-management class (0x0B) attribute IDs (ar-sharp.md). Frozen wire values.
namespace am_attr {
inline constexpr uint16_t kAmKeyInfo = 0x0010;
inline constexpr uint16_t kAnInfo = 0x0020;
inline constexpr uint16_t kQpAllocation = 0x0021;
inline constexpr uint16_t kQpcConfig = 0x0022;
inline constexpr uint16_t kTreeConfig = 0x0023;
inline constexpr uint16_t kQuotaConfig = 0x0024;
inline constexpr uint16_t kResourceCleanup = 0x0040;
inline constexpr uint16_t kPerformanceCounters = 0x0050;
}  // namespace am_attr

// Vendor SMP attributes the SHARP code uses (classes 0x01/0x81). Frozen wire values;
// GeneralInfo is attr::kGeneralInfo (mad/attr/general_info.h).
namespace vendor_attr {
inline constexpr uint16_t kMlnxExtendedPortInfo = 0xFF90;
}  // namespace vendor_attr

inline constexpr uint8_t kAmClassVersion = 1;
inline constexpr size_t kAmDataOffset = 64;
inline constexpr size_t kAmDataSize = 192;
inline constexpr size_t kTreeConfigMaxChildren = 44;
inline constexpr size_t kQpAllocationMax = 44;

// The class 0x0B MAD: common header (bytes 0-23), AM_Key at 24, data 192 bytes at 64.
struct AmMad {
  MadHeader hdr;
  uint64_t am_key = 0;
  std::array<uint8_t, kAmDataSize> data{};
};

template <>
struct Layout<AmMad> {
  static constexpr std::string_view kName = "AmMad";
  static constexpr size_t kSize = kMadSize;
  static constexpr std::array kFields = {
      F<&AmMad::am_key>("am_key", 192, 64, FieldFormat::kHex),
      A<&AmMad::data>("data", 512, 8, 8, FieldFormat::kBytes),
  };
};
static_assert(LayoutIsValid<AmMad>());

// REQUIRES: out.size() >= kMadSize.
inline void EncodeAm(const AmMad& m, std::span<uint8_t> out) {
  EncodeTo(m, out);  // zero-fills, then am_key and data
  MadHeader h = m.hdr;
  std::array<uint8_t, 24> hb{};
  EncodeTo(h, hb);
  std::copy(hb.begin(), hb.end(), out.begin());
}
inline Status DecodeAm(std::span<const uint8_t> in, AmMad* m) {
  IBSM_RETURN_IF_ERROR(DecodeFrom(in, m));
  return DecodeFrom(in, &m->hdr);
}
inline AmMad MakeAmRequest(uint8_t method, uint16_t attr_id, uint32_t attr_mod) {
  AmMad m;
  m.hdr.mgmt_class = static_cast<uint8_t>(MgmtClass::kAggMgmt);
  m.hdr.class_version = kAmClassVersion;
  m.hdr.method = method;
  m.hdr.attr_id = attr_id;
  m.hdr.attr_mod = attr_mod;
  return m;
}

// ANInfo (0x20), ibsm's own layout (unverified, see the top of this file).
struct AnInfo {
  static constexpr uint16_t kAttrId = am_attr::kAnInfo;
  uint16_t tree_table_size = 0;  // trees this AN can be part of
  uint8_t tree_radix_used = 0;
  uint8_t tree_radix = 0;        // children per tree node
  uint16_t sharp_version_active = 0;
  uint16_t sharp_version_supported = 0;
  uint32_t max_groups = 0;
  uint16_t max_qps = 0;
  uint16_t line_size = 0;
};
template <>
struct Layout<AnInfo> {
  using S = AnInfo;
  static constexpr std::string_view kName = "ANInfo";
  static constexpr size_t kSize = kAmDataSize;
  static constexpr std::array kFields = {
      F<&S::tree_table_size>("tree_table_size", 48, 16),
      F<&S::tree_radix_used>("tree_radix_used", 72, 8),
      F<&S::tree_radix>("tree_radix", 88, 8),
      F<&S::sharp_version_active>("sharp_version_active", 96, 16, FieldFormat::kHex),
      F<&S::sharp_version_supported>("sharp_version_supported", 112, 16, FieldFormat::kHex),
      F<&S::max_groups>("max_groups", 160, 32),
      F<&S::max_qps>("max_qps", 336, 16),
      F<&S::line_size>("line_size", 368, 16),
  };
};
static_assert(LayoutIsValid<AnInfo>());

// TreeConfig opcodes and states (ar-sharp.md). Frozen wire values.
namespace tree_op {
inline constexpr uint8_t kAddChildren = 0;
inline constexpr uint8_t kRemoveChildren = 1;
inline constexpr uint8_t kWriteTree = 2;
inline constexpr uint8_t kSetParent = 3;
}  // namespace tree_op
namespace tree_state {
inline constexpr uint8_t kDisabled = 0;
inline constexpr uint8_t kEnabled = 1;
inline constexpr uint8_t kError = 2;
}  // namespace tree_state

// TreeConfig (0x23). Children: {u8 child index, u24 child QPN} x 44 from byte 16.
struct TreeConfig {
  static constexpr uint16_t kAttrId = am_attr::kTreeConfig;
  uint8_t opcode = 0;
  uint8_t state = 0;
  uint8_t record_locator = 0;  // Get: index of the first child wanted; 0 in a Set
  uint16_t tree_id = 0;
  uint8_t mode = 0;  // 0 low-latency, 1 streaming
  uint32_t parent_qpn = 0;  // 0: this AN is the root
  uint8_t num_children = 0;
  std::array<uint8_t, kTreeConfigMaxChildren> child_index{};
  std::array<uint32_t, kTreeConfigMaxChildren> child_qpn{};
};
template <>
struct Layout<TreeConfig> {
  using S = TreeConfig;
  static constexpr std::string_view kName = "TreeConfig";
  static constexpr size_t kSize = kAmDataSize;
  static constexpr std::array kFields = {
      F<&S::opcode>("opcode", 0, 4),
      F<&S::state>("state", 4, 4),
      F<&S::record_locator>("record_locator", 8, 8),
      F<&S::tree_id>("tree_id", 16, 16),
      F<&S::mode>("mode", 32, 4),
      F<&S::parent_qpn>("parent_qpn", 72, 24, FieldFormat::kHex),
      F<&S::num_children>("num_children", 120, 8),
      A<&S::child_index>("child_index", 128, 8, 32),
      A<&S::child_qpn>("child_qpn", 136, 24, 32, FieldFormat::kHex),
  };
};
// child_index and child_qpn interleave; check their extents by hand (LayoutIsValid checks
// overall extents only).
static_assert(128 + 43 * 32 + 32 == kAmDataSize * 8);

// QPAllocation (0x21), ibsm encoding v2.
namespace qp_alloc_op {
inline constexpr uint8_t kAllocate = 0;
inline constexpr uint8_t kRelease = 1;
}  // namespace qp_alloc_op
struct QpAllocation {
  static constexpr uint16_t kAttrId = am_attr::kQpAllocation;
  uint8_t opcode = 0;
  uint16_t tree_id = 0;
  uint32_t job_id = 0;  // the job the QPs belong to (ResourceCleanup by job frees them)
  uint8_t count = 0;
  std::array<uint32_t, kQpAllocationMax> qpn{};
};
template <>
struct Layout<QpAllocation> {
  using S = QpAllocation;
  static constexpr std::string_view kName = "QPAllocation";
  static constexpr size_t kSize = kAmDataSize;
  static constexpr std::array kFields = {
      F<&S::opcode>("opcode", 0, 4),
      F<&S::tree_id>("tree_id", 16, 16),
      F<&S::job_id>("job_id", 32, 32, FieldFormat::kHex),
      F<&S::count>("count", 120, 8),
      A<&S::qpn>("qpn", 136, 24, 32, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<QpAllocation>());

// QPCConfig (0x22), ibsm encoding v2: everything a reliable-connected QP needs to reach
// ready-to-send (IBA 10.2.4's QP attributes for the RTR and RTS transitions).
namespace qp_state {
inline constexpr uint8_t kReset = 0;
inline constexpr uint8_t kReady = 1;
}  // namespace qp_state
namespace qp_transport {
inline constexpr uint8_t kUnset = 0;  // a context that names no transport is incomplete
inline constexpr uint8_t kRc = 1;     // reliable connected, the only one tree QPs use
inline constexpr uint8_t kUc = 2;
inline constexpr uint8_t kUd = 3;
}  // namespace qp_transport
inline constexpr uint32_t kPsnLimit = 1u << 24;  // PSNs are 24 bits (IBA 9.7.1)
struct QpcConfig {
  static constexpr uint16_t kAttrId = am_attr::kQpcConfig;
  uint32_t qpn = 0;
  uint8_t state = 0;
  uint8_t transport = 0;  // qp_transport
  uint32_t remote_qpn = 0;
  uint16_t remote_lid = 0;
  uint16_t tree_id = 0;
  uint8_t mtu = 0;  // path MTU, mad::mtu code
  uint8_t sl = 0;
  uint8_t retry_count = 0;    // transport retries before the QP fails (0..7)
  uint8_t rnr_retry = 0;      // receiver-not-ready retries (0..7; 7 = without limit)
  uint8_t rnr_min_timer = 0;  // IBA RNR NAK timer code (0 = 655.36 ms, 1 = 0.01 ms ..)
  uint8_t local_ack_timeout = 0;  // 4.096 us x 2^n; 0 = wait for ever
  uint64_t remote_guid = 0;
  uint16_t pkey = 0;
  uint32_t qkey = 0;
  uint32_t send_psn = 0;
  uint32_t recv_psn = 0;
  uint8_t max_rd_atomic = 0;       // outstanding RDMA reads/atomics as requester
  uint8_t max_dest_rd_atomic = 0;  // as responder
  bool operator==(const QpcConfig&) const = default;
};
template <>
struct Layout<QpcConfig> {
  using S = QpcConfig;
  static constexpr std::string_view kName = "QPCConfig";
  static constexpr size_t kSize = kAmDataSize;
  static constexpr std::array kFields = {
      F<&S::qpn>("qpn", 8, 24, FieldFormat::kHex),
      F<&S::state>("state", 32, 4),
      F<&S::transport>("transport", 36, 4),
      F<&S::remote_qpn>("remote_qpn", 40, 24, FieldFormat::kHex),
      F<&S::remote_lid>("remote_lid", 64, 16),
      F<&S::tree_id>("tree_id", 80, 16),
      F<&S::mtu>("mtu", 96, 4),
      F<&S::sl>("sl", 100, 4),
      F<&S::retry_count>("retry_count", 105, 3),
      F<&S::rnr_retry>("rnr_retry", 109, 3),
      F<&S::rnr_min_timer>("rnr_min_timer", 115, 5),
      F<&S::local_ack_timeout>("local_ack_timeout", 123, 5),
      F<&S::remote_guid>("remote_guid", 128, 64, FieldFormat::kGuid),
      F<&S::pkey>("pkey", 192, 16, FieldFormat::kHex),
      F<&S::qkey>("qkey", 224, 32, FieldFormat::kHex),
      F<&S::send_psn>("send_psn", 256, 32, FieldFormat::kHex),
      F<&S::recv_psn>("recv_psn", 288, 32, FieldFormat::kHex),
      F<&S::max_rd_atomic>("max_rd_atomic", 320, 8),
      F<&S::max_dest_rd_atomic>("max_dest_rd_atomic", 328, 8),
  };
};
static_assert(LayoutIsValid<QpcConfig>());

// ResourceCleanup (0x40), ibsm encoding v2.
namespace cleanup_scope {
inline constexpr uint8_t kAll = 0;
inline constexpr uint8_t kJob = 1;
inline constexpr uint8_t kTree = 2;
inline constexpr uint8_t kQp = 3;
}  // namespace cleanup_scope
struct ResourceCleanup {
  static constexpr uint16_t kAttrId = am_attr::kResourceCleanup;
  uint8_t scope = 0;
  uint16_t tree_id = 0;
  uint32_t job_id = 0;
  uint32_t qpn = 0;
};
template <>
struct Layout<ResourceCleanup> {
  using S = ResourceCleanup;
  static constexpr std::string_view kName = "ResourceCleanup";
  static constexpr size_t kSize = kAmDataSize;
  static constexpr std::array kFields = {
      F<&S::scope>("scope", 0, 4),
      F<&S::tree_id>("tree_id", 16, 16),
      F<&S::job_id>("job_id", 32, 32, FieldFormat::kHex),
      F<&S::qpn>("qpn", 72, 24, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<ResourceCleanup>());

// MlnxExtendedPortInfo (SMP 0xFF90): only the bit SHARP needs; the rest is left alone by a
// read-modify-write of the raw 64 bytes.
struct MlnxExtendedPortInfo {
  static constexpr uint16_t kAttrId = vendor_attr::kMlnxExtendedPortInfo;
  uint8_t sharp_an_en = 0;  // byte 0 bit 6 "SHArPANEn"
  // Byte 0 bit 4, set by the switch after a link recovery; "On SET, only 0 is valid"
  // (mstflint tools_open_layouts.h), so a read-modify-write must clear it.
  uint8_t port_recovered = 0;
  // Byte 47 (MLNX OpenSM ib_types.h ib_mlnx_ext_port_info_t special_port_type, GPLv2/BSD):
  // bit 7 IsSpecialPort, bits 3-0 the type (special_port_type::kAggregationNode), valid
  // where the switch reports general_cap::kSpecialPortsMarking.
  uint8_t is_special_port = 0;
  uint8_t special_port_type = 0;
};
inline constexpr uint32_t kMlnxExtPortInfoPortRecoveredBit = 3;  // bit offset of byte 0 bit 4
namespace special_port_type {
inline constexpr uint8_t kAggregationNode = 1;
inline constexpr uint8_t kRouter = 2;
inline constexpr uint8_t kEthernetGateway = 3;
}  // namespace special_port_type
template <>
struct Layout<MlnxExtendedPortInfo> {
  static constexpr std::string_view kName = "MlnxExtendedPortInfo";
  static constexpr size_t kSize = kSmpDataSize;
  static constexpr std::array kFields = {
      F<&MlnxExtendedPortInfo::sharp_an_en>("sharp_an_en", 1, 1),
      F<&MlnxExtendedPortInfo::port_recovered>("port_recovered",
                                                kMlnxExtPortInfoPortRecoveredBit, 1),
      F<&MlnxExtendedPortInfo::is_special_port>("is_special_port", 47 * 8, 1),
      F<&MlnxExtendedPortInfo::special_port_type>("special_port_type", 47 * 8 + 4, 4),
  };
};
static_assert(LayoutIsValid<MlnxExtendedPortInfo>());

// GeneralInfo's capability bits (SHARP: general_cap::kSharpAggregationNode) are in
// mad/attr/general_info.h, shared with adaptive routing.

}  // namespace ibsm::mad
