#include "conf/sm_config.h"

#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>

#include <fmt/format.h>

#include "conf/opensm_keys.h"
#include "conf/qos_config.h"
#include "conf/text_file.h"

namespace ibsm::conf {
namespace {


constexpr std::array<std::string_view, 4> kPartEnforceValues = {"both", "in", "out", "off"};
constexpr std::array<std::string_view, 2> kArLidModeValues = {"bounded", "free"};

using SC = SmConfig;

constexpr OptionDesc Bool(std::string_view name, bool SC::*f, std::string_view def,
                          std::string_view comment) {
  OptionDesc d{.name = name, .kind = OptionKind::kBool, .field = f, .default_text = def};
  d.comment = comment;
  return d;
}
template <typename T>
constexpr OptionDesc Uint(std::string_view name, T SC::*f, std::string_view def, uint64_t min,
                          uint64_t max, std::string_view comment) {
  OptionDesc d{.name = name, .kind = OptionKind::kUint, .field = f, .default_text = def};
  d.min = min;
  d.max = max;
  d.comment = comment;
  return d;
}
template <typename T>
constexpr OptionDesc Hex(std::string_view name, T SC::*f, std::string_view def, uint64_t min,
                         uint64_t max, int digits, std::string_view comment) {
  OptionDesc d = Uint(name, f, def, min, max, comment);
  d.kind = OptionKind::kHex;
  d.hex_digits = digits;
  return d;
}
constexpr OptionDesc GuidOpt(std::string_view name, Guid SC::*f, std::string_view comment) {
  OptionDesc d{.name = name, .kind = OptionKind::kGuid, .field = f,
               .default_text = "0x0000000000000000"};
  d.max = UINT64_MAX;
  d.hex_digits = 16;
  d.comment = comment;
  return d;
}
constexpr OptionDesc Str(std::string_view name, std::string SC::*f, std::string_view def,
                         std::string_view comment) {
  OptionDesc d{.name = name, .kind = OptionKind::kString, .field = f, .default_text = def};
  d.comment = comment;
  return d;
}
constexpr OptionDesc Enum(std::string_view name, std::string SC::*f, std::string_view def,
                          std::span<const std::string_view> values, std::string_view comment) {
  OptionDesc d = Str(name, f, def, comment);
  d.kind = OptionKind::kEnum;
  d.enum_values = values;
  return d;
}
constexpr OptionDesc Section(std::string_view section, OptionDesc d) {
  d.section = section;
  return d;
}
constexpr OptionDesc AcceptsBool(OptionDesc d) {
  d.accepts_bool = true;
  return d;
}
constexpr OptionDesc QosText(OptionDesc d, Status (*check)(std::string_view)) {
  d.check = check;
  return d;
}
// SIGHUP applies it (ibsmd re-reads the file and the running SM takes the new value); every
// other option keeps the value ibsmd started with until it restarts (CONF-104 says so).
constexpr OptionDesc Reloads(OptionDesc d) {
  d.reloads = true;
  return d;
}
constexpr OptionDesc AliasOf(std::string_view canonical, OptionDesc d) {
  d.alias_of = canonical;
  return d;
}

// The one table. Order and comments follow `opensm -c` (OpenSM 3.3.23) where OpenSM has the
// option; ibsm's own options come last. Defaults must equal SmConfig's initializers (tested).
const OptionDesc kOptions[] = {
    Section("DEVICE ATTRIBUTES OPTIONS",
            GuidOpt("guid", &SC::guid, "The port GUID on which the SM is running\n"
                                       "0 = the first active port")),
    Hex("m_key", &SC::m_key, "0x0000000000000000", 0, UINT64_MAX, 16,
        "M_Key value sent to all ports qualifying all Set(PortInfo)"),
    Uint("m_key_lease_period", &SC::m_key_lease_period, "0", 0, 0xFFFF,
         "The lease period used for the M_Key on this subnet in [sec]"),
    Uint("m_key_protection_level", &SC::m_key_protection_level, "0", 0, 3,
         "The protection level used for the M_Key on this subnet (0..3)"),
    Hex("sm_key", &SC::sm_key, "0x0000000000000001", 0, UINT64_MAX, 16,
        "SM_Key value of the SM used for SM authentication"),
    Hex("sa_key", &SC::sa_key, "0x0000000000000001", 0, UINT64_MAX, 16,
        "SM_Key value to qualify rcv SA queries as 'trusted'"),
    Hex("subnet_prefix", &SC::subnet_prefix, "0xfe80000000000000", 0, UINT64_MAX, 16,
        "Subnet prefix used on this subnet"),
    Uint("lmc", &SC::lmc, "0", 0, 7, "The LMC value used on this subnet (2^lmc LIDs per port)"),
    Bool("lmc_esp0", &SC::lmc_esp0, "FALSE",
         "lmc_esp0 determines whether LMC value used on subnet is used for\n"
         "enhanced switch port 0. If TRUE, LMC value for subnet is used for\n"
         "ESP0. Otherwise, LMC value for ESP0s is 0."),
    Uint("sm_sl", &SC::sm_sl, "0", 0, 15,
         "sm_sl determines SMSL used for SM/SA communication\n"
         "(PortInfo:MasterSMSL of every CA port and switch port 0)"),
    Hex("packet_life_time", &SC::packet_life_time, "0x12", 0, 0x1F, 2,
        "The code of maximal time a packet can live in a switch\n"
        "The actual time is 4.096usec * 2^<packet_life_time>\n"
        "The value 0x14 disables this mechanism"),
    Hex("vl_stall_count", &SC::vl_stall_count, "0x07", 0, 7, 2,
        "The number of sequential packets dropped that cause the port\n"
        "to enter the VLStalled state."),
    Hex("leaf_vl_stall_count", &SC::leaf_vl_stall_count, "0x07", 0, 7, 2,
        "The number of sequential packets dropped that cause the port\n"
        "to enter the VLStalled state. This value is for switch ports\n"
        "driving a CA or router port."),
    Hex("head_of_queue_lifetime", &SC::head_of_queue_lifetime, "0x12", 0, 0x1F, 2,
        "The code of maximal time a packet can wait at the head of\n"
        "transmission queue.\n"
        "The actual time is 4.096usec * 2^<head_of_queue_lifetime>\n"
        "The value 0x14 disables this mechanism"),
    Hex("leaf_head_of_queue_lifetime", &SC::leaf_head_of_queue_lifetime, "0x10", 0, 0x1F, 2,
        "The maximal time a packet can wait at the head of queue on\n"
        "switch port connected to a CA or router port"),
    Uint("max_op_vls", &SC::max_op_vls, "5", 1, 5,
         "Limit the maximal operational VLs\n"
         "(1: VL0, 2: VL0-1, 3: VL0-3, 4: VL0-7, 5: VL0-14)"),
    Uint("force_link_speed", &SC::force_link_speed, "15", 0, 15,
         "Force PortInfo:LinkSpeedEnabled on switch ports\n"
         "If 0, don't modify PortInfo:LinkSpeedEnabled on switch port\n"
         "Otherwise, use value for PortInfo:LinkSpeedEnabled on switch port\n"
         "   1: 2.5 Gbps, 3: 2.5 or 5.0 Gbps, 5: 2.5 or 10.0 Gbps,\n"
         "   7: 2.5 or 5.0 or 10.0 Gbps, 2,4,6,8-14 Reserved\n"
         "   Default 15: set to PortInfo:LinkSpeedSupported"),
    Uint("force_link_speed_ext", &SC::force_link_speed_ext, "31", 0, 31,
         "Force PortInfo:LinkSpeedExtEnabled on ports where both ends have\n"
         "extended speeds (IsExtendedSpeedsSupported)\n"
         "If 0, don't modify PortInfo:LinkSpeedExtEnabled\n"
         "   1: 14.0625 Gbps, 2: 25.78125 Gbps, 4: 53.125 Gbps (sums: either),\n"
         "   30: Disable extended link speeds\n"
         "   Default 31: set to PortInfo:LinkSpeedExtSupported"),
    Uint("force_link_width", &SC::force_link_width, "255", 0, 255,
         "Force PortInfo:LinkWidthEnabled on every port\n"
         "If 0, don't modify PortInfo:LinkWidthEnabled\n"
         "   1: 1x, 2: 4x, 4: 8x, 8: 12x, 16: 2x (sums: either; 2x only where\n"
         "   CapabilityMask2 says 2x is supported), 32-254 Reserved\n"
         "   Default 255: set to PortInfo:LinkWidthSupported"),
    Reloads(Uint("subnet_timeout", &SC::subnet_timeout, "18", 0, 0x1F,
         "The subnet_timeout code that will be set for all the ports\n"
         "The actual timeout is 4.096usec * 2^<subnet_timeout>")),
    Hex("local_phy_errors_threshold", &SC::local_phy_errors_threshold, "0x08", 0, 0xF, 2,
        "Threshold of local phy errors for sending Trap 129"),
    Hex("overrun_errors_threshold", &SC::overrun_errors_threshold, "0x08", 0, 0xF, 2,
        "Threshold of credit overrun errors for sending Trap 130"),
    Section("PARTITIONING OPTIONS",
            Reloads(Str("partition_config_file", &SC::partition_config_file,
                "/etc/opensm/partitions.conf", "Partition configuration file to be used"))),
    Reloads(Bool("no_partition_enforcement", &SC::no_partition_enforcement, "FALSE",
         "Disable partition enforcement by switches (DEPRECATED)\n"
         "This option is DEPRECATED. Please use part_enforce instead")),
    Reloads(Enum("part_enforce", &SC::part_enforce, "both", kPartEnforceValues,
         "Partition enforcement type (for switches)\n"
         "Values are both, out, in and off\n"
         "Default is both (outbound and inbound enforcement)")),
    Reloads(Bool("allow_both_pkeys", &SC::allow_both_pkeys, "FALSE",
         "Allow both full and limited membership on the same partition")),
    Section("SWEEP OPTIONS",
            Reloads(Uint("sweep_interval", &SC::sweep_interval, "10", 0, UINT32_MAX,
                 "The number of seconds between subnet sweeps (0 disables it)"))),
    Bool("reassign_lids", &SC::reassign_lids, "FALSE", "If TRUE cause all lids to be reassigned"),
    Reloads(Bool("force_heavy_sweep", &SC::force_heavy_sweep, "FALSE",
         "If TRUE forces every sweep to be a heavy sweep")),
    Reloads(Bool("sweep_on_trap", &SC::sweep_on_trap, "TRUE",
         "If TRUE every trap 128 and 144 will cause a heavy sweep.")),
    Reloads(Bool("incremental_repair", &SC::incremental_repair, "TRUE",
         "If TRUE a trap 128 from a known switch (or PortStateChange seen by a light\n"
         "sweep) re-reads that switch's ports and repairs the model (cables that went\n"
         "down) instead of rediscovering the fabric; anything else still causes a heavy\n"
         "sweep (ibsm's own key)")),
    Reloads(Bool("incremental_reroute", &SC::incremental_reroute, "TRUE",
         "If TRUE a repair sweep keeps every route that still delivers and routes\n"
         "again only the LIDs whose routes crossed what was lost, up*/down* (the\n"
         "result verified and checked for credit loops like an engine's; if it fails,\n"
         "the routing engine routes as in a heavy sweep); FALSE: the routing engine\n"
         "routes every repair (ibsm's own key)")),
    Reloads(Uint("link_flap_threshold", &SC::link_flap_threshold, "5", 0, 1000,
         "A cable that changes state (goes down, or reports a change while out of the\n"
         "model after a down) this many times within link_flap_window seconds is\n"
         "kept out of the model (not routed, not armed) until it has stayed quiet for\n"
         "link_flap_hold_time seconds; 0 turns damping off (ibsm's own key)")),
    Reloads(Uint("link_flap_window", &SC::link_flap_window, "10", 1, 86400,
         "Seconds over which link_flap_threshold downs are counted (ibsm's own key)")),
    Reloads(Uint("link_flap_hold_time", &SC::link_flap_hold_time, "60", 1, 86400,
         "Seconds a damped cable must stay quiet before it is used again (ibsm's own key)")),
    Section("ROUTING OPTIONS",
            Reloads(Str("routing_engine", &SC::routing_engine, "(null)",
                "Routing engine\n"
                "Multiple routing engines can be specified separated by\n"
                "commas so that specific ordering of routing algorithms will\n"
                "be tried if earlier routing engines fail.\n"
                "(null) = minhop"))),
    Bool("use_ucast_cache", &SC::use_ucast_cache, "FALSE",
         "Use unicast routing cache (use FALSE if unsure)"),
    Reloads(Str("root_guid_file", &SC::root_guid_file, "(null)",
        "The file holding the root node guids (for fat-tree or Up/Down)\n"
        "One guid in each line")),
    Reloads(Str("cn_guid_file", &SC::cn_guid_file, "(null)",
        "The file holding the fat-tree compute node guids\n"
        "One guid in each line")),
    Reloads(Str("io_guid_file", &SC::io_guid_file, "(null)",
        "The file holding the fat-tree I/O node guids\n"
        "One guid in each line.")),
    Reloads(Uint("max_reverse_hops", &SC::max_reverse_hops, "0", 0, 0xFFFF,
         "Number of reverse hops allowed for I/O nodes\n"
         "Used for connectivity between I/O nodes connected to Top Switches")),
    Reloads(Str("guid_routing_order_file", &SC::guid_routing_order_file, "(null)",
        "The file holding guid routing order guids (for MinHop and Up/Down)")),
    Reloads(Bool("port_shifting", &SC::port_shifting, "FALSE", "Port Shifting (use FALSE if unsure)")),
    Reloads(Uint("scatter_ports", &SC::scatter_ports, "0", 0, UINT32_MAX,
         "Assign ports in a random order instead of round-robin\n"
         "If zero disable (default), otherwise use the value as a random seed")),
    Section("HANDOVER - MULTIPLE SMs OPTIONS",
            Uint("sm_priority", &SC::sm_priority, "0", 0, 15,
                 "SM priority used for deciding who is the master\n"
                 "Range goes from 0 (lowest priority) to 15 (highest).")),
    Bool("ignore_other_sm", &SC::ignore_other_sm, "FALSE",
         "If TRUE other SMs on the subnet should be ignored"),
    Uint("sminfo_polling_timeout", &SC::sminfo_polling_timeout, "10000", 1, UINT32_MAX,
         "Timeout in [msec] between two polls of active master SM"),
    Uint("polling_retry_number", &SC::polling_retry_number, "4", 1, UINT32_MAX,
         "Number of failing polls of remote SM that declares it dead"),
    Bool("honor_guid2lid_file", &SC::honor_guid2lid_file, "FALSE",
         "If TRUE honor the guid2lid file when coming out of standby\n"
         "state, if such file exists and is valid"),
    Section("TIMING AND THREADING OPTIONS",
            Uint("max_wire_smps", &SC::max_wire_smps, "64", 0, 65535,
                 "Maximum number of SMPs sent in parallel (0 = no limit)\n"
                 "ibsm's default is 64 (OpenSM's is 4): measured several times\n"
                 "faster discovery with no extra timeouts")),
    Uint("transaction_timeout", &SC::transaction_timeout, "200", 1, 600000,
         "The maximum time in [msec] allowed for a transaction to complete"),
    Uint("transaction_retries", &SC::transaction_retries, "3", 0, 100,
         "The maximum number of retries allowed for a transaction to complete"),
    Section("MISC OPTIONS", Bool("daemon", &SC::daemon, "FALSE", "Daemon mode")),
    Reloads(Bool("babbling_port_policy", &SC::babbling_port_policy, "FALSE", "Babbling Port Policy")),
    Section("Performance Manager Options",
            Bool("perfmgr", &SC::perfmgr, "FALSE",
                 "perfmgr enable\n"
                 "PerfMgr is enabled if TRUE and disabled if FALSE (default FALSE)")),
    Reloads(Uint("perfmgr_sweep_time_s", &SC::perfmgr_sweep_time_s, "180", 1, UINT32_MAX,
         "sweep time in seconds (default 180 seconds)")),
    Reloads(Uint("perfmgr_max_outstanding_queries", &SC::perfmgr_max_outstanding_queries, "500", 1,
         65535, "Max outstanding queries (default 500)")),
    Reloads(Bool("perfmgr_ignore_cas", &SC::perfmgr_ignore_cas, "FALSE",
         "Ignore CAs on sweep (default FALSE)")),
    Reloads(Bool("perfmgr_query_cpi", &SC::perfmgr_query_cpi, "TRUE",
         "Query PerfMgt Get(ClassPortInfo) for extended capabilities\n"
         "Extended capabilities include 64 bit extended counters\n"
         "and transmit wait support (default TRUE)")),
    Reloads(Bool("perfmgr_clear_near_overflow", &SC::perfmgr_clear_near_overflow, "TRUE",
         "(ibsm) Clear a port's PortCounters when one nears its maximum\n"
         "(3/4 of it, as OpenSM does), so later deltas stay exact")),
    Reloads(Uint("perfmgr_history_sweeps", &SC::perfmgr_history_sweeps, "1000", 1, UINT32_MAX,
         "(ibsm) PerfMgr sweeps of counter deltas kept in the state file")),
    Reloads(Uint("state_history_sweeps", &SC::state_history_sweeps, "10000", 1, UINT32_MAX,
         "(ibsm) Heavy sweep rows kept in the state file (older ones are dropped\n"
         "after each heavy sweep)")),
    Reloads(Uint("state_history_events", &SC::state_history_events, "100000", 1, UINT32_MAX,
         "(ibsm) Events (state changes, health findings, ...) kept in the state file")),
    Reloads(Uint("health_symbol_errors_threshold", &SC::health_symbol_errors_threshold, "10", 0,
         UINT32_MAX,
         "(ibsm) Health rules: a port is reported when a counter grows by at least\n"
         "its threshold within one PerfMgr sweep; 0 turns a rule off.\n"
         "SymbolErrorCounter")),
    Reloads(Uint("health_link_error_recovery_threshold", &SC::health_link_error_recovery_threshold, "1",
         0, UINT32_MAX, "(ibsm) LinkErrorRecoveryCounter")),
    Reloads(Uint("health_link_downed_threshold", &SC::health_link_downed_threshold, "1", 0, UINT32_MAX,
         "(ibsm) LinkDownedCounter")),
    Reloads(Uint("health_port_rcv_errors_threshold", &SC::health_port_rcv_errors_threshold, "10", 0,
         UINT32_MAX, "(ibsm) PortRcvErrors")),
    Reloads(Uint("health_excessive_buffer_overruns_threshold",
         &SC::health_excessive_buffer_overruns_threshold, "1", 0, UINT32_MAX,
         "(ibsm) ExcessiveBufferOverrunErrors")),
    Reloads(Uint("health_vl15_dropped_threshold", &SC::health_vl15_dropped_threshold, "100", 0,
         UINT32_MAX, "(ibsm) VL15Dropped")),
    Reloads(Bool("health_degraded_links", &SC::health_degraded_links, "TRUE",
         "(ibsm) Report links running below the width or speed both ends support")),
    Reloads(Uint("health_window_s", &SC::health_window_s, "3600", 1, UINT32_MAX,
         "(ibsm) Seconds health and links --errors remember a finding or an error\n"
         "count after the last PerfMgr sweep that saw it")),
    Section("DEBUG FEATURES",
            Hex("log_flags", &SC::log_flags, "0x03", 0, 0xFF, 2,
                "The log flags used\n"
                "0x01 ERROR, 0x02 INFO, 0x04 VERBOSE, 0x08 DEBUG, 0x10 FUNCS,\n"
                "0x20 FRAMES, 0x40 ROUTING, 0x80 SYS")),
    Bool("force_log_flush", &SC::force_log_flush, "FALSE",
         "Force flush of the log file after each log message\n"
         "(ibsm always flushes state lines such as SUBNET UP at once)"),
    Str("log_file", &SC::log_file, "/var/log/opensm.log",
        "Log file to be used (stdout or stderr for the terminal)"),
    Uint("log_max_size", &SC::log_max_size, "0", 0, UINT32_MAX,
         "Limit the size of the log file in MB. If overrun, log is restarted"),
    Bool("accum_log_file", &SC::accum_log_file, "TRUE",
         "If TRUE will accumulate the log over multiple sessions"),
    Reloads(Str("dump_files_dir", &SC::dump_files_dir, "/var/log/",
        "The directory to hold the file dumps (opensm-subnet.lst, opensm-lfts.dump)")),
    Reloads(Bool("no_clients_rereg", &SC::no_clients_rereg, "FALSE",
         "If TRUE disables client reregistration")),
    Bool("disable_multicast", &SC::disable_multicast, "FALSE",
         "If TRUE the SM should disable multicast support and\n"
         "no multicast routing is performed if TRUE"),
    Bool("exit_on_fatal", &SC::exit_on_fatal, "TRUE",
         "If TRUE the SM will exit on fatal initialization issues"),
    Section("QoS OPTIONS", Reloads(Bool("qos", &SC::qos, "FALSE",
                                "Enable QoS setup: VLHighLimit, VL arbitration and SL-to-VL\n"
                                "tables of every port, as the qos_* options below say"))),
    Reloads(Str("qos_policy_file", &SC::qos_policy_file, "/etc/opensm/qos-policy.conf",
        "QoS policy file: its qos-ulps section gives PathRecords their SL\n"
        "(with qos TRUE; the other sections are refused, docs/qos.md)")),
    Reloads(Bool("suppress_sl2vl_mad_status_errors", &SC::suppress_sl2vl_mad_status_errors, "FALSE",
         "If TRUE a failed SL2VL or VLArb Set does not fail the sweep\n"
         "(it is counted and logged either way, and retried next sweep)")),
    QosText(Reloads(Str("qos_high_limit", &SC::qos_high_limit, "-1",
                "default for every port class: VLHighLimit, 0-255 (-1: not set)")), CheckQosHighLimit),
    QosText(Reloads(Str("qos_vlarb_high", &SC::qos_vlarb_high, "(null)",
                "default for every port class: high-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_vlarb_low", &SC::qos_vlarb_low, "(null)",
                "default for every port class: low-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_sl2vl", &SC::qos_sl2vl, "(null)",
                "default for every port class: the VL of each of the 16 SLs, v0,v1,...,v15 (15 drops)")), CheckQosSl2Vl),
    QosText(Reloads(Str("qos_ca_high_limit", &SC::qos_ca_high_limit, "-1",
                "CA ports: VLHighLimit, 0-255 (-1: not set)")), CheckQosHighLimit),
    QosText(Reloads(Str("qos_ca_vlarb_high", &SC::qos_ca_vlarb_high, "(null)",
                "CA ports: high-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_ca_vlarb_low", &SC::qos_ca_vlarb_low, "(null)",
                "CA ports: low-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_ca_sl2vl", &SC::qos_ca_sl2vl, "(null)",
                "CA ports: the VL of each of the 16 SLs, v0,v1,...,v15 (15 drops)")), CheckQosSl2Vl),
    QosText(Reloads(Str("qos_sw0_high_limit", &SC::qos_sw0_high_limit, "-1",
                "switch port 0: VLHighLimit, 0-255 (-1: not set)")), CheckQosHighLimit),
    QosText(Reloads(Str("qos_sw0_vlarb_high", &SC::qos_sw0_vlarb_high, "(null)",
                "switch port 0: high-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_sw0_vlarb_low", &SC::qos_sw0_vlarb_low, "(null)",
                "switch port 0: low-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_sw0_sl2vl", &SC::qos_sw0_sl2vl, "(null)",
                "switch port 0: the VL of each of the 16 SLs, v0,v1,...,v15 (15 drops)")), CheckQosSl2Vl),
    QosText(Reloads(Str("qos_swe_high_limit", &SC::qos_swe_high_limit, "-1",
                "switch external ports: VLHighLimit, 0-255 (-1: not set)")), CheckQosHighLimit),
    QosText(Reloads(Str("qos_swe_vlarb_high", &SC::qos_swe_vlarb_high, "(null)",
                "switch external ports: high-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_swe_vlarb_low", &SC::qos_swe_vlarb_low, "(null)",
                "switch external ports: low-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_swe_sl2vl", &SC::qos_swe_sl2vl, "(null)",
                "switch external ports: the VL of each of the 16 SLs, v0,v1,...,v15 (15 drops)")), CheckQosSl2Vl),
    QosText(Reloads(Str("qos_rtr_high_limit", &SC::qos_rtr_high_limit, "-1",
                "router ports: VLHighLimit, 0-255 (-1: not set)")), CheckQosHighLimit),
    QosText(Reloads(Str("qos_rtr_vlarb_high", &SC::qos_rtr_vlarb_high, "(null)",
                "router ports: high-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_rtr_vlarb_low", &SC::qos_rtr_vlarb_low, "(null)",
                "router ports: low-priority VL arbitration, vl:weight,... (VL 0-14)")), CheckQosVlArb),
    QosText(Reloads(Str("qos_rtr_sl2vl", &SC::qos_rtr_sl2vl, "(null)",
                "router ports: the VL of each of the 16 SLs, v0,v1,...,v15 (15 drops)")), CheckQosSl2Vl),
    Section("IBSM OPTIONS (not known to OpenSM)",
            Str("guid2lid_file", &SC::guid2lid_file, "/var/cache/opensm/guid2lid",
                "OpenSM's guid2lid file (0xGUID 0xMINLID 0xMAXLID per line), read at start\n"
                "so ports keep the LIDs OpenSM gave them; ibsmd writes its own, in the same\n"
                "format, to dump_files_dir/guid2lid after each sweep")),
    Str("state_db_file", &SC::state_db_file, "/var/lib/ibsm/ibsm-state.db",
        "SQLite state file: guid2lid, sweep history, events, SA registrations"),
    Str("control_socket", &SC::control_socket, "/run/ibsm/ibsmd.sock",
        "Unix socket for ibsmctl (JSON lines); \"none\" for no socket. Read-only\n"
        "commands for whoever may open it, changes for root and the daemon's user"),
    Str("control_socket_group", &SC::control_socket_group, "(null)",
        "Group owning the control socket (mode 0660); empty: the daemon's group"),
    Uint("metrics_port", &SC::metrics_port, "0", 0, 65535,
         "TCP port serving Prometheus text metrics at /metrics; 0 = off"),
    Str("metrics_address", &SC::metrics_address, "127.0.0.1",
        "Address the metrics port listens on (0.0.0.0 for every interface)"),
    AcceptsBool(Reloads(Uint("ar_mode", &SC::ar_mode, "0", 0, 3,
                     "Adaptive routing: 0 off, 1 on, 2 on with notifications, 3 auto\n"
                     "(ar_enable is accepted as another name; AR is programmed on top of\n"
                     "any routing_engine, ar_updn and ar_ftree being updn and ftree)"))),
    AliasOf("ar_mode", AcceptsBool(Uint("ar_enable", &SC::ar_mode, "0", 0, 3, ""))),
    Reloads(Hex("ar_sl_mask", &SC::ar_sl_mask, "0xffff", 0, 0xFFFF, 4,
        "SLs on which adaptive routing is enabled (bit n = SL n)")),
    Reloads(Hex("ar_transport_mask", &SC::ar_transport_mask, "0xa", 0, 0xF, 1,
        "Transports that may use adaptive routing (0x2 RC, 0x8 DC; default RC and DC)")),
    Reloads(Enum("ar_lid_mode", &SC::ar_lid_mode, "free", kArLidModeValues,
         "Adaptive routing per LID: free (every packet may take another port of its\n"
         "group, NVIDIA's documented mode) or bounded (a burst stays on one port until\n"
         "the ageing time passes)")),
    Reloads(Uint("ar_ageing_time_us", &SC::ar_ageing_time_us, "30", 0, 0xFFFFFFFF,
         "Adaptive routing ageing time in microseconds (bounded mode burst end)")),
    Reloads(Bool("sharp_enable", &SC::sharp_enable, "FALSE",
         "If TRUE configure SHARP aggregation nodes on capable switches")),
};


bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

}  // namespace

// Decimal or 0x hex, no sign, no spaces, no overflow.
bool ParseU64(std::string_view s, uint64_t* out) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char ch : s) {
    unsigned digit;
    if (ch >= '0' && ch <= '9') {
      digit = static_cast<unsigned>(ch - '0');
    } else if (base == 16 && ch >= 'a' && ch <= 'f') {
      digit = static_cast<unsigned>(ch - 'a' + 10);
    } else if (base == 16 && ch >= 'A' && ch <= 'F') {
      digit = static_cast<unsigned>(ch - 'A' + 10);
    } else {
      return false;
    }
    if (v > (UINT64_MAX - digit) / static_cast<uint64_t>(base)) return false;
    v = v * static_cast<uint64_t>(base) + digit;
  }
  *out = v;
  return true;
}

