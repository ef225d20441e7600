#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds ibsm, and runs ibsmd on the in-process simulator
# loaded with the bundled fat tree (3-tier, 8-port switches: 128 hosts, 80 switches).
# Settings: conf/examples/ibsmd-sim.conf (state, dumps and guid2lid go to ./out).
# Extra arguments go to ibsmd; the default is one sweep (-o). Without -o it keeps sweeping
# every 10 s until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$(nproc)" ibsmd
mkdir -p out
if [ $# -eq 0 ]; then set -- -o; fi
status=0
./build/bin/ibsmd -F conf/examples/ibsmd-sim.conf --sim sim/topologies/ftree3-k8.net "$@" || status=$?
echo
echo "ibsmd exited with status $status. Files it wrote:"
ls -l out/
exit $status
