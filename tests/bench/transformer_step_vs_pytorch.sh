#!/usr/bin/env bash
# Training-step throughput of cmha against PyTorch 1.13 on the same model,
# batch, optimiser and thread count, in one run: both sides interleaved,
# `repeats` times, medians of target tokens per second and their ratio.
#
#   tests/bench/transformer_step_vs_pytorch.sh [threads] [steps] [repeats] [recipes...]
#
# Needs build/cmha and Debian's python3-torch with OpenBLAS
# (apt-get install python3-torch libopenblas0-openmp).
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=${1:-1}
steps=${2:-5}
repeats=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
recipes=("$@")
[ ${#recipes[@]} -gt 0 ] || recipes=(recipes/bench/transformer_small_concat_dk256.yaml recipes/bench/transformer_small_collab_dk64.yaml)
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
printf '%-48s %7s %12s %12s %7s\n' recipe threads cmha_tok/s torch_tok/s ratio
for recipe in "${recipes[@]}"; do
  ours=() theirs=()
  for ((r = 0; r < repeats; ++r)); do
    ours+=("$(build/cmha bench "$recipe" --steps "$steps" --warmup 1 --threads "$threads" | field tokens_per_s)")
    theirs+=("$(/usr/bin/python3 tests/bench/pytorch_transformer_bench.py "$recipe" --steps "$steps" --warmup 1 --threads "$threads" | field tokens_per_s)")
  done
  a=$(printf '%s\n' "${ours[@]}" | median)
  b=$(printf '%s\n' "${theirs[@]}" | median)
  printf '%-48s %7s %12.0f %12.0f %7.2f\n' "$(basename "$recipe")" "$threads" "$a" "$b" "$(python3 -c "print($a/$b)")"
done
