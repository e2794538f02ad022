#!/bin/sh
# Installs everything cmha needs from Debian 12 packages, then configures and
# builds it. Works on a fresh minimal Debian (nothing preinstalled, not even a
# compiler) and is safe to run again: apt skips what is there, CMake and Ninja
# rebuild only what changed.
#
#   ./install.sh                         # build/ in Release
#   ./install.sh -DCMHA_CUDA=OFF         # extra arguments go to cmake
#   CMHA_BUILD_DIR=build-asan ./install.sh -DCMAKE_BUILD_TYPE=Debug -DCMHA_SANITIZE='address;undefined'
set -eu

cd "$(dirname "$0")"
BUILD_DIR=${CMHA_BUILD_DIR:-build}
LOG=${TMPDIR:-/tmp}/cmha-install-apt.log

# Installed without "Recommends" (they would pull in Mesa and X11); the one
# recommendation the build needs is named: oneDNN's CMake package requires
# OpenCL (ocl-icd-opencl-dev), which libdnnl-dev only recommends.
PACKAGES="g++ cmake ninja-build pkg-config libdnnl-dev ocl-icd-opencl-dev libyaml-cpp-dev
libsentencepiece-dev sentencepiece nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
zlib1g-dev libicu-dev dataset-fashion-mnist python3 python3-matplotlib ca-certificates
openmpi-bin libopenmpi-dev"
PACKAGES="$PACKAGES libjpeg62-turbo-dev libpng-dev"  # image decoding (framework/data/image.cpp)
PACKAGES="$PACKAGES liblapacke-dev libopenblas-openmp-dev"  # LAPACK/BLAS of framework/compress/dense_linalg.cpp
PACKAGES="$PACKAGES libcli11-dev"  # the argument parser of every subcommand (framework/cli/command_line.h)
PACKAGES="$PACKAGES ccache"  # a rebuild (another build tree, a second clone) reuses every unchanged object
PACKAGES="$PACKAGES libgloo-dev"  # CPU ranks under torchrun-style variables (framework/distributed/gloo_communicator.cpp)

say() { printf 'install.sh: %s\n' "$*"; }
fail() {
  say "$*" >&2
  if [ -s "$LOG" ]; then
    say "last lines of $LOG:" >&2
    tail -n 40 "$LOG" >&2
  fi
  exit 1
}

# root runs apt directly; anyone else needs sudo.
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || fail "not root and sudo is not installed: run this script as root"
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

# Only ask apt (and for root rights) when a package is missing, so a second run
# is quick and works offline.
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $p"
done

if [ -n "$missing" ]; then
  : >"$LOG"
  say "installing Debian packages:$missing (log: $LOG)"
  $SUDO apt-get update >>"$LOG" 2>&1 || fail "apt-get update failed"
  for p in $missing; do
    if ! apt-cache policy "$p" 2>>"$LOG" | grep -q 'Candidate: [^(]'; then
      fail "package '$p' is not available from the configured apt sources (this script expects Debian 12 bookworm with 'main')"
    fi
  done
  # shellcheck disable=SC2086
  $SUDO apt-get install -y --no-install-recommends $missing >>"$LOG" 2>&1 \
    || fail "apt-get install failed"
else
  say "all Debian packages present"
fi

say "configuring $BUILD_DIR"
CONF_LOG=${TMPDIR:-/tmp}/cmha-install-configure.log
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMHA_UNITY_BUILD=ON "$@" >"$CONF_LOG" 2>&1 || {
  cat "$CONF_LOG" >&2
  say "cmake configure failed" >&2
  exit 1
}
grep '^-- cmha:' "$CONF_LOG" || true

JOBS=$(nproc 2>/dev/null || echo 2)
say "building with $JOBS jobs"
cmake --build "$BUILD_DIR" -j "$JOBS"
say "done: $BUILD_DIR/cmha is ready (try '$BUILD_DIR/cmha --help')"
