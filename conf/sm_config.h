// ibsm's configuration in opensm.conf form: OpenSM's option names, defaults and file layout,
// so an operator's opensm.conf loads unchanged and `ibsmd -c FILE` writes a file OpenSM reads.
//
// One table of option descriptors (sm_config.cc) drives the parser, the writer and the
// dumper; adding an option means one member here and one row there.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "conf/diagnostic.h"

namespace ibsm::conf {

// Strings: empty means unset, written as OpenSM's "(null)".
struct SmConfig {
  // --- Device attributes
  Guid guid{0};                         // local port to bind; 0 = first active port
  uint64_t m_key = 0;
  uint16_t m_key_lease_period = 0;      // seconds
  uint8_t m_key_protection_level = 0;   // 0..3 (IBA 14.2.4.1)
  uint64_t sm_key = 1;
  uint64_t sa_key = 1;
  uint64_t subnet_prefix = 0xfe80000000000000ull;
  uint8_t lmc = 0;                      // 2^lmc LIDs per end port
  bool lmc_esp0 = false;
  uint8_t sm_sl = 0;                    // PortInfo:MasterSMSL of every end port
  uint8_t packet_life_time = 0x12;      // 4.096us * 2^v; >= 0x14 disables
  uint8_t vl_stall_count = 0x07;
  uint8_t leaf_vl_stall_count = 0x07;
  uint8_t head_of_queue_lifetime = 0x12;
  uint8_t leaf_head_of_queue_lifetime = 0x10;
  uint8_t max_op_vls = 5;               // PortInfo:OperationalVLs code (5 = VL0-14)
  uint8_t force_link_speed = 15;        // 0 = leave, 15 = LinkSpeedSupported
  uint8_t force_link_speed_ext = 31;    // 0 = leave, 31 = LinkSpeedExtSupported
  uint8_t force_link_width = 255;       // 0 = leave, 255 = LinkWidthSupported
  uint8_t subnet_timeout = 18;
  uint8_t local_phy_errors_threshold = 0x08;  // PortInfo:LocalPhyErrors (trap 129)
  uint8_t overrun_errors_threshold = 0x08;    // PortInfo:OverrunErrors (trap 130)
  // --- Partitioning
  std::string partition_config_file = "/etc/opensm/partitions.conf";
  bool no_partition_enforcement = false;  // deprecated in OpenSM: part_enforce wins
  std::string part_enforce = "both";      // both | in | out | off
  bool allow_both_pkeys = false;
  // --- Sweeps
  uint32_t sweep_interval = 10;         // seconds; 0 = no periodic sweep
  bool reassign_lids = false;
  bool force_heavy_sweep = false;
  bool sweep_on_trap = true;
  bool incremental_repair = true;  // ibsm: repair sweeps from trap 128 (sm/sweep/subnet_manager.h)
  bool incremental_reroute = true;  // ibsm: repairs keep intact routes (routing/reroute.h)
  // ibsm: link flap damping (sm/sweep/link_damping.h); threshold 0 = off.
  uint32_t link_flap_threshold = 5;
  uint32_t link_flap_window = 10;     // seconds
  uint32_t link_flap_hold_time = 60;  // seconds
  // --- Routing
  std::string routing_engine;           // comma list; unset = ftree,updn (routing::kDefaultChain)
  bool use_ucast_cache = false;
  std::string root_guid_file;
  std::string cn_guid_file;
  std::string io_guid_file;
  uint16_t max_reverse_hops = 0;
  std::string guid_routing_order_file;
  bool port_shifting = false;
  uint32_t scatter_ports = 0;           // 0 = off, else random seed
  // --- Handover
  uint8_t sm_priority = 0;
  bool ignore_other_sm = false;
  uint32_t sminfo_polling_timeout = 10000;  // ms
  uint32_t polling_retry_number = 4;
  bool honor_guid2lid_file = false;
  // --- Timing
  // ibsm's default is 64, not OpenSM's 4: DR discovery with 64 SMPs in flight measured
  // several times faster on ibsim fat trees with no extra timeouts. 0 = no limit, as OpenSM.
  uint32_t max_wire_smps = 64;
  uint32_t transaction_timeout = 200;   // ms per attempt
  uint32_t transaction_retries = 3;
  // --- Misc
  bool daemon = false;
  bool babbling_port_policy = false;
  // --- Performance manager
  bool perfmgr = false;
  uint32_t perfmgr_sweep_time_s = 180;
  uint32_t perfmgr_max_outstanding_queries = 500;
  bool perfmgr_ignore_cas = false;
  bool perfmgr_query_cpi = true;
  // ibsm's own PerfMgr and health keys (sm/perf/perf_manager.h, sm/answers/health.h).
  bool perfmgr_clear_near_overflow = true;
  uint32_t perfmgr_history_sweeps = 1000;
  uint32_t state_history_sweeps = 10000;
  uint32_t state_history_events = 100000;
  uint32_t health_symbol_errors_threshold = 10;
  uint32_t health_link_error_recovery_threshold = 1;
  uint32_t health_link_downed_threshold = 1;
  uint32_t health_port_rcv_errors_threshold = 10;
  uint32_t health_excessive_buffer_overruns_threshold = 1;
  uint32_t health_vl15_dropped_threshold = 100;
  bool health_degraded_links = true;
  uint32_t health_window_s = 3600;  // how long health remembers a finding (ibsm)
  // --- Debug / logging
  uint8_t log_flags = 0x03;             // OpenSM bits: 0x01 ERROR, 0x02 INFO, 0x04 VERBOSE...
  bool force_log_flush = false;
  std::string log_file = "/var/log/opensm.log";
  uint32_t log_max_size = 0;            // MB; 0 = unlimited
  bool accum_log_file = true;
  std::string dump_files_dir = "/var/log/";
  bool no_clients_rereg = false;
  bool disable_multicast = false;
  bool exit_on_fatal = true;
  // --- QoS (conf/qos_config.h builds each port class's tables from these; empty text and
  // high limit -1 mean "not set": the class falls back to qos_*, then to OpenSM's defaults)
  bool qos = false;
  // The QoS policy file (conf/qos_policy.h): its qos-ulps give PathRecords their SL, with
  // qos TRUE only. OpenSM's default path missing is not an error.
  std::string qos_policy_file = "/etc/opensm/qos-policy.conf";
  bool suppress_sl2vl_mad_status_errors = false;
  std::string qos_high_limit = "-1", qos_vlarb_high, qos_vlarb_low, qos_sl2vl;
  std::string qos_ca_high_limit = "-1", qos_ca_vlarb_high, qos_ca_vlarb_low, qos_ca_sl2vl;
  std::string qos_sw0_high_limit = "-1", qos_sw0_vlarb_high, qos_sw0_vlarb_low, qos_sw0_sl2vl;
  std::string qos_swe_high_limit = "-1", qos_swe_vlarb_high, qos_swe_vlarb_low, qos_swe_sl2vl;
  std::string qos_rtr_high_limit = "-1", qos_rtr_vlarb_high, qos_rtr_vlarb_low, qos_rtr_sl2vl;
  // --- ibsm's own
  std::string guid2lid_file = "/var/cache/opensm/guid2lid";  // OpenSM's cache file
  std::string state_db_file = "/var/lib/ibsm/ibsm-state.db";
  std::string control_socket = "/run/ibsm/ibsmd.sock";
  std::string control_socket_group;
  uint32_t metrics_port = 0;            // 0 = no metrics listener
  std::string metrics_address = "127.0.0.1";
  uint8_t ar_mode = 0;                  // 0 off, 1 on, 2 with notifications, 3 auto
  uint16_t ar_sl_mask = 0xFFFF;
  uint8_t ar_transport_mask = 0xA;      // RC and DC
  std::string ar_lid_mode = "free";  // free | bounded (docs/ar-sharp.md "Defaults")
  uint32_t ar_ageing_time_us = 30;
  bool sharp_enable = false;

