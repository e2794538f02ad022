#!/usr/bin/env bash
# Builds what tests/gpu/check.sh runs on a lent GPU machine, which has CUDA,
# cmake and PyTorch but none of Debian's libraries (oneDNN, yaml-cpp,
# SentencePiece, ICU, OpenBLAS, Open MPI...) and no network: cmha and
# cmha_tests built here for sm_90 (the H100/H200), for any x86-64 CPU
# (CMHA_NATIVE=OFF: the device host's CPU model is not this one), and every
# shared library they need that is neither glibc's nor CUDA's, packed into
# gpu-bundle/bundle.tar.xz (ignored by git; the device tool carries it).
#
#   tests/gpu/make_bundle.sh            # about 20 min on 2 cores the first time
# then, with a device:  run(command="tests/gpu/check.sh", carry=["gpu-bundle"])
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${CMHA_GPU_BUILD_DIR:-$ROOT/build-gpu}
BUNDLE=$ROOT/gpu-bundle
say() { printf 'make_bundle: %s\n' "$*"; }

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
say "configuring $BUILD (sm_90, portable x86-64)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMHA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMHA_NATIVE=OFF -DCMHA_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
say "building cmha, cmha_tests and fused_attention_bench"
cmake --build "$BUILD" -j "$(nproc)" --target cmha cmha_tests fused_attention_bench

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "$BUILD/cmha" "$stage/bin/"
cp "$BUILD/tests/cmha_tests" "$stage/bin/"
cp "$BUILD/tests/fused_attention_bench" "$stage/bin/"
# Every library the three need, except glibc's (the device's own is newer) and
# CUDA's (the device's toolkit and driver provide them).
for bin in "$stage/bin/cmha" "$stage/bin/cmha_tests" "$stage/bin/fused_attention_bench"; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*|libcudart.so*|libcublas*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
# The build's compiled-in paths (CMHA_SOURCE_DIR, CMHA_BINARY_DIR) are these:
printf '%s\n%s\n' "$ROOT" "$BUILD" >"$stage/paths"
mkdir -p "$BUNDLE"
tar -C "$stage" -cJf "$BUNDLE/bundle.tar.xz" .
say "$(du -h "$BUNDLE/bundle.tar.xz" | cut -f1) in $BUNDLE/bundle.tar.xz ($(ls "$stage/lib" | wc -l) libraries)"
