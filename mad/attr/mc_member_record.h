// Multicast records of the SA: MCMemberRecord (IBA 15.2.5.17), attribute 0x0038, which
// clients Set (join/create), Delete (leave) and Get/GetTable; and
// MulticastForwardingTableRecord (15.2.5.8), attribute 0x0017, the SA's view of the MFT
// blocks the SM programmed.
//
// Offsets agree with OpenSM's include/iba/ib_types.h (ib_member_rec_t, ib_mft_record_t) and
// libibmad's IB_SA_MCM_* fields; component numbers with IB_MCR_COMPMASK_* and
// IB_MFTR_COMPMASK_*. All numbers here are frozen wire values.
#pragma once

#include <cstdint>

#include "mad/attr/multicast_forwarding_table.h"
#include "mad/attr/path_record.h"
#include "mad/attr/sa_records.h"

namespace ibsm::mad {

// JoinState bits (15.2.5.17 table 216 note): a port may hold several at once.
namespace join_state {
inline constexpr uint8_t kFull = 1 << 0;
inline constexpr uint8_t kNon = 1 << 1;
inline constexpr uint8_t kSendOnlyNon = 1 << 2;
inline constexpr uint8_t kSendOnlyFull = 1 << 3;  // IBA 1.3; OpenSM treats it as full
inline constexpr uint8_t kAll = 0x0F;
}  // namespace join_state

// Multicast scope of an MGID (4.1.1, the low nibble of byte 1).
namespace mc_scope {
inline constexpr uint8_t kLinkLocal = 0x2;
inline constexpr uint8_t kSiteLocal = 0x5;
inline constexpr uint8_t kOrganizationLocal = 0x8;
inline constexpr uint8_t kGlobal = 0xE;
}  // namespace mc_scope

struct McMemberRecord {
  uint64_t mgid_prefix = 0;  // the MGID's high 64 bits (ff1s:...)
  uint64_t mgid_guid = 0;    // its low 64 bits
  uint64_t port_gid_prefix = 0;
  uint64_t port_gid_guid = 0;
  uint32_t q_key = 0;
  uint16_t mlid = 0;
  uint8_t mtu_selector = 0;
  uint8_t mtu = 0;
  uint8_t tclass = 0;
  uint16_t p_key = 0;
  uint8_t rate_selector = 0;
  uint8_t rate = 0;
  uint8_t packet_life_time_selector = 0;
  uint8_t packet_life_time = 0;
  uint8_t sl = 0;
  uint32_t flow_label = 0;
  uint8_t hop_limit = 0;
  uint8_t scope = 0;
  uint8_t join_state = 0;
  uint8_t proxy_join = 0;

  Gid mgid() const { return Gid{mgid_prefix, mgid_guid}; }
  Gid port_gid() const { return Gid{port_gid_prefix, port_gid_guid}; }
  void set_mgid(const Gid& g) { mgid_prefix = g.prefix, mgid_guid = g.guid; }
  void set_port_gid(const Gid& g) { port_gid_prefix = g.prefix, port_gid_guid = g.guid; }
};
template <>
struct Layout<McMemberRecord> {
  static constexpr std::string_view kName = "MCMemberRecord";
  static constexpr size_t kSize = 52;
  static constexpr std::array kFields = {
      F<&McMemberRecord::mgid_prefix>("mgid_prefix", 0, 64, FieldFormat::kGuid),
      F<&McMemberRecord::mgid_guid>("mgid_guid", 64, 64, FieldFormat::kGuid),
      F<&McMemberRecord::port_gid_prefix>("port_gid_prefix", 128, 64, FieldFormat::kGuid),
      F<&McMemberRecord::port_gid_guid>("port_gid_guid", 192, 64, FieldFormat::kGuid),
      F<&McMemberRecord::q_key>("q_key", 256, 32, FieldFormat::kHex),
      F<&McMemberRecord::mlid>("mlid", 288, 16, FieldFormat::kHex),
      F<&McMemberRecord::mtu_selector>("mtu_selector", 304, 2),
      F<&McMemberRecord::mtu>("mtu", 306, 6),
      F<&McMemberRecord::tclass>("tclass", 312, 8),
      F<&McMemberRecord::p_key>("p_key", 320, 16, FieldFormat::kHex),
      F<&McMemberRecord::rate_selector>("rate_selector", 336, 2),
      F<&McMemberRecord::rate>("rate", 338, 6),
      F<&McMemberRecord::packet_life_time_selector>("packet_life_time_selector", 344, 2),
      F<&McMemberRecord::packet_life_time>("packet_life_time", 346, 6),
      F<&McMemberRecord::sl>("sl", 352, 4),
      F<&McMemberRecord::flow_label>("flow_label", 356, 20, FieldFormat::kHex),
      F<&McMemberRecord::hop_limit>("hop_limit", 376, 8),
      F<&McMemberRecord::scope>("scope", 384, 4),
      F<&McMemberRecord::join_state>("join_state", 388, 4, FieldFormat::kHex),
      F<&McMemberRecord::proxy_join>("proxy_join", 392, 1),
  };
};
template <>
struct SaRecord<McMemberRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kMcMemberRecord;
  static constexpr uint16_t kAttrOffset = 7;  // 52 bytes padded to 56 (sizeof ib_member_rec_t)
  static constexpr std::array<Embedded<McMemberRecord>, 0> kEmbedded = {};
  static constexpr std::array kComponents = {
      K("mgid", 0, 128),          K("port_gid", 128, 128),   K("q_key", 256, 32),
      K("mlid", 288, 16),         K("mtu_selector", 304, 2), K("mtu", 306, 6),
      K("tclass", 312, 8),        K("p_key", 320, 16),       K("rate_selector", 336, 2),
      K("rate", 338, 6),          K("life_selector", 344, 2), K("life", 346, 6),
      K("sl", 352, 4),            K("flow_label", 356, 20),  K("hop_limit", 376, 8),
      K("scope", 384, 4),         K("join_state", 388, 4),   K("proxy_join", 392, 1),
  };
};
static_assert(RecordIsValid<McMemberRecord>());

