#include "sim/ar_switch.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

#include "mad/attr/general_info.h"
#include "mad/mad.h"

namespace ibsm::sim {
namespace {

constexpr mad::ArLftEntry kUnsetEntry{static_cast<uint8_t>(mad::ArLidState::kStatic), 0, 0xFF,
                                      0xFF};

}  // namespace

ArSwitch::ArSwitch(uint8_t num_ports, uint16_t lft_cap, ArSwitchCaps caps)
    : num_ports_(num_ports), lft_cap_(lft_cap), caps_(caps) {
  Reset();
}

void ArSwitch::Reset() {
  info_ = mad::ArInfo{};
  info_.by_sl_cap = caps_.by_sl_cap;
  info_.group_table_copy_sup = caps_.group_table_copy_sup;
  info_.group_cap = caps_.group_cap;
  info_.group_table_cap = 1;
  info_.num_directions = 1;
  info_.ar_version_cap = caps_.ar_version_cap;
  info_.enable_by_sl_mask = 0xFFFF;
  info_.ageing_time = 30;
  info_.by_transport_cap = caps_.by_transport_cap;
  info_.sub_grps_active = caps_.sub_grps_active;
  info_.e = caps_.enabled_at_start ? 1 : 0;
  info_.unmanaged = kSimArInfoUnmanaged;
  groups_.clear();
  groups_.shrink_to_fit();
  lft_.clear();
  lft_.shrink_to_fit();
}

void ArSwitch::OnLftSet() {
  ++lft_sets_seen_;
  if (info_.no_fallback == 0) info_.e = 0;
}

mad::ArLftEntry ArSwitch::lft_entry(Lid lid) const {
  return lid.value() < lft_.size() ? lft_[lid.value()] : kUnsetEntry;
}

size_t ArSwitch::state_bytes() const {
  return sizeof(*this) + groups_.capacity() * sizeof(mad::ArPortMask) +
         lft_.capacity() * sizeof(mad::ArLftEntry);
}

uint16_t ArSwitch::Handle(uint16_t attr_id, uint8_t method, uint32_t mod,
                          std::span<uint8_t> data) {
  switch (attr_id) {
    case mad::attr::kArInfo: return HandleInfo(method, mod, data);
    case mad::attr::kArGroupTable: return HandleGroupTable(method, mod, data);
    case mad::attr::kArLinearForwardingTable: return HandleLft(method, mod, data);
    case mad::attr::kArGroupTableCopy: return HandleCopy(method, mod, data);
    default: return mad::mad_status::kMethodAttrUnsupported;
  }
}

void ArSwitch::AddCapabilities(mad::GeneralInfoCapabilities& caps) const {
  // Devices report one of the two formats, never both (docs/ar-sharp.md "Discovery").
  caps.Set(caps_.legacy_format ? mad::general_cap::kAdaptiveRoutingLegacy
                               : mad::general_cap::kAdaptiveRoutingRev1);
}

// Set writes the SM's settings (E, by-SL, no_fallback, GroupTop, transports, ageing time)
// and bytes 20 on (their enables are writable on a device); capability fields are the
// switch's own and ignored in a Set. by_transport_disable without by-transport capability is
// refused unless unchanged. A capability Get (modifier bit 31) answers the capability fields
// only, settings zero, so an SM that takes E or GroupTop from it sees AR off; a plain Get
// answers everything.
uint16_t ArSwitch::HandleInfo(uint8_t method, uint32_t mod, std::span<uint8_t> data) {
  const bool cap_get = mad::DecodeModifier<mad::ArInfoModifier>(mod).get_cap != 0;
  if (method == mad::method::kSet) {
    if (cap_get) return mad::mad_status::kInvalidField;
    mad::ArInfo req{};
    if (!mad::DecodeFrom(data, &req).ok()) return mad::mad_status::kInvalidField;
    if (req.by_sl_enabled && !info_.by_sl_cap) return mad::mad_status::kInvalidField;
    if (req.group_top >= info_.group_cap && req.group_top != 0)
      return mad::mad_status::kInvalidField;
    if (!info_.by_transport_cap && req.by_transport_disable != info_.by_transport_disable)
      return mad::mad_status::kInvalidField;
    info_.e = req.e;
    info_.by_sl_enabled = req.by_sl_enabled;
    info_.enable_by_sl_mask = req.enable_by_sl_mask;
    info_.no_fallback = req.no_fallback;
    info_.group_top = req.group_top;
    info_.by_transport_disable = req.by_transport_disable;
    info_.ageing_time = req.ageing_time;
    info_.unmanaged = req.unmanaged;
    ++info_sets_seen_;
  }
  if (cap_get && method == mad::method::kGet) {
    mad::ArInfo caps{};
    caps.dyn_cap_calc_sup = info_.dyn_cap_calc_sup;
    caps.by_transport_cap = info_.by_transport_cap;
    caps.by_sl_cap = info_.by_sl_cap;
    caps.glb_groups = info_.glb_groups;
    caps.num_directions = info_.num_directions;
    caps.group_table_copy_sup = info_.group_table_copy_sup;
    caps.fr_sup = info_.fr_sup;
    caps.frn_sup = info_.frn_sup;
    caps.arn_sup = info_.arn_sup;
    caps.string_width_cap = info_.string_width_cap;
    caps.group_table_cap = info_.group_table_cap;
    caps.group_cap = info_.group_cap;
    caps.rn_version_cap = info_.rn_version_cap;
    caps.ar_version_cap = info_.ar_version_cap;
    caps.unmanaged = info_.unmanaged;
    mad::EncodeTo(caps, data);
    return mad::mad_status::kOk;
  }
  mad::EncodeTo(info_, data);
  return mad::mad_status::kOk;
}

bool ArSwitch::ValidMask(const mad::ArPortMask& m) const {
  if (m.Has(0)) return false;  // the switch itself is never a member
  for (unsigned p = num_ports_ + 1u; p < 256; ++p)
    if (m.Has(p)) return false;
  return true;
}

uint16_t ArSwitch::HandleGroupTable(uint8_t method, uint32_t mod, std::span<uint8_t> data) {
  auto m = mad::DecodeModifier<mad::ArGroupTableModifier>(mod);
  const size_t first = size_t{m.block} * mad::kArGroupsPerBlock;
  if (m.table != 0 || first + 1 >= info_.group_cap) return mad::mad_status::kInvalidField;
  mad::ArGroupTable blk;
  if (method == mad::method::kSet) {
    if (!mad::DecodeFrom(data, &blk).ok()) return mad::mad_status::kInvalidField;
    for (size_t g = 0; g < mad::kArGroupsPerBlock; ++g)
      if (!ValidMask(blk.Group(g))) return mad::mad_status::kInvalidField;
    if (groups_.size() < first + mad::kArGroupsPerBlock) groups_.resize(first + mad::kArGroupsPerBlock);
    for (size_t g = 0; g < mad::kArGroupsPerBlock; ++g) groups_[first + g] = blk.Group(g);
  }
  for (size_t g = 0; g < mad::kArGroupsPerBlock; ++g)
    blk.SetGroup(g, group(static_cast<uint16_t>(first + g)));
  mad::EncodeTo(blk, data);
  return mad::mad_status::kOk;
}

uint16_t ArSwitch::HandleLft(uint8_t method, uint32_t mod, std::span<uint8_t> data) {
  auto m = mad::DecodeModifier<mad::ArLftModifier>(mod);
  const size_t first = size_t{m.block} * mad::kArLftBlockSize;
  if (first >= lft_cap_) return mad::mad_status::kInvalidField;
  mad::ArLinearForwardingTable blk;
  if (method == mad::method::kSet) {
    if (!mad::DecodeFrom(data, &blk).ok()) return mad::mad_status::kInvalidField;
    for (size_t i = 0; i < mad::kArLftBlockSize; ++i) {
      const mad::ArLftEntry e = blk.Entry(i);
      // LidState 3 is hash-based forwarding: a group entry like bounded and free.
      if (e.lid_state > static_cast<uint8_t>(mad::ArLidState::kHashBased) || e.table_number != 0)
        return mad::mad_status::kInvalidField;
      if (e.default_port > num_ports_ && e.default_port != 0xFF)
        return mad::mad_status::kInvalidField;
      const bool is_static = e.lid_state == static_cast<uint8_t>(mad::ArLidState::kStatic);
      if (is_static ? (e.group_number > num_ports_ && e.group_number != 0xFF)
                    : e.group_number >= info_.group_cap)
        return mad::mad_status::kInvalidField;
    }
    if (lft_.size() < first + mad::kArLftBlockSize) lft_.resize(first + mad::kArLftBlockSize, kUnsetEntry);
    for (size_t i = 0; i < mad::kArLftBlockSize; ++i) lft_[first + i] = blk.Entry(i);
  }
  for (size_t i = 0; i < mad::kArLftBlockSize; ++i)
    blk.SetEntry(i, lft_entry(Lid{static_cast<uint16_t>(first + i)}));
  mad::EncodeTo(blk, data);
  return mad::mad_status::kOk;
}

// Copies the source group into every range [first, last]; a range with first > last, or
// 0..0, is unused. Validated whole before any group changes.
uint16_t ArSwitch::HandleCopy(uint8_t method, uint32_t mod, std::span<uint8_t> data) {
  if (method != mad::method::kSet) return mad::mad_status::kMethodAttrUnsupported;
  if (!info_.group_table_copy_sup) return mad::mad_status::kMethodAttrUnsupported;
  const uint16_t src = mad::DecodeModifier<mad::ArGroupTableCopyModifier>(mod).source_group;
  mad::ArGroupTableCopy req;
  if (!mad::DecodeFrom(data, &req).ok()) return mad::mad_status::kInvalidField;
  if (src >= info_.group_cap) return mad::mad_status::kInvalidField;
  uint16_t top = 0;
  for (size_t i = 0; i < mad::kArCopyRanges; ++i) {
    const mad::ArCopyRange r = req.Range(i);
    if (r.first > r.last || (r.first == 0 && r.last == 0)) continue;
    if (r.last >= info_.group_cap) return mad::mad_status::kInvalidField;
    top = std::max(top, r.last);
  }
  const mad::ArPortMask source = group(src);
  if (groups_.size() < size_t{top} + 1) groups_.resize(size_t{top} + 1);
  for (size_t i = 0; i < mad::kArCopyRanges; ++i) {
    const mad::ArCopyRange r = req.Range(i);
    if (r.first > r.last || (r.first == 0 && r.last == 0)) continue;
    for (size_t g = r.first; g <= r.last; ++g) groups_[g] = source;
  }
  return mad::mad_status::kOk;
}

namespace {

std::string_view Trim(std::string_view s) {
  const auto a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

Status AddGuid(const Fabric& f, std::string_view text, std::vector<NodeId>& out) {
  text = Trim(text);
  if (text.empty()) return Status::Ok();
  std::string_view digits = text;
  if (digits.starts_with("0x") || digits.starts_with("0X")) digits.remove_prefix(2);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty())
    return InvalidArgument("'" + std::string(text) + "' is not a GUID");
  auto n = f.FindNode(Guid{v});
  if (!n || !f.node(*n).is_switch())
    return InvalidArgument("GUID " + std::string(text) + " names no switch of the fabric");
  if (std::find(out.begin(), out.end(), *n) == out.end()) out.push_back(*n);
  return Status::Ok();
}

}  // namespace

Result<std::vector<NodeId>> SelectSwitches(const Fabric& fabric, std::string_view spec) {
  std::vector<NodeId> out;
  spec = Trim(spec);
  if (spec.empty() || spec == "none") return out;
  if (spec == "all") {
    for (NodeId n = 0; n < fabric.node_count(); ++n)
      if (fabric.node(n).is_switch()) out.push_back(n);
    return out;
  }
  std::ifstream in{std::string(spec)};
  if (in) {
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      std::string_view l = line;
      if (auto hash = l.find('#'); hash != std::string_view::npos) l = l.substr(0, hash);
      Status st = AddGuid(fabric, l, out);
      if (!st.ok())
        return InvalidArgument(std::string(spec) + ":" + std::to_string(number) + ": " +
                               st.message());
    }
    return out;
  }
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    IBSM_RETURN_IF_ERROR(AddGuid(fabric, spec.substr(0, comma), out));
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace ibsm::sim
