#include "mad/mad.h"

#include <algorithm>

namespace ibsm::mad {

void EncodeSa(const SaMad& m, std::span<uint8_t> out) {
  EncodeTo(m, out);  // zeroes all 256 bytes, fills bytes 24-255
  EncodeTo(m.hdr, out);
}

Status DecodeSa(std::span<const uint8_t> in, SaMad* m) {
  IBSM_RETURN_IF_ERROR(DecodeFrom(in, m));
  return DecodeFrom(in, &m->hdr);
}

Smp MakeDrSmp(uint8_t method, uint16_t attr_id, uint32_t attr_mod,
              std::span<const uint8_t> path, uint64_t m_key) {
  Smp s;
  s.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnDirected);
  s.method = method;
  s.attr_id = attr_id;
  s.attr_mod = attr_mod;
  s.m_key = m_key;
  size_t n = std::min(path.size(), kMaxDrHops);
  s.hop_count = static_cast<uint8_t>(n);
  s.hop_pointer = 0;
  for (size_t i = 0; i < n; ++i) s.initial_path[i + 1] = path[i];
  return s;
}

Smp MakeLidSmp(uint8_t method, uint16_t attr_id, uint32_t attr_mod, uint64_t m_key) {
  Smp s;
  s.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnLid);
  s.method = method;
  s.attr_id = attr_id;
  s.attr_mod = attr_mod;
  s.m_key = m_key;
  s.dr_slid = 0;
  s.dr_dlid = 0;
  return s;
}

MadMessage ToMessage(const Smp& smp, Lid dlid) {
  MadMessage m;
  m.bytes.resize(kMadSize);
  EncodeTo(smp, m.bytes);
  m.addr.lid = dlid;
  m.addr.qpn = 0;
  m.addr.qkey = 0;
  return m;
}

}  // namespace ibsm::mad
