// OpenSM 3.3.23's QoS texts and fallbacks (osm_qos.c qos_build_config), with checks OpenSM
// does not make: it takes any text, reading a VL modulo 15 and a missing number as 0; ibsm
// refuses a text it would have to read that way.
#include "conf/qos_config.h"

#include <fmt/format.h>

#include <vector>

namespace ibsm::conf {
namespace {

std::vector<std::string_view> QosSplit(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t at = text.find(sep);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

std::string_view QosTrim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool QosNumber(std::string_view s, uint64_t max, uint64_t* out) {
  return ParseU64(QosTrim(s), out) && *out <= max;
}

void ParseVlArb(std::string_view text, std::array<QosVlArbEntry, kQosVlArbEntries>* out) {
  *out = {};
  size_t i = 0;
  for (std::string_view e : QosSplit(text, ',')) {
    if (i == kQosVlArbEntries) break;
    const size_t colon = e.find(':');
    uint64_t vl = 0, weight = 0;
    QosNumber(e.substr(0, colon), 14, &vl);
    if (colon != std::string_view::npos) QosNumber(e.substr(colon + 1), 255, &weight);
    (*out)[i++] = {static_cast<uint8_t>(vl), static_cast<uint8_t>(weight)};
  }
}

void ParseSl2Vl(std::string_view text, std::array<uint8_t, 16>* out) {
  *out = {};
  size_t i = 0;
  for (std::string_view e : QosSplit(text, ',')) {
    if (i == out->size()) break;
    uint64_t vl = 0;
    QosNumber(e, 15, &vl);
    (*out)[i++] = static_cast<uint8_t>(vl);
  }
}

// The first text that is set: the class's key, the qos_* key, OpenSM's default.
std::string_view First(const std::string& own, const std::string& all, std::string_view dflt) {
  if (!own.empty()) return own;
  if (!all.empty()) return all;
  return dflt;
}

uint8_t HighLimit(const std::string& own, const std::string& all) {
  for (const std::string* s : {&own, &all}) {
    uint64_t v = 0;
    if (!s->empty() && *s != "-1" && QosNumber(*s, 255, &v)) return static_cast<uint8_t>(v);
  }
  return 0;  // OSM_DEFAULT_QOS_HIGH_LIMIT
}

QosLevel Build(const SmConfig& c, const std::string& high_limit, const std::string& vlarb_high,
               const std::string& vlarb_low, const std::string& sl2vl) {
  QosLevel l;
  l.high_limit = HighLimit(high_limit, c.qos_high_limit);
  ParseVlArb(First(vlarb_high, c.qos_vlarb_high, kQosDefaultVlArbHigh), &l.vlarb_high);
  ParseVlArb(First(vlarb_low, c.qos_vlarb_low, kQosDefaultVlArbLow), &l.vlarb_low);
  ParseSl2Vl(First(sl2vl, c.qos_sl2vl, kQosDefaultSl2Vl), &l.sl2vl);
  return l;
}

}  // namespace

const QosLevel& QosLevels::For(QosClass c) const {
  switch (c) {
    case QosClass::kCa: return ca;
    case QosClass::kSwitchPort0: return sw0;
    case QosClass::kSwitchExternal: return swe;
    case QosClass::kRouter: return rtr;
  }
  return ca;
}

Status CheckQosVlArb(std::string_view text) {
  const std::vector<std::string_view> entries = QosSplit(text, ',');
  if (entries.size() > kQosVlArbEntries) {
    return InvalidArgument(fmt::format("{} entries, at most {}", entries.size(), kQosVlArbEntries));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string_view e = entries[i];
    const size_t colon = e.find(':');
    uint64_t v = 0;
    if (colon == std::string_view::npos || !QosNumber(e.substr(0, colon), 14, &v) ||
        !QosNumber(e.substr(colon + 1), 255, &v)) {
      return InvalidArgument(
          fmt::format("entry {} is not vl:weight with a VL of 0-14 and a weight of 0-255", i + 1));
    }
  }
  return Status::Ok();
}

Status CheckQosSl2Vl(std::string_view text) {
  const std::vector<std::string_view> entries = QosSplit(text, ',');
  if (entries.size() != 16) {
    return InvalidArgument(fmt::format("{} VLs, not one for each of the 16 SLs", entries.size()));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    uint64_t v = 0;
    if (!QosNumber(entries[i], 15, &v)) {
      return InvalidArgument(fmt::format("the VL of SL {} is not 0-15", i));
    }
  }
  return Status::Ok();
}

Status CheckQosHighLimit(std::string_view text) {
  uint64_t v = 0;
  if (QosTrim(text) == "-1" || QosNumber(text, 255, &v)) return Status::Ok();
  return InvalidArgument("not -1 (not set) or 0-255");
}

QosLevels BuildQosLevels(const SmConfig& c) {
  QosLevels l;
  l.ca = Build(c, c.qos_ca_high_limit, c.qos_ca_vlarb_high, c.qos_ca_vlarb_low, c.qos_ca_sl2vl);
  l.sw0 = Build(c, c.qos_sw0_high_limit, c.qos_sw0_vlarb_high, c.qos_sw0_vlarb_low,
                c.qos_sw0_sl2vl);
  l.swe = Build(c, c.qos_swe_high_limit, c.qos_swe_vlarb_high, c.qos_swe_vlarb_low,
                c.qos_swe_sl2vl);
  l.rtr = Build(c, c.qos_rtr_high_limit, c.qos_rtr_vlarb_high, c.qos_rtr_vlarb_low,
                c.qos_rtr_sl2vl);
  return l;
}

}  // namespace ibsm::conf
