// Internal to the Simulator files: the power-on defaults of a port, field access on raw SMP
// bytes through the Smp layout, port state codes and the seeded uniform draw they share.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string_view>

#include "mad/attr/sl_to_vl_table.h"
#include "mad/attr/vl_arbitration_table.h"
#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::sim {
namespace {

// Defaults a freshly powered port reports, as ibsim's (sim_net.c): P_Key entry 0 is the
// default partition as full member; SLs map to VLs by ibsim's default_sl2vl; VL arbitration
// by its default_vlarb_high/low.
constexpr uint16_t kPartitionCapCa = 64;      // ibsim hcanodeinfo PartitionCap
constexpr uint16_t kPartitionCapSwitch = 8;   // ibsim swnodeinfo PartitionCap (port 0)
constexpr uint16_t kPartitionEnforcementCap = 64;  // ibsim switchinfo
constexpr std::array<uint8_t, 16> kDefaultSlToVl = {0, 1, 2, 3, 4, 5, 6, 7,
                                                    8, 9, 10, 11, 12, 13, 14, 7};

inline mad::SlToVlTable DefaultSlToVl() {
  mad::SlToVlTable t;
  t.vl = kDefaultSlToVl;
  return t;
}

// Block b (0..3 for modifier blocks 1..4): high-priority entries {VL0, 4}, {VLi, 0};
// low-priority entries {VL0, 0}, {VLi, 4}, for the first 15 entries of the first block.
inline mad::VlArbitrationTable DefaultVlArb(size_t b) {
  mad::VlArbitrationTable t;
  if (b != 0 && b != 2) return t;
  bool high = b == 2;
  for (size_t i = 0; i < 15; ++i) {
    t.vl[i] = static_cast<uint8_t>(i);
    t.weight[i] = high ? (i == 0 ? 4 : 0): (i == 0 ? 0 : 4);
  }
  return t;
}

using mad::Field;
using mad::Layout;
using mad::Smp;

// Field access on raw SMP bytes through the one Smp layout table (no hand-written shifts):
// the simulator turns a request into its response in place, like a real SMA, and decoding
// the whole 256-byte SMP per hop would cost more than the rest of the walk.
constexpr size_t SmpFieldIndex(std::string_view name) {
  for (size_t i = 0; i < Layout<Smp>::kFields.size(); ++i)
    if (Layout<Smp>::kFields[i].name == name) return i;
  return SIZE_MAX;
}
template <size_t I>
constexpr const Field<Smp>& SmpF() {
  static_assert(I < Layout<Smp>::kFields.size(), "no such Smp field");
  return Layout<Smp>::kFields[I];
}
#define SMP_FIELD(name) SmpF<SmpFieldIndex(name)>()

inline uint64_t Get(std::span<const uint8_t> b, const Field<Smp>& f, size_t i = 0) {
  return mad::GetBits(b, f.bit_offset + static_cast<uint32_t>(i * f.stride), f.bit_width);
}
inline void Put(std::span<uint8_t> b, const Field<Smp>& f, uint64_t v, size_t i = 0) {
  mad::SetBits(b, f.bit_offset + static_cast<uint32_t>(i * f.stride), f.bit_width, v);
}

const Field<Smp>& kBaseVersion = SMP_FIELD("base_version");
const Field<Smp>& kMgmtClass = SMP_FIELD("mgmt_class");
const Field<Smp>& kClassVersion = SMP_FIELD("class_version");
const Field<Smp>& kMethod = SMP_FIELD("method");
const Field<Smp>& kDirection = SMP_FIELD("direction");
const Field<Smp>& kStatus = SMP_FIELD("status");
const Field<Smp>& kHopPointer = SMP_FIELD("hop_pointer");
const Field<Smp>& kHopCount = SMP_FIELD("hop_count");
const Field<Smp>& kTid = SMP_FIELD("tid");
const Field<Smp>& kAttrId = SMP_FIELD("attr_id");
const Field<Smp>& kAttrMod = SMP_FIELD("attr_mod");
const Field<Smp>& kMKey = SMP_FIELD("m_key");
const Field<Smp>& kDrSlid = SMP_FIELD("dr_slid");
const Field<Smp>& kDrDlid = SMP_FIELD("dr_dlid");
const Field<Smp>& kInitialPath = SMP_FIELD("initial_path");
const Field<Smp>& kReturnPath = SMP_FIELD("return_path");
// The whole (15-bit) status word of a LID-routed SMP or GMP includes the D-bit position.
const mad::Field<mad::MadHeader>& kHdrStatus = Layout<mad::MadHeader>::kFields[4];
static_assert(Layout<mad::MadHeader>::kFields[4].bit_width == 16);

constexpr uint8_t kPhysPolling = 2;
constexpr uint8_t kPhysDisabled = 3;
constexpr uint8_t kPhysLinkUp = 5;
constexpr uint8_t kStateDown = 1;
constexpr uint8_t kStateInit = 2;
constexpr uint8_t kStateArmed = 3;
constexpr uint8_t kStateActive = 4;
constexpr uint32_t kMaxLidHops = 64;

// Uniform in [0, 1) from 53 random bits: same sequence for the same seed on every platform.
inline double Unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace
}  // namespace ibsm::sim