namespace {

std::optional<bool> ParseBool(std::string_view s) {
  if (EqualsIgnoreCase(s, "TRUE") || s == "1") return true;
  if (EqualsIgnoreCase(s, "FALSE") || s == "0") return false;
  return std::nullopt;
}

std::string RangeText(const OptionDesc& d) {
  if (d.kind == OptionKind::kHex || d.kind == OptionKind::kGuid) {
    return fmt::format("{:#x}..{:#x}", d.min, d.max);
  }
  return fmt::format("{}..{}", d.min, d.max);
}

std::string EnumText(const OptionDesc& d) {
  std::string out;
  for (std::string_view v : d.enum_values) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

// Sets `d`'s member from `value`. Error messages start with `subject` (the key, or the
// command-line flag) and name what would have been accepted.
Status SetFromText(SmConfig* c, const OptionDesc& d, std::string_view value,
                   std::string_view subject) {
  const std::string shown = Printable(value);
  if (value.empty()) return InvalidArgument(fmt::format("{}: missing value", subject));
  switch (d.kind) {
    case OptionKind::kBool: {
      auto b = ParseBool(value);
      if (!b) return InvalidArgument(fmt::format("{}: '{}' is not TRUE or FALSE", subject, shown));
      c->*std::get<bool SC::*>(d.field) = *b;
      return Status::Ok();
    }
    case OptionKind::kUint:
    case OptionKind::kHex:
    case OptionKind::kGuid: {
      uint64_t v = 0;
      if (!ParseU64(value, &v)) {
        std::optional<bool> b = d.accepts_bool ? ParseBool(value) : std::nullopt;
        if (!b) {
          return InvalidArgument(fmt::format("{}: '{}' is not a number in {}", subject, shown,
                                             RangeText(d)));
        }
        v = *b ? 1 : 0;
      }
      if (v < d.min || v > d.max) {
        return InvalidArgument(
            fmt::format("{}: '{}' is out of range {}", subject, shown, RangeText(d)));
      }
      std::visit(
          [&](auto member) {
            using T = std::remove_reference_t<decltype(c->*member)>;
            if constexpr (std::is_same_v<T, Guid>) {
              c->*member = Guid{v};
            } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
              c->*member = static_cast<T>(v);
            }
          },
          d.field);
      return Status::Ok();
    }
    case OptionKind::kString:
      if (d.check != nullptr && value != "(null)") {
        if (Status s = d.check(value); !s.ok()) {
          return InvalidArgument(fmt::format("{}: '{}': {}", subject, shown, s.message()));
        }
      }
      c->*std::get<std::string SC::*>(d.field) = value == "(null)" ? "" : std::string(value);
      return Status::Ok();
    case OptionKind::kEnum:
      for (std::string_view v : d.enum_values) {
        if (value == v) {
          c->*std::get<std::string SC::*>(d.field) = std::string(v);
          return Status::Ok();
        }
      }
      return InvalidArgument(
          fmt::format("{}: '{}' is not one of {}", subject, shown, EnumText(d)));
  }
  return Internal("unknown option kind");
}

const OptionDesc* Canonical(const OptionDesc* d) {
  return d->alias_of.empty() ? d : FindOption(d->alias_of);
}

}  // namespace

