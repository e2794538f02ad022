#!/usr/bin/env bash
# Prints the Python interpreter that the benchmarks comparing cmha with
# PyTorch (or numpy) run: the venv of make_venv.sh (PyTorch 2.15, exact pins
# in requirements.txt) unless CMHA_BENCH_PYTHON asks for another:
#   CMHA_BENCH_PYTHON=debian   Debian's /usr/bin/python3 (python3-torch 1.13 on OpenBLAS)
#   CMHA_BENCH_PYTHON=/a/python  that interpreter
# The venv is tests/bench/python/venv, or CMHA_BENCH_VENV. Every benchmark
# prints the interpreter and library versions it measured.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
case "${CMHA_BENCH_PYTHON:-}" in
  "") py="${CMHA_BENCH_VENV:-$here/venv}/bin/python"
      if [ ! -x "$py" ]; then
        echo "bench_python.sh: no benchmark venv at ${py%/bin/python}: run tests/bench/python/make_venv.sh, or set CMHA_BENCH_PYTHON=debian for Debian's PyTorch 1.13" >&2
        exit 2
      fi ;;
  debian) py=/usr/bin/python3 ;;
  *) py="$CMHA_BENCH_PYTHON" ;;
esac
[ -x "$py" ] || { echo "bench_python.sh: $py is not an executable interpreter" >&2; exit 2; }
echo "$py"