// MCMemberRecord component-mask bits by name (the wire numbers, IB_MCR_COMPMASK_*).
namespace mcr_comp {
inline constexpr uint64_t kMgid = 1ull << 0;
inline constexpr uint64_t kPortGid = 1ull << 1;
inline constexpr uint64_t kQKey = 1ull << 2;
inline constexpr uint64_t kMlid = 1ull << 3;
inline constexpr uint64_t kMtuSelector = 1ull << 4;
inline constexpr uint64_t kMtu = 1ull << 5;
inline constexpr uint64_t kTClass = 1ull << 6;
inline constexpr uint64_t kPKey = 1ull << 7;
inline constexpr uint64_t kRateSelector = 1ull << 8;
inline constexpr uint64_t kRate = 1ull << 9;
inline constexpr uint64_t kLifeSelector = 1ull << 10;
inline constexpr uint64_t kLife = 1ull << 11;
inline constexpr uint64_t kSl = 1ull << 12;
inline constexpr uint64_t kFlowLabel = 1ull << 13;
inline constexpr uint64_t kHopLimit = 1ull << 14;
inline constexpr uint64_t kScope = 1ull << 15;
inline constexpr uint64_t kJoinState = 1ull << 16;
inline constexpr uint64_t kProxyJoin = 1ull << 17;
// What any join needs (o15-0.1.8), and what a join that creates a group needs on top
// (o15-0.1.9 / C15-0.1.x; OpenSM's REQUIRED_MC_CREATE_COMP_MASK).
inline constexpr uint64_t kJoin = kMgid | kPortGid | kJoinState;
inline constexpr uint64_t kCreate = kJoin | kQKey | kTClass | kPKey | kFlowLabel | kSl;
}  // namespace mcr_comp

// MulticastForwardingTableRecord (15.2.5.8): one per switch, 16-port position and 32-MLID
// block.
struct MftRecord {
  uint16_t lid = 0;
  uint8_t position = 0;
  uint16_t block_num = 0;
  MulticastForwardingTable mft;
};
template <>
struct Layout<MftRecord> {
  static constexpr std::string_view kName = "MulticastForwardingTableRecord";
  static constexpr size_t kSize = 72;
  static constexpr std::array kFields = {
      F<&MftRecord::lid>("lid", 0, 16),
      F<&MftRecord::position>("position", 16, 4),
      F<&MftRecord::block_num>("block_num", 23, 9),
  };
};
template <>
struct SaRecord<MftRecord> {
  static constexpr uint16_t kAttrId = sa_attr::kMftRecord;
  static constexpr uint16_t kAttrOffset = 9;
  static constexpr std::array kEmbedded = {E<&MftRecord::mft>(8)};
  static constexpr std::array kComponents = {K("lid", 0, 16), K("position", 16, 4),
                                             K("reserved", 20, 3), K("block_num", 23, 9),
                                             K("reserved", 32, 32)};
};
static_assert(RecordIsValid<MftRecord>());

namespace mftr_comp {
inline constexpr uint64_t kLid = 1ull << 0;
inline constexpr uint64_t kPosition = 1ull << 1;
inline constexpr uint64_t kBlock = 1ull << 3;
}  // namespace mftr_comp

}  // namespace ibsm::mad
