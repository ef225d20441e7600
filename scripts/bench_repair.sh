#!/usr/bin/env bash
# bench_repair.sh - faults on ibsim (a spine-core cable cut, a spine switch dying, 16 cables
# at once, a cable or a spine coming back): time from the fault to the SM's next "SUBNET UP",
# ibsmd and OpenSM 3.3.23 side by side on the same fabric and settings.
#
#   scripts/bench_repair.sh [--fabric TYPE:K] [--after "3 20"] [--faults "cable spine cables16"]
#                           [--engine E] [--ibsmd PATH] [--sms "ibsmd opensm"] [--keep]
#
#   --fabric TYPE:K   ftree3:K (default ftree3:16: 320 switches, 1,024 hosts)
#   --after LIST      seconds between SUBNET UP and the fault (default "3 20")
#   --faults LIST     cable: `unlink` of the first core switch's port 1 (a spine-core cable);
#                     spine: `unlink` of every port of the first spine switch (it dies);
#                     spine2: the same with the first spine of pod 2, away from the SM's
#                     pod (the first spine is in the SM's, where ftree's switch routes turn);
#                     cables16: port 1 of the first 16 core switches, in one burst;
#                     cableback: the cable of `cable` cut, and once the SM is up again
#                     (SUBNET UP, then 2 s) put back with `relink`, timed from the relink;
#                     spineback: the same with the spine of `spine` (it dies, then returns
#                     with its cables; ibsim keeps its tables, so this is a switch coming
#                     back, not the power cycle the in-process repair_bench times);
#                     heavycable: the cable of `cable` cut while a heavy sweep walks the
#                     fabric (SIGHUP, as an operator's reload, then --heavy-delay); ibsmd only:
#                     OpenSM's next SUBNET UP may be that heavy sweep's, which did not see
#                     the cut (default "cable")
#   --heavy-delay S   heavycable: seconds from the SIGHUP to the cut (default 0.2)
#   --engine E        routing_engine for both SMs (default ftree,updn)
#   --ibsmd PATH      ibsmd binary (default build/bin/ibsmd)
#   --sms LIST        which SMs to run (default "ibsmd opensm")
#   --keep            keep the temp dir (logs, configs) and print its path
#
# Per run: a fresh ibsim with a console, the SM at the first host, SUBNET UP, a pause, then
# the fault through ibsim's console. Measured:
#   repair_s   from the fault (this script's clock) to the SM's next "SUBNET UP" (its log's
#              timestamp; both SMs log local time with microseconds)
#   sweep      ibsmd: the kind of that sweep and its SMPs ("repair, 56 SMPs"); OpenSM: "-"
# Output: a Markdown table on stdout; progress on stderr.
# Needs: ibsim, opensm, libumad2sim.
set -uo pipefail

script=bench_repair
source "$(dirname "$0")/lib/bench.sh"
fabric=ftree3:16 after="3 20" faults=cable engine=ftree,updn ibsmd=$here/build/bin/ibsmd sms="ibsmd opensm"
keep=0 heavy_delay=0.2

usage() { usage_lines 2 35; }
while [ $# -gt 0 ]; do
    case $1 in
        --fabric) [ $# -ge 2 ] || usage; fabric=$2; shift ;;
        --after) [ $# -ge 2 ] || usage; after=$2; shift ;;
        --faults) [ $# -ge 2 ] || usage; faults=$2; shift ;;
        --engine) [ $# -ge 2 ] || usage; engine=$2; shift ;;
        --ibsmd) [ $# -ge 2 ] || usage; ibsmd=$2; shift ;;
        --sms) [ $# -ge 2 ] || usage; sms=$2; shift ;;
        --heavy-delay) [ $# -ge 2 ] || usage; heavy_delay=$2; shift ;;
        --keep) keep=1 ;;
        -h|--help) usage ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
    shift
done
need ibsim opensm awk
ibsmd=$(readlink -f "$ibsmd")
[ -x "$ibsmd" ] || die "ibsmd not found at $ibsmd (build it or pass --ibsmd)"
build_dir=$(dirname "$(dirname "$ibsmd")")  # ibsm-topogen beside it

tmp=$(mktemp -d /tmp/bench_repair.XXXXXX) || die "mktemp failed"
pids=()
cleanup() {
    exec 3>&- 2>/dev/null
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    if [ "$keep" = 1 ]; then echo "$script: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

net=$tmp/fabric.net
gen_fabric "$fabric" "$net"
first_host=$(awk -F'"' '/^Ca/ { print $2; exit }' "$net")
# ibsim console lines of fault $1 (ibsm-topogen names cores core-NNN and spines ...-spine-NN).
fault_lines() {
    case $1 in
        cable) awk -F'"' '/^Switch/ && $2 ~ /^core/ { printf "unlink \"%s\"[1]\n", $2; exit }' "$net" ;;
        spine) awk -F'"' '/^Switch/ && $2 ~ /spine/ { printf "unlink \"%s\"\n", $2; exit }' "$net" ;;
        spine2) awk -F'"' '/^Switch/ && $2 ~ /^pod0*2-spine/ { printf "unlink \"%s\"\n", $2; exit }' "$net" ;;
        cables16) awk -F'"' '/^Switch/ && $2 ~ /^core/ && n++ < 16 { printf "unlink \"%s\"[1]\n", $2 }' "$net" ;;
        cableback) fault_lines cable | sed 's/^unlink/relink/' ;;
        heavycable) fault_lines cable ;;
        spineback) fault_lines spine | sed 's/^unlink/relink/' ;;
        *) die "unknown fault $1 (cable, spine, spine2, cables16, cableback, spineback, heavycable)" ;;
    esac
}
# What fault $1 does first, before the part that is timed (empty: nothing).
fault_before() {
    case $1 in
        cableback) fault_lines cable ;;
        spineback) fault_lines spine ;;
    esac
}
for fault in $faults; do [ -n "$(fault_lines "$fault")" ] || die "fault $fault: no such switch in $fabric"; done

