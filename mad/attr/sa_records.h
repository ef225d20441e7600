// Subnet Administration records (IBA 15.2.5) that the SA serves from the SM's view of the
// fabric: NodeRecord, PortInfoRecord, SL2VLTableRecord, SwitchInfoRecord, LFTRecord,
// SMInfoRecord, LinkRecord, GUIDInfoRecord, P_KeyTableRecord, VLArbitrationTableRecord;
// and ServiceRecord, which is SA state registered by clients rather than a fabric view.
//
// Each record is declared once, in the spec's offsets, in three tables:
//   Layout<R>::kFields       the record's own key fields (LID, port, block, ...);
//   SaRecord<R>::kEmbedded   the SMP attribute it carries (NodeInfo, PortInfo, ...) and the
//                            byte where it starts, encoded by that attribute's own layout;
//   SaRecord<R>::kComponents the ComponentMask bits: component i is bit i of the mask and
//                            names a bit range of the record's wire image.
// Matching a request against a record compares those bit ranges on the wire (15.2.4.1), so
// no record needs hand-written comparison code.
//
// Offsets and sizes agree with OpenSM's include/iba/ib_types.h (ib_node_record_t, ...), the
// structs saquery decodes with, and for NodeRecord and GUIDInfoRecord with libibmad's
// IB_SA_NR_* / IB_SA_GIR_* / IB_SA_SR_* fields (sa_records_test.cc checks both). Numbers here are frozen
// wire values.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "mad/attr/guid_info.h"
#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/node_description.h"
#include "mad/attr/node_info.h"
#include "mad/attr/pkey_table.h"
#include "mad/attr/port_info.h"
#include "mad/attr/sl_to_vl_table.h"
#include "mad/attr/sm_info.h"
#include "mad/attr/switch_info.h"
#include "mad/attr/vl_arbitration_table.h"
#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

// SA attribute IDs (15.2.5, Table 209).
namespace sa_attr {
inline constexpr uint16_t kClassPortInfo = 0x0001;
inline constexpr uint16_t kNotice = 0x0002;
inline constexpr uint16_t kInformInfo = 0x0003;
inline constexpr uint16_t kNodeRecord = 0x0011;
inline constexpr uint16_t kPortInfoRecord = 0x0012;
inline constexpr uint16_t kSl2VlTableRecord = 0x0013;
inline constexpr uint16_t kSwitchInfoRecord = 0x0014;
inline constexpr uint16_t kLftRecord = 0x0015;
inline constexpr uint16_t kRftRecord = 0x0016;
inline constexpr uint16_t kMftRecord = 0x0017;
inline constexpr uint16_t kSmInfoRecord = 0x0018;
inline constexpr uint16_t kLinkRecord = 0x0020;
inline constexpr uint16_t kGuidInfoRecord = 0x0030;
inline constexpr uint16_t kServiceRecord = 0x0031;
inline constexpr uint16_t kPKeyTableRecord = 0x0033;
inline constexpr uint16_t kPathRecord = 0x0035;
inline constexpr uint16_t kVlArbitrationTableRecord = 0x0036;
inline constexpr uint16_t kMcMemberRecord = 0x0038;
inline constexpr uint16_t kTraceRecord = 0x0039;
inline constexpr uint16_t kMultiPathRecord = 0x003A;
inline constexpr uint16_t kInformInfoRecord = 0x00F3;
}  // namespace sa_attr

// SA class version (15.2.1.1) and the SA's class-specific status codes (15.2.1.2, Table
// 194): a 3-bit code in bits 8-10 of the MAD status word, values as shifted on the wire.
inline constexpr uint8_t kSaClassVersion = 2;
namespace sa_status {
inline constexpr uint16_t kNoResources = 1 << 8;
inline constexpr uint16_t kReqInvalid = 2 << 8;
inline constexpr uint16_t kNoRecords = 3 << 8;
inline constexpr uint16_t kTooManyRecords = 4 << 8;
inline constexpr uint16_t kReqInvalidGid = 5 << 8;
inline constexpr uint16_t kReqInsufficientComponents = 6 << 8;
inline constexpr uint16_t kReqDenied = 7 << 8;
}  // namespace sa_status

// The GSI's well-known Q_Key (IBA 13.5.1).
inline constexpr uint32_t kQp1QKey = 0x80010000;

