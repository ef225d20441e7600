#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds ibsm, and runs the whole test suite twice: an
# AddressSanitizer + UndefinedBehaviorSanitizer build (Debug) and a release build
# (RelWithDebInfo) of the same tests. Ends with the 10 slowest tests of each build.
# Usage: scripts/test.sh [--no-sanitize]
#
# The README's "Build and test times" says where the time goes and how it was measured.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=1
[ "${1:-}" = "--no-sanitize" ] && sanitize=0

./scripts/setup.sh --test
jobs=$(nproc)
status=0
logs=()

# ctest's per-test lines ("  12/234 Test  #56: Name ....   Passed    1.23 sec"), slowest first.
slowest() {
  sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) .*[[:space:]]([0-9.]+) sec$/\2 \1/p' "$1" |
    sort -rn | awk 'NR <= 10' | awk '{ printf "  %8.2f s  %s\n", $1, $2 }'
}

# ctest starts the tests it knows to be slow first (longest first packs two cores best), from
# the times of its last run in that build tree; a fresh tree starts from the times kept in
# tests/ctest-costs/ (a scheduling hint only: every test runs whatever it says).
seed_costs() {
  local file="$1/Testing/Temporary/CTestCostData.txt"
  [ -e "$file" ] && return 0
  mkdir -p "$(dirname "$file")"
  cp "$2" "$file"
}

# Sanitizer build first: it takes longest to build and to test, and its failures are the
# ones that need the most reading.
if [ "$sanitize" = 1 ]; then
  echo "== sanitizer build (ASan + UBSan)"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DIBSM_SANITIZE=ON -DIBSM_TESTS=ON >/dev/null
  ninja -C build-asan -j"$jobs"
  echo "== tests under ASan + UBSan"
  seed_costs build-asan tests/ctest-costs/asan.txt
  # libumad2sim is preloaded into ibsim clients; ASan must tolerate not being first, and
  # tests/asan.supp silences a buffer overrun inside libumad2sim itself. The sanitized tests
  # are CPU-bound: one per core.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0:suppressions=$PWD/../tests/asan.supp \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest -j"$jobs" --timeout 600 --output-on-failure) 2>&1 | tee build-asan/ctest.log || status=1
  logs+=("ASan + UBSan:build-asan/ctest.log")
fi

echo "== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIBSM_TESTS=ON >/dev/null
ninja -C build -j"$jobs"
echo "== tests (release build)"
seed_costs build tests/ctest-costs/release.txt
# Most release tests wait on ibsim, the daemon or a timer rather than compute: two per core.
(cd build && ctest -j"$((jobs * 2))" --timeout 600 --output-on-failure) 2>&1 | tee build/ctest.log || status=1
logs+=("release:build/ctest.log")

for entry in "${logs[@]}"; do
  echo "== 10 slowest tests, ${entry%%:*} build"
  slowest "${entry#*:}"
done
exit $status
