#!/usr/bin/env bash
# Coverage-guided fuzzing of every *_fuzz.cc target with clang's libFuzzer, ASan and UBSan.
# Each target starts from its kept corpus (tests/fuzz/corpus/NAME) and runs SECONDS seconds;
# new interesting inputs go to build-fuzz/corpus/NAME (copy the useful ones into the kept
# corpus), crashes to build-fuzz/findings/NAME. A crash input kept in tests/fuzz/corpus is
# replayed by the normal suite (FuzzReplay.NAME) from then on.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (default 60 s, every target)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

./scripts/setup.sh
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DIBSM_FUZZ=ON -DIBSM_SANITIZE=ON -DIBSM_WERROR=OFF >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in $(find . -path ./build\* -prune -o -name '*_fuzz.cc' -print | sort); do
    targets+=("$(basename "$f" .cc)")
  done
fi
ninja -C build-fuzz -j"$(nproc)" "${targets[@]}"

status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t"
  echo "== $t: ${seconds} s"
  if ! (cd "build-fuzz/findings/$t" && \
        ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "../../bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
          -print_final_stats=1 "../../corpus/$t" "../../../tests/fuzz/corpus/$t" 2>&1 | \
        grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY|.*crash-)" ); then
    :
  fi
  if ls "build-fuzz/findings/$t"/crash-* "build-fuzz/findings/$t"/leak-* "build-fuzz/findings/$t"/timeout-* >/dev/null 2>&1; then
    echo "!! $t: findings in build-fuzz/findings/$t"
    status=1
  fi
done
exit $status
