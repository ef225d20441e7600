// PathRecord (IBA 15.2.5.16), SA attribute 0x0035, 64 bytes, and MultiPathRecord
// (15.2.5.17), SA attribute 0x003A: a 24-byte header followed by SGIDCount + DGIDCount GIDs.
// Also the GID value type (4.1.1: subnet prefix + interface ID, the port GUID) that SA
// records carry as 16 network-order bytes (GidBytes, as in ClassPortInfo and Notice).
//
// Component-mask bits are the wire numbers (bit n of the SA header's 64-bit ComponentMask
// = 1ull << n); they are frozen. OpenSM's IB_PR_COMPMASK_* / IB_MPR_COMPMASK_* agree.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "mad/attr/class_port_info.h"
#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

// ---- GID ----

struct Gid {
  uint64_t prefix = 0;  // subnet prefix
  uint64_t guid = 0;    // interface ID: the port GUID

  auto operator<=>(const Gid&) const = default;
  // fe80::/10 (IBA 4.1.1: the default, link-local prefix).
  bool is_link_local() const { return (prefix & 0xFFC0000000000000ull) == 0xFE80000000000000ull; }
  bool is_multicast() const { return (prefix & 0xFF00000000000000ull) == 0xFF00000000000000ull; }
};

template <>
struct Layout<Gid> {
  static constexpr std::string_view kName = "GID";
  static constexpr size_t kSize = 16;
  static constexpr std::array kFields = {
      F<&Gid::prefix>("prefix", 0, 64, FieldFormat::kGuid),
      F<&Gid::guid>("guid", 64, 64, FieldFormat::kGuid),
  };
};
static_assert(LayoutIsValid<Gid>());

inline Gid ToGid(const GidBytes& b) {
  Gid g;
  (void)DecodeFrom(b, &g);  // 16 bytes always decode
  return g;
}
inline GidBytes ToGidBytes(const Gid& g) {
  GidBytes b{};
  EncodeTo(g, b);
  return b;
}

// ---- Encodings shared by PathRecord, MultiPathRecord and MCMemberRecord ----

// Selector of the MTU, Rate and PacketLifeTime fields (IBA 15.2.5.16 table 207).
namespace selector {
inline constexpr uint8_t kGreaterThan = 0;
inline constexpr uint8_t kLessThan = 1;
inline constexpr uint8_t kExactly = 2;
inline constexpr uint8_t kLargest = 3;  // for PacketLifeTime: smallest available
}  // namespace selector

// MTU codes (PortInfo MTUCap, PathRecord MTU).
namespace mtu {
inline constexpr uint8_t k256 = 1;
inline constexpr uint8_t k512 = 2;
inline constexpr uint8_t k1024 = 3;
inline constexpr uint8_t k2048 = 4;
inline constexpr uint8_t k4096 = 5;
}  // namespace mtu
inline constexpr bool IsValidMtu(uint8_t m) { return m >= mtu::k256 && m <= mtu::k4096; }

// Static rate codes (IBA 15.2.5.16 table 208 with the later additions; rdma-core's
// enum ibv_rate and OpenSM's IB_PATH_RECORD_RATE_* use the same numbers).
namespace rate {
inline constexpr uint8_t k2_5 = 2;
inline constexpr uint8_t k10 = 3;
inline constexpr uint8_t k30 = 4;
inline constexpr uint8_t k5 = 5;
inline constexpr uint8_t k20 = 6;
inline constexpr uint8_t k40 = 7;
inline constexpr uint8_t k60 = 8;
inline constexpr uint8_t k80 = 9;
inline constexpr uint8_t k120 = 10;
inline constexpr uint8_t k14 = 11;
inline constexpr uint8_t k56 = 12;
inline constexpr uint8_t k112 = 13;
inline constexpr uint8_t k168 = 14;
inline constexpr uint8_t k25 = 15;
inline constexpr uint8_t k100 = 16;
inline constexpr uint8_t k200 = 17;
inline constexpr uint8_t k300 = 18;
inline constexpr uint8_t k28 = 19;
inline constexpr uint8_t k50 = 20;
inline constexpr uint8_t k400 = 21;
inline constexpr uint8_t k600 = 22;
inline constexpr uint8_t k800 = 23;
inline constexpr uint8_t k1200 = 24;

// Every code with its data rate in units of 0.5 Gb/s, slowest first: the order in which
// selectors compare rates (code numbers are not monotonic).
struct Entry {
  uint8_t code;
  uint16_t half_gbps;
};
inline constexpr std::array<Entry, 23> kByBandwidth = {{
    {k2_5, 5},   {k5, 10},    {k10, 20},    {k14, 28},    {k20, 40},     {k25, 50},
    {k28, 56},   {k30, 60},   {k40, 80},    {k50, 100},   {k56, 112},    {k60, 120},
    {k80, 160},  {k100, 200}, {k112, 224},  {k120, 240},  {k168, 336},   {k200, 400},
    {k300, 600}, {k400, 800}, {k600, 1200}, {k800, 1600}, {k1200, 2400},
}};
// Position of `code` in kByBandwidth, or -1 for a reserved code.
constexpr int Rank(uint8_t code) {
  for (size_t i = 0; i < kByBandwidth.size(); ++i)
    if (kByBandwidth[i].code == code) return static_cast<int>(i);
  return -1;
}
}  // namespace rate
inline constexpr bool IsValidRate(uint8_t r) { return rate::Rank(r) >= 0; }

