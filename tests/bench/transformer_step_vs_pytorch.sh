#!/usr/bin/env bash
# Training-step throughput of cmha against PyTorch on the same model, batch,
# optimiser and thread count, in one run, f32 and bf16 (cmha's train.bf16
# beside PyTorch's torch.autocast(bfloat16) around forward and loss): all four
# interleaved, `repeats` times; medians of target tokens per second, and every
# ratio in one table (cmha/torch in each dtype, and bf16/f32 on each side).
#
#   tests/bench/transformer_step_vs_pytorch.sh [threads] [steps] [repeats] [recipes...]
#
# Needs build/cmha and the benchmark venv (tests/bench/python/make_venv.sh:
# PyTorch 2.15); CMHA_BENCH_PYTHON=debian measures Debian's python3-torch 1.13
# instead (apt-get install python3-torch libopenblas0-openmp). The first line
# says which PyTorch was measured. step_table_vs_pytorch.sh adds torch.compile,
# the ViT and the GEMM ceilings.
set -euo pipefail
cd "$(dirname "$0")/../.."
py="$(tests/bench/python/bench_python.sh)"
"$py" -c 'import sys, torch; print(f"PyTorch {torch.__version__} ({sys.executable})")'
threads=${1:-1}
steps=${2:-5}
repeats=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
recipes=("$@")
[ ${#recipes[@]} -gt 0 ] || recipes=(recipes/bench/transformer_small_concat_dk256.yaml recipes/bench/transformer_small_collab_dk64.yaml)
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
printf '%-36s %3s %10s %10s %10s %10s %7s %7s %9s %9s\n' recipe thr cmha_f32 torch_f32 cmha_bf16 torch_bf16 \
  f32_x bf16_x cmha_bf/f torch_bf/f
for recipe in "${recipes[@]}"; do
  cf=() tf=() cb=() tb=()
  for ((r = 0; r < repeats; ++r)); do
    cf+=("$(build/cmha bench "$recipe" --steps "$steps" --warmup 1 --threads "$threads" train.bf16=false | field tokens_per_s)")
    tf+=("$("$py" tests/bench/pytorch_transformer_bench.py "$recipe" --steps "$steps" --warmup 1 --threads "$threads" | field tokens_per_s)")
    cb+=("$(build/cmha bench "$recipe" --steps "$steps" --warmup 1 --threads "$threads" train.bf16=true | field tokens_per_s)")
    tb+=("$("$py" tests/bench/pytorch_transformer_bench.py "$recipe" --steps "$steps" --warmup 1 --threads "$threads" --bf16 | field tokens_per_s)")
  done
  a=$(printf '%s\n' "${cf[@]}" | median)
  b=$(printf '%s\n' "${tf[@]}" | median)
  c=$(printf '%s\n' "${cb[@]}" | median)
  d=$(printf '%s\n' "${tb[@]}" | median)
  printf '%-36s %3s %10.0f %10.0f %10.0f %10.0f %7s %7s %9s %9s\n' "$(basename "$recipe")" "$threads" "$a" "$b" "$c" "$d" \
    "$(ratio "$a" "$b")" "$(ratio "$c" "$d")" "$(ratio "$c" "$a")" "$(ratio "$d" "$b")"
done
