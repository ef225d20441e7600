#!/usr/bin/env bash
# bench_failover.sh - master killed -> standby SUBNET UP, ibsmd->ibsmd and opensm->opensm,
# on the same ibsim fabric with the same polling settings.
#
#   scripts/bench_failover.sh [--fabric TYPE:K] [--polling-ms N] [--retries N] [--runs N]
#                             [--ibsmd PATH] [--sms "ibsmd opensm"] [--keep]
#
#   --fabric TYPE:K   ftree2:K or ftree3:K (default ftree3:8: 80 switches, 128 hosts)
#   --polling-ms N    sminfo_polling_timeout for both SMs (default 1000)
#   --retries N       polling_retry_number (default 2)
#   --runs N          failovers per SM kind (default 1); every run starts a fresh ibsim
#   --ibsmd PATH      ibsmd binary (default build/bin/ibsmd)
#   --sms LIST        which pairs to run (default "ibsmd opensm")
#   --keep            keep the temp dir (logs, configs) and print its path
#
# Per run: the master (priority 5) runs at the first host and brings the fabric up; the
# standby (priority 3) starts at the last host and stands by; an ibsmd standby is given
# until it logs that a takeover starts from its model (its refresh every sweep_interval, 10 s,
# found the fabric unchanged and read the LFT blocks; at most 300 s); the master is killed
# with SIGKILL. Measured:
#   failover_s  from the kill to the standby's "SUBNET UP" after "Entering MASTER state"
#               (the SMs' own log timestamps; both log local time with microseconds)
#   after_detect_s  from the standby's "Entering DISCOVERING state" (it gave the master up:
#               the polling timeout times the retries) to that SUBNET UP
#   start       ibsmd: "warm" when the takeover started from the standby's model, "cold"
#               when it discovered the fabric; OpenSM: "-"
#   smps        SMPs the new master sent from the kill to SUBNET UP: ibsmd: its takeover
#               sweep's "N SMPs" (the missed polls are counted apart); opensm: the rise of
#               its SMInfo ActCount, which OpenSM keeps as its count of QP0 MADs sent
#   lft_sets    LFT blocks the new master wrote (ibsmd logs it; OpenSM does not say, "-")
#   lid_changes LIDs that differ before/after (ibnetdiscover from a third host)
# Output: a Markdown table on stdout; progress on stderr.
# Needs: ibsim, opensm, libumad2sim, infiniband-diags (sminfo, ibstat, ibnetdiscover).
set -uo pipefail

script=bench_failover
source "$(dirname "$0")/lib/bench.sh"
fabric=ftree3:8 polling=1000 retries=2 runs=1 ibsmd=$here/build/bin/ibsmd sms="ibsmd opensm"
keep=0

usage() { usage_lines 2 33; }
while [ $# -gt 0 ]; do
    case $1 in
        --fabric) [ $# -ge 2 ] || usage; fabric=$2; shift ;;
        --polling-ms) [ $# -ge 2 ] || usage; polling=$2; shift ;;
        --retries) [ $# -ge 2 ] || usage; retries=$2; shift ;;
        --runs) [ $# -ge 2 ] || usage; runs=$2; shift ;;
        --ibsmd) [ $# -ge 2 ] || usage; ibsmd=$2; shift ;;
        --sms) [ $# -ge 2 ] || usage; sms=$2; shift ;;
        --keep) keep=1 ;;
        -h|--help) usage ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
    shift
done
need ibsim opensm sminfo ibstat ibnetdiscover awk
ibsmd=$(readlink -f "$ibsmd")
[ -x "$ibsmd" ] || die "ibsmd not found at $ibsmd (build it or pass --ibsmd)"
build_dir=$(dirname "$(dirname "$ibsmd")")  # ibsm-topogen beside it

tmp=$(mktemp -d /tmp/bench_failover.XXXXXX) || die "mktemp failed"
pids=()   # every process we started, stopped by PID
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    if [ "$keep" = 1 ]; then echo "bench_failover: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