// ClassPortInfo CapabilityMask2 bits of the SA (15.2.1.3; OpenSM osm_base.h OSM_CAP2_*).
namespace sa_cap2 {
inline constexpr uint32_t kIsFullPortInfoRecordSupported = 1u << 6;
inline constexpr uint32_t kIsExtendedSpeedsSupported = 1u << 7;
inline constexpr uint32_t kIsSendOnlyFullMemberSupported = 1u << 12;
}  // namespace sa_cap2

// ClassPortInfo CapabilityMask bits of the SA (15.2.1.3, Table 196).
namespace sa_cap {
inline constexpr uint16_t kIsSubnGetSetNoticeSupported = 1 << 1;  // InformInfo and Reports
inline constexpr uint16_t kIsSubnetOptRecordSupported = 1 << 8;
inline constexpr uint16_t kIsUdMulticastSupported = 1 << 9;
inline constexpr uint16_t kIsMultiPathSupported = 1 << 10;
inline constexpr uint16_t kIsReinitSupported = 1 << 11;
inline constexpr uint16_t kIsGidScopedMultiPathSupported = 1 << 12;
inline constexpr uint16_t kIsPortInfoCapMaskMatchSupported = 1 << 13;
}  // namespace sa_cap

// PortInfoRecord queries with this attribute-modifier bit ask that the CapabilityMask
// component match when every requested bit is set, not by equality (IBA 1.2.1 C15-0.1.31;
// saquery -s uses it).
inline constexpr uint32_t kPortInfoCapMaskMatchModifier = 1u << 31;

// How one component compares.
enum class Match : uint8_t {
  kEqual,          // the record's bits equal the request's
  kBitsSetIfAsked, // kEqual, or with kPortInfoCapMaskMatchModifier: every requested bit set
};

// One ComponentMask bit: a bit range of the record's wire image.
struct Component {
  std::string_view name;
  uint32_t bit_offset = 0;
  uint32_t bit_width = 0;
  Match match = Match::kEqual;
};

// An attribute carried inside record R at `byte_offset`, coded by the attribute's layout.
// `size` bytes of it travel in the record: all of it, or less when the record carries less
// than the attribute's SMP data (SwitchInfoRecord holds 20 bytes of SwitchInfo's 64).
template <typename R>
struct Embedded {
  size_t byte_offset;
  size_t size;
  // REQUIRES: out/in hold at least `size` bytes.
  void (*encode)(const R&, std::span<uint8_t> out, size_t size);
  Status (*decode)(std::span<const uint8_t> in, size_t size, R*);
};

// A layout with fields past `size` yields size 0, which RecordIsValid rejects.
template <auto M>
constexpr Embedded<typename detail::MemberTraits<decltype(M)>::Class> E(
    size_t byte_offset,
    size_t size = Layout<typename detail::MemberTraits<decltype(M)>::Member>::kSize) {
  using R = typename detail::MemberTraits<decltype(M)>::Class;
  using T = typename detail::MemberTraits<decltype(M)>::Member;
  for (const auto& f : Layout<T>::kFields) {
    if (f.bit_offset + (f.count - 1) * size_t{f.stride} + f.bit_width > size * 8) size = 0;
  }
  return Embedded<R>{
      byte_offset, size,
      [](const R& r, std::span<uint8_t> out, size_t n) {
        std::array<uint8_t, Layout<T>::kSize> tmp{};
        EncodeTo(r.*M, tmp);
        std::copy(tmp.begin(), tmp.begin() + n, out.begin());
      },
      [](std::span<const uint8_t> in, size_t n, R* r) {
        if (in.size() < n) return Corrupt(std::string(Layout<R>::kName) + " is short");
        std::array<uint8_t, Layout<T>::kSize> tmp{};
        std::copy(in.begin(), in.begin() + n, tmp.begin());
        return DecodeFrom(std::span<const uint8_t>(tmp), &(r->*M));
      }};
}

// The component for field `name` of attribute T embedded at `byte_offset` (an array field
// covers every element). A name T does not have yields width 0, which RecordIsValid rejects.
template <typename T>
constexpr Component C(std::string_view name, size_t byte_offset, Match match = Match::kEqual) {
  for (const auto& f : Layout<T>::kFields) {
    if (f.name == name) {
      uint32_t width = f.count > 1 ? (f.count - 1) * f.stride + f.bit_width : f.bit_width;
      return Component{name, static_cast<uint32_t>(byte_offset * 8 + f.bit_offset), width, match};
    }
  }
  return Component{name, 0, 0, match};
}