// ---- PathRecord ----

// Component-mask bits (IBA 15.2.5.16). ServiceID takes two bits (its halves were two
// reserved fields before the QoS annex); a query sets both or neither.
namespace path_comp {
inline constexpr uint64_t kServiceIdMsb = 1ull << 0;
inline constexpr uint64_t kServiceIdLsb = 1ull << 1;
inline constexpr uint64_t kServiceId = kServiceIdMsb | kServiceIdLsb;
inline constexpr uint64_t kDgid = 1ull << 2;
inline constexpr uint64_t kSgid = 1ull << 3;
inline constexpr uint64_t kDlid = 1ull << 4;
inline constexpr uint64_t kSlid = 1ull << 5;
inline constexpr uint64_t kRawTraffic = 1ull << 6;
// bit 7: reserved
inline constexpr uint64_t kFlowLabel = 1ull << 8;
inline constexpr uint64_t kHopLimit = 1ull << 9;
inline constexpr uint64_t kTClass = 1ull << 10;
inline constexpr uint64_t kReversible = 1ull << 11;
inline constexpr uint64_t kNumbPath = 1ull << 12;
inline constexpr uint64_t kPKey = 1ull << 13;
inline constexpr uint64_t kQosClass = 1ull << 14;
inline constexpr uint64_t kSl = 1ull << 15;
inline constexpr uint64_t kMtuSelector = 1ull << 16;
inline constexpr uint64_t kMtu = 1ull << 17;
inline constexpr uint64_t kRateSelector = 1ull << 18;
inline constexpr uint64_t kRate = 1ull << 19;
inline constexpr uint64_t kPacketLifeTimeSelector = 1ull << 20;
inline constexpr uint64_t kPacketLifeTime = 1ull << 21;
inline constexpr uint64_t kPreference = 1ull << 22;
}  // namespace path_comp

struct PathRecord {
  static constexpr uint16_t kAttrId = 0x0035;  // SA attribute (sa_attr::kPathRecord)
  uint64_t service_id = 0;
  GidBytes dgid{};
  GidBytes sgid{};
  uint16_t dlid = 0;
  uint16_t slid = 0;
  uint8_t raw_traffic = 0;  // 1 bit
  uint32_t flow_label = 0;  // 20 bits
  uint8_t hop_limit = 0;
  uint8_t tclass = 0;
  uint8_t reversible = 0;  // 1 bit
  uint8_t numb_path = 0;   // 7 bits; a query's limit, 0 in answers
  uint16_t pkey = 0;
  uint16_t qos_class = 0;    // 12 bits
  uint8_t sl = 0;            // 4 bits
  uint8_t mtu_selector = 0;  // 2 bits
  uint8_t mtu = 0;           // 6 bits
  uint8_t rate_selector = 0;
  uint8_t rate = 0;
  uint8_t packet_life_time_selector = 0;
  uint8_t packet_life_time = 0;
  uint8_t preference = 0;
};