# Seconds of day of the SUBNET UP line number N (1-based) of LOG, empty if none yet.
nth_up() {
    awk -v n="$2" -v kind="$3" '
        /SUBNET UP/ && ++seen == n {
            ts = (kind == "ibsmd") ? $2 : $3; us = (kind == "ibsmd") ? "" : $4
            split(ts, a, ":"); t = a[1] * 3600 + a[2] * 60 + a[3]
            if (us != "") t += us / 1e6
            printf "%.6f", t; exit
        }' "$1" 2>/dev/null
}
wait_up() {   # wait_up LOG N KIND SECONDS
    for _ in $(seq $(($4 * 20))); do
        [ -n "$(nth_up "$1" "$2" "$3")" ] && return 0
        sleep 0.05
    done
    return 1
}

rows=()
for fault in $faults; do
for pause in $after; do
    for kind in $sms; do
        if [ "$fault" = heavycable ] && [ "$kind" != ibsmd ]; then
            echo "$script: $kind skipped for heavycable (its next SUBNET UP may be the heavy sweep's)" >&2
            continue
        fi
        run_dir=$tmp/$kind-$fault-$pause
        mkdir -p "$run_dir/state"
        echo "$script: $kind on $fabric, $fault ${pause} s after SUBNET UP" >&2
        mkfifo "$run_dir/console"
        exec 3<>"$run_dir/console"   # read-write: does not block, and keeps ibsim's stdin open
        IBSIM_CONSOLE=$run_dir/console start_ibsim "$net" "$run_dir/ibsim.log" ||
            die "ibsim did not come up"
        pids+=("$ibsim_pid")
        conf=$run_dir/sm.conf log=$run_dir/sm.log
        printf 'routing_engine %s\n' "$engine" >"$conf"
        if [ "$kind" = ibsmd ]; then
            printf 'state_db_file %s\nguid2lid_file %s\nlog_file %s\ncontrol_socket none\n' \
                "$run_dir/state/state.db" "$run_dir/state/guid2lid" "$log" >>"$conf"
            (cd "$run_dir" && LD_PRELOAD=$SIM_SO SIM_HOST=$first_host exec "$ibsmd" -F "$conf") \
                >"$run_dir/sm.out" 2>&1 &
        else
            printf 'force_log_flush TRUE\n' >>"$conf"
            (cd "$run_dir" && LD_PRELOAD=$SIM_SO SIM_HOST=$first_host \
                OSM_TMP_DIR=$run_dir/state OSM_CACHE_DIR=$run_dir/state \
                exec opensm -F "$conf" -f "$log") >"$run_dir/sm.out" 2>&1 &
        fi
        sm_pid=$!
        pids+=("$sm_pid")
        wait_up "$log" 1 "$kind" 600 || die "$kind never came up ($run_dir)"
        sleep "$pause"
        before=$(fault_before "$fault")
        if [ -n "$before" ]; then
            ups=$(grep -c "SUBNET UP" "$log")
            echo "$before" >&3
            wait_up "$log" $((ups + 1)) "$kind" 600 || die "$kind never came up after the first cut ($run_dir)"
            sleep 2
        fi
        ups=$(grep -c "SUBNET UP" "$log")
        if [ "$fault" = heavycable ]; then
            kill -HUP "$sm_pid"
            sleep "$heavy_delay"
        fi
        t0=$(sod)
        fault_lines "$fault" >&3
        wait_up "$log" $((ups + 1)) "$kind" 600 || die "$kind never came up after the cut ($run_dir)"
        t1=$(nth_up "$log" $((ups + 1)) "$kind")
        repair=$(awk -v a="$t0" -v b="$t1" 'BEGIN { d = b - a; if (d < -43200) d += 86400; printf "%.2f", d }')
        sweep="-"
        if [ "$kind" = ibsmd ]; then
            # The first sweep to end after the fault's count of SUBNET UP lines: sweeps end, and
            # the state writer logs their SUBNET UP, in order.
            line=$(awk -v n="$ups" '/SUBNET UP/ { seen++ } seen >= n && / sweep [0-9]+ done in / { print; exit }' "$log")
            sweep=$(echo "$line" | sed -n 's/.* \(repair\|heavy\) sweep [0-9]* done in .* \([0-9][0-9]*\) SMPs (.*/\1, \2 SMPs/p')
        fi
        rows+=("| $kind | $fabric | $fault | ${pause} s | $repair | ${sweep:--} |")
        exec 3>&-
        kill "$sm_pid" 2>/dev/null; wait "$sm_pid" 2>/dev/null
        stop_ibsim
    done
done
done

echo "| SM | fabric | fault | after SUBNET UP | repair_s (fault -> SUBNET UP) | ibsmd sweep |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
