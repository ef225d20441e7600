// The QoS policy file (opensm.conf qos_policy_file), its qos-ulps section: which SL a
// PathRecord gets, by service ID, P_Key and end port GUIDs, in OpenSM 3.3.23's grammar
// (docs/qos.md, "QoS policy file"):
//
//   qos-ulps
//       default                                  : 0   # required: no rule matched
//       sdp, port-num 3000-3100                  : 1   # service ID 0x10000 + port
//       sdp                                      : 2   # 0x10000-0x1FFFF
//       rds                                      : 3   # 0x1060000 + 0x48CA
//       iser, port-num 3260                      : 4   # 0x1060000 + port
//       iser                                     : 4   # 0x1060000 + 0x0CBC
//       srp, target-port-guid 0x1234-0x1240      : 5   # destination port GUIDs
//       ipoib, pkey 0x8001                       : 6   # the request's P_Key
//       ipoib                                    : 6   # P_Key 0x7FFF
//       any, service-id 0x500-0x5FF, 0x700       : 7
//       any, pkey 0x10-0x20                      : 8
//       any, target-port-guid 0x10,0x20-0x30     : 9
//       any, source-port-guid 0x10               : 9
//       any, source-target-port-guid 0x10        : 10  # both ends in the list
//   end-qos-ulps
//
// One rule a line; the first rule that matches gives the SL, else `default`. Numbers are
// decimal or 0x hex, lists are comma-separated numbers and ranges (a-b; b-a is read as a-b).
// The other sections (port-groups, qos-setup, qos-levels, qos-match-rules) are not
// implemented: a file holding one is refused whole (QOS-POL-010), as is any line that does
// not parse (QOS-POL-001..004) and a qos-ulps without `default` (QOS-POL-005, which OpenSM
// also refuses). The caller keeps the policy it had.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "conf/diagnostic.h"

namespace ibsm::conf {

// Stable IDs (frozen: operators grep for them).
inline constexpr char kQosPolBadLine[] = "QOS-POL-001";     // not "ulp[, criterion list] : sl"
inline constexpr char kQosPolBadNumber[] = "QOS-POL-002";   // a list item or SL that is no number
inline constexpr char kQosPolBadSl[] = "QOS-POL-003";       // SL above 15
inline constexpr char kQosPolOutside[] = "QOS-POL-004";     // text outside a section, unclosed
inline constexpr char kQosPolNoDefault[] = "QOS-POL-005";   // qos-ulps without "default : sl"
inline constexpr char kQosPolUnsupported[] = "QOS-POL-010"; // a section ibsm does not implement
inline constexpr char kQosPolRejected[] = "QOS-POL-020";    // the whole file, with its count

// OpenSM's service IDs of the named ULPs (osm_qos_policy.h).
inline constexpr uint64_t kQosSdpServiceId = 0x10000;
inline constexpr uint64_t kQosRdsServiceId = 0x1060000;  // + port: the RDMA CM TCP port space
inline constexpr uint64_t kQosRdsPort = 0x48CA;
inline constexpr uint64_t kQosIserServiceId = 0x1060000;
inline constexpr uint64_t kQosIserPort = 0x0CBC;

using QosRange = std::pair<uint64_t, uint64_t>;  // inclusive, first <= second

// One qos-ulps line as a match rule: every list that is not empty must match.
struct QosUlpRule {
  std::vector<QosRange> service_ids;  // the request must name its service ID
  std::vector<QosRange> pkeys;        // 15-bit bases; the request must name its P_Key
  std::vector<QosRange> sources;      // source port GUIDs
  std::vector<QosRange> targets;      // destination port GUIDs
  uint8_t sl = 0;
  int line = 0;
  bool operator==(const QosUlpRule&) const = default;
};

// What a PathRecord request says, as the rules read it.
struct QosPathQuery {
  std::optional<uint64_t> service_id;  // when the component mask names it
  std::optional<uint16_t> pkey;        // when the component mask names it
  Guid source{0};
  Guid target{0};
};

struct QosPolicy {
  uint8_t default_sl = 0;
  std::vector<QosUlpRule> rules;  // file order
  bool operator==(const QosPolicy&) const = default;
  // The SL of the first rule that matches, else default_sl.
  uint8_t SlFor(const QosPathQuery& q) const;
};

struct QosPolicyParse {
  QosPolicy policy;                  // meaningful only when errors is empty
  std::vector<Diagnostic> errors;    // any -> the file is refused
  bool ok() const { return errors.empty(); }
};

// Untrusted input: never crashes; reports every bad line with file and line.
QosPolicyParse ParseQosPolicy(std::string_view text, std::string_view file_name);
// NotFound when the file does not exist, IoError when unreadable; else the parse.
Result<QosPolicyParse> LoadQosPolicyFile(const std::string& path);

}  // namespace ibsm::conf