// A component of the record's own bits (key fields and reserved ranges).
constexpr Component K(std::string_view name, uint32_t bit_offset, uint32_t bit_width) {
  return Component{name, bit_offset, bit_width, Match::kEqual};
}

// Every SA record type specialises SaRecord<R> with:
//   static constexpr uint16_t kAttrId;
//   static constexpr uint16_t kAttrOffset;   // 8-byte words one record takes in a GetTable
//   static constexpr std::array<Embedded<R>, N> kEmbedded;
//   static constexpr std::array<Component, M> kComponents;
template <typename R>
struct SaRecord;

// --- the records ------------------------------------------------------------------------

// NodeRecord (15.2.5.2): one per port that has a LID (CA ports; switch port 0).
struct NodeRecord {
  uint16_t lid = 0;
  NodeInfo node_info;
  NodeDescription node_description;
};
template <>
struct Layout<NodeRecord> {
  static constexpr std::string_view kName = "NodeRecord";
  static constexpr size_t kSize = 108;
  static constexpr std::array kFields = {F<&NodeRecord::lid>("lid", 0, 16)};
};
template <>
struct SaRecord<NodeRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kNodeRecord;
  static constexpr uint16_t kAttrOffset = 14;  // 108 bytes padded to 112 as OpenSM sends
  static constexpr std::array kEmbedded = {E<&NodeRecord::node_info>(4),
                                           E<&NodeRecord::node_description>(44)};
  static constexpr std::array kComponents = {
      K("lid", 0, 16),
      K("reserved", 16, 16),
      C<NodeInfo>("base_version", 4),
      C<NodeInfo>("class_version", 4),
      C<NodeInfo>("node_type", 4),
      C<NodeInfo>("num_ports", 4),
      C<NodeInfo>("system_image_guid", 4),
      C<NodeInfo>("node_guid", 4),
      C<NodeInfo>("port_guid", 4),
      C<NodeInfo>("partition_cap", 4),
      C<NodeInfo>("device_id", 4),
      C<NodeInfo>("revision", 4),
      C<NodeInfo>("local_port_num", 4),
      C<NodeInfo>("vendor_id", 4),
      C<NodeDescription>("text", 44),
  };
};

