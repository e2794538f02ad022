#!/usr/bin/env bash
# Proves, on a machine without a GPU, what tests/gpu/check.sh needs of the
# bundle on a GPU machine that has none of Debian's libraries: in a minimal
# Debian 12 root (debootstrap --variant=minbase: no compiler, no -dev package,
# no oneDNN, yaml-cpp, SentencePiece, ICU, OpenBLAS or Open MPI), the
# bundle's cmha and cmha_tests start and find every library they need, and
# check.sh's parity part passes on the emulated GPU (CMHA_EMULATE_CUDA=1):
# everything but the GPU kernels themselves. Run as root after
# tests/gpu/make_bundle.sh:
#
#   tests/gpu/prove_in_chroot.sh [ROOT_DIR]     # default /var/tmp/cmha-bare-root
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BARE=${1:-/var/tmp/cmha-bare-root}
[ "$(id -u)" -eq 0 ] || { echo "prove_in_chroot: needs root (debootstrap, chroot)" >&2; exit 2; }
[ -f "$ROOT/gpu-bundle/bundle.tar.xz" ] || { echo "prove_in_chroot: run tests/gpu/make_bundle.sh first" >&2; exit 2; }
if [ ! -x "$BARE/bin/bash" ]; then
  command -v debootstrap >/dev/null || apt-get install -y --no-install-recommends debootstrap >/dev/null
  debootstrap --variant=minbase bookworm "$BARE" http://deb.debian.org/debian >/tmp/cmha-debootstrap.log
fi
# The one package added: xz to unpack the bundle (the GPU machine's python3 does it there).
[ -x "$BARE/usr/bin/xz" ] || chroot "$BARE" /bin/sh -c 'apt-get install -y --no-install-recommends xz-utils' >/dev/null
# The tracked tree (what the device tool sends) and the bundle (what it carries).
rm -rf "$BARE/repo" && mkdir -p "$BARE/repo"
git -C "$ROOT" archive HEAD | tar -x -C "$BARE/repo"
cp -r "$ROOT/gpu-bundle" "$BARE/repo/"
for lib in libdnnl libyaml-cpp libsentencepiece libicuuc libopenblas libmpi; do
  if ls "$BARE"/usr/lib/x86_64-linux-gnu/$lib.so* >/dev/null 2>&1; then
    echo "prove_in_chroot: $lib is in the bare root: it proves nothing" >&2
    exit 1
  fi
done
# What the GPU machine's CUDA toolkit provides and the bundle leaves out: the runtime.
mkdir -p "$BARE/usr/local/cuda/lib64"
cp -L /usr/local/cuda/lib64/libcudart.so.13 "$BARE/usr/local/cuda/lib64/"
mount -t proc proc "$BARE/proc"
trap 'umount "$BARE/proc"' EXIT
chroot "$BARE" /bin/bash -c "cd /repo && OUT=/repo/out CMHA_EMULATE_CUDA=1 tests/gpu/check.sh --parity-only"