template <>
struct Layout<PathRecord> {
  using P = PathRecord;
  static constexpr std::string_view kName = "PathRecord";
  static constexpr size_t kSize = 64;
  static constexpr std::array kFields = {
      F<&P::service_id>("service_id", 0, 64, FieldFormat::kHex),
      A<&P::dgid>("dgid", 64, 8, 8, FieldFormat::kBytes),
      A<&P::sgid>("sgid", 192, 8, 8, FieldFormat::kBytes),
      F<&P::dlid>("dlid", 320, 16),
      F<&P::slid>("slid", 336, 16),
      F<&P::raw_traffic>("raw_traffic", 352, 1),
      F<&P::flow_label>("flow_label", 356, 20, FieldFormat::kHex),
      F<&P::hop_limit>("hop_limit", 376, 8),
      F<&P::tclass>("tclass", 384, 8),
      F<&P::reversible>("reversible", 392, 1),
      F<&P::numb_path>("numb_path", 393, 7),
      F<&P::pkey>("pkey", 400, 16, FieldFormat::kHex),
      F<&P::qos_class>("qos_class", 416, 12),
      F<&P::sl>("sl", 428, 4),
      F<&P::mtu_selector>("mtu_selector", 432, 2),
      F<&P::mtu>("mtu", 434, 6),
      F<&P::rate_selector>("rate_selector", 440, 2),
      F<&P::rate>("rate", 442, 6),
      F<&P::packet_life_time_selector>("packet_life_time_selector", 448, 2),
      F<&P::packet_life_time>("packet_life_time", 450, 6),
      F<&P::preference>("preference", 456, 8),
  };
  // The component-mask bit of each field, in kFields order. ServiceID's second bit is
  // path_comp::kServiceIdLsb.
  static constexpr std::array<uint8_t, kFields.size()> kCompBits = {
      0, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22};
};
static_assert(LayoutIsValid<PathRecord>());

// ---- MultiPathRecord ----

namespace multipath_comp {
inline constexpr uint64_t kRawTraffic = 1ull << 0;
// bit 1: reserved
inline constexpr uint64_t kFlowLabel = 1ull << 2;
inline constexpr uint64_t kHopLimit = 1ull << 3;
inline constexpr uint64_t kTClass = 1ull << 4;
inline constexpr uint64_t kReversible = 1ull << 5;
inline constexpr uint64_t kNumbPath = 1ull << 6;
inline constexpr uint64_t kPKey = 1ull << 7;
inline constexpr uint64_t kQosClass = 1ull << 8;
inline constexpr uint64_t kSl = 1ull << 9;
inline constexpr uint64_t kMtuSelector = 1ull << 10;
inline constexpr uint64_t kMtu = 1ull << 11;
inline constexpr uint64_t kRateSelector = 1ull << 12;
inline constexpr uint64_t kRate = 1ull << 13;
inline constexpr uint64_t kPacketLifeTimeSelector = 1ull << 14;
inline constexpr uint64_t kPacketLifeTime = 1ull << 15;
inline constexpr uint64_t kServiceIdMsb = 1ull << 16;
inline constexpr uint64_t kIndependenceSelector = 1ull << 17;
// bit 18: reserved
inline constexpr uint64_t kSgidCount = 1ull << 19;
inline constexpr uint64_t kDgidCount = 1ull << 20;
inline constexpr uint64_t kServiceIdLsb = 1ull << 21;
inline constexpr uint64_t kServiceId = kServiceIdMsb | kServiceIdLsb;
}  // namespace multipath_comp

// The fixed part. The GIDs (SGIDs first, then DGIDs) follow at byte kSize, 16 bytes each;
// read and write them with DecodeMultiPathRequest / EncodeMultiPathRequest.
struct MultiPathRecord {
  static constexpr uint16_t kAttrId = 0x003A;  // SA attribute (sa_attr::kMultiPathRecord)
  uint8_t raw_traffic = 0;
  uint32_t flow_label = 0;
  uint8_t hop_limit = 0;
  uint8_t tclass = 0;
  uint8_t reversible = 0;
  uint8_t numb_path = 0;
  uint16_t pkey = 0;
  uint16_t qos_class = 0;
  uint8_t sl = 0;
  uint8_t mtu_selector = 0;
  uint8_t mtu = 0;
  uint8_t rate_selector = 0;
  uint8_t rate = 0;
  uint8_t packet_life_time_selector = 0;
  uint8_t packet_life_time = 0;
  uint8_t service_id_msb = 0;         // ServiceID bits 63..56
  uint8_t independence_selector = 0;  // 2 bits
  uint8_t sgid_count = 0;
  uint8_t dgid_count = 0;
  uint64_t service_id_lsb = 0;  // ServiceID bits 55..0

  uint64_t service_id() const { return (uint64_t{service_id_msb} << 56) | service_id_lsb; }
};