  // Options OpenSM 3.3.23 knows that ibsm does not use, as read (key, value), in file order.
  // Kept so that a config written back by ibsm shows them (as comments: ibsm reads none).
  std::vector<std::pair<std::string, std::string>> opensm_only;

  bool operator==(const SmConfig&) const = default;
};

enum class OptionKind { kBool, kUint, kHex, kGuid, kString, kEnum };

// A typed option. `field` names the SmConfig member; aliases (ar_enable for ar_mode) point
// at the same member and are read but never written.
struct OptionDesc {
  using Field = std::variant<bool SmConfig::*, uint8_t SmConfig::*, uint16_t SmConfig::*,
                             uint32_t SmConfig::*, uint64_t SmConfig::*, Guid SmConfig::*,
                             std::string SmConfig::*>;
  std::string_view name;
  OptionKind kind;
  Field field;
  std::string_view default_text;  // as OpenSM writes it ("0x12", "TRUE", "(null)")
  uint64_t min = 0;
  uint64_t max = 0;
  int hex_digits = 0;             // kHex/kGuid: zero-padded width when written
  std::span<const std::string_view> enum_values = {};
  std::string_view comment = {};  // one or more lines, without "# "
  std::string_view section = {};  // section header when it starts one, else empty
  std::string_view alias_of = {};
  bool accepts_bool = false;      // uint that also takes TRUE/FALSE (ar_enable)
  // SIGHUP applies it; false: it keeps its value until ibsmd restarts (CONF-104 on a reload
  // that changes it).
  bool reloads = false;
  // kString: checks the text (QoS tables); an error names what would have been accepted.
  Status (*check)(std::string_view text) = nullptr;
};

// Every typed option, in the order WriteConfig writes them.
std::span<const OptionDesc> OptionTable();
// Null when `name` is not a typed option.
const OptionDesc* FindOption(std::string_view name);
// True for keys OpenSM 3.3.23 writes with `opensm -c` that are not typed options here (what
// ibsm does with each: conf/opensm_keys.h).
bool IsOpenSmOnlyOption(std::string_view name);

struct ConfigLoad {
  SmConfig config;
  // Unknown keys (CONF-001), keys set twice (CONF-002), OpenSM keys set to a value ibsm does
  // not honour (CONF-030, conf/opensm_keys.h).
  std::vector<Diagnostic> warnings;
  size_t not_honoured = 0;  // CONF-030 lines, all of them (warnings stops at 100)
};

// Parses opensm.conf text. Untrusted input: never crashes; a value that does not parse or is
// out of range is an InvalidArgument "FILE:LINE: key: 'v' is out of range 0..7"; unknown keys
// are warnings. Options absent from `text` keep their defaults.
Result<ConfigLoad> ParseConfig(std::string_view text, std::string_view file_name);
// A config number: decimal or 0x hex, no sign, no spaces, no overflow.
bool ParseU64(std::string_view s, uint64_t* out);
// Reads `path` (at most 16 MiB) and parses it; IoError/NotFound when it cannot be read.
Result<ConfigLoad> LoadConfigFile(const std::string& path);

// Sets one option from its text form, as a config line would. InvalidArgument naming the
// key and the accepted range; NotFound for a key that is not a typed option.
Status SetOption(SmConfig* c, std::string_view key, std::string_view value);
// The option's current value as WriteConfig writes it.
std::string OptionValueText(const SmConfig& c, const OptionDesc& d);

// Every typed option with a comment, in OpenSM's `opensm -c` layout; an OpenSM key set to a
// value ibsm does not honour is written as a comment saying so ("# not supported by ibsm"),
// as is every OpenSM key ibsm does not read, with the value `c` read or OpenSM's default.
// ParseConfig(WriteConfig(c)) yields c but for those commented values.
std::string WriteConfig(const SmConfig& c);

// "key value" lines for the log at startup; with `only_changed`, only options that differ
// from their defaults (and the OpenSM-only ones that were set).
std::string DumpConfig(const SmConfig& c, bool only_changed);

}  // namespace ibsm::conf
