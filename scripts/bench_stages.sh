#!/usr/bin/env bash
# bench_stages.sh - ibsmd and OpenSM on ibsim, stage by stage, and the routes each one set.
#
#   scripts/bench_stages.sh [--fabrics LIST] [--engines LIST] [--permutations N]
#                           [--no-quality] [--no-trace] [--timeout SEC] [--ibsmd PATH]
#                           [--routecheck PATH] [--build-dir DIR] [--no-build] [--keep]
#
#   --fabrics LIST     default "ftree3:8 ftree3:16 ftree3:24" (TYPE:K, TYPE = ftree2 | ftree3)
#   --engines LIST     routing engine of both SMs, one pass each (default "ftree minhop")
#   --permutations N   random permutations for the quality figures (default 100)
#   --no-quality       do not dump and judge the tables
#   --no-trace         skip ibsmd's untimed trace run (its discovery split then shows "-")
#   --timeout SEC      limit for each SM run and each dump (default 1200)
#   --ibsmd PATH, --routecheck PATH   binaries (default DIR/bin/..., built first)
#   --build-dir DIR    CMake build dir (default build-bench); --no-build: do not build
#   --keep             keep the temp dir (logs, dumps) and print its path
#
# Per fabric and engine, each SM runs once with -o on a fresh ibsim (cold fabric):
#   ibsmd   info level (timed), then again at trace level (-vvv, every MAD logged, untimed)
#           for the discovery / LID split
#   opensm  `opensm -o -R ENGINE -f LOG` at its default log level (timed)
# Stage markers (log timestamps; "launch" = the wall clock just before exec):
#   opensm  discovery            launch -> "Entering MASTER state" (start-up + discovery;
#                                OpenSM becomes master once its first discovery is done)
#           LIDs + routing       -> "osm_ucast_mgr_process: <engine> tables configured on
#                                all switches" (LID assignment, routing, LFT blocks queued)
#           LFT push + activation -> "SUBNET UP" (waiting for the LFT Sets, link ARMED/ACTIVE)
#   ibsmd   discovery            launch -> its first SMP Set (trace run: "trace: sent ...
#                                method 0x02"); start-up + discovery Gets
#           LIDs + routing       -> "<engine> tables configured: ...; routed in X s,
#                                verified in Y s, credit loops checked in Z s" (trace run)
#           LFT push + activation -> "SUBNET UP" (trace run)
#   routing only   ibsmd: X + Y + Z from that line (info run); OpenSM logs no such figure
#   to SUBNET UP   launch -> "SUBNET UP" of the timed run (ibsmd: info level)
#   RSS MB         peak RSS of the timed run (/usr/bin/time -v)
#   engine used    the "<engine> tables configured" of the timed run (shows a fallback)
# Quality: right after each timed run, on the same ibsim, `ibnetdiscover` and `dump_lfts`
# (infiniband-diags, preloaded like the SMs) read the fabric and the LFTs the SM set; then
# `ibsm-routecheck --topology IBND --lft-dump LFTS --quality --permutations N --threads 2`
# judges them: verify and credit-loop result, routes per channel per tier (t0 host cables,
# t1 leaf-spine, t2 spine-core; min-max (stddev)), shift and random max link sharing,
# effective bisection bandwidth (see scripts/bench_routing.sh for their meaning).
# Output: two Markdown tables on stdout (stages, quality); progress on stderr.
# Needs: ibsim, opensm, libumad2sim (ibsim-utils), infiniband-diags, GNU time.
set -uo pipefail

script=bench_stages
source "$(dirname "$0")/lib/bench.sh"
fabrics="ftree3:8 ftree3:16 ftree3:24" engines="ftree minhop" perms=100 quality=1 trace=1
sm_timeout=1200 sim_timeout=600 ibsmd="" routecheck="" build_dir="$here/build-bench"
do_build=1 keep=0

usage() { usage_lines 2 17; }
while [ $# -gt 0 ]; do
    case $1 in
        --fabrics) [ $# -ge 2 ] || usage; fabrics=$2; shift ;;
        --engines) [ $# -ge 2 ] || usage; engines=$2; shift ;;
        --permutations) [ $# -ge 2 ] || usage; perms=$2; shift ;;
        --no-quality) quality=0 ;;
        --no-trace) trace=0 ;;
        --timeout) [ $# -ge 2 ] || usage; sm_timeout=$2; shift ;;
        --ibsmd) [ $# -ge 2 ] || usage; ibsmd=$2; shift ;;
        --routecheck) [ $# -ge 2 ] || usage; routecheck=$2; shift ;;
        --build-dir) [ $# -ge 2 ] || usage; build_dir=$2; shift ;;
        --no-build) do_build=0 ;;
        --keep) keep=1 ;;
        -h|--help) usage ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
    shift
done

need ibsim opensm timeout awk ibnetdiscover dump_lfts
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) is missing (apt-get install time)"
if [ "$do_build" = 1 ]; then
    build_binaries "$build_dir" ibsmd ibsm-routecheck ibsm-topogen
