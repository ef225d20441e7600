// QoS settings as OpenSM 3.3.23 reads them (docs/qos.md): five port classes, each with a
// VLHighLimit, a high- and a low-priority VL arbitration table and an SL-to-VL table. A
// class's key that is not set falls back to the qos_* key of the same name, then to
// OpenSM's default. The texts are OpenSM's: "vl:weight,vl:weight,..." (up to 64 entries)
// for the arbitration tables, sixteen VLs "0,1,...,7" for the SL-to-VL table.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "conf/sm_config.h"

namespace ibsm::conf {

// OpenSM's defaults (osm_base.h OSM_DEFAULT_QOS_*), used when neither key is set.
inline constexpr std::string_view kQosDefaultVlArbHigh =
    "0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0,8:0,9:0,10:0,11:0,12:0,13:0,14:0";
inline constexpr std::string_view kQosDefaultVlArbLow =
    "0:0,1:4,2:4,3:4,4:4,5:4,6:4,7:4,8:4,9:4,10:4,11:4,12:4,13:4,14:4";
inline constexpr std::string_view kQosDefaultSl2Vl = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7";

inline constexpr size_t kQosVlArbEntries = 64;  // two 32-entry blocks per priority

struct QosVlArbEntry {
  uint8_t vl = 0;
  uint8_t weight = 0;
  bool operator==(const QosVlArbEntry&) const = default;
};

// One port class's tables, complete: entries a text leaves out are VL 0, weight 0, as in
// OpenSM.
struct QosLevel {
  uint8_t high_limit = 0;
  std::array<QosVlArbEntry, kQosVlArbEntries> vlarb_high{};
  std::array<QosVlArbEntry, kQosVlArbEntries> vlarb_low{};
  std::array<uint8_t, 16> sl2vl{};  // VL by SL; 15 drops
  bool operator==(const QosLevel&) const = default;
};

enum class QosClass { kCa, kSwitchPort0, kSwitchExternal, kRouter };

struct QosLevels {
  QosLevel ca, sw0, swe, rtr;
  const QosLevel& For(QosClass c) const;
  bool operator==(const QosLevels&) const = default;
};

// The option checks (OptionDesc::check): a VL arbitration list (VL 0-14, weight 0-255, at
// most 64 entries), an SL-to-VL list (sixteen VLs 0-15), a high limit (-1 to 255).
Status CheckQosVlArb(std::string_view text);
Status CheckQosSl2Vl(std::string_view text);
Status CheckQosHighLimit(std::string_view text);

// The tables of every class from `c`'s qos_* keys. REQUIRES: the texts passed the checks
// (ParseConfig and SetOption run them).
QosLevels BuildQosLevels(const SmConfig& c);

}  // namespace ibsm::conf