// PortInfoRecord (15.2.5.3): one per port the SM read PortInfo of; switches by port 0's LID.
struct PortInfoRecord {
  uint16_t lid = 0;
  uint8_t port_num = 0;
  uint8_t options = 0;
  PortInfo port_info;
};
template <>
struct Layout<PortInfoRecord> {
  static constexpr std::string_view kName = "PortInfoRecord";
  static constexpr size_t kSize = 68;
  static constexpr std::array kFields = {
      F<&PortInfoRecord::lid>("lid", 0, 16),
      F<&PortInfoRecord::port_num>("port_num", 16, 8),
      F<&PortInfoRecord::options>("options", 24, 8, FieldFormat::kHex),
  };
};
template <>
struct SaRecord<PortInfoRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kPortInfoRecord;
  static constexpr uint16_t kAttrOffset = 9;  // 68 bytes padded to 72
  static constexpr std::array kEmbedded = {E<&PortInfoRecord::port_info>(4)};
  // Component numbers as OpenSM's IB_PIR_COMPMASK_* (0..56); reserved ranges keep theirs.
  static constexpr std::array kComponents = {
      K("lid", 0, 16),
      K("port_num", 16, 8),
      K("options", 24, 8),
      C<PortInfo>("m_key", 4),
      C<PortInfo>("gid_prefix", 4),
      C<PortInfo>("lid", 4),
      C<PortInfo>("master_sm_base_lid", 4),
      C<PortInfo>("capability_mask", 4, Match::kBitsSetIfAsked),
      C<PortInfo>("diag_code", 4),
      C<PortInfo>("m_key_lease_period", 4),
      C<PortInfo>("local_port_num", 4),
      C<PortInfo>("link_width_enabled", 4),
      C<PortInfo>("link_width_supported", 4),
      C<PortInfo>("link_width_active", 4),
      C<PortInfo>("link_speed_supported", 4),
      C<PortInfo>("port_state", 4),
      C<PortInfo>("port_phys_state", 4),
      C<PortInfo>("link_down_default_state", 4),
      C<PortInfo>("m_key_protect_bits", 4),
      K("reserved", 32 + 274, 3),
      C<PortInfo>("lmc", 4),
      C<PortInfo>("link_speed_active", 4),
      C<PortInfo>("link_speed_enabled", 4),
      C<PortInfo>("neighbor_mtu", 4),
      C<PortInfo>("master_sm_sl", 4),
      C<PortInfo>("vl_cap", 4),
      C<PortInfo>("init_type", 4),
      C<PortInfo>("vl_high_limit", 4),
      C<PortInfo>("vl_arb_high_cap", 4),
      C<PortInfo>("vl_arb_low_cap", 4),
      C<PortInfo>("init_type_reply", 4),
      C<PortInfo>("mtu_cap", 4),
      C<PortInfo>("vl_stall_count", 4),
      C<PortInfo>("hoq_life", 4),
      C<PortInfo>("operational_vls", 4),
      C<PortInfo>("partition_enforcement_inbound", 4),
      C<PortInfo>("partition_enforcement_outbound", 4),
      C<PortInfo>("filter_raw_inbound", 4),
      C<PortInfo>("filter_raw_outbound", 4),
      C<PortInfo>("m_key_violations", 4),
      C<PortInfo>("p_key_violations", 4),
      C<PortInfo>("q_key_violations", 4),
      C<PortInfo>("guid_cap", 4),
      C<PortInfo>("client_reregister", 4),
      C<PortInfo>("multicast_pkey_trap_suppression", 4),
      C<PortInfo>("subnet_timeout", 4),
      K("reserved", 32 + 416, 3),
      C<PortInfo>("resp_time_value", 4),
      C<PortInfo>("local_phy_errors", 4),
      C<PortInfo>("overrun_errors", 4),
      C<PortInfo>("max_credit_hint", 4),
      K("reserved", 32 + 448, 8),
      C<PortInfo>("link_round_trip_latency", 4),
      C<PortInfo>("capability_mask2", 4),
      C<PortInfo>("link_speed_ext_active", 4),
      C<PortInfo>("link_speed_ext_supported", 4),
  };
};

// SL2VLTableRecord (15.2.5.4).
struct Sl2VlTableRecord {
  uint16_t lid = 0;
  uint8_t in_port_num = 0;
  uint8_t out_port_num = 0;
  SlToVlTable table;
};
template <>
struct Layout<Sl2VlTableRecord> {
  static constexpr std::string_view kName = "SL2VLTableRecord";
  static constexpr size_t kSize = 16;
  static constexpr std::array kFields = {
      F<&Sl2VlTableRecord::lid>("lid", 0, 16),
      F<&Sl2VlTableRecord::in_port_num>("in_port_num", 16, 8),
      F<&Sl2VlTableRecord::out_port_num>("out_port_num", 24, 8),
  };
};
template <>
struct SaRecord<Sl2VlTableRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kSl2VlTableRecord;
  static constexpr uint16_t kAttrOffset = 2;
  static constexpr std::array kEmbedded = {E<&Sl2VlTableRecord::table>(8)};
  static constexpr std::array kComponents = {
      K("lid", 0, 16), K("in_port_num", 16, 8), K("out_port_num", 24, 8),
      K("reserved", 32, 32), C<SlToVlTable>("vl", 8)};
};

