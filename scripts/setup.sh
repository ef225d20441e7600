#!/usr/bin/env bash
# Installs every Debian package ibsm needs to build, test and compare against real tools.
# Idempotent: packages already present are skipped, so a second run costs seconds.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  libibumad-dev libibverbs-dev libibmad-dev
  libboost-dev libsqlite3-dev libspdlog-dev libfmt-dev
  libgtest-dev googletest libgmock-dev libbenchmark-dev nlohmann-json3-dev
  ibsim-utils infiniband-diags opensm ibutils
  clang libclang-rt-14-dev
  systemd chromium
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
