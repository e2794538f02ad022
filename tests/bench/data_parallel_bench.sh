#!/usr/bin/env bash
# Data-parallel throughput on one machine: `cmha bench` with 1 rank × 1 thread
# against 2 ranks × 1 thread under mpirun (each rank the recipe's whole bench
# batch, so tokens/s counts both ranks' tokens), and 2 ranks with the gradient
# exchange after the backward pass instead of overlapping it. The three run
# interleaved `repeats` times; medians. Prints the speed-up of 2 ranks and the
# fraction of the all-reduce the backward pass hides:
#   hidden = 1 - exchange left after backward (overlap) / exchange (no overlap)
#
#   tests/bench/data_parallel_bench.sh [steps] [repeats] [recipe] [key=value ...]
#
# key=value overrides go to every run (e.g. train.dist_bucket_mb=5).
#
# The 2 ranks start under mpirun (the mpi backend), or with DP_LAUNCH=gloo
# under torchrun-style variables (tests/mpi/torchrun_like.sh: the gloo
# backend, whose communication thread progresses the exchange by itself).
# Needs build/cmha built with MPI (openmpi-bin, libopenmpi-dev) or Gloo
# (libgloo-dev). Take figures with `uptime` load below 1: the two ranks need
# both cores of this machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-5}
repeats=${2:-3}
recipe=${3:-recipes/bench/transformer_small_concat_dk256.yaml}
shift $(( $# < 3 ? $# : 3 ))
overrides=("$@")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # root in containers
mpirun="mpirun -np 2 --oversubscribe --bind-to none"
[ "${DP_LAUNCH:-mpi}" = gloo ] && mpirun="tests/mpi/torchrun_like.sh 2"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
# bench LAUNCHER [key=value...]: LAUNCHER is "" or the mpirun command line (split into words).
bench() {
  local launcher=$1
  shift
  # shellcheck disable=SC2086
  $launcher build/cmha bench "$recipe" --steps "$steps" --warmup 1 --threads 1 ${overrides[@]+"${overrides[@]}"} "$@"
}
echo "load before: $(uptime)"
one=() two=() two_exchange=() flat=() flat_exchange=()
for ((r = 0; r < repeats; ++r)); do
  one+=("$(bench "" | field tokens_per_s)")
  out=$(bench "$mpirun")
  two+=("$(echo "$out" | field tokens_per_s)")
  two_exchange+=("$(echo "$out" | field exchange_ms_median)")
  out=$(bench "$mpirun" train.dist_overlap=false)
  flat+=("$(echo "$out" | field tokens_per_s)")
  flat_exchange+=("$(echo "$out" | field exchange_ms_median)")
done
echo "load after: $(uptime)"
a=$(printf '%s\n' "${one[@]}" | median)
b=$(printf '%s\n' "${two[@]}" | median)
c=$(printf '%s\n' "${flat[@]}" | median)
e=$(printf '%s\n' "${two_exchange[@]}" | median)
f=$(printf '%s\n' "${flat_exchange[@]}" | median)
printf '%-34s %12s %14s\n' setup tokens/s exchange_ms
printf '%-34s %12.0f %14s\n' "1 rank x 1 thread" "$a" "-"
printf '%-34s %12.0f %14.1f\n' "2 ranks x 1 thread, overlap" "$b" "$e"
printf '%-34s %12.0f %14.1f\n' "2 ranks x 1 thread, no overlap" "$c" "$f"
python3 -c "print(f'speed-up 2 ranks / 1 rank: {$b/$a:.2f}x (no overlap {$c/$a:.2f}x); all-reduce hidden behind backward: {max(0.0, 1 - $e/$f)*100:.0f}%')"