// SwitchInfoRecord (15.2.5.5).
struct SwitchInfoRecord {
  uint16_t lid = 0;
  SwitchInfo switch_info;
};
template <>
struct Layout<SwitchInfoRecord> {
  static constexpr std::string_view kName = "SwitchInfoRecord";
  static constexpr size_t kSize = 24;
  static constexpr std::array kFields = {F<&SwitchInfoRecord::lid>("lid", 0, 16)};
};
template <>
struct SaRecord<SwitchInfoRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kSwitchInfoRecord;
  static constexpr uint16_t kAttrOffset = 3;
  static constexpr std::array kEmbedded = {E<&SwitchInfoRecord::switch_info>(4, 20)};
  static constexpr std::array kComponents = {
      K("lid", 0, 16),
      K("reserved", 16, 16),
      C<SwitchInfo>("linear_fdb_cap", 4),
      C<SwitchInfo>("random_fdb_cap", 4),
      C<SwitchInfo>("multicast_fdb_cap", 4),
      C<SwitchInfo>("linear_fdb_top", 4),
      C<SwitchInfo>("default_port", 4),
      C<SwitchInfo>("default_mcast_primary_port", 4),
      C<SwitchInfo>("default_mcast_not_primary_port", 4),
      C<SwitchInfo>("life_time_value", 4),
      C<SwitchInfo>("port_state_change", 4),
      C<SwitchInfo>("optimized_sl_to_vl_mapping_programming", 4),
      C<SwitchInfo>("lids_per_port", 4),
      C<SwitchInfo>("partition_enforcement_cap", 4),
      C<SwitchInfo>("inbound_enforcement_cap", 4),
      C<SwitchInfo>("outbound_enforcement_cap", 4),
      C<SwitchInfo>("filter_raw_inbound_cap", 4),
      C<SwitchInfo>("filter_raw_outbound_cap", 4),
      C<SwitchInfo>("enhanced_port0", 4),
  };
};

// LinearForwardingTableRecord (15.2.5.6): one per switch and 64-LID block.
struct LftRecord {
  uint16_t lid = 0;
  uint16_t block_num = 0;
  LinearForwardingTable lft;
};
template <>
struct Layout<LftRecord> {
  static constexpr std::string_view kName = "LinearForwardingTableRecord";
  static constexpr size_t kSize = 72;
  static constexpr std::array kFields = {
      F<&LftRecord::lid>("lid", 0, 16),
      F<&LftRecord::block_num>("block_num", 16, 16),
  };
};
template <>
struct SaRecord<LftRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kLftRecord;
  static constexpr uint16_t kAttrOffset = 9;
  static constexpr std::array kEmbedded = {E<&LftRecord::lft>(8)};
  static constexpr std::array kComponents = {K("lid", 0, 16), K("block_num", 16, 16),
                                             K("reserved", 32, 32),
                                             C<LinearForwardingTable>("port", 8)};
};

// SMInfoRecord (15.2.5.7).
struct SmInfoRecord {
  uint16_t lid = 0;
  SmInfo sm_info;
};
template <>
struct Layout<SmInfoRecord> {
  static constexpr std::string_view kName = "SMInfoRecord";
  static constexpr size_t kSize = 25;
  static constexpr std::array kFields = {F<&SmInfoRecord::lid>("lid", 0, 16)};
};
template <>
struct SaRecord<SmInfoRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kSmInfoRecord;
  static constexpr uint16_t kAttrOffset = 4;  // 25 bytes padded to 32
  static constexpr std::array kEmbedded = {E<&SmInfoRecord::sm_info>(4)};
  static constexpr std::array kComponents = {
      K("lid", 0, 16),           K("reserved", 16, 16),    C<SmInfo>("guid", 4),
      C<SmInfo>("sm_key", 4),    C<SmInfo>("act_count", 4), C<SmInfo>("priority", 4),
      C<SmInfo>("sm_state", 4),
  };
};

// LinkRecord (15.2.5.13): one per direction of every cable.
struct LinkRecord {
  uint16_t from_lid = 0;
  uint8_t from_port_num = 0;
  uint8_t to_port_num = 0;
  uint16_t to_lid = 0;
};
template <>
struct Layout<LinkRecord> {
  static constexpr std::string_view kName = "LinkRecord";
  static constexpr size_t kSize = 8;
  static constexpr std::array kFields = {
      F<&LinkRecord::from_lid>("from_lid", 0, 16),
      F<&LinkRecord::from_port_num>("from_port_num", 16, 8),
      F<&LinkRecord::to_port_num>("to_port_num", 24, 8),
      F<&LinkRecord::to_lid>("to_lid", 32, 16),
  };
};
template <>
struct SaRecord<LinkRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kLinkRecord;
  static constexpr uint16_t kAttrOffset = 1;
  static constexpr std::array<Embedded<LinkRecord>, 0> kEmbedded = {};
  static constexpr std::array kComponents = {K("from_lid", 0, 16), K("from_port_num", 16, 8),
                                             K("to_port_num", 24, 8), K("to_lid", 32, 16)};
};