fi
ibsmd=$(readlink -f "${ibsmd:-$build_dir/bin/ibsmd}")
routecheck=$(readlink -f "${routecheck:-$build_dir/bin/ibsm-routecheck}")
[ -x "$ibsmd" ] || die "ibsmd binary $ibsmd is missing"
[ "$quality" = 0 ] || [ -x "$routecheck" ] || die "ibsm-routecheck binary $routecheck is missing"

tmp=$(mktemp -d /tmp/bench_stages.XXXXXX) || die "mktemp failed"
sm_pid=""
cleanup() {
    [ -n "$sm_pid" ] && { kill "$sm_pid" 2>/dev/null; wait "$sm_pid" 2>/dev/null; }
    stop_ibsim
    if [ "$keep" = 1 ]; then echo "bench_stages: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP



# in_sim DIR TIMEOUT OUT CMD...: CMD in DIR with umad2sim preloaded, stdout to OUT; sets rc.
# With timefile set, CMD runs under /usr/bin/time -v -o $timefile (outside the preload).
timefile=""
in_sim() {
    local dir=$1 lim=$2 out=$3; shift 3
    local timer=()
    [ -n "$timefile" ] && timer=(/usr/bin/time -v -o "$timefile")
    ( cd "$dir" && exec timeout -k 10 "$lim" "${timer[@]}" env LD_PRELOAD="$SIM_SO" OSM_TMP_DIR="$dir" \
        OSM_CACHE_DIR="$dir" "$@" >"$out" 2>>"$dir/stderr.txt" </dev/null ) &
    sm_pid=$!
    wait "$sm_pid"; rc=$?
    sm_pid=""
}

ibsmd_conf() {   # ibsmd_conf DIR ENGINE
    rm -f "$1/ibsmd.log"   # ibsmd appends to its log
    cat >"$1/ibsmd.conf" <<EOF
log_file $1/ibsmd.log
dump_files_dir $1/dump
state_db_file $1/state.db
guid2lid_file $1/guid2lid
routing_engine $2
EOF
}

# secs LOG KIND LAUNCH REGEX: seconds from LAUNCH to the first line matching REGEX
secs() {
    awk -v kind="$2" -v t0="$3" -v re="$4" '
        $0 ~ re {
            ts = (kind == "ibsmd") ? $2 : $3
            split(ts, a, ":"); t = a[1] * 3600 + a[2] * 60 + a[3]
            if (kind != "ibsmd") t += $4 / 1e6
            d = t - t0; if (d < -43200) d += 86400
            printf "%.3f", d; found = 1; exit
        }
        END { if (!found) print "-" }' "$1" 2>/dev/null
}
diff3() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "-" && b != "-" && a != "" && b != "") printf "%.3f", b - a; else print "-" }'; }

# judge DIR: ibnetdiscover + dump_lfts on the live ibsim, then ibsm-routecheck; sets q_row
judge() {
    local dir=$1 out
    q_row="| - | - | - | - | - | - | - | - |"
    [ "$quality" = 1 ] || return
    in_sim "$dir" "$sm_timeout" "$dir/ibnd.txt" ibnetdiscover
    [ "$rc" = 0 ] || { echo "bench_stages: ibnetdiscover failed (rc $rc) in $dir" >&2; return; }
    in_sim "$dir" "$sm_timeout" "$dir/lfts.txt" dump_lfts
    [ "$rc" = 0 ] || { echo "bench_stages: dump_lfts failed (rc $rc) in $dir" >&2; return; }
    pending_judge+=("$dir")
}
# judge_offline DIR: runs ibsm-routecheck on DIR's dumps (after ibsim is stopped)
judge_offline() {
    local dir=$1 out=$1/routecheck.txt t row
    timeout "$sm_timeout" "$routecheck" --topology "$dir/ibnd.txt" --lft-dump "$dir/lfts.txt" \
        --quality --permutations "$perms" --threads 2 >"$out" 2>&1
    sed 's/^/    /' "$out" >&2
    row="| $(sed -nE 's/^verify: ([A-Za-z]+): ([0-9]+) missing entries.*/\1 (\2 missing)/p' "$out") |"
    row+=" $(sed -nE 's/^credit loops: ([A-Za-z]+):.*/\1/p' "$out") |"
    for t in 0 1 2; do
        row+=" $(sed -nE "s/^routes per link, tier $t[^:]*: .* min ([0-9]+), max ([0-9]+), mean [0-9.]+, stddev ([0-9.]+).*/\\1-\\2 (\\3)/p" "$out" | head -1) |"
    done
    row+=" $(sed -nE 's/^quality: .*shift max sharing ([0-9]+).*/\1/p' "$out") |"
    row+=" $(sed -nE 's/^quality: .*random max sharing ([0-9]+).*/\1/p' "$out") |"
    row+=" $(sed -nE 's/^quality: .*effective bisection bandwidth ([0-9.]+).*/\1/p' "$out") |"
    q_row=$row
}

