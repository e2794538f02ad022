#!/usr/bin/env bash
# usage: torchrun_like.sh N COMMAND...
# Starts N copies of COMMAND on this machine the way torchrun does (RANK,
# WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; no MPI)
# and exits with the first non-zero status among them (0 when all succeed).
# Unlike torchrun it does not stop the others when one fails: the tests check
# that cmha ends the job itself.
set -u
n=$1
shift
port=${MASTER_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=$port \
    "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do
  wait "$pid"
  status=$?
  [ "$rc" -ne 0 ] || rc=$status
done
exit "$rc"
