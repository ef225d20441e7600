// How much the simulated devices forgive. Real fabrics are strict: optional attributes go
// unanswered or come back "unsupported" on some devices, a retried Set meets the state the
// first copy left, answers arrive late, out of order and twice, and a host's root writes
// any 64 bytes as its NodeDescription. A test that passes only because the simulator
// forgives is a false pass, so the strict profile is the default; the kind one is for unit
// tests of the simulator's own mechanics. README.md "Simulator profiles" lists what each
// does and which suites run on which.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "fabric/fabric.h"

namespace ibsm::sim {

enum class SimProfile : uint8_t {
  kKind,    // every attribute answered, same-state port transitions accepted, no duplicates
  kStrict,  // as the IBA spec allows devices to be, and as ibsim and common devices are
};

// What one device answers to an optional attribute (IBA 14.2.5: SLtoVLMappingTable and
// VLArbitrationTable are optional; PortCountersExtended is optional, 16.1.4.9).
enum class OptionalAnswer : uint8_t {
  kAnswered,
  kUnsupported,  // MAD status 0x000C (unsupported method/attribute combination)
  kSilent,       // no answer at all: the request is dropped, the SM sees a timeout
};

// One device's model, fixed for its life (a reboot keeps it): derived from the node GUID and
// the simulator's seed, so a fabric and a seed always give the same devices.
struct DeviceQuirks {
  OptionalAnswer sl2vl = OptionalAnswer::kAnswered;
  OptionalAnswer vlarb = OptionalAnswer::kAnswered;
  // PortCountersExtended answered "unsupported", and ClassPortInfo CapabilityMask without
  // IsExtendedWidthSupported (bit 9), as older HCAs do.
  bool no_extended_counters = false;
  // The NodeDescription is the topology's text followed by hostile bytes (not UTF-8,
  // control and escape bytes, markup, quotes) to the full 64 bytes, with no NUL.
  bool hostile_description = false;
  // A switch whose external ports keep no LocalPhyErrors and OverrunErrors thresholds and no
  // VLStallCount: a Set takes the other fields and these read back as at power-on (0), as on
  // ibsim's switches (which keep fewer still: NeighborMTU and LinkDownDefaultState too).
  bool drops_port_tuning = false;
  // A switch that reports partition enforcement (SwitchInfo PartitionEnforcementCap) but whose
  // external ports keep no PartitionEnforcementInbound/Outbound or FilterRaw bits: a Set takes
  // the other fields and these read back 0, as on ibsim's switches.
  bool drops_partition_enforcement = false;
};

// The strict profile's mix, per CA: 1 in 5 silent on SL2VL and VLArb, 1 in 5 answer both
// "unsupported", 1 in 3 without PortCountersExtended, 1 in 5 with a hostile description;
// per switch: 1 in 6 silent on VLArb, 1 in 3 keeping no error thresholds or VLStallCount,
// 1 in 4 keeping no partition enforcement bits.
// The kind profile: nothing.
DeviceQuirks QuirksFor(SimProfile profile, uint64_t seed, Guid node_guid, NodeKind kind);

// `base` with hostile bytes after it, exactly 64 bytes, no NUL. `salt` varies the bytes.
std::string HostileDescription(std::string_view base, uint64_t salt);

}  // namespace ibsm::sim