echo "bench_stages: ibsmd=$ibsmd opensm=$(command -v opensm) tmp=$tmp load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
stage_rows=() quality_rows=()
for spec in $fabrics; do
    type=${spec%%:*} k=${spec#*:}
    case $type in ftree2|ftree3) ;; *) die "bad fabric $spec" ;; esac
    name="${type/ftree/}-tier k=$k"
    net=$tmp/$type-k$k.net
    gen_fabric "$spec" "$net"
    for engine in $engines; do
        for sm in ibsmd opensm; do
            dir=$tmp/$type-k$k/$engine/$sm
            mkdir -p "$dir"
            load=$(cut -d' ' -f1 /proc/loadavg)
            echo "bench_stages: $name $engine $sm (load $load)" >&2
            pending_judge=()
            start_ibsim "$net" "$dir/ibsim.log" || continue
            if [ "$sm" = ibsmd ]; then
                ibsmd_conf "$dir" "$engine"
                t0=$(sod)
                timefile=$dir/time.txt
                in_sim "$dir" "$sm_timeout" "$dir/stdout.txt" "$ibsmd" -o -F "$dir/ibsmd.conf"
                timefile=""
                log=$dir/ibsmd.log
                up=$(secs "$log" ibsmd "$t0" "SUBNET UP")
                used=$(sed -nE 's/.*\] info: ([a-z]+) tables configured.*/\1/p' "$log" | head -1)
                routing=$(sed -nE 's/.*routed in ([0-9.]+) s, verified in ([0-9.]+) s, credit loops checked in ([0-9.]+) s.*/\1 \2 \3/p' "$log" |
                          head -1 | awk 'NF == 3 { printf "%.3f (%s + %s + %s)", $1 + $2 + $3, $1, $2, $3 }')
            else
                t0=$(sod)
                timefile=$dir/time.txt
                in_sim "$dir" "$sm_timeout" "$dir/stdout.txt" opensm -o -R "$engine" -f "$dir/opensm.log"
                timefile=""
                log=$dir/opensm.log
                up=$(secs "$log" opensm "$t0" "SUBNET UP")
                used=$(sed -nE 's/.*osm_ucast_mgr_process: ([a-z_]+) tables configured.*/\1/p' "$log" | head -1)
                routing="-"
                s1=$(secs "$log" opensm "$t0" "Entering MASTER state")
                s2=$(secs "$log" opensm "$t0" "tables configured")
            fi
            sm_rc=$rc
            rss=$(awk -v k="$(time_field "$dir/time.txt" "Maximum resident set size")" \
                  'BEGIN { if (k + 0 > 0) printf "%.1f", k / 1024; else print "-" }')
            echo "  rc=$sm_rc up=$up engine=$used routing=$routing rss=$rss" >&2
            judge "$dir"
            stop_ibsim
            [ ${#pending_judge[@]} -gt 0 ] && judge_offline "$dir"
            if [ "$sm" = ibsmd ]; then
                s1=- s2=- s3=-
                if [ "$trace" = 1 ]; then
                    tdir=$dir/trace
                    mkdir -p "$tdir"
                    echo "bench_stages: $name $engine ibsmd trace run (untimed)" >&2
                    if start_ibsim "$net" "$tdir/ibsim.log"; then
                        ibsmd_conf "$tdir" "$engine"
                        tt0=$(sod)
                        in_sim "$tdir" "$sm_timeout" "$tdir/stdout.txt" "$ibsmd" -o -vvv -F "$tdir/ibsmd.conf"
                        stop_ibsim
                        s1=$(secs "$tdir/ibsmd.log" ibsmd "$tt0" "trace: sent class 0x81 method 0x02 ")
                        s2=$(secs "$tdir/ibsmd.log" ibsmd "$tt0" "tables configured")
                        s3=$(secs "$tdir/ibsmd.log" ibsmd "$tt0" "SUBNET UP")
                        rm -f "$tdir/ibsmd.log"
                    fi
                fi
                stage_rows+=("| $name | $engine | ibsmd (${used:-none}) | $s1 | $(diff3 "$s1" "$s2") |\
 $routing | $(diff3 "$s2" "$s3") | $s3 | ${up:--} | $rss | $sm_rc |")
            else
                stage_rows+=("| $name | $engine | opensm (${used:-none}) | $s1 | $(diff3 "$s1" "$s2") |\
 - | $(diff3 "$s2" "$up") | $up | $up | $rss | $sm_rc |")
            fi
            quality_rows+=("| $name | $engine | $sm (${used:-none}) $q_row")
            [ "$keep" = 1 ] || rm -f "$dir/lfts.txt" "$dir"/*.log
        done
    done
done

echo "| fabric | engine | SM (engine used) | discovery s | LIDs + routing s | routing only s (route + verify + loops) | LFT push + activation s | stages total s | launch -> SUBNET UP s (timed run) | peak RSS MB | rc |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${stage_rows[@]}"
if [ "$quality" = 1 ]; then
    echo
    echo "| fabric | engine | SM (engine used) | verify | credit loops | routes/link t0 | routes/link t1 | routes/link t2 | shift max | random max | eff. BB |"
    echo "|---|---|---|---|---|---|---|---|---:|---:|---:|"
    printf '%s\n' "${quality_rows[@]}"
fi
exit 0
