#!/usr/bin/env bash
# bench_sweep.sh - ibsmd -o against opensm -o on ibsim fat trees, side by side.
#
#   scripts/bench_sweep.sh [--full] [--fabrics LIST] [--runs N] [--stages] [--no-opensm-smps]
#                          [--timeout SEC] [--ibsmd PATH] [--build-dir DIR] [--no-build]
#                          [--engine NAME] [--keep] [--raw FILE]
#
#   (default)         quick set: ftree2:8 ftree2:16 ftree3:8 ftree3:16
#   --full            ftree2:8 ftree2:16 ftree2:32 ftree3:8 ftree3:16 ftree3:24 ftree3:32
#   --fabrics LIST    e.g. "ftree3:24 ftree3:32" (TYPE:K, TYPE = ftree2 | ftree3)
#   --runs N          timed runs per SM and fabric (default 2); the table keeps the fastest
#   --stages          one extra, untimed ibsmd run per fabric at trace level (-vvv): prints
#                     per-stage times (discovery, LID Sets, routing, LFT push, activation)
#   --no-opensm-smps  skip the extra, untimed opensm -D 0x0b run that counts its SMPs
#                     (it is skipped anyway above --smp-count-max-nodes, default 12000)
#   --timeout SEC     limit for each SM run (default 1200) and for ibsim start (600)
#   --ibsmd PATH      ibsmd binary (default: DIR/bin/ibsmd, built first)
#   --build-dir DIR   CMake build dir (default build-bench, configured Release if absent)
#   --no-build        do not run the build step
#   --engine NAME     routing engine for both SMs (default minhop, both SMs' default)
#   --keep            keep the temp dir (logs, dumps, net files) and print its path
#   --raw FILE        also write every run (one line each, key=value) to FILE
#
# Each SM run gets a fresh ibsim (own IBSIM_SOCKNAME, -N/-S/-P sized from the net file,
# -L 49152), so every run starts from a cold fabric: LIDs 0, empty LFTs, ports INIT.
# Measured per run:
#   up_s    seconds from launching the SM to its "SUBNET UP" log line (wall clock of the
#           log timestamps; both SMs log local time with microseconds)
#   wall_s  process wall time (/usr/bin/time -v), i.e. including exit after the sweep
#   rss     peak RSS (/usr/bin/time -v "Maximum resident set size")
#   cpu_s   the SM's user+sys CPU; sim_cpu_s: ibsim's CPU during the SM run (/proc)
#   smps    ibsmd: "heavy sweep 1 done ... N SMPs"; opensm: "N total sent" of its last
#           vl15_send_mad debug line, from a separate untimed run with -D 0x0b
#   load    /proc/loadavg (1 min) just before the run: figures taken under load are noisy
# Output: a Markdown table on stdout; progress on stderr.
# Needs: ibsim, opensm, libumad2sim (ibsim-utils), GNU time, timeout.
set -uo pipefail

script=bench_sweep sim_timeout=600
source "$(dirname "$0")/lib/bench.sh"
quick="ftree2:8 ftree2:16 ftree3:8 ftree3:16"
full="ftree2:8 ftree2:16 ftree2:32 ftree3:8 ftree3:16 ftree3:24 ftree3:32"
fabrics=$quick runs=2 stages=0 osm_smps=1 smp_max_nodes=12000 sm_timeout=1200 sim_timeout=600
ibsmd="" build_dir="$here/build-bench" do_build=1 engine=minhop keep=0 rawfile=""
sim_timeout=600

usage() { usage_lines 2 36; }
while [ $# -gt 0 ]; do
    case $1 in
        --full) fabrics=$full ;;
        --fabrics) [ $# -ge 2 ] || usage; fabrics=$2; shift ;;
        --runs) [ $# -ge 2 ] || usage; runs=$2; shift ;;
        --stages) stages=1 ;;
        --no-opensm-smps) osm_smps=0 ;;
        --smp-count-max-nodes) [ $# -ge 2 ] || usage; smp_max_nodes=$2; shift ;;
        --timeout) [ $# -ge 2 ] || usage; sm_timeout=$2; shift ;;
        --ibsmd) [ $# -ge 2 ] || usage; ibsmd=$2; do_build=0; shift ;;
        --build-dir) [ $# -ge 2 ] || usage; build_dir=$2; shift ;;
        --no-build) do_build=0 ;;
        --engine) [ $# -ge 2 ] || usage; engine=$2; shift ;;
        --keep) keep=1 ;;
        --raw) [ $# -ge 2 ] || usage; rawfile=$2; shift ;;
        -h|--help) usage ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs wants a positive number"

