#!/usr/bin/env bash
# Installs the Debian packages ibsm needs. Idempotent: packages already present are skipped,
# so a second run costs a second.
#
#   scripts/setup.sh          what building and running ibsmd needs (scripts/run.sh)
#   scripts/setup.sh --test   that, plus what the test suite and the comparisons need
#                             (scripts/test.sh): GoogleTest, ibsim, OpenSM, the diags, clang,
#                             ccache and lld for the build's time,
#                             and dpkg-dev, lintian, man-db, file, logrotate for the package
#                             test...
#
# OpenSM is a test peer here, never a service: with --test its package is installed with
# service starts refused (policy-rc.d) and opensm.service is left disabled, so a management
# node that runs the tests does not boot with a second subnet manager.
set -euo pipefail

run_packages=(
  build-essential cmake ninja-build pkg-config
  libibumad-dev libboost-dev libsqlite3-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
)
test_packages=(
  libgtest-dev googletest libgmock-dev libbenchmark-dev libibmad-dev python3 ccache lld
  ibsim-utils infiniband-diags opensm ibutils
  clang libclang-rt-14-dev
  systemd chromium
  dpkg-dev lintian man-db file logrotate
)

packages=("${run_packages[@]}")
with_tests=0
case "${1:-}" in
  "") ;;
  --test) with_tests=1; packages+=("${test_packages[@]}") ;;
  *) echo "usage: scripts/setup.sh [--test]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
policy=""
if [ $with_tests = 1 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
  # No daemon the packages bring (opensm above all) starts while they install.
  policy=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ $with_tests = 1 ] && command -v systemctl >/dev/null 2>&1 &&
   [ -e /lib/systemd/system/opensm.service ]; then
  $SUDO systemctl disable opensm.service >/dev/null 2>&1 || true
  echo "setup: opensm is installed as a test peer only; opensm.service is disabled"
fi