// GUIDInfoRecord (15.2.5.18).
struct GuidInfoRecord {
  uint16_t lid = 0;
  uint8_t block_num = 0;
  GuidInfo guid_info;
};
template <>
struct Layout<GuidInfoRecord> {
  static constexpr std::string_view kName = "GUIDInfoRecord";
  static constexpr size_t kSize = 72;
  static constexpr std::array kFields = {
      F<&GuidInfoRecord::lid>("lid", 0, 16),
      F<&GuidInfoRecord::block_num>("block_num", 16, 8),
  };
};
template <>
struct SaRecord<GuidInfoRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kGuidInfoRecord;
  static constexpr uint16_t kAttrOffset = 9;
  static constexpr std::array kEmbedded = {E<&GuidInfoRecord::guid_info>(8)};
  static constexpr std::array kComponents = {
      K("lid", 0, 16),    K("block_num", 16, 8), K("reserved", 24, 8), K("reserved", 32, 32),
      K("guid0", 64, 64), K("guid1", 128, 64),   K("guid2", 192, 64),  K("guid3", 256, 64),
      K("guid4", 320, 64), K("guid5", 384, 64),  K("guid6", 448, 64),  K("guid7", 512, 64),
  };
};

// P_KeyTableRecord (15.2.5.11).
struct PKeyTableRecord {
  uint16_t lid = 0;
  uint16_t block_num = 0;
  uint8_t port_num = 0;  // switches: the port; CAs: reserved
  PKeyTable pkey_table;
};
template <>
struct Layout<PKeyTableRecord> {
  static constexpr std::string_view kName = "P_KeyTableRecord";
  static constexpr size_t kSize = 72;
  static constexpr std::array kFields = {
      F<&PKeyTableRecord::lid>("lid", 0, 16),
      F<&PKeyTableRecord::block_num>("block_num", 16, 16),
      F<&PKeyTableRecord::port_num>("port_num", 32, 8),
  };
};
template <>
struct SaRecord<PKeyTableRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kPKeyTableRecord;
  static constexpr uint16_t kAttrOffset = 9;
  static constexpr std::array kEmbedded = {E<&PKeyTableRecord::pkey_table>(8)};
  static constexpr std::array kComponents = {K("lid", 0, 16), K("block_num", 16, 16),
                                             K("port_num", 32, 8), K("reserved", 40, 24),
                                             C<PKeyTable>("pkey", 8)};
};

// VLArbitrationTableRecord (15.2.5.9). block_num 1..4: low, high, and their upper halves.
struct VlArbitrationTableRecord {
  uint16_t lid = 0;
  uint8_t output_port_num = 0;
  uint8_t block_num = 0;
  VlArbitrationTable table;
};
template <>
struct Layout<VlArbitrationTableRecord> {
  static constexpr std::string_view kName = "VLArbitrationTableRecord";
  static constexpr size_t kSize = 72;
  static constexpr std::array kFields = {
      F<&VlArbitrationTableRecord::lid>("lid", 0, 16),
      F<&VlArbitrationTableRecord::output_port_num>("output_port_num", 16, 8),
      F<&VlArbitrationTableRecord::block_num>("block_num", 24, 8),
  };
};
template <>
struct SaRecord<VlArbitrationTableRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kVlArbitrationTableRecord;
  static constexpr uint16_t kAttrOffset = 9;
  static constexpr std::array kEmbedded = {E<&VlArbitrationTableRecord::table>(8)};
  static constexpr std::array kComponents = {K("lid", 0, 16), K("output_port_num", 16, 8),
                                             K("block_num", 24, 8), K("reserved", 32, 32)};
};

// ServiceRecord (15.2.5.14): a service a port registered with SubnAdmSet. Not a view of
// the fabric but SA state the SA keeps (sm/sa/sa_server.h) and persists (ha/state_store.h).
// ServiceLease is in seconds; kServiceLeaseInfinite never expires.
inline constexpr uint32_t kServiceLeaseInfinite = 0xFFFFFFFF;
struct ServiceRecord {
  uint64_t service_id = 0;
  std::array<uint8_t, 16> service_gid{};  // network byte order: prefix, then port GUID
  uint16_t service_p_key = 0;
  uint32_t service_lease = 0;
  std::array<uint8_t, 16> service_key{};
  std::array<uint8_t, 64> service_name{};  // NUL-padded UTF-8
  std::array<uint8_t, 16> service_data8{};
  std::array<uint16_t, 8> service_data16{};
  std::array<uint32_t, 4> service_data32{};
  std::array<uint64_t, 2> service_data64{};

