#!/usr/bin/env bash
# bench_routing.sh - ibsm's routing engines on 3-tier fat trees, offline (no SM, no ibsim).
#
#   scripts/bench_routing.sh [--engines LIST] [--k LIST] [--threads N] [--quality]
#                            [--no-quality] [--quality-max-k K] [--permutations N]
#                            [--timeout SEC] [--routecheck PATH] [--build-dir DIR]
#                            [--no-build] [--raw FILE]
#
#   --engines LIST       engines to run (default "minhop updn dnup ftree")
#   --k LIST             3-tier fat-tree port counts (default "16 32 48 64")
#   --threads N          routing / credit-loop / quality threads (default 2)
#   --quality            quality figures for every k (slow: shifts are hosts^2 flows)
#   --no-quality         no quality figures at all
#   --quality-max-k K    quality figures only for k <= K (default 32)
#   --permutations N     random permutations for the quality figures (default 100)
#   --timeout SEC        limit for each case (default 1800)
#   --routecheck PATH    ibsm-routecheck binary (default DIR/bin/ibsm-routecheck, built first)
#   --build-dir DIR      CMake build dir (default build-bench, configured Release if absent)
#   --no-build           do not run the build step
#   --raw FILE           also append each case's full ibsm-routecheck output to FILE
#
# Each case is one `ibsm-routecheck --fat-tree3 K --engine ENGINE --threads N [--quality
# --permutations P]` process under /usr/bin/time -v, so its peak RSS is its own. The chain
# is the engine alone, which falls back to minhop when the engine declines (as ibsmd and
# OpenSM do); the engine that actually ran is read from the CLI's "routing: engine X" line.
# Columns:
#   k, hosts, switches   the k-ary 3-tier fat tree (k^3/4 hosts, 5k^2/4 switches)
#   LIDs routed          the CLI's max LID: LMC 0, one LID per switch (port 0) and per host,
#                        in node order from 1. Above 49,151 end ports (k=64: 5,120 + 65,536
#                        = 70,656) the unicast LID space is full: the first 49,151 get LIDs,
#                        the rest (k=64: 21,505 hosts) none, and are not routed or judged
#   engine               the engine whose tables are judged; "X <- Y declined" is a fallback
#   route s              wall seconds of RouteChain (the engine, incl. any declined one)
#   verify s             VerifyTables: every (switch, LID) entry walked to its destination
#   credit loops s       CheckCreditLoops: channel dependency graph over all routes, with
#                        its result (acyclic / CYCLE; minhop may have cycles, by design)
#   RSS route / peak MiB the CLI's own getrusage peak after routing, and the process's peak
#                        from /usr/bin/time -v (includes verification and quality)
#   CPU / wall s         the process's user+sys CPU seconds and wall seconds (/usr/bin/time):
#                        CPU near 2x wall means both threads ran; CPU << 2x wall on a 2-core
#                        box means waiting for a core (load) or a serial step
#   rc                   the CLI's exit status (0 clean, 1 verify failure or credit loop)
# With quality (routing/quality.h; all flows host -> host, LMC 0):
#   routes/link tN       min-max (stddev) routes crossing a channel of tier N: t0 host
#                        cables, t1 leaf-spine, t2 spine-core; both directions counted
#   shift max            worst link sharing over all shift permutations (i -> i+s mod hosts);
#                        1 means no shift ever puts two flows on one channel
#   random max           worst link sharing over P random permutations (seed 1)
#   eff. BB              effective bisection bandwidth: mean over the random permutations of
#                        each flow's 1/(sharing of its worst channel)
#   quality s            wall seconds of the quality step
# Output: a Markdown table on stdout; progress on stderr. Timings are wall clock: compare
# ratios from one run on a quiet machine, not absolute seconds from a loaded one.
set -uo pipefail

script=bench_routing
source "$(dirname "$0")/lib/bench.sh"   # sets `here`; die, usage_lines, build_binaries
engines="minhop updn dnup ftree" ks="16 32 48 64" threads=2 quality=auto quality_max_k=32
perms=100 case_timeout=1800 routecheck="" build_dir="$here/build-bench" do_build=1 rawfile=""

usage() { usage_lines 2 23; }
while [ $# -gt 0 ]; do
    case $1 in
        --engines) [ $# -ge 2 ] || usage; engines=$2; shift ;;
        --k) [ $# -ge 2 ] || usage; ks=$2; shift ;;
        --threads) [ $# -ge 2 ] || usage; threads=$2; shift ;;
        --quality) quality=all ;;
        --no-quality) quality=none ;;
        --quality-max-k) [ $# -ge 2 ] || usage; quality_max_k=$2; shift ;;
        --permutations) [ $# -ge 2 ] || usage; perms=$2; shift ;;
        --timeout) [ $# -ge 2 ] || usage; case_timeout=$2; shift ;;
        --routecheck) [ $# -ge 2 ] || usage; routecheck=$2; do_build=0; shift ;;
        --build-dir) [ $# -ge 2 ] || usage; build_dir=$2; shift ;;
        --no-build) do_build=0 ;;
        --raw) [ $# -ge 2 ] || usage; rawfile=$2; shift ;;
        -h|--help) usage ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
    shift
done
for n in "$threads" "$perms" "$quality_max_k" "$case_timeout"; do
    [[ $n =~ ^[0-9]+$ ]] || die "expected a number, got '$n'"
done
for k in $ks; do [[ $k =~ ^[0-9]+$ ]] && [ $((k % 2)) = 0 ] || die "k must be even, got '$k'"; done
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) is missing (apt-get install time)"

