// partitions.conf in OpenSM's grammar (opensm/osm_prtn_config.c, man opensm "PARTITION
// CONFIGURATION"), so an operator's file loads unchanged:
//
//   # comment
//   Default=0x7fff, ipoib : ALL=full, SELF=full ;
//   storage=0x0002, ipoib, mtu=5, rate=7, sl=0, defmember=full :
//       0x0002c90300000011, 0x0002c90300000012=limited,
//       ALL_SWITCHES=full ;
//   compute=0x8003 : ALL_CAS ;            # the membership bit of the P_Key is ignored
//
// A definition is `Name[=PKey][,flag[=value]]... : member[=full|limited|both], ... ;` and may
// span lines. Members are port GUIDs, ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF (the SM's
// own port) or NONE; `mgid=GID[,group flags]` precreates a multicast group. Flags: ipoib,
// mtu, rate, sl, scope, Q_Key, TClass, FlowLabel, defmember=full|limited|both, indx0.
//
// Where ibsm differs from OpenSM, it is stricter, because partitions are the fabric's
// isolation: a flag value that does not parse (mtu=abc) rejects the file where OpenSM skips
// the flag; keywords are matched whole, not as prefixes ("AL" is not ALL). Any error rejects
// the whole file; the caller keeps the partition set it had (OpenSM falls back to "everyone a
// full member of the default partition", which undoes the isolation).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "conf/diagnostic.h"

namespace ibsm::conf {

// Stable IDs (frozen: operators grep for them).
inline constexpr char kPartNoHeader[] = "PART-001";       // no "name=pkey :" before members
inline constexpr char kPartBadPKey[] = "PART-002";
inline constexpr char kPartBadFlag[] = "PART-003";        // empty flag or a value that does not parse
inline constexpr char kPartBadMember[] = "PART-004";      // not a GUID or keyword
inline constexpr char kPartBadMgid[] = "PART-005";
inline constexpr char kPartUnknownFlag[] = "PART-010";    // warning: ignored, as OpenSM
inline constexpr char kPartUnknownMembership[] = "PART-011";  // warning: taken as limited
inline constexpr char kPartDuplicate[] = "PART-012";      // warning: merged into the first
inline constexpr char kPartUnterminated[] = "PART-013";   // warning: last definition has no ';'
inline constexpr char kPartFileRejected[] = "PART-020";   // the whole file, with its count

inline constexpr uint16_t kDefaultPartitionKey = 0x7FFF;  // base, without the membership bit

enum class Membership : uint8_t { kLimited, kFull, kBoth };

enum class MemberKind : uint8_t { kGuid, kAll, kAllCas, kAllSwitches, kAllRouters, kSelf };

struct PartitionMember {
  MemberKind kind = MemberKind::kGuid;
  Guid guid{0};  // kGuid only: a port GUID
  Membership membership = Membership::kLimited;
  int line = 0;
  bool operator==(const PartitionMember&) const = default;
};

// Flags of the IPoIB broadcast group and of `mgid=` groups. Zero = not given (OpenSM's
// defaults apply: mtu 4 (2048), rate 3 (10 Gb/s), Q_Key 0x0b1b for IPoIB).
struct GroupFlags {
  uint8_t mtu = 0;
  uint8_t rate = 0;
  uint8_t sl = 0;
  uint16_t scope_mask = 0;  // bit n = scope n
  uint32_t q_key = 0;
  uint8_t tclass = 0;
  uint32_t flow_label = 0;
  bool operator==(const GroupFlags&) const = default;
};

struct MulticastGroupSpec {
  std::array<uint8_t, 16> mgid{};
  GroupFlags flags;
  int line = 0;
  bool operator==(const MulticastGroupSpec&) const = default;
};

struct Partition {
  std::string name;
  uint16_t pkey = 0;  // 15-bit base: the membership bit is never part of a partition's key
  bool ipoib = false;
  bool indx0 = false;  // put this P_Key at index 0 of its members' tables
  GroupFlags flags;
  std::vector<PartitionMember> members;  // file order: a later line about a port wins
  std::vector<MulticastGroupSpec> groups;
  int line = 0;  // where it was first defined
  bool operator==(const Partition&) const = default;
};

// What a partitions.conf defines, in file order; one entry per P_Key (a second definition of
// a P_Key is merged into the first, as OpenSM does).
struct PartitionConfig {
  std::vector<Partition> partitions;
  bool operator==(const PartitionConfig&) const = default;
  const Partition* Find(uint16_t pkey_base) const;
};

struct PartitionsParse {
  PartitionConfig config;            // meaningful only when errors is empty
  std::vector<Diagnostic> errors;    // one per bad line; any -> the file is rejected
  std::vector<Diagnostic> warnings;  // unknown flags, merged duplicates
  bool ok() const { return errors.empty(); }
};

// Untrusted input: never crashes; reports every bad line with file and line.
PartitionsParse ParsePartitions(std::string_view text, std::string_view file_name);
// NotFound when the file does not exist (OpenSM then makes every port a full member of the
// default partition), IoError when unreadable; otherwise the parse, good or bad.
Result<PartitionsParse> LoadPartitionsFile(const std::string& path);

}  // namespace ibsm::conf
