#!/usr/bin/env bash
# bench_sa.sh - PathRecord service of ibsmd's SA: in process (tests/bench/sa_bench) and over
# ibsim (ibsmctl --repeat from a far host), each quiet and while full re-routes run.
#
#   scripts/bench_sa.sh [--k K] [--queries N] [--build-dir DIR]
#
#   --k K          3-tier fat tree of K-port switches on ibsim (default 8; sa_bench uses 16)
#   --queries N    PathRecord Gets per ibsim phase (default 3000)
#   --build-dir D  build with ibsmd, ibsmctl, ibsm-topogen and sa_bench (default build)
#
# Over ibsim the "during" phase sends ibsmd SIGHUP every 0.3 s while the client asks: each
# SIGHUP re-reads the config and runs a heavy sweep with a full re-route. One query at a
# time; figures are ibsmctl's: queries per second and latency percentiles. Asserts nothing.
set -euo pipefail
script=bench_sa sim_timeout=60
source "$(dirname "$0")/lib/bench.sh"   # die, need, gen_fabric, start_ibsim, stop_ibsim
cd "$here"

k=8
queries=3000
build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --k) k=$2; shift 2 ;;
    --queries) queries=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
bin=$PWD/$build/bin
for b in ibsmd ibsmctl ibsm-topogen sa_bench; do
  [ -x "$bin/$b" ] || die "$bin/$b not built"
done
need ibsim

echo "== in process: $bin/sa_bench (3-tier k=16, 1,024 hosts; window 1 and 16)"
"$bin/sa_bench" 2>/dev/null | grep BM_ | sed 's/  */ /g'

tmp=$(mktemp -d /tmp/ibsm-bench-sa-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; stop_ibsim; rm -rf "$tmp"' EXIT
TOPOGEN=$bin/ibsm-topogen gen_fabric "ftree3:$k" "$tmp/f.net"
start_ibsim "$tmp/f.net" "$tmp/ibsim.log" || die "ibsim did not start"
export LD_PRELOAD=$SIM_SO
printf 'log_file %s/ibsmd.log\nstate_db_file %s/state.db\nrouting_engine ftree\nsweep_interval 0\n' \
  "$tmp" "$tmp" >"$tmp/ibsmd.conf"
(cd "$tmp" && exec "$bin/ibsmd" -F "$tmp/ibsmd.conf") >/dev/null 2>&1 &
sm=$!
for _ in $(seq 600); do grep -q "SUBNET UP" "$tmp/ibsmd.log" 2>/dev/null && break; sleep 0.1; done
grep -q "SUBNET UP" "$tmp/ibsmd.log" || die "no SUBNET UP"
far=$(awk -F'"' '/^Ca/{n=$2} END{print n}' "$tmp/f.net")
hosts=$(grep -c '^Ca' "$tmp/f.net")
slid=$(SIM_HOST=$far "$bin/ibsmctl" sa nodes 2>/dev/null | awk '/ CA /{if (!s) s=$2} END{print s}')
dlid=$(SIM_HOST=$far "$bin/ibsmctl" sa nodes 2>/dev/null | awk '/ CA /{l=$2} END{print l}')
ask() { (cd "$tmp" && SIM_HOST=$far "$bin/ibsmctl" sa paths --slid "$slid" --dlid "$dlid" \
        --repeat "$queries" 2>/dev/null); }
echo "== ibsim: 3-tier k=$k ($hosts hosts), PathRecord $slid -> $dlid from $far"
echo "quiet:  $(ask)"
(while kill -0 $sm 2>/dev/null; do kill -HUP $sm; sleep 0.3; done) &
hup=$!
echo "during: $(ask)"
kill $hup 2>/dev/null || true
echo "re-routes during the run: $(grep -c 'Entering heavy sweep .*(SIGHUP)' "$tmp/ibsmd.log")," \
     "heavy sweep times: $(grep -o 'heavy sweep [0-9]* done in [0-9.]* s' "$tmp/ibsmd.log" |
     awk '{print $6}' | sort -n | awk '{a[NR]=$1} END{print "min " a[1] " s, max " a[NR] " s"}')"
