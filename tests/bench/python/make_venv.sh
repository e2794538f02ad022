#!/usr/bin/env bash
# Creates the benchmark and fixture venv from requirements.txt (exact pins):
# PyTorch 2.15, timm, transformers, sacrebleu and numpy, for the scripts of
# tests/bench/ that compare cmha with PyTorch and for tests/reference's
# fixture scripts. Nothing here is a dependency of cmha or of CI.
#
#   tests/bench/python/make_venv.sh            # into tests/bench/python/venv (git-ignored)
#   CMHA_BENCH_VENV=/some/dir tests/bench/python/make_venv.sh
#
# The CPU wheel of torch comes from PyTorch's own index when pip reaches it;
# otherwise from PyPI, whose Linux wheel also pulls the CUDA runtime
# packages (about 3 GB, unused on a CPU: requirements-cuda-runtime.txt pins
# them). Re-running it on an existing venv only installs what is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${CMHA_BENCH_VENV:-$here/venv}"
python="${PYTHON:-python3}"
"$python" -c 'import sys; assert sys.version_info[:2] >= (3, 10), "needs Python >= 3.10"' \
  || { echo "make_venv.sh: $python is older than 3.10; set PYTHON=" >&2; exit 2; }
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --disable-pip-version-check)
if "$venv/bin/python" -m pip download --no-deps --dest "$(mktemp -d)" --index-url https://download.pytorch.org/whl/cpu \
     torch==2.15.0 --quiet --timeout 20 --retries 0 >/dev/null 2>&1; then
  "${pip[@]}" --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple \
    -r "$here/requirements.txt"
else
  "${pip[@]}" -r "$here/requirements.txt" -r "$here/requirements-cuda-runtime.txt"
fi
"$venv/bin/python" -c 'import torch, timm, transformers, sacrebleu, numpy; print("venv", __import__("sys").prefix, "torch", torch.__version__, "timm", timm.__version__, "transformers", transformers.__version__, "sacrebleu", sacrebleu.__version__, "numpy", numpy.__version__)'
