#include "mad/attr/registry.h"

#include <fmt/format.h>

#include <array>

#include "mad/attr/adaptive_routing.h"
#include "mad/attr/class_port_info.h"
#include "mad/attr/general_info.h"
#include "mad/attr/guid_info.h"
#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/multicast_forwarding_table.h"
#include "mad/attr/node_description.h"
#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/pkey_table.h"
#include "mad/attr/port_counters.h"
#include "mad/attr/port_counters_extended.h"
#include "mad/attr/port_info.h"
#include "mad/attr/sl_to_vl_table.h"
#include "mad/attr/sharp.h"
#include "mad/attr/sm_info.h"
#include "mad/attr/switch_info.h"
#include "mad/attr/vl_arbitration_table.h"
#include "mad/mad.h"

namespace ibsm::mad {
namespace {

enum class ClassGroup : uint8_t {
  kSmp,      // SubnLid and SubnDirected
  kSa,       // SubnAdm
  kPerf,     // PerfMgt
  kAm,       // SHARP aggregation management (0x0B)
  kAnyGmp,   // every class other than the SMP ones (ClassPortInfo)
};

bool InGroup(ClassGroup g, uint8_t mgmt_class) {
  const bool smp = mgmt_class == static_cast<uint8_t>(MgmtClass::kSubnLid) ||
                   mgmt_class == static_cast<uint8_t>(MgmtClass::kSubnDirected);
  switch (g) {
    case ClassGroup::kSmp:
      return smp;
    case ClassGroup::kSa:
      return mgmt_class == static_cast<uint8_t>(MgmtClass::kSubnAdm);
    case ClassGroup::kPerf:
      return mgmt_class == static_cast<uint8_t>(MgmtClass::kPerfMgt);
    case ClassGroup::kAm:
      return mgmt_class == static_cast<uint8_t>(MgmtClass::kAggMgmt);
    case ClassGroup::kAnyGmp:
      return !smp;
  }
  return false;
}

using DumpFn = Result<std::string> (*)(std::span<const uint8_t>);

template <typename S>
Result<std::string> DumpAs(std::span<const uint8_t> data) {
  auto r = Decode<S>(data);
  if (!r.ok()) return r.status();
  return Dump(*r);
}

std::string DumpTrapDetails(const Notice& n) {
  if (n.is_generic != 1) return "";
  switch (n.trap_number_or_device_id) {
    case trap::kGidInService:
    case trap::kGidOutOfService:
    case trap::kMcastGroupCreated:
    case trap::kMcastGroupDeleted:
      return Dump(TrapDetails<Trap64Details>(n));
    case trap::kLinkStateChanged:
      return Dump(TrapDetails<Trap128Details>(n));
    case trap::kLinkIntegrityThreshold:
    case trap::kBufferOverrunThreshold:
    case trap::kWatchdogTimerExpired:
      return Dump(TrapDetails<Trap129Details>(n));
    case trap::kLocalChanges:
      return Dump(TrapDetails<Trap144Details>(n));
    case trap::kSystemImageGuidChanged:
      return Dump(TrapDetails<Trap145Details>(n));
    case trap::kBadMKey:
      return Dump(TrapDetails<Trap256Details>(n));
    case trap::kBadPKey:
    case trap::kBadQKey:
      return Dump(TrapDetails<Trap257Details>(n));
    case trap::kSwitchBadPKey:
      return Dump(TrapDetails<Trap259Details>(n));
    default:
      return "";
  }
}

// An SMP carries the first 64 bytes of a Notice; an SA Report carries all 80.
Result<std::string> DumpSmpNotice(std::span<const uint8_t> data) {
  Notice n;
  IBSM_RETURN_IF_ERROR(DecodeSmpNotice(data, &n));
  return Dump(n) + DumpTrapDetails(n);
}

Result<std::string> DumpGmpNotice(std::span<const uint8_t> data) {
  Notice n;
  IBSM_RETURN_IF_ERROR(DecodeFrom(data, &n));
  return Dump(n) + DumpTrapDetails(n);
}

struct Entry {
  ClassGroup group;
  uint16_t attr_id;
  std::string_view name;
  DumpFn dump;
};

template <typename S>
constexpr Entry E(ClassGroup g, uint16_t id) {
  return {g, id, Layout<S>::kName, &DumpAs<S>};
}

// First match wins: specific classes before kAnyGmp.
constexpr std::array kEntries = {
    Entry{ClassGroup::kSmp, attr::kNotice, Layout<Notice>::kName, &DumpSmpNotice},
    E<NodeDescription>(ClassGroup::kSmp, attr::kNodeDescription),
    E<NodeInfo>(ClassGroup::kSmp, attr::kNodeInfo),
    E<SwitchInfo>(ClassGroup::kSmp, attr::kSwitchInfo),
    E<GuidInfo>(ClassGroup::kSmp, attr::kGuidInfo),
    E<PortInfo>(ClassGroup::kSmp, attr::kPortInfo),
    E<PKeyTable>(ClassGroup::kSmp, attr::kPKeyTable),
    E<SlToVlTable>(ClassGroup::kSmp, attr::kSlToVlTable),
    E<VlArbitrationTable>(ClassGroup::kSmp, attr::kVlArbitrationTable),
    E<LinearForwardingTable>(ClassGroup::kSmp, attr::kLinearForwardingTable),
    E<MulticastForwardingTable>(ClassGroup::kSmp, attr::kMulticastForwardingTable),
    E<SmInfo>(ClassGroup::kSmp, attr::kSmInfo),
    E<GeneralInfoCapabilities>(ClassGroup::kSmp, attr::kGeneralInfo),
    E<ArInfo>(ClassGroup::kSmp, attr::kArInfo),
    E<ArGroupTable>(ClassGroup::kSmp, attr::kArGroupTable),
    E<ArLinearForwardingTable>(ClassGroup::kSmp, attr::kArLinearForwardingTable),
    E<ArGroupTableCopy>(ClassGroup::kSmp, attr::kArGroupTableCopy),
    E<MlnxExtendedPortInfo>(ClassGroup::kSmp, vendor_attr::kMlnxExtendedPortInfo),
    E<AnInfo>(ClassGroup::kAm, am_attr::kAnInfo),
    E<TreeConfig>(ClassGroup::kAm, am_attr::kTreeConfig),
    E<QpAllocation>(ClassGroup::kAm, am_attr::kQpAllocation),
    E<QpcConfig>(ClassGroup::kAm, am_attr::kQpcConfig),
    E<ResourceCleanup>(ClassGroup::kAm, am_attr::kResourceCleanup),
    Entry{ClassGroup::kSa, attr::kNotice, Layout<Notice>::kName, &DumpGmpNotice},
    E<PortCounters>(ClassGroup::kPerf, attr::kPortCounters),
    E<PortCountersExtended>(ClassGroup::kPerf, attr::kPortCountersExtended),
    E<ClassPortInfo>(ClassGroup::kAnyGmp, attr::kClassPortInfo),
};

const Entry* Find(uint8_t mgmt_class, uint16_t attr_id) {
  for (const auto& e : kEntries)
    if (e.attr_id == attr_id && InGroup(e.group, mgmt_class)) return &e;
  return nullptr;
}

}  // namespace

std::string_view AttributeName(uint8_t mgmt_class, uint16_t attr_id) {
  const Entry* e = Find(mgmt_class, attr_id);
  return e ? e->name : std::string_view();
}

std::string HexDump(std::span<const uint8_t> data, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(data.size(), max_bytes);
  for (size_t i = 0; i < n; i += 16) {
    out += fmt::format("{:04x}:", i);
    for (size_t j = i; j < std::min(i + 16, n); ++j) out += fmt::format(" {:02x}", data[j]);
    out += '\n';
  }
  if (n < data.size()) out += fmt::format("... {} more bytes\n", data.size() - n);
  return out;
}

std::string DumpAttribute(uint8_t mgmt_class, uint16_t attr_id, std::span<const uint8_t> data) {
  const Entry* e = Find(mgmt_class, attr_id);
  if (e == nullptr) {
    return fmt::format("unknown attribute 0x{:04x} (class 0x{:02x}), {} bytes\n", attr_id,
                       mgmt_class, data.size()) +
           HexDump(data);
  }
  Result<std::string> text = e->dump(data);
  if (text.ok()) return std::move(text).value();
  return fmt::format("{}: {}\n", e->name, text.status().ToString()) + HexDump(data);
}

}  // namespace ibsm::mad