  uint64_t GidPrefix() const;
  uint64_t GidGuid() const;
};
template <>
struct Layout<ServiceRecord> {
  static constexpr std::string_view kName = "ServiceRecord";
  static constexpr size_t kSize = 176;
  static constexpr std::array kFields = {
      F<&ServiceRecord::service_id>("service_id", 0, 64, FieldFormat::kHex),
      A<&ServiceRecord::service_gid>("service_gid", 64, 8, 8, FieldFormat::kBytes),
      F<&ServiceRecord::service_p_key>("service_p_key", 192, 16, FieldFormat::kHex),
      F<&ServiceRecord::service_lease>("service_lease", 224, 32),
      A<&ServiceRecord::service_key>("service_key", 256, 8, 8, FieldFormat::kBytes),
      A<&ServiceRecord::service_name>("service_name", 384, 8, 8, FieldFormat::kString),
      A<&ServiceRecord::service_data8>("service_data8", 896, 8, 8, FieldFormat::kHex),
      A<&ServiceRecord::service_data16>("service_data16", 1024, 16, 16, FieldFormat::kHex),
      A<&ServiceRecord::service_data32>("service_data32", 1152, 32, 32, FieldFormat::kHex),
      A<&ServiceRecord::service_data64>("service_data64", 1280, 64, 64, FieldFormat::kHex),
  };
};
namespace detail {
// One component per field, one per element of the ServiceData arrays, in the order of
// OpenSM's IB_SR_COMPMASK_* bits (SID 0 .. SDATA64_1 36).
constexpr std::array<Component, 37> ServiceRecordComponents() {
  std::array<Component, 37> c{};
  c[0] = K("service_id", 0, 64);
  c[1] = K("service_gid", 64, 128);
  c[2] = K("service_p_key", 192, 16);
  c[3] = K("reserved", 208, 16);
  c[4] = K("service_lease", 224, 32);
  c[5] = K("service_key", 256, 128);
  c[6] = K("service_name", 384, 512);
  for (uint32_t i = 0; i < 16; ++i) c[7 + i] = K("service_data8", 896 + 8 * i, 8);
  for (uint32_t i = 0; i < 8; ++i) c[23 + i] = K("service_data16", 1024 + 16 * i, 16);
  for (uint32_t i = 0; i < 4; ++i) c[31 + i] = K("service_data32", 1152 + 32 * i, 32);
  for (uint32_t i = 0; i < 2; ++i) c[35 + i] = K("service_data64", 1280 + 64 * i, 64);
  return c;
}
}  // namespace detail
template <>
struct SaRecord<ServiceRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kServiceRecord;
  static constexpr uint16_t kAttrOffset = 22;  // 176 bytes, unpadded
  static constexpr std::array<Embedded<ServiceRecord>, 0> kEmbedded = {};
  static constexpr std::array kComponents = detail::ServiceRecordComponents();
};
// Component numbers the SA server needs by name.
namespace sr_comp {
inline constexpr uint64_t kServiceId = 1ull << 0;
inline constexpr uint64_t kServiceGid = 1ull << 1;
inline constexpr uint64_t kServicePKey = 1ull << 2;
inline constexpr uint64_t kServiceLease = 1ull << 4;
}  // namespace sr_comp

inline uint64_t ServiceRecord::GidPrefix() const {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | service_gid[i];
  return v;
}
inline uint64_t ServiceRecord::GidGuid() const {
  uint64_t v = 0;
  for (size_t i = 8; i < 16; ++i) v = (v << 8) | service_gid[i];
  return v;
}

// --- the generic engine -----------------------------------------------------------------

