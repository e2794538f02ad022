#!/usr/bin/env bash
# The one GPU check of cmha: run on a machine with an NVIDIA GPU from the
# repository root, with gpu-bundle/ made by tests/gpu/make_bundle.sh (the
# device tool: run(command="tests/gpu/check.sh", carry=["gpu-bundle"],
# timeout_s=540)). It prints and writes to $OUT (or /tmp/cmha-gpu):
#   1. the GPU (nvidia-smi, cmha info --devices);
#   2. the parity suite: every kernel-table entry GPU vs CPU, whole training
#      runs of every attention type and the ViT, the pool after warm-up
#      (parity.log, parity.xml);
#   3. training steps per second, cmha vs PyTorch on the same GPU, f32 and
#      bf16: the local bench recipes and WMT transformer-base (bench.tsv).
# Each part has its own time limit, so one hang cannot take the whole loan.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/cmha-gpu}
mkdir -p "$OUT"
LOG=$OUT/check.log
say() { printf 'check: %s\n' "$*" | tee -a "$LOG"; }
started=$(date +%s)

# ---- the bundle, where the build put it -------------------------------------------
[ -f "$ROOT/gpu-bundle/bundle.tar.xz" ] || { say "no gpu-bundle/bundle.tar.xz: run tests/gpu/make_bundle.sh first and carry gpu-bundle"; exit 2; }
STAGE=/tmp/cmha-bundle
rm -rf "$STAGE" && mkdir -p "$STAGE" && tar -C "$STAGE" -xJf "$ROOT/gpu-bundle/bundle.tar.xz"
SRC_DIR=$(sed -n 1p "$STAGE/paths")
BIN_DIR=$(sed -n 2p "$STAGE/paths")
# The tests find the sources and the cmha binary at the paths compiled in.
if [ "$SRC_DIR" != "$ROOT" ]; then
  mkdir -p "$(dirname "$SRC_DIR")"
  [ -e "$SRC_DIR" ] || ln -s "$ROOT" "$SRC_DIR"
fi
mkdir -p "$BIN_DIR/tests"
cp "$STAGE/bin/cmha" "$BIN_DIR/cmha"
cp "$STAGE/bin/cmha_tests" "$BIN_DIR/tests/cmha_tests"
export LD_LIBRARY_PATH="$STAGE/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
CMHA=$BIN_DIR/cmha
PY=$(command -v python3)

# ---- 1. the machine ------------------------------------------------------------------
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG"
timeout 60 "$CMHA" info --devices 2>&1 | tee -a "$LOG"

# ---- 2. parity ---------------------------------------------------------------------------
say "parity suite"
timeout 300 "$BIN_DIR/tests/cmha_tests" --gtest_filter='CudaParity*:CudaRuntime*' \
  --gtest_output="xml:$OUT/parity.xml" >"$OUT/parity.log" 2>&1
rc=$?
grep -E '^\[  (FAILED|PASSED|SKIPPED) |tests ran' "$OUT/parity.log" | tee -a "$LOG"
[ $rc -eq 0 ] || { say "parity suite failed (rc $rc): failures follow"; grep -B2 -A12 'Failure' "$OUT/parity.log" | head -150 | tee -a "$LOG"; }

# ---- 3. speed ------------------------------------------------------------------------------
say "training steps: cmha vs PyTorch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
printf 'recipe\tdtype\tframework\ttokens_per_s\tstep_ms\tpeak_mb\tpool_growths\n' >"$OUT/bench.tsv"
bench_pair() {  # RECIPE LABEL EXTRA-OVERRIDES...
  local recipe=$1 label=$2
  shift 2
  for bf16 in false true; do
    local dtype=f32
    [ "$bf16" = true ] && dtype=bf16
    local c
    c=$(timeout 120 "$CMHA" bench "$recipe" --device cuda --steps 10 --warmup 3 train.bf16=$bf16 "$@" 2>>"$LOG" | tail -1)
    local p
    p=$(timeout 120 "$PY" "$ROOT/tests/bench/pytorch_transformer_bench.py" "$recipe" --device cuda --steps 10 \
      --warmup 3 $([ "$bf16" = true ] && echo --bf16) $(printf -- '--set %s ' "$@") 2>>"$LOG" | tail -1)
    for j in "$c" "$p"; do
      "$PY" - "$label" "$dtype" "$j" >>"$OUT/bench.tsv" <<'PYEOF'
import json, sys
label, dtype, line = sys.argv[1:4]
try:
    r = json.loads(line)
except Exception:
    print(f"{label}\t{dtype}\t(no result)\t\t\t\t"); sys.exit()
print(f"{label}\t{dtype}\t{r.get('framework')}\t{r.get('tokens_per_s', 0):.0f}\t{r.get('step_ms_median', 0):.2f}\t"
      f"{r.get('gpu_peak_reserved_mb', r.get('peak_mb', 0)):.0f}\t{r.get('gpu_pool_growths_timed', '')}")
PYEOF
    done
  done
}
bench_pair "$ROOT/recipes/bench/transformer_small_concat_dk256.yaml" small-concat-dk256
bench_pair "$ROOT/recipes/bench/transformer_small_collab_dk64.yaml" small-collab-dk64
bench_pair "$ROOT/recipes/wmt14_en_de/concat_dk512.yaml" wmt-base-concat bench.batch_size=256
bench_pair "$ROOT/recipes/wmt14_en_de/collaborative_dk128.yaml" wmt-base-collab-dk128 bench.batch_size=256
column -t -s $'\t' "$OUT/bench.tsv" | tee -a "$LOG"
say "done in $(($(date +%s) - started)) s; results in $OUT"
