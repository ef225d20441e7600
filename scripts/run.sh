#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds ibsm, and runs ibsmd on the in-process simulator
# loaded with the bundled fat tree (3-tier, 8-port switches: 128 hosts, 80 switches).
# Extra arguments go to ibsmd; the default is one sweep (-o).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$(nproc)" ibsmd
if [ $# -eq 0 ]; then set -- -o; fi
exec ./build/bin/ibsmd --sim sim/topologies/ftree3-k8.net "$@"
