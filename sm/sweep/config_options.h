// Where each typed option of opensm.conf (conf/sm_config.cc's rows) takes effect: one row per
// option, keyed by its name, saying whether the sweep engine, the PerfMgr, the daemon itself
// or a file loader reads it, or that ibsm does not act on it (conf/opensm_keys.h says why).
// The sweep's and the PerfMgr's rows carry how the value lands in their options, so
// `SweepOptionsFrom` and `PerfOptionsFrom` are these rows applied, and nothing else maps an
// option by hand. A test holds this table and the option table to one row each
// (ARCHITECTURE.md section 8, "A config option").
//
// Why not a column of the option row itself: conf/ is below the SM (it cannot name
// SubnetManagerOptions); this table is the SM's half of the same row.
#pragma once

#include <span>
#include <string_view>

#include "conf/sm_config.h"
#include "sm/perf/perf_manager.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {

enum class OptionUse {
  kSweep,       // SubnetManagerOptions (`sweep`), and PerfManagerOptions too when `perf` is set
  kPerfMgr,     // PerfManagerOptions only (`perf`)
  kFile,        // names a file the daemon loads into SubnetManagerOptions (MakeOptions in
                // sm/daemon/ibsmd_main.cc: a bad file is an error with its line, and on
                // SIGHUP the previous contents stay)
  kDaemon,      // read by ibsmd itself: logging, sockets, the state file, the port, daemonizing
  kNotActedOn,  // a key ibsm behaves as one value of, or a feature it does not have
                // (KeySupport kFixed or kMoot in conf/opensm_keys.h)
};

struct OptionTarget {
  std::string_view option;  // the option's name in conf::OptionTable() (aliases resolved)
  OptionUse use;
  void (*sweep)(const conf::SmConfig&, SubnetManagerOptions&) = nullptr;
  void (*perf)(const conf::SmConfig&, PerfManagerOptions&) = nullptr;
};

// Every typed option, once.
std::span<const OptionTarget> OptionTargets();
// Null when `option` has no row.
const OptionTarget* FindOptionTarget(std::string_view option);

// The options every kSweep row sets from `c`; what files hold (kFile) and `once` are the
// daemon's to add.
SubnetManagerOptions SweepOptionsFrom(const conf::SmConfig& c);
// The options every row with a `perf` function sets from `c`.
PerfManagerOptions PerfOptionsFrom(const conf::SmConfig& c);

}  // namespace ibsm::sm