std::span<const OptionDesc> OptionTable() { return kOptions; }

const OptionDesc* FindOption(std::string_view name) {
  for (const OptionDesc& d : kOptions) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

bool IsOpenSmOnlyOption(std::string_view name) {
  return FindOpenSmKey(name) != nullptr && FindOption(name) == nullptr;
}

Status SetOption(SmConfig* c, std::string_view key, std::string_view value) {
  const OptionDesc* d = FindOption(key);
  if (d == nullptr) return NotFound(fmt::format("unknown option '{}'", Printable(key)));
  return SetFromText(c, *d, value, key);
}

std::string OptionValueText(const SmConfig& c, const OptionDesc& d) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_cvref_t<decltype(c.*member)>;
        const T& v = c.*member;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "TRUE" : "FALSE";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return v.empty() ? "(null)" : v;
        } else if constexpr (std::is_same_v<T, Guid>) {
          return fmt::format("0x{:016x}", v.value());
        } else {
          if (d.kind == OptionKind::kHex) return fmt::format("0x{:0{}x}", v, d.hex_digits);
          return fmt::format("{}", v);
        }
      },
      d.field);
}

Result<ConfigLoad> ParseConfig(std::string_view text, std::string_view file_name) {
  ConfigLoad out;
  const std::span<const OptionDesc> table = OptionTable();
  std::vector<int> set_on_line(table.size(), 0);
  auto warn = [&](int line, const char* id, std::string message) {
    if (out.warnings.size() < kMaxConfWarnings) {
      out.warnings.push_back({id, std::string(file_name), line, std::move(message)});
    } else if (out.warnings.size() == kMaxConfWarnings) {
      out.warnings.push_back({kConfTooManyWarnings, std::string(file_name), line,
                              "too many warnings; the rest are not shown"});
    }
  };

  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = TrimSpace(line);
    if (line.empty()) continue;
    size_t sp = line.find_first_of(kConfSpace);
    std::string_view key = line.substr(0, sp);
    std::string_view value = sp == std::string_view::npos ? std::string_view{}
                                                          : TrimSpace(line.substr(sp));

    if (const OptionDesc* d = FindOption(key)) {
      const OptionDesc* canon = Canonical(d);
      const size_t index = static_cast<size_t>(canon - table.data());
      if (set_on_line[index] != 0) {
        warn(line_no, kConfDuplicateKey,
             fmt::format("{} is set again (first on line {}); the last value wins", key,
                         set_on_line[index]));
      }
      set_on_line[index] = line_no;
      Status s = SetFromText(&out.config, *d, value, key);
      if (!s.ok()) return InvalidArgument(fmt::format("{}:{}: {}", file_name, line_no, s.message()));
      if (const OpenSmKey* k = FindOpenSmKey(key); k && !Honoured(*k, value)) {
        ++out.not_honoured;
        warn(line_no, kConfNotHonoured, NotHonouredText(*k, value));
      }
    } else if (IsOpenSmOnlyOption(key)) {
      out.config.opensm_only.emplace_back(std::string(key), std::string(value));
      if (const OpenSmKey* k = FindOpenSmKey(key); !Honoured(*k, value)) {
        ++out.not_honoured;
        warn(line_no, kConfNotHonoured, NotHonouredText(*k, value));
      }
    } else {
      warn(line_no, kConfUnknownKey,
           fmt::format("unknown option '{}' ignored", Printable(key)));
    }
  }
  return out;
}

