#!/usr/bin/env bash
# The step table against PyTorch eager and torch.compile, 1 and 2 threads
# (step_table_vs_pytorch.py's docstring), in the benchmark venv's interpreter
# (tests/bench/python/bench_python.sh: CMHA_BENCH_PYTHON=debian for Debian's
# PyTorch 1.13, eager only: pass --modes eager).
#
#   tests/bench/step_table_vs_pytorch.sh [--threads 1 2] [--repeats 3] [--steps 3] ...
#
# Needs build/cmha and build/tests/bench/gemm_ceiling
# (ninja -C build cmha gemm_ceiling). About an hour on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
py="$(tests/bench/python/bench_python.sh)"
exec "$py" tests/bench/step_table_vs_pytorch.py "$@"