type=${fabric%%:*} k=${fabric##*:}
net=$tmp/fabric.net
gen_fabric "$fabric" "$net"
hosts=$(awk -F'"' '/^Ca/ { print $2 }' "$net")
first_host=$(echo "$hosts" | head -1)
last_host=$(echo "$hosts" | tail -1)
probe_host=$(echo "$hosts" | sed -n 2p)



on_sim() { (cd "$run_dir" && LD_PRELOAD=$SIM_SO SIM_HOST=$1 timeout -s KILL 30 "${@:2}"); }

# start_sm KIND NAME HOST PRIORITY: sets sm_pid; the SM logs to $run_dir/NAME.log
start_sm() {
    local kind=$1 name=$2 host=$3 prio=$4 conf=$run_dir/$2.conf
    mkdir -p "$run_dir/$name"
    printf 'sm_priority %s\nsminfo_polling_timeout %s\npolling_retry_number %s\n' \
        "$prio" "$polling" "$retries" >"$conf"
    if [ "$kind" = ibsmd ]; then
        printf 'state_db_file %s\nguid2lid_file %s\ndump_files_dir %s\nlog_file %s\n' \
            "$run_dir/$name/state.db" "$run_dir/$name/guid2lid" "$run_dir/$name" \
            "$run_dir/$name.log" >>"$conf"
        (cd "$run_dir" && LD_PRELOAD=$SIM_SO SIM_HOST=$host exec "$ibsmd" -F "$conf") \
            >"$run_dir/$name.out" 2>&1 &
    else
        printf 'force_log_flush TRUE\n' >>"$conf"
        (cd "$run_dir" && LD_PRELOAD=$SIM_SO SIM_HOST=$host OSM_TMP_DIR=$run_dir/$name \
            OSM_CACHE_DIR=$run_dir/$name exec opensm -F "$conf" -f "$run_dir/$name.log") \
            >"$run_dir/$name.out" 2>&1 &
    fi
    sm_pid=$!
    pids+=("$sm_pid")
}

wait_log() {   # wait_log FILE PATTERN SECONDS
    for _ in $(seq $(($3 * 10))); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# Seconds of day of the first "SUBNET UP" after "Entering MASTER state".
takeover_up() {
    awk -v kind="$2" '
        /Entering MASTER state/ { master = 1 }
        master && /SUBNET UP/ {
            ts = (kind == "ibsmd") ? $2 : $3; us = (kind == "ibsmd") ? "" : $4
            split(ts, a, ":"); t = a[1] * 3600 + a[2] * 60 + a[3]
            if (us != "") t += us / 1e6
            printf "%.6f", t; exit
        }' "$1"
}

actcount() { on_sim "$probe_host" sminfo "$@" 2>/dev/null | sed -n 's/.*activity count \([0-9]*\).*/\1/p'; }
lids() { on_sim "$probe_host" ibnetdiscover 2>/dev/null | grep -o 'lid [0-9]*' ; }

rows=()
for kind in $sms; do
    for run in $(seq "$runs"); do
        run_dir=$tmp/$kind-$run
        mkdir -p "$run_dir"
        echo "bench_failover: $kind -> $kind on $fabric, run $run" >&2
        start_ibsim "$net" "$run_dir/ibsim.log" || die "ibsim did not come up"
        pids+=("$ibsim_pid")
        start_sm "$kind" master "$first_host" 5
        master_pid=$sm_pid
        wait_log "$run_dir/master.log" "SUBNET UP" 300 || die "master never up ($run_dir)"
        start_sm "$kind" standby "$last_host" 3
        standby_pid=$sm_pid
        wait_log "$run_dir/standby.log" "Entering STANDBY state" 120 ||
            die "standby never stood by ($run_dir)"
        if [ "$kind" = ibsmd ]; then
            wait_log "$run_dir/standby.log" "a takeover starts from this model" 300 ||
                echo "bench_failover: the standby read no LFT blocks in 300 s (a cold takeover)" >&2
        fi
        sleep 1
        standby_lid=$(on_sim "$last_host" ibstat | sed -n 's/.*Base lid: \([0-9]*\).*/\1/p' | head -1)
        act0=$(actcount "$standby_lid")
        lids_before=$(lids)
        t0=$(sod)
        kill -9 "$master_pid"
        wait "$master_pid" 2>/dev/null
        wait_log "$run_dir/standby.log" "Entering MASTER state" 600 ||
            die "standby never took over ($run_dir)"
        for _ in $(seq 600); do
            [ -n "$(takeover_up "$run_dir/standby.log" "$kind")" ] && break
            sleep 0.1
        done
        t1=$(takeover_up "$run_dir/standby.log" "$kind")
        [ -n "$t1" ] || die "no SUBNET UP after the takeover ($run_dir)"
        failover=$(awk -v a="$t0" -v b="$t1" 'BEGIN { d = b - a; if (d < -43200) d += 86400; printf "%.2f", d }')
        td=$(awk -v kind="$kind" '
            /Entering STANDBY state/ { s = 1 }
            s && /Entering DISCOVERING state/ {
                ts = (kind == "ibsmd") ? $2 : $3; us = (kind == "ibsmd") ? "" : $4
                split(ts, a, ":"); t = a[1] * 3600 + a[2] * 60 + a[3]
                if (us != "") t += us / 1e6
                printf "%.6f", t; exit
            }' "$run_dir/standby.log")
        detect="-"
        [ -n "$td" ] && detect=$(awk -v a="$td" -v b="$t1" 'BEGIN { d = b - a; if (d < -43200) d += 86400; printf "%.2f", d }')
        start="-"
        if [ "$kind" = ibsmd ]; then
            start=cold
            grep -q "takeover from the standby's model" "$run_dir/standby.log" && start=warm
            line=$(awk '/Entering MASTER state/ { m = 1 } m && /(heavy|repair) sweep [0-9]+ done/ { print; exit }' \
                "$run_dir/standby.log")
            smps=$(echo "$line" | sed -n 's/.* \([0-9]*\) SMPs (.*/\1/p')
            lft=$(echo "$line" | sed -n 's/.* \([0-9]*\) LFT blocks sent.*/\1/p')
            polls=$(grep -c "SM-HA-005" "$run_dir/standby.log")
            smps="$smps (+$polls missed polls)"
        else
            act1=$(actcount)
            smps=$(( ${act1:-0} - ${act0:-0} ))
            lft="-"
        fi
        lid_changes=$(diff <(echo "$lids_before") <(lids) | grep -c '^>')
        rows+=("| $kind -> $kind | $fabric | ${polling} ms x $retries | $start | $failover | $detect | $smps | $lft | $lid_changes |")
        kill "$standby_pid" 2>/dev/null; wait "$standby_pid" 2>/dev/null
        kill "$ibsim_pid" 2>/dev/null; wait "$ibsim_pid" 2>/dev/null
    done
done

echo "| failover | fabric | polling | start | failover_s | after_detect_s | SMPs (kill -> SUBNET UP) | LFT blocks set | LIDs changed |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