Result<ConfigLoad> LoadConfigFile(const std::string& path) {
  IBSM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseConfig(text, path);
}

namespace {

void AppendComment(std::string* out, std::string_view comment) {
  while (!comment.empty()) {
    size_t nl = comment.find('\n');
    *out += "# ";
    *out += comment.substr(0, nl);
    *out += '\n';
    comment = nl == std::string_view::npos ? std::string_view{} : comment.substr(nl + 1);
  }
}

// "not supported by ibsm (behaves as FALSE)", or without the parenthesis when it would only
// say "not supported" again.
std::string NotSupportedText(const OpenSmKey& k) {
  const std::string how = SupportText(k);
  return how == "not supported" ? "not supported by ibsm"
                                : fmt::format("not supported by ibsm ({})", how);
}

// The value `key` was given in `c`'s file (the last one), or OpenSM's default.
std::string_view OpenSmOnlyValue(const SmConfig& c, const OpenSmKey& key) {
  for (auto it = c.opensm_only.rbegin(); it != c.opensm_only.rend(); ++it)
    if (it->first == key.name) return it->second;
  return key.opensm_default;
}

}  // namespace

std::string WriteConfig(const SmConfig& c) {
  std::string out;
  for (const OptionDesc& d : OptionTable()) {
    if (!d.alias_of.empty()) continue;
    if (!d.section.empty()) out += fmt::format("#\n# {}\n#\n", d.section);
    AppendComment(&out, d.comment);
    const std::string value = OptionValueText(c, d);
    const OpenSmKey* k = FindOpenSmKey(d.name);
    if (k == nullptr || (k->support == KeySupport::kActs && k->honoured.empty())) {
      out += fmt::format("{} {}\n\n", d.name, value);
    } else if (k->support == KeySupport::kFixed && Honoured(*k, value)) {
      out += fmt::format("# ibsm {}: {}\n{} {}\n\n", SupportText(*k), k->note, d.name, value);
    } else if (k->support == KeySupport::kActs) {
      out += fmt::format("# ibsm: {}\n{} {}\n\n", k->note, d.name, value);
    } else {
      out += fmt::format("# {}: {}\n# {} {}\n\n", NotSupportedText(*k), k->note, d.name, value);
    }
  }
  out += "#\n# OPENSM OPTIONS ibsm does not read (each says what ibsm does instead)\n#\n";
  for (const OpenSmKey& k : OpenSmKeys()) {
    if (FindOption(k.name) != nullptr) continue;
    out += fmt::format("# {} {}\n#   {}: {}\n", k.name, Printable(OpenSmOnlyValue(c, k), 200),
                       NotSupportedText(k), k.note);
  }
  return out;
}

std::string DumpConfig(const SmConfig& c, bool only_changed) {
  const SmConfig defaults;
  std::string out;
  for (const OptionDesc& d : OptionTable()) {
    if (!d.alias_of.empty()) continue;
    std::string v = OptionValueText(c, d);
    if (only_changed && v == OptionValueText(defaults, d)) continue;
    out += fmt::format("{} {}\n", d.name, v);
  }
  for (const auto& [key, value] : c.opensm_only) {
    out += fmt::format("{} {} (not read by ibsm)\n", key, Printable(value, 200));
  }
  return out;
}

}  // namespace ibsm::conf
