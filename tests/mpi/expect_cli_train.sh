#!/bin/sh
# usage: [EXPECT_BACKEND=gloo] expect_cli_train.sh CMHA DIR LAUNCHER...
# `mpirun -np 2 cmha train` (or another 2-process LAUNCHER) on the Fashion-MNIST ViT recipe shrunk to a few updates:
# it must succeed with rank 0 alone writing, and its checkpoint must resume
# on one process.
set -u
cmha=$1
dir=$2
shift 2
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
rm -rf "$dir"
tiny="train.save_dir=$dir train.max_updates=3 train.max_epochs=0 train.log_every=1 model.depth=1 model.d_model=16
      model.ffn_dim=16 model.attention.heads=2 model.attention.key_dim=8 data.batch_size=8 lr.warmup=1 lr.warmup_epochs=0"
recipe="$(cd "$(dirname "$0")/../.." && pwd)/recipes/local/fashion_mnist_vit.yaml"
# shellcheck disable=SC2086
out=$(timeout 100 "$@" "$cmha" train "$recipe" $tiny 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || fail "$1 cmha train exited $rc"
backend=${EXPECT_BACKEND:-mpi}
echo "$out" | grep -q "data parallel: 2 ranks ($backend)" || fail "the run did not say it is data parallel over $backend"
[ "$(echo "$out" | grep -c '^cmha train: .* run dir ')" -eq 1 ] || fail "expected rank 0 alone to print the start line"
[ "$(echo "$out" | grep -c '^cmha train: [0-9]* updates')" -eq 1 ] || fail "expected rank 0 alone to print the end line"
[ -f "$dir/checkpoint_3.safetensors" ] || fail "no checkpoint_3 in $dir"
[ "$(grep -c '"split":"train"' "$dir/metrics.jsonl")" -eq 3 ] || fail "metrics.jsonl should have 3 train rows (rank 0 only)"
# shellcheck disable=SC2086
out=$(timeout 60 "$cmha" train "$recipe" $tiny train.max_updates=4 --resume 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || fail "resuming on one process exited $rc"
echo "$out" | grep -q "resumed from $dir/checkpoint_3.safetensors at update 3" || fail "did not resume from update 3"
echo "$out" | grep -q "the checkpoint was written by 2 ranks" || fail "no note about the re-sharded data order"
echo "ok"