if [ -z "$routecheck" ]; then
    routecheck=$build_dir/bin/ibsm-routecheck
    [ "$do_build" = 1 ] && build_binaries "$build_dir" ibsm-routecheck
fi
[ -x "$routecheck" ] || die "$routecheck is missing (build it or pass --routecheck)"

tmp=$(mktemp -d /tmp/bench_routing.XXXXXX) || die "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
[ -n "$rawfile" ] && : >"$rawfile"

# field FILE REGEX: first capture group of the first line matching REGEX (sed -E)
field() { sed -nE "s/$2/\\1/p" "$1" | head -1; }
time_field() { awk -v p="$2" 'index($0, p) { sub(/.*: /, ""); v = $0 } END { print v }' "$1"; }

with_quality() {   # with_quality K
    case $quality in all) return 0 ;; none) return 1 ;; esac
    [ "$1" -le "$quality_max_k" ]
}

any_quality=0
for k in $ks; do with_quality "$k" && any_quality=1; done

header="| k | hosts | switches | LIDs routed | engine | route s | verify s | credit loops s | RSS route / peak MiB | CPU / wall s | rc |"
rule="|---:|---:|---:|---|---|---:|---:|---|---:|---:|---:|"
if [ "$any_quality" = 1 ]; then
    header+=" routes/link t0 | routes/link t1 | routes/link t2 | shift max | random max | eff. BB | quality s |"
    rule+="---|---|---|---:|---:|---:|---:|"
fi
rows=()
echo "bench_routing: $routecheck threads=$threads engines='$engines' k='$ks'" \
     "quality=$quality (max k $quality_max_k, $perms permutations); load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for k in $ks; do
    for engine in $engines; do
        out=$tmp/k$k-$engine.txt
        args=(--fat-tree3 "$k" --engine "$engine" --threads "$threads")
        q=0
        if with_quality "$k"; then q=1; args+=(--quality --permutations "$perms"); fi
        echo "bench_routing: k=$k $engine (quality $q), load $(cut -d' ' -f1 /proc/loadavg)" >&2
        timeout -k 10 "$case_timeout" /usr/bin/time -v -o "$tmp/time.txt" \
            "$routecheck" "${args[@]}" >"$out" 2>&1
        rc=$?
        [ -n "$rawfile" ] && { echo "## k=$k engine=$engine rc=$rc"; cat "$out"; } >>"$rawfile"
        sed 's/^/    /' "$out" >&2
        hosts=$(field "$out" '^fabric: .*switches, ([0-9]+) CAs.*')
        switches=$(field "$out" '^fabric: [^:]*: ([0-9]+) switches.*')
        maxlid=$(field "$out" '^fabric: .*max LID ([0-9]+) .*')
        left=$(field "$out" '^fabric: .* ([0-9]+) end ports left without a LID.*')
        lids=${maxlid:--}
        [ -n "$left" ] && lids="$maxlid ($left hosts without a LID)"
        used=$(field "$out" '^routing: engine ([^ ]+) .*')
        declined=$(field "$out" "^routing: .*; ([a-z]+) declined.*")
        eng=${used:-fail}
        [ -n "$declined" ] && eng="$used <- $declined declined"
        route_s=$(field "$out" '^routing: .* ([0-9.]+) s, peak RSS.*')
        route_rss=$(field "$out" '^routing: .* peak RSS ([0-9.]+) MiB.*')
        verify_s=$(field "$out" '^verify: .* ([0-9.]+) s, peak RSS.*')
        verify_r=$(field "$out" '^verify: ([A-Za-z]+):.*')
        loops_s=$(field "$out" '^credit loops: .* ([0-9.]+) s, peak RSS.*')
        loops_r=$(field "$out" '^credit loops: ([A-Za-z]+):.*')
        peak=$(awk -v k="$(time_field "$tmp/time.txt" "Maximum resident set size")" \
               'BEGIN { if (k + 0 > 0) printf "%.0f", k / 1024; else print "-" }')
        cpu=$(awk -v u="$(time_field "$tmp/time.txt" "User time")" \
                  -v s="$(time_field "$tmp/time.txt" "System time")" 'BEGIN { printf "%.1f", u + s }')
        wall=$(time_field "$tmp/time.txt" "Elapsed (wall clock)" |
               awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }')
        [ "$rc" = 124 ] && eng="$eng (timed out after $case_timeout s)"
        row="| $k | ${hosts:--} | ${switches:--} | $lids | $eng | ${route_s:--} |"
        row+=" ${verify_s:--}${verify_r:+ ($verify_r)} | ${loops_s:--}${loops_r:+ ($loops_r)} |"
        row+=" ${route_rss:--} / $peak | $cpu / $wall | $rc |"
        if [ "$any_quality" = 1 ]; then
            if [ "$q" = 1 ]; then
                for t in 0 1 2; do
                    row+=" $(sed -nE "s/^routes per link, tier $t[^:]*: .* min ([0-9]+), max ([0-9]+), mean [0-9.]+, stddev ([0-9.]+).*/\\1-\\2 (\\3)/p" "$out" | head -1) |"
                done
                row+=" $(field "$out" '^quality: .*shift max sharing ([0-9]+).*') |"
                row+=" $(field "$out" '^quality: .*random max sharing ([0-9]+).*') |"
                row+=" $(field "$out" '^quality: .*effective bisection bandwidth ([0-9.]+).*') |"
                row+=" $(field "$out" '^quality: .* ([0-9.]+) s, peak RSS.*') |"
            else
                row+=" - | - | - | - | - | - | - |"
            fi
        fi
        rows+=("$row")
    done
done

echo "$header"
echo "$rule"
printf '%s\n' "${rows[@]}"
exit 0
