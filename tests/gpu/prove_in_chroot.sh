#!/usr/bin/env bash
# Proves, on a machine without a GPU, what tests/gpu/check.sh needs of the
# bundle on a GPU machine that has none of Debian's libraries: in a minimal
# Debian 12 root (debootstrap --variant=minbase: no compiler, no -dev package,
# no oneDNN, yaml-cpp, SentencePiece, ICU, OpenBLAS or Open MPI), the
# bundle's cmha and cmha_tests start and find every library they need, with
# CUDA's libraries only where PyTorch's pip wheels put them (no
# /usr/local/cuda: site-packages/nvidia/<lib>/lib), and check.sh runs end to
# end on the asynchronous emulated GPU (CMHA_EMULATE_CUDA=async) under its
# deadline and prints its table: everything but the GPU kernels themselves.
# Run as root after tests/gpu/make_bundle.sh:
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
# CUDA's libraries as PyTorch's pip wheels lay them out (nvidia-cuda-runtime,
# nvidia-cublas, nvidia-cuda-nvrtc, nvidia-cudnn, nvidia-nccl), and nothing
# in /usr/local/cuda.
rm -rf "$BARE/usr/local/cuda" "$BARE/usr/local/lib/python3.11"
SITE=$BARE/usr/local/lib/python3.11/dist-packages/nvidia
LIB=/usr/local/cuda/lib64
wheel() {  # WHEEL FILE...
  local dir=$SITE/$1/lib
  shift
  mkdir -p "$dir"
  for f in "$@"; do cp -L "$f" "$dir/"; done
}
wheel cuda_runtime $LIB/libcudart.so.1?
wheel cublas $LIB/libcublasLt.so.1?
wheel cuda_nvrtc $LIB/libnvrtc.so.1? $LIB/libnvrtc-builtins.so.1?.?
wheel cudnn $LIB/libcudnn*.so.9
wheel nccl "$(ls $LIB/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2 2>/dev/null | head -1)"
mount -t proc proc "$BARE/proc"
trap 'umount "$BARE/proc"' EXIT
set +e
chroot "$BARE" /bin/bash -c "cd /repo && OUT=/repo/out CMHA_EMULATE_CUDA=async CHECK_DEADLINE_S=${CHECK_DEADLINE_S:-420} tests/gpu/check.sh"
rc=$?
set -e
LOG=$BARE/repo/out/check.log
grep -q 'summary after' "$LOG" || { echo "prove_in_chroot: check.sh printed no table (rc $rc)" >&2; exit 1; }
grep -qE '^libraries +ok' "$BARE/repo/out/summary.tsv" 2>/dev/null || grep -qP '^libraries\tok' "$BARE/repo/out/summary.tsv" ||
  { echo "prove_in_chroot: the wheel layout's libraries were not all found (rc $rc)" >&2; exit 1; }
echo "prove_in_chroot: check.sh ran end to end in $(grep -o 'summary after [0-9]* s' "$LOG") (rc $rc)"
