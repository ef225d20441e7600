// The SM's half of each option row (sm/sweep/config_options.h), in the order of
// conf/sm_config.cc's rows.
#include "sm/sweep/config_options.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "conf/qos_config.h"

namespace ibsm::sm {
namespace {

using C = conf::SmConfig;
using O = SubnetManagerOptions;
using P = PerfManagerOptions;
using U = OptionUse;

// Rows that share a function (one value read from several options) apply it once.
void PartitionEnforcement(const C& c, O& o) {
  // The option's row admits only the four names; the daemon refuses a config that has another.
  auto enforce = ParsePartEnforce(c.part_enforce);
  o.partitions.enforce = enforce.ok() ? *enforce : PartEnforce::kBoth;
  if (c.no_partition_enforcement) o.partitions.enforce = PartEnforce::kOff;  // OpenSM
}
void QosLevels(const C& c, O& o) { o.qos_levels = conf::BuildQosLevels(c); }
void SweepSend(const C& c, O& o) {
  o.send.timeout = std::chrono::milliseconds(c.transaction_timeout);
  o.send.retries = static_cast<int>(c.transaction_retries);
}
void PerfSend(const C& c, P& o) {
  o.send.timeout = std::chrono::milliseconds(c.transaction_timeout);
  o.send.retries = static_cast<int>(c.transaction_retries);
}
void LinkDamping(const C& c, O& o) {
  o.link_damping.threshold = c.link_flap_threshold;
  o.link_damping.window = std::chrono::seconds(c.link_flap_window);
  o.link_damping.hold = std::chrono::seconds(c.link_flap_hold_time);
}

constexpr OptionTarget Sweep(std::string_view name, void (*f)(const C&, O&)) {
  return {name, U::kSweep, f, nullptr};
}
constexpr OptionTarget Perf(std::string_view name, void (*f)(const C&, P&)) {
  return {name, U::kPerfMgr, nullptr, f};
}
constexpr OptionTarget Both(std::string_view name, void (*s)(const C&, O&),
                            void (*p)(const C&, P&)) {
  return {name, U::kSweep, s, p};
}
constexpr OptionTarget File(std::string_view name) { return {name, U::kFile}; }
constexpr OptionTarget Daemon(std::string_view name) { return {name, U::kDaemon}; }
constexpr OptionTarget NotActedOn(std::string_view name) { return {name, U::kNotActedOn}; }

const OptionTarget kTargets[] = {
    Daemon("guid"),  // the port the transport binds
    Sweep("m_key", [](const C& c, O& o) { o.m_key = c.m_key; }),
    Sweep("m_key_lease_period", [](const C& c, O& o) { o.m_key_lease_period = c.m_key_lease_period; }),
    Sweep("m_key_protection_level",
          [](const C& c, O& o) { o.m_key_protection_level = c.m_key_protection_level; }),
    Sweep("sm_key", [](const C& c, O& o) { o.sm_key = c.sm_key; }),
    Sweep("sa_key", [](const C& c, O& o) { o.sa_key = c.sa_key; }),
    Sweep("subnet_prefix", [](const C& c, O& o) { o.subnet_prefix = c.subnet_prefix; }),
    Sweep("lmc", [](const C& c, O& o) { o.lids.lmc = c.lmc; }),
    Sweep("lmc_esp0", [](const C& c, O& o) { o.lids.lmc_esp0 = c.lmc_esp0; }),
    Sweep("sm_sl", [](const C& c, O& o) { o.sm_sl = c.sm_sl; }),
    Sweep("packet_life_time", [](const C& c, O& o) { o.packet_life_time = c.packet_life_time; }),
    Sweep("vl_stall_count", [](const C& c, O& o) { o.vl_stall_count = c.vl_stall_count; }),
    Sweep("leaf_vl_stall_count",
          [](const C& c, O& o) { o.leaf_vl_stall_count = c.leaf_vl_stall_count; }),
    Sweep("head_of_queue_lifetime",
          [](const C& c, O& o) { o.head_of_queue_lifetime = c.head_of_queue_lifetime; }),
    Sweep("leaf_head_of_queue_lifetime",
          [](const C& c, O& o) { o.leaf_head_of_queue_lifetime = c.leaf_head_of_queue_lifetime; }),
    Sweep("max_op_vls", [](const C& c, O& o) { o.max_op_vls = c.max_op_vls; }),
    Sweep("force_link_speed", [](const C& c, O& o) { o.force_link_speed = c.force_link_speed; }),
    Sweep("force_link_speed_ext",
          [](const C& c, O& o) { o.force_link_speed_ext = c.force_link_speed_ext; }),
    Sweep("force_link_width", [](const C& c, O& o) { o.force_link_width = c.force_link_width; }),
    Sweep("subnet_timeout", [](const C& c, O& o) { o.subnet_timeout = c.subnet_timeout; }),
    Sweep("local_phy_errors_threshold",
          [](const C& c, O& o) { o.local_phy_errors_threshold = c.local_phy_errors_threshold; }),
    Sweep("overrun_errors_threshold",
          [](const C& c, O& o) { o.overrun_errors_threshold = c.overrun_errors_threshold; }),
    File("partition_config_file"),
    Sweep("no_partition_enforcement", PartitionEnforcement),
    Sweep("part_enforce", PartitionEnforcement),
    Sweep("allow_both_pkeys", [](const C& c, O& o) { o.partitions.allow_both_pkeys = c.allow_both_pkeys; }),
    Sweep("sweep_interval", [](const C& c, O& o) { o.sweep_interval = std::chrono::seconds(c.sweep_interval); }),
    Sweep("reassign_lids", [](const C& c, O& o) { o.lids.reassign = c.reassign_lids; }),
    Sweep("force_heavy_sweep", [](const C& c, O& o) { o.force_heavy_sweep = c.force_heavy_sweep; }),
    Sweep("sweep_on_trap", [](const C& c, O& o) { o.sweep_on_trap = c.sweep_on_trap; }),
    Sweep("incremental_repair", [](const C& c, O& o) { o.incremental_repair = c.incremental_repair; }),
    Sweep("incremental_reroute",
          [](const C& c, O& o) { o.incremental_reroute = c.incremental_reroute; }),
    Sweep("link_flap_threshold", LinkDamping),
    Sweep("link_flap_window", LinkDamping),
    Sweep("link_flap_hold_time", LinkDamping),
    // The daemon drops the names it does not know (KnownEngines in sm/daemon/ibsmd_main.cc).
    Sweep("routing_engine", [](const C& c, O& o) { o.routing_engine = c.routing_engine; }),
    NotActedOn("use_ucast_cache"),
    File("root_guid_file"),
    File("cn_guid_file"),
    File("io_guid_file"),
    NotActedOn("max_reverse_hops"),  // ftree needs no reverse hops (routing/ftree_engine.h)
    File("guid_routing_order_file"),
    Sweep("port_shifting", [](const C& c, O& o) { o.routing.port_shifting = c.port_shifting; }),
    Sweep("scatter_ports", [](const C& c, O& o) { o.routing.scatter_ports = c.scatter_ports; }),
    Sweep("sm_priority", [](const C& c, O& o) { o.sm_priority = c.sm_priority; }),
    Sweep("ignore_other_sm", [](const C& c, O& o) { o.ignore_other_sm = c.ignore_other_sm; }),
    Sweep("sminfo_polling_timeout", [](const C& c, O& o) {
      o.sminfo_polling_timeout = std::chrono::milliseconds(c.sminfo_polling_timeout);
    }),
    Sweep("polling_retry_number",
          [](const C& c, O& o) { o.polling_retry_number = c.polling_retry_number; }),
    NotActedOn("honor_guid2lid_file"),
    Sweep("max_wire_smps",
          [](const C& c, O& o) { o.max_wire_smps = c.max_wire_smps == 0 ? 65535 : c.max_wire_smps; }),
    Both("transaction_timeout", SweepSend, PerfSend),
    Both("transaction_retries", SweepSend, PerfSend),
    Daemon("daemon"),
    Sweep("babbling_port_policy",
          [](const C& c, O& o) { o.babbling_port_policy = c.babbling_port_policy; }),
    Daemon("perfmgr"),  // whether the daemon builds a PerfManager at all
    Perf("perfmgr_sweep_time_s",
         [](const C& c, P& o) { o.sweep_time = std::chrono::seconds(c.perfmgr_sweep_time_s); }),
    Perf("perfmgr_max_outstanding_queries",
         [](const C& c, P& o) { o.max_outstanding = c.perfmgr_max_outstanding_queries; }),
    Perf("perfmgr_ignore_cas", [](const C& c, P& o) { o.ignore_cas = c.perfmgr_ignore_cas; }),
    Perf("perfmgr_query_cpi", [](const C& c, P& o) { o.query_cpi = c.perfmgr_query_cpi; }),
    Perf("perfmgr_clear_near_overflow",
         [](const C& c, P& o) { o.clear_near_overflow = c.perfmgr_clear_near_overflow; }),
    Perf("perfmgr_history_sweeps",
         [](const C& c, P& o) { o.history_sweeps = c.perfmgr_history_sweeps; }),
    Sweep("state_history_sweeps", [](const C& c, O& o) { o.keep_sweeps = c.state_history_sweeps; }),
    Sweep("state_history_events", [](const C& c, O& o) { o.keep_events = c.state_history_events; }),
    Perf("health_symbol_errors_threshold", [](const C& c, P& o) {
      o.thresholds.symbol_errors = c.health_symbol_errors_threshold;
    }),
    Perf("health_link_error_recovery_threshold", [](const C& c, P& o) {
      o.thresholds.link_error_recovery = c.health_link_error_recovery_threshold;
    }),
    Perf("health_link_downed_threshold", [](const C& c, P& o) {
      o.thresholds.link_downed = c.health_link_downed_threshold;
    }),
    Perf("health_port_rcv_errors_threshold", [](const C& c, P& o) {
      o.thresholds.port_rcv_errors = c.health_port_rcv_errors_threshold;
    }),
    Perf("health_excessive_buffer_overruns_threshold", [](const C& c, P& o) {
      o.thresholds.excessive_buffer_overruns = c.health_excessive_buffer_overruns_threshold;
    }),
    Perf("health_vl15_dropped_threshold", [](const C& c, P& o) {
      o.thresholds.vl15_dropped = c.health_vl15_dropped_threshold;
    }),
    Both("health_degraded_links",
         [](const C& c, O& o) { o.health_degraded_links = c.health_degraded_links; },
         [](const C& c, P& o) { o.thresholds.degraded_links = c.health_degraded_links; }),
    Perf("health_window_s",
         [](const C& c, P& o) { o.health_window = std::chrono::seconds(c.health_window_s); }),
    // The log level is the daemon's; bit 0x40 (OpenSM's OSM_LOG_ROUTING) writes the LFT dump.
    Sweep("log_flags", [](const C& c, O& o) { o.dump_lfts = (c.log_flags & 0x40) != 0; }),
    Daemon("force_log_flush"),
    Daemon("log_file"),
    Daemon("log_max_size"),
    Daemon("accum_log_file"),
    Sweep("dump_files_dir", [](const C& c, O& o) {
      o.dump_dir = c.dump_files_dir;
      while (o.dump_dir.size() > 1 && o.dump_dir.back() == '/') o.dump_dir.pop_back();
    }),
    Sweep("no_clients_rereg", [](const C& c, O& o) { o.no_clients_rereg = c.no_clients_rereg; }),
    NotActedOn("disable_multicast"),
    NotActedOn("exit_on_fatal"),
    Sweep("qos", [](const C& c, O& o) { o.qos = c.qos; }),
    File("qos_policy_file"),
    Sweep("suppress_sl2vl_mad_status_errors", [](const C& c, O& o) {
      o.suppress_sl2vl_mad_status_errors = c.suppress_sl2vl_mad_status_errors;
    }),
    Sweep("qos_high_limit", QosLevels),
    Sweep("qos_vlarb_high", QosLevels),
    Sweep("qos_vlarb_low", QosLevels),
    Sweep("qos_sl2vl", QosLevels),
    Sweep("qos_ca_high_limit", QosLevels),
    Sweep("qos_ca_vlarb_high", QosLevels),
    Sweep("qos_ca_vlarb_low", QosLevels),
    Sweep("qos_ca_sl2vl", QosLevels),
    Sweep("qos_sw0_high_limit", QosLevels),
    Sweep("qos_sw0_vlarb_high", QosLevels),
    Sweep("qos_sw0_vlarb_low", QosLevels),
    Sweep("qos_sw0_sl2vl", QosLevels),
    Sweep("qos_swe_high_limit", QosLevels),
    Sweep("qos_swe_vlarb_high", QosLevels),
    Sweep("qos_swe_vlarb_low", QosLevels),
    Sweep("qos_swe_sl2vl", QosLevels),
    Sweep("qos_rtr_high_limit", QosLevels),
    Sweep("qos_rtr_vlarb_high", QosLevels),
    Sweep("qos_rtr_vlarb_low", QosLevels),
    Sweep("qos_rtr_sl2vl", QosLevels),
    Sweep("guid2lid_file", [](const C& c, O& o) { o.guid2lid_file = c.guid2lid_file; }),
    Daemon("state_db_file"),
    Daemon("control_socket"),
    Daemon("control_socket_group"),
    Daemon("metrics_port"),
    Daemon("metrics_address"),
    Sweep("ar_mode", [](const C& c, O& o) { o.ar.mode = c.ar_mode; }),
    Sweep("ar_sl_mask", [](const C& c, O& o) { o.ar.sl_mask = c.ar_sl_mask; }),
    Sweep("ar_transport_mask", [](const C& c, O& o) { o.ar.transport_mask = c.ar_transport_mask; }),
    Sweep("ar_lid_mode", [](const C& c, O& o) {
      o.ar.lid_mode = c.ar_lid_mode == "bounded" ? routing::ArLidMode::kBounded
                                                 : routing::ArLidMode::kFree;
    }),
    Sweep("ar_ageing_time_us", [](const C& c, O& o) { o.ar.ageing_time_us = c.ar_ageing_time_us; }),
    Sweep("sharp_enable", [](const C& c, O& o) { o.sharp_enable = c.sharp_enable; }),
};

}  // namespace

std::span<const OptionTarget> OptionTargets() { return kTargets; }

const OptionTarget* FindOptionTarget(std::string_view option) {
  for (const OptionTarget& t : kTargets)
    if (t.option == option) return &t;
  return nullptr;
}

namespace {
// Applies the `fn` of every row that has one, once per function (rows that share a function
// read one value from several options).
template <typename Options>
Options Apply(const conf::SmConfig& c, void (*OptionTarget::*fn)(const C&, Options&)) {
  Options o;
  std::vector<void (*)(const C&, Options&)> applied;
  for (const OptionTarget& t : kTargets) {
    auto f = t.*fn;
    if (!f || std::find(applied.begin(), applied.end(), f) != applied.end()) continue;
    applied.push_back(f);
    f(c, o);
  }
  return o;
}
}  // namespace

SubnetManagerOptions SweepOptionsFrom(const conf::SmConfig& c) {
  SubnetManagerOptions o = Apply(c, &OptionTarget::sweep);
  o.routing.threads = std::max(1u, std::thread::hardware_concurrency());
  return o;
}

PerfManagerOptions PerfOptionsFrom(const conf::SmConfig& c) { return Apply(c, &OptionTarget::perf); }

}  // namespace ibsm::sm
