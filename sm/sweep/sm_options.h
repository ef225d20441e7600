// What a SubnetManager is told to do: the opensm.conf keys it acts on, as conf/ parses them
// (sm/sweep/config_options.h maps the file's names onto these fields).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "conf/qos_config.h"
#include "conf/qos_policy.h"
#include "mad/transport.h"
#include "routing/routing_engine.h"
#include "sm/model/lid_manager.h"
#include "sm/model/pkey_manager.h"
#include "sm/sweep/link_damping.h"
#include "sm/vendor/ar_manager.h"
#include "sm/vendor/sharp_manager.h"

namespace ibsm::sm {

struct SubnetManagerOptions {
  LidPolicy lids;
  uint64_t subnet_prefix = 0xfe80000000000000ull;
  uint64_t m_key = 0;
  uint16_t m_key_lease_period = 0;
  uint8_t m_key_protection_level = 0;
  uint64_t sm_key = 1;
  uint64_t sa_key = 1;  // SA requests presenting it are trusted (M_Key, SM_Key shown)
  uint8_t sm_priority = 0;
  // HA (opensm.conf names): other SMs are not looked for and never obeyed when set.
  bool ignore_other_sm = false;
  // A port whose health trap (129-131) repeats 250 times without a 60 s pause is disabled
  // (PortPhysicalState Disabled), as OpenSM's babbling_port_policy does.
  bool babbling_port_policy = false;
  // health_degraded_links: FALSE turns the degraded-link rule off for links, topo and health
  // alike (on ibsim every cable is "degraded").
  bool health_degraded_links = true;
  std::chrono::milliseconds sminfo_polling_timeout{10000};
  uint32_t polling_retry_number = 4;
  uint8_t subnet_timeout = 18;
  // Switch external ports (opensm.conf names): HOQLife and VLStallCount, the leaf_ values on
  // ports facing a CA or router.
  uint8_t head_of_queue_lifetime = 0x12;
  uint8_t leaf_head_of_queue_lifetime = 0x10;
  uint8_t vl_stall_count = 0x07;
  uint8_t leaf_vl_stall_count = 0x07;
  // OpenSM's link manager (docs/port-programming.md): what every port is set to.
  uint8_t sm_sl = 0;                          // MasterSMSL of end ports
  uint8_t max_op_vls = 5;                     // OperationalVLs cap (5 = VL0-14)
  uint8_t force_link_width = 255;             // LinkWidthEnabled; 0 leave, 255 = Supported
  uint8_t force_link_speed = 15;              // LinkSpeedEnabled; 0 leave, 15 = Supported
  uint8_t force_link_speed_ext = 31;          // LinkSpeedExtEnabled; 0 leave, 31 = Supported
  uint8_t local_phy_errors_threshold = 0x08;  // PortInfo error thresholds
  uint8_t overrun_errors_threshold = 0x08;
  uint8_t packet_life_time = 0x12;            // SwitchInfo LifeTimeValue
  // QoS (sm/sweep/qos_program.h): with `qos`, every port's VLHighLimit, VLArb and SL2VL tables
  // as its class's level says; a failed table Set fails the sweep unless suppressed.
  bool qos = false;
  conf::QosLevels qos_levels;
  // The QoS policy file's qos-ulps (PathRecord SLs; used with `qos` only); null: none.
  std::shared_ptr<const conf::QosPolicy> qos_policy;
  bool suppress_sl2vl_mad_status_errors = false;
  std::string routing_engine;  // comma list; empty = minhop
  routing::RoutingOptions routing;
  size_t max_wire_smps = 64;
  // qos FALSE: the most the end of a heavy sweep waits for the optional SL2VL and VLArb
  // reads before SUBNET UP (QosStage::HoldsFinish). Not an opensm.conf key.
  std::chrono::milliseconds optional_reads_wait{250};
  mad::SendOptions send;
  std::chrono::seconds sweep_interval{10};  // 0 = no light sweeps
  bool force_heavy_sweep = false;           // a heavy sweep every sweep_interval, not a light one
  size_t keep_sweeps = 10000;               // sweep rows and events kept in the state file
  size_t keep_events = 100000;
  bool sweep_on_trap = true;
  // A trap 128 from a known switch (or a light sweep's PortStateChange) re-reads only that
  // switch's ports; links that went down are taken out of the model and the rest of the
  // sweep runs on it, without rediscovery. Anything else falls back to a heavy sweep
  // (ARCHITECTURE.md "Repair sweep").
  bool incremental_repair = true;
  // A repair sweep re-routes only the LIDs whose routes the lost cables and nodes broke,
  // keeping every other route (routing::RerouteAround); the routing engine routes it when
  // that result fails verification or the credit-loop check.
  bool incremental_reroute = true;
  // Cables that flap are kept out of the model (link_flap_threshold, link_flap_window,
  // link_flap_hold_time; sm/sweep/link_damping.h).
  LinkDampingOptions link_damping;
  bool once = false;               // one heavy sweep, then report done
  // The state writer on a thread of its own (the daemon): dumps, sweep rows and snapshots
  // never hold up the io thread. REQUIRES: the store is safe to share (ha::LockedStateFile).
  // Off, they are written on the io thread at the end of each sweep (tests in process).
  bool state_writer_thread = false;
  std::string dump_dir;            // empty = no dump files
  // opensm-lfts.dump as well as opensm-subnet.lst (OpenSM: log_flags routing bit 0x40).
  bool dump_lfts = false;
  std::string guid2lid_file;       // OpenSM's file, read at start (migration from OpenSM)
  bool no_clients_rereg = false;
  // partitions.conf as last loaded well, part_enforce, allow_both_pkeys (SIGHUP reloads).
  PartitionPolicy partitions;
  ArConfig ar;  // adaptive routing (ar_mode, ar_sl_mask, ...), on top of any engine
  bool sharp_enable = false;  // SHARP aggregation trees (sm/vendor/sharp_manager.h)
  // What SHARP writes into tree QP contexts (P_Key, SL, retry limits, ...); `send` is
  // replaced by the SM's own. Read when the SM is built.
  SharpOptions sharp;
};

}  // namespace ibsm::sm
