#!/bin/sh
# usage: expect_rank_failure.sh CMHA DIR MPIRUN... TEST_BINARY
# Runs the failure drill (rank 1 throws after 3 updates) under MPIRUN and
# checks that the job ends in bounded time with a non-zero status and a
# message naming the rank, and that the last checkpoint still loads.
set -u
cmha=$1
dir=$2
shift 2
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
rm -rf "$dir"
mkdir -p "$dir"
out=$(timeout 60 "$@" --failure-drill "$dir" 2>&1)
rc=$?
echo "$out"
[ "$rc" -ne 124 ] || fail "the job did not end within 60 s: a rank hangs after the other failed"
[ "$rc" -ne 0 ] || fail "the job exited 0 although rank 1 failed"
echo "$out" | grep -q "rank 1 of 2 failed: injected failure after 3 updates" || fail "no message naming rank 1"
last=$(ls "$dir"/checkpoint_*.safetensors 2>/dev/null | sort -V | tail -n 1)
[ -n "$last" ] || fail "no checkpoint in $dir"
"$cmha" info "$last" >/dev/null || fail "the last checkpoint $last does not load"
echo "ok: exit $rc, last checkpoint $last loads"
