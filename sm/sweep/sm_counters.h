// The SubnetManager's counters and the one table that names them for the control answer,
// the metrics and ibsmctl.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <string_view>

namespace ibsm::sm {

struct SmCounters {
  uint64_t heavy_sweeps = 0;
  uint64_t light_sweeps = 0;
  uint64_t repair_sweeps = 0;     // sweeps that re-read reporting switches, not the fabric
  uint64_t repair_fallbacks = 0;  // repairs that found what only a heavy sweep handles
  uint64_t repair_restarts = 0;   // repairs begun again with switches that reported meanwhile
  uint64_t repair_reads_abandoned = 0;  // re-read switches whose path crossed a cable found down
  uint64_t links_damped = 0;      // cables damped for flapping (sm/sweep/link_damping.h)
  uint64_t heavy_sweeps_cut_short = 0;  // heavy sweeps that gave way to a repair
  uint64_t repairs_handed_over = 0;     // repairs that gave way to the next repair
  uint64_t repair_models_kept = 0;  // repairs that patched the model copy made while idle
  uint64_t repair_tables_kept = 0;  // re-routes built in the tables copy made while idle
  uint64_t repair_spare_awaited = 0;  // repairs that waited for the model copy being made
  uint64_t repair_reroutes = 0;          // repairs routed incrementally
  uint64_t repair_reroutes_refused = 0;  // ... whose incremental result was refused
  uint64_t repair_reroutes_proven = 0;   // ... whose tables were proven from the changed LIDs
  uint64_t repair_sweeps_local = 0;  // repairs whose port stages looked at touched nodes only
  uint64_t repair_sweeps_grown = 0;  // repairs that read what is behind ports that came up
  uint64_t engine_tables_reused = 0;  // repairs that took the engine's tables for their model again
  uint64_t standby_refreshes = 0;      // a standby's discoveries of the fabric (Gets only)
  uint64_t standby_lft_blocks_read = 0;  // LFT blocks a standby read
  uint64_t warm_takeovers = 0;  // takeovers that started from the standby's model
  uint64_t qos_waits_cut_short = 0;  // heavy sweeps that ended before their SL2VL/VLArb reads
  uint64_t qos_waits_timed_out = 0;  // ... because the reads outlasted their bounded wait
  uint64_t traps_received = 0;
  uint64_t traps_malformed = 0;
  uint64_t traps_issuer_mismatch = 0;  // IssuerLID other than the LID the trap came from
  uint64_t own_traps_ignored = 0;  // trap 144 from the SM's own port (its IsSM claim)
  uint64_t sminfo_requests = 0;
  uint64_t unsolicited_ignored = 0;  // requests for classes/attributes the SM does not serve
  uint64_t routing_failures = 0;
  uint64_t credit_loops_found = 0;  // routings whose channel dependency graph has a cycle
  // HA (SMInfo protocol).
  uint64_t sminfo_sets_refused = 0;    // Sets answered with status 7 (illegal now)
  uint64_t sm_key_mismatches = 0;      // other SMs ignored because their SM_Key differs
  uint64_t other_sms_seen = 0;         // SMInfo answers from other SMs during sweeps
  uint64_t handovers_sent = 0;         // HANDOVERs accepted by a better SM
  uint64_t handovers_received = 0;
  uint64_t acknowledges_sent = 0;
  uint64_t polls_sent = 0;             // SMInfo Gets to the master while STANDBY
  uint64_t polls_missed = 0;
  uint64_t takeovers = 0;              // STANDBY -> MASTER (master lost or handed over)
  uint64_t trap144_sent = 0;           // standby telling a worse master to hand over
  uint64_t state_changes = 0;          // SM state transitions (NOTACTIVE -> DISCOVERING, ...)
  uint64_t client_reregisters = 0;     // PortInfo Sets with ClientReregister (SA state lost)
  // State file writes that failed (disk full, read-only, I/O error). The fabric keeps being
  // served from memory; guid2lid rows and multicast groups not saved are retried each sweep.
  uint64_t state_write_failures = 0;
  uint64_t dump_write_failures = 0;    // heavy sweeps whose dump files could not be written
  // Traps repeated 10+ times within 5 s (port-health traps: 60 s) ignored: no sweep, no Report.
  uint64_t traps_suppressed = 0;
  uint64_t babbling_ports_disabled = 0;
  // Handlers that threw and were abandoned (SM-EXC-001): each a bug, never a stop.
  uint64_t internal_errors = 0;
  // Port state Sets that failed (a lost reply, the retry refused) but whose port, read back,
  // holds the state asked for.
  uint64_t sets_confirmed_by_readback = 0;
  // Switch ports that answered a partition enforcement Set without the bits asked for
  // (SM-PKEY-004): the device keeps no enforcement there.
  uint64_t enforcement_not_kept = 0;
  // Every problem a sweep reported and went on past, by stable log ID ("SM-DISC-003").
  std::map<std::string, uint64_t> issues_by_id;
};

// Every SmCounters field once: the key it has in the control answer (`ibsmctl status`'s
// "counters", `ibsmctl ha`'s "counters"), and the Prometheus family and label it is a
// sample of. The control answer, the metrics and ibsmctl read this table and nothing else,
// so a counter added to the struct and to this table is shown everywhere.
enum class CounterSection : uint8_t { kStatus, kHa };
struct SmCounterRow {
  uint64_t SmCounters::*member;
  CounterSection section;
  std::string_view key;          // control answer key
  std::string_view family;       // metric family (rows of one family are adjacent)
  std::string_view label_name;   // "" when the family has one sample
  std::string_view label_value;
  std::string_view help;         // the family's help text (its first row's)
};

inline constexpr SmCounterRow kSmCounterRows[] = {
    {&SmCounters::heavy_sweeps, CounterSection::kStatus, "heavy_sweeps", "ibsm_sweeps_total",
     "kind", "heavy", "sweeps run, by kind"},
    {&SmCounters::light_sweeps, CounterSection::kStatus, "light_sweeps", "ibsm_sweeps_total",
     "kind", "light", ""},
    {&SmCounters::repair_sweeps, CounterSection::kStatus, "repair_sweeps", "ibsm_sweeps_total",
     "kind", "repair", ""},
    {&SmCounters::repair_fallbacks, CounterSection::kStatus, "repair_fallbacks",
     "ibsm_repair_fallbacks_total", "", "",
     "repair sweeps that found what only a heavy sweep handles, and ran one"},
    {&SmCounters::repair_restarts, CounterSection::kStatus, "repair_restarts",
     "ibsm_repair_restarts_total", "", "",
     "repair sweeps begun again, with the switches that reported while they read, because a "
     "check took a path over a cable those reports name"},
    {&SmCounters::repair_reads_abandoned, CounterSection::kStatus, "repair_reads_abandoned",
     "ibsm_repair_reads_abandoned_total", "", "",
     "switches a repair sweep was to re-read whose path crossed a cable another switch "
     "answered down: their reads were not waited for, their cables were checked from the far "
     "side"},
    {&SmCounters::heavy_sweeps_cut_short, CounterSection::kStatus, "heavy_sweeps_cut_short",
     "ibsm_heavy_sweeps_cut_short_total", "", "",
     "heavy sweeps that gave way to a repair sweep: a trap came in during their discovery "
     "(they run again after it) or before their tables were pushed (the repair took over)"},
    {&SmCounters::repairs_handed_over, CounterSection::kStatus, "repairs_handed_over",
     "ibsm_repairs_handed_over_total", "", "",
     "repair sweeps that gave way to the next repair: switches reported changes while they "
     "routed or programmed the switches (the next one took over their model and finished "
     "their work)"},
    {&SmCounters::repair_models_kept, CounterSection::kStatus, "repair_models_kept",
     "ibsm_repair_models_kept_total", "", "",
     "repair sweeps that patched the copy of the last model made while the SM was idle "
     "(the others copied it when they began)"},
    {&SmCounters::repair_tables_kept, CounterSection::kStatus, "repair_tables_kept",
     "ibsm_repair_tables_kept_total", "", "",
     "incremental re-routes built in the copy of the last tables made on the routing worker "
     "after the sweep before (the others copied the tables when they began)"},
    {&SmCounters::repair_spare_awaited, CounterSection::kStatus, "repair_spare_awaited",
     "ibsm_repair_spare_awaited_total", "", "",
     "repair sweeps that began while the copy of the last model was still being made (right "
     "after SUBNET UP) and waited for it instead of copying the model a second time"},
    {&SmCounters::repair_reroutes, CounterSection::kStatus, "repair_reroutes",
     "ibsm_repair_reroutes_total", "", "",
     "repair sweeps that kept every intact route and re-routed only what the fault broke "
     "(incremental_reroute)"},
    {&SmCounters::repair_reroutes_refused, CounterSection::kStatus, "repair_reroutes_refused",
     "ibsm_repair_reroutes_refused_total", "", "",
     "repair sweeps whose incremental re-route failed verification or the credit-loop check, "
     "and were routed by the engine instead"},
    {&SmCounters::repair_reroutes_proven, CounterSection::kStatus, "repair_reroutes_proven",
     "ibsm_repair_reroutes_proven_total", "", "",
     "incremental re-routes verified and proven free of credit loops from the LIDs they "
     "changed alone (routing/updown_proof.h), without the whole-fabric checks"},
    {&SmCounters::repair_sweeps_local, CounterSection::kStatus, "repair_sweeps_local",
     "ibsm_repair_sweeps_local_total", "", "",
     "repair sweeps after a clean sweep whose partition and port stages compared only the "
     "re-read switches and their neighbours (the rest of the fabric kept its settings)"},
    {&SmCounters::repair_sweeps_grown, CounterSection::kStatus, "repair_sweeps_grown",
     "ibsm_repair_sweeps_grown_total", "", "",
     "repair sweeps that found ports up (a cable back, a new link, a switch that came back "
     "or rebooted) and read only what is behind them, not the whole fabric"},
    {&SmCounters::engine_tables_reused, CounterSection::kStatus, "engine_tables_reused",
     "ibsm_engine_tables_reused_total", "", "",
     "repair sweeps whose model had the routing inputs of the last tables an engine made "
     "(what was lost came back as it was): those tables were taken again, not routed anew"},
    {&SmCounters::standby_refreshes, CounterSection::kStatus, "standby_refreshes",
     "ibsm_standby_refreshes_total", "", "",
     "discoveries of the fabric a STANDBY made with Gets alone, to keep a current model for "
     "a takeover"},
    {&SmCounters::standby_lft_blocks_read, CounterSection::kStatus, "standby_lft_blocks_read",
     "ibsm_standby_lft_blocks_read_total", "", "",
     "LFT blocks a STANDBY read, once the fabric had not changed between two of its "
     "discoveries"},
    {&SmCounters::warm_takeovers, CounterSection::kStatus, "warm_takeovers",
     "ibsm_warm_takeovers_total", "", "",
     "takeovers that started from the standby's model and the LFT blocks it read, instead of "
     "a discovery and a read-back of every block"},
    {&SmCounters::qos_waits_cut_short, CounterSection::kStatus, "qos_waits_cut_short",
     "ibsm_qos_waits_cut_short_total", "", "",
     "heavy sweeps that logged SUBNET UP before their SL2VL and VLArb reads were in, because "
     "a switch reported a change (its repair does not wait behind optional reads)"},
    {&SmCounters::qos_waits_timed_out, CounterSection::kStatus, "qos_waits_timed_out",
     "ibsm_qos_waits_timed_out_total", "", "",
     "heavy sweeps (qos FALSE) that logged SUBNET UP before their SL2VL and VLArb reads were "
     "in, because the reads took longer than the 250 ms the end of a sweep waits for them; the "
     "records reach the SA when the reads end"},
    {&SmCounters::links_damped, CounterSection::kStatus, "links_damped",
     "ibsm_links_damped_total", "", "",
     "cables kept out of the model for flapping (link_flap_threshold downs in link_flap_window)"},
    {&SmCounters::traps_received, CounterSection::kStatus, "traps_received",
     "ibsm_traps_received_total", "", "", "traps received"},
    {&SmCounters::traps_malformed, CounterSection::kStatus, "traps_malformed",
     "ibsm_traps_malformed_total", "", "", "traps that could not be decoded"},
    {&SmCounters::traps_issuer_mismatch, CounterSection::kStatus, "traps_issuer_mismatch",
     "ibsm_traps_issuer_mismatch_total", "", "",
     "traps whose IssuerLID was not the LID they came from (attributed to their source)"},
    {&SmCounters::own_traps_ignored, CounterSection::kStatus, "own_traps_ignored",
     "ibsm_own_traps_ignored_total", "", "", "trap 144s from the SM's own port, ignored"},
    {&SmCounters::traps_suppressed, CounterSection::kStatus, "traps_suppressed",
     "ibsm_traps_suppressed_total", "", "",
     "traps ignored as repeats (10+ within 5 s; port-health traps 60 s)"},
    {&SmCounters::babbling_ports_disabled, CounterSection::kStatus, "babbling_ports_disabled",
     "ibsm_babbling_ports_disabled_total", "", "", "ports disabled by babbling_port_policy"},
    {&SmCounters::sminfo_requests, CounterSection::kStatus, "sminfo_requests",
     "ibsm_sminfo_requests_total", "", "", "SMInfo Gets and Sets other SMs sent this SM"},
    {&SmCounters::unsolicited_ignored, CounterSection::kStatus, "unsolicited_ignored",
     "ibsm_unsolicited_ignored_total", "", "",
     "requests for classes or attributes the SM does not serve (dropped)"},
    {&SmCounters::state_write_failures, CounterSection::kStatus, "state_write_failures",
     "ibsm_state_write_failures_total", "", "",
     "state file writes that failed (disk full, read-only, I/O error)"},
    {&SmCounters::dump_write_failures, CounterSection::kStatus, "dump_write_failures",
     "ibsm_dump_write_failures_total", "", "",
     "heavy sweeps whose dump files (dump_files_dir) could not be written"},
    {&SmCounters::routing_failures, CounterSection::kStatus, "routing_failures",
     "ibsm_routing_failures_total", "", "",
     "routings refused (failed, unverifiable or with a credit loop)"},
    {&SmCounters::credit_loops_found, CounterSection::kStatus, "credit_loops_found",
     "ibsm_credit_loops_found_total", "", "",
     "routings whose channel dependency graph has a cycle"},
    {&SmCounters::internal_errors, CounterSection::kStatus, "internal_errors",
     "ibsm_internal_errors_total", "", "",
     "handlers that threw and were abandoned (SM-EXC-001), each a bug"},
    {&SmCounters::sets_confirmed_by_readback, CounterSection::kStatus,
     "sets_confirmed_by_readback", "ibsm_sets_confirmed_by_readback_total", "", "",
     "port state Sets that failed but whose port, read back, holds the state asked for"},
    {&SmCounters::enforcement_not_kept, CounterSection::kStatus, "enforcement_not_kept",
     "ibsm_enforcement_not_kept_total", "", "",
     "switch ports that answered a partition enforcement Set without it (SM-PKEY-004)"},
    {&SmCounters::handovers_sent, CounterSection::kHa, "handovers_sent", "ibsm_ha_events_total",
     "event", "handover_sent", "SMInfo protocol events, by kind"},
    {&SmCounters::handovers_received, CounterSection::kHa, "handovers_received",
     "ibsm_ha_events_total", "event", "handover_received", ""},
    {&SmCounters::takeovers, CounterSection::kHa, "takeovers", "ibsm_ha_events_total", "event",
     "takeover", ""},
    {&SmCounters::polls_sent, CounterSection::kHa, "polls_sent", "ibsm_ha_events_total", "event",
     "poll_sent", ""},
    {&SmCounters::polls_missed, CounterSection::kHa, "polls_missed", "ibsm_ha_events_total",
     "event", "poll_missed", ""},
    {&SmCounters::sm_key_mismatches, CounterSection::kHa, "sm_key_mismatches",
     "ibsm_ha_events_total", "event", "sm_key_mismatch", ""},
    {&SmCounters::sminfo_sets_refused, CounterSection::kHa, "sminfo_sets_refused",
     "ibsm_ha_events_total", "event", "sminfo_set_refused", ""},
    {&SmCounters::state_changes, CounterSection::kHa, "state_changes", "ibsm_ha_events_total",
     "event", "state_change", ""},
    {&SmCounters::acknowledges_sent, CounterSection::kHa, "acknowledges_sent",
     "ibsm_ha_events_total", "event", "acknowledge_sent", ""},
    {&SmCounters::trap144_sent, CounterSection::kHa, "trap144_sent", "ibsm_ha_events_total",
     "event", "trap144_sent", ""},
    {&SmCounters::other_sms_seen, CounterSection::kHa, "other_sms_seen", "ibsm_ha_events_total",
     "event", "other_sm_seen", ""},
    {&SmCounters::client_reregisters, CounterSection::kHa, "client_reregisters",
     "ibsm_client_reregisters_total", "", "",
     "PortInfo Sets with ClientReregister (ports whose SA state was lost)"},
};

// The number of uint64_t fields of SmCounters; a field not in kSmCounterRows fails to build.
static_assert(std::size(kSmCounterRows) ==
              (sizeof(SmCounters) - sizeof(std::map<std::string, uint64_t>)) / sizeof(uint64_t));

}  // namespace ibsm::sm