// Compile-time checks of a record: key fields valid (LayoutIsValid), embedded attributes
// inside the record and clear of the key fields, every component non-empty and inside the
// record, at most 64 components, and the attribute offset large enough for the record.
template <typename R>
constexpr bool RecordIsValid() {
  if (!LayoutIsValid<R>()) return false;
  constexpr size_t size = Layout<R>::kSize;
  if (size_t{SaRecord<R>::kAttrOffset} * 8 < size) return false;
  for (const auto& e : SaRecord<R>::kEmbedded) {
    if (e.size == 0 || e.byte_offset + e.size > size) return false;
    for (const auto& f : Layout<R>::kFields) {
      size_t fb = f.bit_offset, fe = fb + (f.count - 1) * size_t{f.stride} + f.bit_width;
      if (fb < (e.byte_offset + e.size) * 8 && e.byte_offset * 8 < fe) return false;
    }
  }
  if (SaRecord<R>::kComponents.size() > 64) return false;
  for (const auto& c : SaRecord<R>::kComponents) {
    if (c.bit_width == 0 || c.bit_offset + c.bit_width > size * 8) return false;
  }
  return true;
}
static_assert(RecordIsValid<NodeRecord>());
static_assert(RecordIsValid<PortInfoRecord>());
static_assert(RecordIsValid<Sl2VlTableRecord>());
static_assert(RecordIsValid<SwitchInfoRecord>());
static_assert(RecordIsValid<LftRecord>());
static_assert(RecordIsValid<SmInfoRecord>());
static_assert(RecordIsValid<LinkRecord>());
static_assert(RecordIsValid<GuidInfoRecord>());
static_assert(RecordIsValid<PKeyTableRecord>());
static_assert(RecordIsValid<VlArbitrationTableRecord>());
static_assert(RecordIsValid<ServiceRecord>());

// Writes `r` into the first Layout<R>::kSize bytes of `out`; reserved bits zero.
// REQUIRES: out.size() >= Layout<R>::kSize.
template <typename R>
void EncodeRecord(const R& r, std::span<uint8_t> out) {
  EncodeTo(r, out);
  for (const auto& e : SaRecord<R>::kEmbedded) e.encode(r, out.subspan(e.byte_offset), e.size);
}

// Reads a record; Corrupt if `in` is shorter than the record.
template <typename R>
Result<R> DecodeRecord(std::span<const uint8_t> in) {
  R r{};
  IBSM_RETURN_IF_ERROR(DecodeFrom(in, &r));
  for (const auto& e : SaRecord<R>::kEmbedded)
    IBSM_RETURN_IF_ERROR(e.decode(in.subspan(e.byte_offset), e.size, &r));
  return r;
}

// True when every component selected by `comp_mask` has the same bits in `record` as in
// `request` (both wire images of R; `request` may be shorter than the record, missing bytes
// count as zero). `enhanced`: the request carried kPortInfoCapMaskMatchModifier.
// Mask bits beyond the record's components are ignored, as OpenSM does.
inline bool ComponentsMatch(std::span<const Component> components, uint64_t comp_mask,
                            std::span<const uint8_t> request, std::span<const uint8_t> record,
                            bool enhanced = false) {
  // Bits past the end of `span` read as zero, so a short request cannot read out of bounds.
  auto bits = [](std::span<const uint8_t> span, uint32_t off, uint32_t width) -> uint64_t {
    if (size_t{off} + width <= span.size() * 8) return GetBits(span, off, width);
    uint64_t v = 0;
    for (uint32_t i = 0; i < width; ++i) {
      uint32_t b = off + i;
      uint64_t bit = b / 8 < span.size() ? (span[b / 8] >> (7 - b % 8)) & 1 : 0;
      v = (v << 1) | bit;
    }
    return v;
  };
  for (size_t i = 0; i < components.size() && i < 64; ++i) {
    if ((comp_mask & (uint64_t{1} << i)) == 0) continue;
    const Component& c = components[i];
    for (uint32_t done = 0; done < c.bit_width; done += 64) {
      uint32_t w = c.bit_width - done < 64 ? c.bit_width - done : 64;
      uint64_t want = bits(request, c.bit_offset + done, w);
      uint64_t have = bits(record, c.bit_offset + done, w);
      bool ok = c.match == Match::kBitsSetIfAsked && enhanced ? (have & want) == want
                                                               : have == want;
      if (!ok) return false;
    }
  }
  return true;
}

template <typename R>
bool Matches(uint64_t comp_mask, std::span<const uint8_t> request,
             std::span<const uint8_t> record, bool enhanced = false) {
  return ComponentsMatch(SaRecord<R>::kComponents, comp_mask, request, record, enhanced);
}

}  // namespace ibsm::mad
