// The table of opensm_keys.h. Names and defaults are those `opensm -c` of OpenSM 3.3.23
// writes (conf/sm_config_test.cc compares them with the installed opensm when there is one);
// what ibsm does is checked against the code that reads each typed option.
#include "conf/opensm_keys.h"

#include "conf/diagnostic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace ibsm::conf {
namespace {

using K = KeySupport;

constexpr std::string_view kQosMaxVls =
    "OpenSM 3.3.23 reads it and programs nothing from it; max_op_vls caps OperationalVLs";
constexpr std::string_view kNoCc =
    "no congestion-control manager (congestion_control is named when TRUE)";

const OpenSmKey kKeys[] = {
    {"guid", "0x0000000000000000", K::kActs, "", ""},
    {"m_key", "0x0000000000000000", K::kActs, "", ""},
    {"m_key_lease_period", "0", K::kActs, "", ""},
    {"m_key_protection_level", "0", K::kActs, "", ""},
    {"m_key_lookup", "TRUE", K::kFixed, "FALSE",
     "no guid2mkey file: an unknown port's M_Key is not recovered"},
    {"sm_key", "0x0000000000000001", K::kActs, "", ""},
    {"sa_key", "0x0000000000000001", K::kActs, "", ""},
    {"subnet_prefix", "0xfe80000000000000", K::kActs, "", ""},
    {"lmc", "0", K::kActs, "", ""},
    {"lmc_esp0", "FALSE", K::kActs, "", ""},
    {"sm_sl", "0", K::kActs, "", ""},
    {"packet_life_time", "0x12", K::kActs, "", ""},
    {"vl_stall_count", "0x07", K::kActs, "", ""},
    {"leaf_vl_stall_count", "0x07", K::kActs, "", ""},
    {"head_of_queue_lifetime", "0x12", K::kActs, "", ""},
    {"leaf_head_of_queue_lifetime", "0x10", K::kActs, "", ""},
    {"max_op_vls", "5", K::kActs, "", ""},
    {"force_link_speed", "15", K::kActs, "", ""},
    {"force_link_speed_ext", "31", K::kActs, "", ""},
    {"force_link_width", "255", K::kActs, "", ""},
    {"fdr10", "1", K::kFixed, "0", "no FDR10 (MLNX ExtendedPortInfo) handling"},
    {"subnet_timeout", "18", K::kActs, "", ""},
    {"local_phy_errors_threshold", "0x08", K::kActs, "", ""},
    {"overrun_errors_threshold", "0x08", K::kActs, "", ""},
    {"use_mfttop", "TRUE", K::kFixed, "FALSE", "SwitchInfo MulticastFDBTop is never set"},
    {"partition_config_file", "/etc/opensm/partitions.conf", K::kActs, "", ""},
    {"no_partition_enforcement", "FALSE", K::kActs, "", ""},
    {"part_enforce", "both", K::kActs, "", ""},
    {"allow_both_pkeys", "FALSE", K::kActs, "", ""},
    {"keep_pkey_indexes", "TRUE", K::kFixed, "TRUE",
     "a port keeps the P_Key table index of each partition it has"},
    {"sm_assigned_guid", "0x00", K::kMoot, "", "ibsm assigns no alias GUIDs"},
    {"sweep_interval", "10", K::kActs, "", ""},
    {"reassign_lids", "FALSE", K::kActs, "", ""},
    {"force_heavy_sweep", "FALSE", K::kActs, "", ""},
    {"sweep_on_trap", "TRUE", K::kActs, "", ""},
    {"port_profile_switch_nodes", "FALSE", K::kFixed, "FALSE",
     "no port profiling: switch nodes are not counted in port loads"},
    {"port_prof_ignore_file", "(null)", K::kFixed, "(null)", "no port profiling"},
    {"hop_weights_file", "(null)", K::kFixed, "(null)", "no per-port hop weights"},
    {"port_search_ordering_file", "(null)", K::kFixed, "(null)", "no port search ordering"},
    {"routing_engine", "(null)", K::kActs, "",
     "engines: ftree, updn, dnup, minhop (ar_ftree, ar_updn as aliases); others are "
     "named (SM-ROUTE-004)"},
    {"avoid_throttled_links", "FALSE", K::kMoot, "",
     "tunes nue, dfsssp and sssp, which ibsm does not have"},
    {"connect_roots", "FALSE", K::kFixed, "FALSE",
     "updn keeps the up/down rule between root switches"},
    {"use_ucast_cache", "FALSE", K::kMoot, "",
     "no unicast cache: every heavy sweep routes anew, with the same result"},
    {"lid_matrix_dump_file", "(null)", K::kFixed, "(null)", "no LID matrix file is read"},
    {"lfts_file", "(null)", K::kMoot, "", "read by the file engine only, which ibsm does not have"},
    {"root_guid_file", "(null)", K::kActs, "", ""},
    {"cn_guid_file", "(null)", K::kActs, "", ""},
    {"io_guid_file", "(null)", K::kActs, "", ""},
    {"quasi_ftree_indexing", "FALSE", K::kFixed, "FALSE",
     "ftree indexes ports as on a full fat tree"},
    {"max_reverse_hops", "0", K::kMoot, "",
     "ibsm's ftree reaches I/O nodes without reverse hops (routing/ftree_engine.h)"},
    {"ids_guid_file", "(null)", K::kFixed, "(null)", "no switch ID file"},
    {"guid_routing_order_file", "(null)", K::kActs, "", ""},
    {"do_mesh_analysis", "FALSE", K::kMoot, "", "tunes LASH, which ibsm does not have"},
    {"lash_start_vl", "0", K::kMoot, "", "tunes LASH, which ibsm does not have"},
    {"nue_max_num_vls", "1", K::kMoot, "", "tunes Nue, which ibsm does not have"},
    {"nue_include_switches", "FALSE", K::kMoot, "", "tunes Nue, which ibsm does not have"},
    {"port_shifting", "FALSE", K::kActs, "", ""},
    {"scatter_ports", "0", K::kActs, "", ""},
    {"guid_routing_order_no_scatter", "FALSE", K::kFixed, "FALSE",
     "scatter_ports applies to the ordered ports too"},
    {"sa_db_file", "(null)", K::kFixed, "(null)",
     "SA registrations persist in state_db_file instead"},
    {"sa_db_dump", "FALSE", K::kFixed, "FALSE",
     "no opensm-sa.dump is written (SA registrations persist in state_db_file)"},
    {"torus_config", "/etc/opensm/torus-2QoS.conf", K::kMoot, "",
     "read by torus-2QoS only, which ibsm does not have"},
    {"sm_priority", "0", K::kActs, "", ""},
    {"ignore_other_sm", "FALSE", K::kActs, "", ""},
    {"sminfo_polling_timeout", "10000", K::kActs, "", ""},
    {"polling_retry_number", "4", K::kActs, "", ""},
    {"honor_guid2lid_file", "FALSE", K::kFixed, "FALSE",
     "coming out of standby, ports keep the LIDs they hold"},
    {"max_wire_smps", "4", K::kActs, "", ""},
    {"max_wire_smps2", "4", K::kMoot, "", "one SMP window (max_wire_smps) for every transaction"},
    {"max_smps_timeout", "600000", K::kMoot, "",
     "one SMP window (max_wire_smps) for every transaction"},
    {"transaction_timeout", "200", K::kActs, "", ""},
    {"transaction_retries", "3", K::kActs, "", ""},
    {"long_transaction_timeout", "500", K::kMoot, "", "every SMP waits transaction_timeout"},
    {"max_msg_fifo_timeout", "10000", K::kMoot, "",
     "no message FIFO: requests wait in bounded queues"},
    {"single_thread", "FALSE", K::kMoot, "", "one io thread; routing runs on a worker"},
    {"daemon", "FALSE", K::kActs, "", ""},
    {"sm_inactive", "FALSE", K::kFixed, "FALSE", "ibsm has no inactive mode (-I is refused)"},
    {"babbling_port_policy", "FALSE", K::kActs, "", ""},
    {"drop_event_subscriptions", "FALSE", K::kFixed, "TRUE",
     "a departed port's InformInfo subscriptions are dropped"},
    {"ipoib_mcgroup_creation_validation", "TRUE", K::kFixed, "FALSE",
     "new IPoIB groups are not checked against the broadcast group"},
    {"mcgroup_join_validation", "TRUE", K::kFixed, "TRUE", "every multicast join is validated"},
    {"use_original_extended_sa_rates_only", "FALSE", K::kFixed, "FALSE",
     "SA records use every rate code, HDR and NDR too"},
    {"use_optimized_slvl", "FALSE", K::kFixed, "FALSE",
     "a switch's SL2VL tables are written one (input, output) port pair at a time"},
    {"fsync_high_avail_files", "TRUE", K::kFixed, "TRUE",
     "the state file is written with SQLite synchronous=FULL"},
    {"perfmgr", "FALSE", K::kActs, "", ""},
    {"perfmgr_redir", "TRUE", K::kFixed, "FALSE", "PMA redirection is not followed"},
    {"perfmgr_sweep_time_s", "180", K::kActs, "", ""},
    {"perfmgr_max_outstanding_queries", "500", K::kActs, "", ""},
    {"perfmgr_ignore_cas", "FALSE", K::kActs, "", ""},
    {"perfmgr_rm_nodes", "TRUE", K::kFixed, "TRUE", "counters of a departed port are forgotten"},
    {"perfmgr_log_errors", "TRUE", K::kFixed, "FALSE",
     "counter errors are reported by the health_* thresholds instead"},
    {"perfmgr_query_cpi", "TRUE", K::kActs, "", ""},
    {"perfmgr_xmit_wait_log", "FALSE", K::kFixed, "FALSE", "PortXmitWait is read but not logged"},
    {"perfmgr_xmit_wait_threshold", "65535", K::kMoot, "", "used by perfmgr_xmit_wait_log only"},
    {"event_db_dump_file", "(null)", K::kFixed, "(null)", "no event database dump"},
    {"event_plugin_name", "(null)", K::kFixed, "(null)", "no event plugins"},
    {"event_plugin_options", "(null)", K::kMoot, "", "used by event plugins only"},
    {"node_name_map_name", "(null)", K::kFixed, "(null)", "nodes are named by NodeDescription"},
    {"log_flags", "0x03", K::kActs, "bits:0x03",
     "0x04/0x08 log debug lines and 0x10/0x20 trace lines (as -v and -V); 0x40 writes "
     "the LFT dump; errors and info are always logged"},
    {"force_log_flush", "FALSE", K::kActs, "", ""},
    {"log_file", "/var/log/opensm.log", K::kActs, "", ""},
    {"log_max_size", "0", K::kActs, "", ""},
    {"accum_log_file", "TRUE", K::kActs, "", ""},
    {"per_module_logging_file", "/etc/opensm/per-module-logging.conf", K::kMoot, "",
     "one log level for every module (-v, -V, log_flags)"},
    {"dump_files_dir", "/var/log/", K::kActs, "", ""},
    {"enable_quirks", "FALSE", K::kFixed, "FALSE", "no device quirks"},
    {"no_clients_rereg", "FALSE", K::kActs, "", ""},
    {"disable_multicast", "FALSE", K::kFixed, "FALSE", "multicast is always served"},
    {"exit_on_fatal", "TRUE", K::kFixed, "FALSE",
     "a duplicate GUID or a corrupt guid2lid file is reported (SM-DISC-003, CONF-02x) "
     "and ibsmd carries on"},
    {"console", "off", K::kFixed, "off", "no console: ibsmctl and the control socket instead"},
    {"console_port", "10000", K::kMoot, "", "used by the console only"},
    {"qos", "FALSE", K::kActs, "", ""},
    {"qos_policy_file", "/etc/opensm/qos-policy.conf", K::kActs, "", ""},
    {"suppress_sl2vl_mad_status_errors", "FALSE", K::kActs, "", ""},
    {"qos_max_vls", "0", K::kMoot, "", kQosMaxVls},
    {"qos_high_limit", "-1", K::kActs, "", ""},
    {"qos_vlarb_high", "(null)", K::kActs, "", ""},
    {"qos_vlarb_low", "(null)", K::kActs, "", ""},
    {"qos_sl2vl", "(null)", K::kActs, "", ""},
    {"qos_ca_max_vls", "0", K::kMoot, "", kQosMaxVls},
    {"qos_ca_high_limit", "-1", K::kActs, "", ""},
    {"qos_ca_vlarb_high", "(null)", K::kActs, "", ""},
    {"qos_ca_vlarb_low", "(null)", K::kActs, "", ""},
    {"qos_ca_sl2vl", "(null)", K::kActs, "", ""},
    {"qos_sw0_max_vls", "0", K::kMoot, "", kQosMaxVls},
    {"qos_sw0_high_limit", "-1", K::kActs, "", ""},
    {"qos_sw0_vlarb_high", "(null)", K::kActs, "", ""},
    {"qos_sw0_vlarb_low", "(null)", K::kActs, "", ""},
    {"qos_sw0_sl2vl", "(null)", K::kActs, "", ""},
    {"qos_swe_max_vls", "0", K::kMoot, "", kQosMaxVls},
    {"qos_swe_high_limit", "-1", K::kActs, "", ""},
    {"qos_swe_vlarb_high", "(null)", K::kActs, "", ""},
    {"qos_swe_vlarb_low", "(null)", K::kActs, "", ""},
    {"qos_swe_sl2vl", "(null)", K::kActs, "", ""},
    {"qos_rtr_max_vls", "0", K::kMoot, "", kQosMaxVls},
    {"qos_rtr_high_limit", "-1", K::kActs, "", ""},
    {"qos_rtr_vlarb_high", "(null)", K::kActs, "", ""},
    {"qos_rtr_vlarb_low", "(null)", K::kActs, "", ""},
    {"qos_rtr_sl2vl", "(null)", K::kActs, "", ""},
    {"congestion_control", "FALSE", K::kFixed, "FALSE", "no congestion-control manager"},
    {"cc_key", "0x0000000000000000", K::kMoot, "", kNoCc},
    {"cc_max_outstanding_mads", "500", K::kMoot, "", kNoCc},
    {"cc_sw_cong_setting_control_map", "0x0", K::kMoot, "", kNoCc},
    {"cc_sw_cong_setting_victim_mask",
     "0x0000000000000000000000000000000000000000000000000000000000000000", K::kMoot, "", kNoCc},
    {"cc_sw_cong_setting_credit_mask",
     "0x0000000000000000000000000000000000000000000000000000000000000000", K::kMoot, "", kNoCc},
    {"cc_sw_cong_setting_threshold", "0x00", K::kMoot, "", kNoCc},
    {"cc_sw_cong_setting_packet_size", "0", K::kMoot, "", kNoCc},
    {"cc_sw_cong_setting_credit_starvation_threshold", "0x00", K::kMoot, "", kNoCc},
    {"cc_sw_cong_setting_credit_starvation_return_delay", "0:0", K::kMoot, "", kNoCc},
    {"cc_sw_cong_setting_marking_rate", "0", K::kMoot, "", kNoCc},
    {"cc_ca_cong_setting_port_control", "0x0000", K::kMoot, "", kNoCc},
    {"cc_ca_cong_setting_control_map", "0x0000", K::kMoot, "", kNoCc},
    {"cc_ca_cong_setting_ccti_timer", "0 0", K::kMoot, "", kNoCc},
    {"cc_ca_cong_setting_ccti_increase", "0 0", K::kMoot, "", kNoCc},
    {"cc_ca_cong_setting_trigger_threshold", "0 0", K::kMoot, "", kNoCc},
    {"cc_ca_cong_setting_ccti_min", "0 0", K::kMoot, "", kNoCc},
    {"cc_cct", "(null)", K::kMoot, "", kNoCc},
    {"prefix_routes_file", "/etc/opensm/prefix-routes.conf", K::kMoot, "",
     "no IB router support: prefix routes are not served"},
    {"consolidate_ipv6_snm_req", "FALSE", K::kFixed, "FALSE",
     "each IPv6 solicited-node group gets its own MLID"},
    {"log_prefix", "(null)", K::kFixed, "(null)", "log lines carry no prefix"},
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> Number(std::string_view s) {
  if (s == "TRUE" || s == "true" || s == "True") return 1;
  if (s == "FALSE" || s == "false" || s == "False") return 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9'                 ? c - '0'
            : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
            : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
    if (d < 0) return std::nullopt;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return v;
}

bool SameValue(std::string_view a, std::string_view b) {
  a = Trim(a);
  b = Trim(b);
  auto null = [](std::string_view s) { return s.empty() || s == "(null)"; };
  if (null(a) || null(b)) return null(a) && null(b);
  if (a == b) return true;
  auto x = Number(a), y = Number(b);
  return x && y && *x == *y;
}

}  // namespace

std::string ValuesText(std::string_view honoured) {
  std::string out;
  for (char c : honoured) {
    if (c == '|') {
      out += " or ";
    } else {
      out += c;
    }
  }
  return out;
}

std::span<const OpenSmKey> OpenSmKeys() { return kKeys; }

const OpenSmKey* FindOpenSmKey(std::string_view name) {
  for (const OpenSmKey& k : kKeys)
    if (k.name == name) return &k;
  return nullptr;
}

bool Honoured(const OpenSmKey& key, std::string_view value) {
  switch (key.support) {
    case K::kMoot:
      return true;
    case K::kActs:
      if (key.honoured.empty()) return true;
      [[fallthrough]];
    case K::kFixed: {
      std::string_view list = key.honoured;
      if (list.substr(0, 5) == "bits:") {  // the value has these bits set
        auto want = Number(list.substr(5)), have = Number(Trim(value));
        return want && have && (*have & *want) == *want;
      }
      while (!list.empty()) {
        const size_t bar = list.find('|');
        if (SameValue(list.substr(0, bar), value)) return true;
        list = bar == std::string_view::npos ? std::string_view{} : list.substr(bar + 1);
      }
      return false;
    }
  }
  return false;
}

std::string NotHonouredText(const OpenSmKey& k, std::string_view value) {
  std::string how = k.support == K::kActs ? "it acts only in part"
                    : k.honoured.empty()  ? "it honours no value of it"
                                          : fmt::format("it behaves as {}", ValuesText(k.honoured));
  return fmt::format("{} {} is not honoured by ibsm ({}): {}", k.name, Printable(value), how,
                     k.note);
}

std::string SupportText(const OpenSmKey& key) {
  switch (key.support) {
    case K::kActs:
      return key.honoured.empty() ? "acts" : "acts partly";
    case K::kFixed:
      if (key.honoured.empty()) return "not supported";
      return fmt::format("behaves as {}", ValuesText(key.honoured));
    case K::kMoot:
      return "no effect";
  }
  return "";
}

}  // namespace ibsm::conf