# --- prerequisites -------------------------------------------------------------------
need ibsim opensm timeout awk
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) is missing (apt-get install time)"
if [ "$do_build" = 1 ]; then
    build_binaries "$build_dir" ibsmd ibsm-topogen
fi
[ -n "$ibsmd" ] || ibsmd=$build_dir/bin/ibsmd
[ -x "$ibsmd" ] || die "ibsmd binary $ibsmd is missing (build it or pass --ibsmd)"
ibsmd=$(readlink -f "$ibsmd")

# --- cleanup -------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/bench_sweep.XXXXXX) || die "mktemp failed"
sm_pid=""
cleanup() {
    # sm_pid is a `timeout` process leading its own process group: TERM reaches the SM too.
    [ -n "$sm_pid" ] && { kill "$sm_pid" 2>/dev/null; wait "$sm_pid" 2>/dev/null; }
    stop_ibsim
    if [ "$keep" = 1 ]; then echo "bench_sweep: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK)


# run_sm DIR TIMEOUT CMD...: runs CMD (cwd DIR, umad2sim preloaded) under /usr/bin/time -v;
# sets rc, t_launch (seconds of day), sim_cpu
run_sm() {
    local dir=$1 lim=$2; shift 2
    local k0 k1
    k0=$(ticks "$ibsim_pid")
    t_launch=$(sod)
    ( cd "$dir" && exec timeout -k 10 "$lim" /usr/bin/time -v -o "$dir/time.txt" \
        env LD_PRELOAD="$SIM_SO" OSM_TMP_DIR="$dir" OSM_CACHE_DIR="$dir" "$@" \
        >"$dir/stdout.txt" 2>&1 </dev/null ) &
    sm_pid=$!
    wait "$sm_pid"; rc=$?
    sm_pid=""
    k1=$(ticks "$ibsim_pid")
    kill -0 "$ibsim_pid" 2>/dev/null || echo "bench_sweep: ibsim died during the run in $dir" >&2
    sim_cpu=$(awk -v a="$k0" -v b="$k1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
}

wall_secs() {    # "h:mm:ss" or "m:ss.ss" -> seconds
    echo "$1" | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }'
}
# log_up_secs LOG KIND LAUNCH: seconds from LAUNCH (seconds of day) to the "SUBNET UP" line
log_up_secs() {
    awk -v kind="$2" -v t0="$3" '
        /SUBNET UP/ {
            ts = (kind == "ibsmd") ? $2 : $3; us = (kind == "ibsmd") ? "" : $4
            split(ts, a, ":"); t = a[1] * 3600 + a[2] * 60 + a[3]
            if (us != "") t += us / 1e6
            d = t - t0; if (d < -43200) d += 86400
            printf "%.3f", d; found = 1; exit
        }
        END { if (!found) print "-" }' "$1" 2>/dev/null
}

fmt_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.1f", a / b; else print "-" }'; }
fmt_mb() { awk -v k="$1" 'BEGIN { if (k + 0 > 0) printf "%.1f", k / 1024; else print "-" }'; }

# one_run SM NET DIR: one timed run of SM on a fresh ibsim; prints a key=value line
one_run() {
    local sm=$1 net=$2 dir=$3 load up wall rss cpu smps
    mkdir -p "$dir"
    load=$(cut -d' ' -f1 /proc/loadavg)
    start_ibsim "$net" "$dir/ibsim.log" || { echo "sm=$sm rc=125"; return; }
    if [ "$sm" = ibsmd ]; then
        cat >"$dir/ibsmd.conf" <<EOF
log_file $dir/ibsmd.log
dump_files_dir $dir/dump
state_db_file $dir/state.db
guid2lid_file $dir/guid2lid
routing_engine $engine
EOF
        run_sm "$dir" "$sm_timeout" "$ibsmd" -o -F "$dir/ibsmd.conf"
        up=$(log_up_secs "$dir/ibsmd.log" ibsmd "$t_launch")
        smps=$(sed -n 's/.*heavy sweep 1 done.* \([0-9][0-9]*\) SMPs.*/\1/p' "$dir/ibsmd.log" | head -1)
    else
        run_sm "$dir" "$sm_timeout" opensm -o -R "$engine" -f "$dir/opensm.log"
        up=$(log_up_secs "$dir/opensm.log" opensm "$t_launch")
        smps=""
    fi
    stop_ibsim
    wall=$(wall_secs "$(time_field "$dir/time.txt" "Elapsed (wall clock)")")
    rss=$(time_field "$dir/time.txt" "Maximum resident set size")
    cpu=$(awk -v u="$(time_field "$dir/time.txt" "User time")" \
              -v s="$(time_field "$dir/time.txt" "System time")" 'BEGIN { printf "%.2f", u + s }')
    echo "sm=$sm rc=$rc up_s=${up:--} wall_s=$wall rss_kb=${rss:-0} cpu_s=$cpu" \
         "sim_cpu_s=$sim_cpu smps=${smps:--} load=$load dir=$dir"
}

# opensm_smps NET DIR: opensm's SMP count from its DEBUG log ("N total sent")
opensm_smps() {
    local net=$1 dir=$2
    mkdir -p "$dir"
    start_ibsim "$net" "$dir/ibsim.log" || { echo "-"; return; }
    run_sm "$dir" "$sm_timeout" opensm -o -R "$engine" -D 0x0b -f "$dir/opensm.log"
    stop_ibsim
    awk '/vl15_send_mad:/ { for (i = 1; i < NF; i++) if ($(i + 1) == "total") n = $i }
         /SUBNET UP/ { up = 1; exit }
         END { print (up && n != "") ? n : "-" }' "$dir/opensm.log"
    rm -f "$dir/opensm.log"    # large
}

# ibsmd_stages NET DIR: per-stage seconds from an ibsmd trace log (every MAD logged).
# Stages: discovery (sweep start -> first Set), LID Sets (-> last response before the
# routing line), routing (-> "tables configured"), switch programming (SwitchInfo + LFT
# blocks; -> first PortInfo Set after it), link activation (ARMED + ACTIVE; -> last
# response), finish (dumps + state file; -> "heavy sweep 1 done"), then "SUBNET UP".
ibsmd_stages() {
    local net=$1 dir=$2
    mkdir -p "$dir"
    cat >"$dir/ibsmd.conf" <<EOF
log_file $dir/ibsmd.log
dump_files_dir $dir/dump
state_db_file $dir/state.db
guid2lid_file $dir/guid2lid
routing_engine $engine
EOF
    start_ibsim "$net" "$dir/ibsim.log" || return
    run_sm "$dir" "$sm_timeout" "$ibsmd" -o -vvv -F "$dir/ibsmd.conf"
    stop_ibsim
    awk -v t_launch="$t_launch" '
        function t(s,  a) { split(s, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
        NR == 1 { first = t($2) }
        /Entering heavy sweep 1 / { T0 = t($2); ph = 1; next }
        ph == 0 { next }
        $4 == "trace:" && $5 == "recv" { last = t($2); next }
        $4 == "trace:" && $5 == "sent" {
            set = ($9 == "0x02")
            if (ph == 1 && set) { T1 = t($2); ph = 2 }
            else if (ph == 3 && set && $11 == "0x0015") { T4 = t($2); ph = 4 }
            n[ph]++; next
        }
        ph == 2 && /tables configured/ { T2 = last; T3 = t($2); ph = 3; next }
        /heavy sweep 1 done/ { T5 = last; T6 = t($2); next }
        /SUBNET UP/ { T7 = t($2); exit }
        END {
            if (!T7) { print "  (no SUBNET UP in the trace run)"; exit }
            d = t_launch + 0; if (first - d < -43200) d -= 86400
            printf "| exec + load (launch -> first log line) | %.3f | |\n", first - d
            printf "| init: state file, umad port (-> sweep 1 starts) | %.3f | |\n", T0 - first
            printf "| discovery (Gets) | %.3f | %d |\n", T1 - T0, n[1]
            printf "| LID / PortInfo Sets | %.3f | %d |\n", T2 - T1, n[2]
            printf "| routing + verification | %.3f | |\n", T3 - T2
            printf "| SwitchInfo + LFT push | %.3f | %d |\n", T4 - T3, n[3]
            printf "| link activation (ARMED, ACTIVE) | %.3f | %d |\n", T5 - T4, n[4]
            printf "| dumps + state file | %.3f | |\n", T6 - T5
            printf "| total launch -> SUBNET UP (trace level) | %.3f | %d |\n", T7 - d, n[1] + n[2] + n[3] + n[4]
        }' "$dir/ibsmd.log"
    rm -f "$dir/ibsmd.log"
}

# --- main ----------------------------------------------------------------------------
echo "bench_sweep: ibsmd=$ibsmd opensm=$(command -v opensm) engine=$engine runs=$runs tmp=$tmp" >&2
declare -a rows=() stage_out=()
[ -n "$rawfile" ] && : >"$rawfile"
for spec in $fabrics; do
    type=${spec%%:*} k=${spec#*:}
    case $type in ftree2|ftree3) ;; *) die "bad fabric $spec (want ftree2:K or ftree3:K)" ;; esac
    name="${type/ftree/}-tier k=$k"
    net=$tmp/$type-k$k.net
    gen_fabric "$spec" "$net"
    hosts=$(grep -c '^Ca' "$net"); switches=$(grep -c '^Switch' "$net")
    declare -A best_up=() best_rss=() best_line=() all_up=()
    for sm in ibsmd opensm; do
        best_up[$sm]="" all_up[$sm]=""
        for r in $(seq "$runs"); do
            echo "bench_sweep: $name ($hosts hosts, $switches switches): $sm run $r" >&2
            line=$(one_run "$sm" "$net" "$tmp/$type-k$k/$sm-$r")
            echo "  $line" >&2
            [ -n "$rawfile" ] && echo "fabric=$type:$k $line" >>"$rawfile"
            eval "$(echo "$line" | tr ' ' '\n' | grep -E '^(rc|up_s|rss_kb)=' | sed 's/^/v_/')"
            if [ "$v_rc" != 0 ] || [ "$v_up_s" = - ]; then
                echo "bench_sweep: $sm failed on $name (rc $v_rc); see $tmp/$type-k$k/$sm-$r" >&2
                keep=1; all_up[$sm]+="fail "; continue
            fi
            all_up[$sm]+="$v_up_s "
            if [ -z "${best_up[$sm]}" ] ||
               awk -v a="$v_up_s" -v b="${best_up[$sm]}" 'BEGIN { exit !(a < b) }'; then
                best_up[$sm]=$v_up_s best_line[$sm]=$line
            fi
            # peak RSS: the smallest of the runs (it hardly varies)
            if [ -z "${best_rss[$sm]:-}" ] || [ "$v_rss_kb" -lt "${best_rss[$sm]}" ]; then
                best_rss[$sm]=$v_rss_kb
            fi
        done
    done
    get() { echo "${best_line[$1]:-}" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
    osm_n="-"
    nodes=$((hosts + switches))
    if [ "$osm_smps" = 1 ] && [ "$nodes" -le "$smp_max_nodes" ]; then
        echo "bench_sweep: $name: counting opensm SMPs (-D 0x0b, untimed)" >&2
        osm_n=$(opensm_smps "$net" "$tmp/$type-k$k/opensm-count")
    fi
    iu=${best_up[ibsmd]:-} ou=${best_up[opensm]:-}
    rows+=("| $name | $hosts | $switches | ${iu:-fail} | ${ou:-fail} | $(fmt_ratio "$ou" "$iu") |\
 $(fmt_mb "${best_rss[ibsmd]:-}") | $(fmt_mb "${best_rss[opensm]:-}") |\
 $(fmt_ratio "${best_rss[opensm]:-}" "${best_rss[ibsmd]:-}") | $(get ibsmd smps) | $osm_n |\
 $(get ibsmd wall_s) / $(get opensm wall_s) | $(get ibsmd cpu_s) / $(get opensm cpu_s) |\
 $(get ibsmd sim_cpu_s) / $(get opensm sim_cpu_s) | $(get ibsmd load) / $(get opensm load) |\
 ${all_up[ibsmd]% } / ${all_up[opensm]% } |")
    if [ "$stages" = 1 ]; then
        echo "bench_sweep: $name: ibsmd trace run for per-stage times (untimed)" >&2
        stage_out+=("" "#### ibsmd stages, $name (trace level: every MAD logged, so slower than the timed runs)" ""
                    "| stage | seconds | SMPs sent |" "|---|---:|---:|")
        while IFS= read -r l; do stage_out+=("$l"); done < <(ibsmd_stages "$net" "$tmp/$type-k$k/ibsmd-stages")
    fi
    unset best_up best_rss best_line all_up
done

echo "| fabric | hosts | switches | ibsmd s to SUBNET UP | opensm s | opensm/ibsmd | ibsmd RSS MB |\
 opensm RSS MB | RSS opensm/ibsmd | ibsmd SMPs | opensm SMPs | wall s ibsmd / opensm |\
 SM CPU s ibsmd / opensm | ibsim CPU s ibsmd / opensm run | load 1m ibsmd / opensm | all runs s ibsmd / opensm |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
[ ${#stage_out[@]} -gt 0 ] && printf '%s\n' "${stage_out[@]}"
exit 0
