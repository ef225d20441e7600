#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds ibsm, and runs the whole test suite twice: a
# release build (unit, simulator integration and ibsim end-to-end tests) and an
# AddressSanitizer + UndefinedBehaviorSanitizer build of the same tests.
# Usage: scripts/test.sh [--no-sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=1
[ "${1:-}" = "--no-sanitize" ] && sanitize=0

./scripts/setup.sh
jobs=$(nproc)

echo "== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$jobs"

status=0
if [ "$sanitize" = 1 ]; then
  echo "== sanitizer build (ASan + UBSan)"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DIBSM_SANITIZE=ON >/dev/null
  ninja -C build-asan -j"$jobs"
  echo "== tests under ASan + UBSan"
  # libumad2sim is preloaded into ibsim clients; ASan must tolerate not being first, and
  # tests/asan.supp silences a buffer overrun inside libumad2sim itself.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0:suppressions=$PWD/../tests/asan.supp \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest -j"$jobs" --timeout 600 --output-on-failure) || status=1
fi

echo "== tests (release build)"
(cd build && ctest -j"$jobs" --timeout 600 --output-on-failure) || status=1
exit $status