template <>
struct Layout<MultiPathRecord> {
  using M = MultiPathRecord;
  static constexpr std::string_view kName = "MultiPathRecord";
  static constexpr size_t kSize = 24;
  static constexpr std::array kFields = {
      F<&M::raw_traffic>("raw_traffic", 0, 1),
      F<&M::flow_label>("flow_label", 4, 20, FieldFormat::kHex),
      F<&M::hop_limit>("hop_limit", 24, 8),
      F<&M::tclass>("tclass", 32, 8),
      F<&M::reversible>("reversible", 40, 1),
      F<&M::numb_path>("numb_path", 41, 7),
      F<&M::pkey>("pkey", 48, 16, FieldFormat::kHex),
      F<&M::qos_class>("qos_class", 64, 12),
      F<&M::sl>("sl", 76, 4),
      F<&M::mtu_selector>("mtu_selector", 80, 2),
      F<&M::mtu>("mtu", 82, 6),
      F<&M::rate_selector>("rate_selector", 88, 2),
      F<&M::rate>("rate", 90, 6),
      F<&M::packet_life_time_selector>("packet_life_time_selector", 96, 2),
      F<&M::packet_life_time>("packet_life_time", 98, 6),
      F<&M::service_id_msb>("service_id_msb", 104, 8, FieldFormat::kHex),
      F<&M::independence_selector>("independence_selector", 112, 2),
      F<&M::sgid_count>("sgid_count", 120, 8),
      F<&M::dgid_count>("dgid_count", 128, 8),
      F<&M::service_id_lsb>("service_id_lsb", 136, 56, FieldFormat::kHex),
  };
  static constexpr std::array<uint8_t, kFields.size()> kCompBits = {
      0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 21};
};
static_assert(LayoutIsValid<MultiPathRecord>());

inline constexpr size_t kGidSize = Layout<Gid>::kSize;
// GIDs that fit in one SA MAD's 200 data bytes (OpenSM's IB_MULTIPATH_MAX_GIDS); a
// GetMulti request sent with RMPP may carry more.
inline constexpr size_t kMultiPathGidsInOneMad =
    (kSaDataSize - Layout<MultiPathRecord>::kSize) / kGidSize;

// A MultiPathRecord with its GID lists.
struct MultiPathRequest {
  MultiPathRecord record;
  std::vector<Gid> sgids;  // record.sgid_count of them
  std::vector<Gid> dgids;  // record.dgid_count of them
};

// Reads the fixed part and sgid_count + dgid_count GIDs. Corrupt if `in` is shorter than
// that. Untrusted input: never reads past `in`.
inline Result<MultiPathRequest> DecodeMultiPathRequest(std::span<const uint8_t> in) {
  MultiPathRequest r;
  IBSM_RETURN_IF_ERROR(DecodeFrom(in, &r.record));
  const size_t n = size_t{r.record.sgid_count} + r.record.dgid_count;
  const size_t need = Layout<MultiPathRecord>::kSize + n * kGidSize;
  if (in.size() < need) {
    return Corrupt("MultiPathRecord with " + std::to_string(n) + " GIDs needs " +
                   std::to_string(need) + " bytes, got " + std::to_string(in.size()));
  }
  for (size_t i = 0; i < n; ++i) {
    Gid g;
    IBSM_RETURN_IF_ERROR(DecodeFrom(in.subspan(Layout<MultiPathRecord>::kSize + i * kGidSize), &g));
    (i < r.record.sgid_count ? r.sgids : r.dgids).push_back(g);
  }
  return r;
}

// Bytes the request occupies: the fixed part plus every GID.
inline size_t MultiPathRequestSize(const MultiPathRequest& r) {
  return Layout<MultiPathRecord>::kSize + (r.sgids.size() + r.dgids.size()) * kGidSize;
}

// Writes the fixed part (with sgid_count/dgid_count taken from the lists) and the GIDs.
// InvalidArgument if a list holds more than 255 GIDs or `out` is too small.
inline Status EncodeMultiPathRequest(const MultiPathRequest& r, std::span<uint8_t> out) {
  if (r.sgids.size() > 255 || r.dgids.size() > 255)
    return InvalidArgument("MultiPathRecord holds at most 255 SGIDs and 255 DGIDs");
  if (out.size() < MultiPathRequestSize(r))
    return InvalidArgument("MultiPathRecord needs " + std::to_string(MultiPathRequestSize(r)) +
                           " bytes, buffer has " + std::to_string(out.size()));
  MultiPathRecord rec = r.record;
  rec.sgid_count = static_cast<uint8_t>(r.sgids.size());
  rec.dgid_count = static_cast<uint8_t>(r.dgids.size());
  EncodeTo(rec, out);
  size_t off = Layout<MultiPathRecord>::kSize;
  for (const auto* list : {&r.sgids, &r.dgids}) {
    for (const Gid& g : *list) {
      EncodeTo(g, out.subspan(off));
      off += kGidSize;
    }
  }
  return Status::Ok();
}

}  // namespace ibsm::mad
