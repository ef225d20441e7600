# Shared by the benchmark scripts (source it; it defines functions and a few variables):
# argument and error helpers, the build of the binaries a benchmark measures, fabric
# generation with ibsm-topogen, and a private ibsim per run.
#
# The sourcing script sets `script` (its name, for messages) before sourcing, and may set
# `sim_timeout` (seconds ibsim may take to come up, default 600).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SIM_SO=${SIM_SO:-/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so}
sim_timeout=${sim_timeout:-600}
ibsim_pid=""

die() { echo "$script: $*" >&2; exit 2; }

# usage FIRST LAST: prints the script's own header comment lines FIRST..LAST as help.
usage_lines() { sed -n "$1,$2p" "$0" | sed 's/^# \{0,1\}//'; exit 2; }

# Seconds since midnight with microseconds, for timing against log timestamps.
sod() { date +%H:%M:%S.%N | awk -F: '{ printf "%.6f", $1 * 3600 + $2 * 60 + $3 }'; }

# time_field FILE PATTERN: the value after the last ": " on the last line with PATTERN.
time_field() { awk -v p="$2" 'index($0, p) { sub(/.*: /, ""); v = $0 } END { print v }' "$1" 2>/dev/null; }

# need CMD...: each command must be in PATH.
need() {
    for b in "$@"; do
        command -v "$b" >/dev/null || die "$b not found in PATH (scripts/setup.sh --test installs it)"
    done
    [ -r "$SIM_SO" ] || die "$SIM_SO is missing (apt-get install ibsim-utils)"
}

# build_binaries BUILD_DIR TARGET...: configures BUILD_DIR (Release) if needed and builds the
# targets; their binaries are then in BUILD_DIR/bin.
build_binaries() {
    local dir=$1; shift
    if [ ! -f "$dir/CMakeCache.txt" ]; then
        echo "$script: configuring $dir (Release)" >&2
        # -Wno-error=maybe-uninitialized: GCC -O3 warns on fabric/topogen_cli.cc (seen 2026-11)
        cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_CXX_FLAGS=-Wno-error=maybe-uninitialized >&2 || die "cmake configure failed"
    fi
    echo "$script: building $* in $dir" >&2
    timeout 3600 cmake --build "$dir" --target "$@" --parallel "$(nproc)" >&2 ||
        die "building $* failed"
}

# gen_fabric SPEC OUT [ARGS...]: writes the ibsim net file of SPEC ("ftree3:16": generator
# and -k) to OUT with ibsm-topogen (TOPOGEN, default the build's), extra ARGS passed on.
gen_fabric() {
    local spec=$1 out=$2; shift 2
    local topogen=${TOPOGEN:-${build_dir:-$here/build}/bin/ibsm-topogen}
    [ -x "$topogen" ] || die "ibsm-topogen not found at $topogen (build it or set TOPOGEN)"
    timeout 600 "$topogen" "${spec%%:*}" -k "${spec##*:}" -o "$out" "$@" >/dev/null ||
        die "generating $spec failed"
}

stop_ibsim() {   # only the ibsim we started, by PID
    [ -n "$ibsim_pid" ] || return 0
    # Each may fail (ibsim already gone): harmless, also under `set -e`.
    kill "$ibsim_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$ibsim_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$ibsim_pid" 2>/dev/null || true
    wait "$ibsim_pid" 2>/dev/null || true
    ibsim_pid=""
}

# start_ibsim NETFILE LOG: a fresh ibsim with its own IBSIM_SOCKNAME (exported), -N/-S/-P
# sized from the net file and -L 49152; sets ibsim_pid and waits until its sockets exist.
# With IBSIM_CONSOLE set to a FIFO, ibsim reads console commands from it.
start_ibsim() {
    local net=$1 log=$2 nn ns np
    read -r nn ns np < <(awk '
        /^Switch/           { n++; s++; p += $2 + 1 }
        /^(Ca|Hca|Rt)[ \t]/ { n++;       p += $2 }
        END { print n + 0, s + 0, p + 0 }' "$net")
    export IBSIM_SOCKNAME="${script//_/}$$x$RANDOM"
    if [ -n "${IBSIM_CONSOLE:-}" ]; then
        # With a console: commands written to the FIFO $IBSIM_CONSOLE (unlink, ...).
        ibsim -s -N $((nn + 64)) -S $((ns + 16)) -P $((np + 1024)) -L 49152 "$net" \
            >"$log" 2>&1 <"$IBSIM_CONSOLE" &
    else
        ibsim -s -n -N $((nn + 64)) -S $((ns + 16)) -P $((np + 1024)) -L 49152 "$net" \
            >"$log" 2>&1 </dev/null &
    fi
    ibsim_pid=$!
    local deadline=$((SECONDS + sim_timeout))
    until grep -Eq "@${IBSIM_SOCKNAME}:out9(@|\$)" /proc/net/unix; do
        if ! kill -0 "$ibsim_pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            echo "$script: ibsim did not come up on $net; log:" >&2
            tail -5 "$log" >&2
            stop_ibsim
            return 1
        fi
        sleep 0.1
    done
}
