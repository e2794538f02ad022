#!/usr/bin/env bash
# The one GPU check of cmha: run on a machine with an NVIDIA GPU from the
# repository root, with gpu-bundle/ made by tests/gpu/make_bundle.sh (the
# device tool: run(command="tests/gpu/check.sh", carry=["gpu-bundle"],
# timeout_s=540)). It prints and writes to $OUT (or /tmp/cmha-gpu):
#   1. the GPU (nvidia-smi, cmha info --devices);
#   2. the parity suite: every kernel-table entry GPU vs CPU, whole training
#      runs of every attention type and the ViT, the pool after warm-up
#      (parity.log, parity.xml);
#   3. fused (cuDNN SDPA) against unfused attention, forward + backward per
#      attention type and D_k at the WMT and DeiT-B3 shapes, and decoding
#      sentences/s, greedy and beam, GPU against CPU (fused_attention.txt);
#   4. the GPU's bf16 GEMM ceiling (measured), then training steps of
#      transformer-base (~25k tokens) and DeiT-B3 (128 images), concat and
#      collaborative, f32 and bf16, cmha and PyTorch on the same GPU: one
#      table of units/s, step ms, MFU against the ceiling, the ratio to
#      PyTorch and the pool's growths after warm-up (bench.tsv).
# The training steps run with fused attention where it applies (cmha bench
# writes each attention place's path and reason to check.log).
# It must finish within 8 minutes (each part has a time limit).
# Each part has its own time limit, so one hang cannot take the whole loan.
#
#   tests/gpu/check.sh [--parity-only]     (--parity-only: parts 1 and 2)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PARITY_ONLY=0
[ "${1:-}" = "--parity-only" ] && PARITY_ONLY=1
OUT=${OUT:-/tmp/cmha-gpu}
mkdir -p "$OUT"
LOG=$OUT/check.log
say() { printf 'check: %s\n' "$*" | tee -a "$LOG"; }
started=$(date +%s)

# ---- the bundle, where the build put it -------------------------------------------
[ -f "$ROOT/gpu-bundle/bundle.tar.xz" ] || { say "no gpu-bundle/bundle.tar.xz: run tests/gpu/make_bundle.sh first and carry gpu-bundle"; exit 2; }
STAGE=/tmp/cmha-bundle
rm -rf "$STAGE" && mkdir -p "$STAGE"
if command -v xz >/dev/null; then
  tar -C "$STAGE" -xJf "$ROOT/gpu-bundle/bundle.tar.xz"
elif command -v python3 >/dev/null; then  # no xz (a bare image): Python's lzma reads it
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$ROOT/gpu-bundle/bundle.tar.xz" "$STAGE"
fi
[ -f "$STAGE/paths" ] || { say "cannot unpack gpu-bundle/bundle.tar.xz (needs xz or python3)"; exit 2; }
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
[ -f "$STAGE/bin/fused_attention_bench" ] && cp "$STAGE/bin/fused_attention_bench" "$BIN_DIR/tests/fused_attention_bench"
CMHA=$BIN_DIR/cmha
PY=$(command -v python3)
# cmha opens libcudnn.so.9 and libnccl.so.2 by name (dlopen); the CUDA toolkit
# here has neither, PyTorch's wheels do (site-packages/nvidia/{cudnn,nccl}/lib).
TORCH_LIBS=$("$PY" -c 'import glob, os, site
dirs = [d for p in site.getsitepackages() for d in glob.glob(os.path.join(p, "nvidia", "*", "lib"))
        if os.path.basename(os.path.dirname(d)) in ("cudnn", "nccl")]
print(":".join(dirs))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$STAGE/lib:/usr/local/cuda/lib64${TORCH_LIBS:+:$TORCH_LIBS}:${LD_LIBRARY_PATH:-}"

# ---- 1. the machine ------------------------------------------------------------------
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG" ||
  say "no nvidia-smi here"
timeout 60 "$CMHA" info --devices 2>&1 | tee -a "$LOG"

# ---- 2. parity ---------------------------------------------------------------------------
say "parity suite"
timeout 300 "$BIN_DIR/tests/cmha_tests" --gtest_filter='CudaParity*:CudaRuntime*:NcclOneGpu*:FusedAttentionPlan*' \
  --gtest_output="xml:$OUT/parity.xml" >"$OUT/parity.log" 2>&1
rc=$?
grep -E '^\[  (FAILED|PASSED|SKIPPED) |tests ran' "$OUT/parity.log" | tee -a "$LOG"
[ $rc -eq 0 ] || { say "parity suite failed (rc $rc): failures follow"; grep -B2 -A12 'Failure' "$OUT/parity.log" | head -150 | tee -a "$LOG"; }

if [ $PARITY_ONLY -eq 1 ]; then
  say "done in $(($(date +%s) - started)) s (parity only); results in $OUT"
  exit $rc
fi

# ---- 3. fused attention and decoding ------------------------------------------------------
# The parity suite above holds the fused path's parity tests (CudaParity.FusedAttention*).
say "fused vs unfused attention, and GPU decoding"
if [ -x "$BIN_DIR/tests/fused_attention_bench" ]; then
  timeout 100 "$BIN_DIR/tests/fused_attention_bench" --iters 5 --decode-sentences 64 >"$OUT/fused_attention.txt" 2>>"$LOG" ||
    say "fused_attention_bench stopped (rc $?): see check.log"
  tee -a "$LOG" <"$OUT/fused_attention.txt"
else
  say "no fused_attention_bench in the bundle (rebuild it with tests/gpu/make_bundle.sh)"
fi

# ---- 4. speed ------------------------------------------------------------------------------
# The bf16 GEMM ceiling of this GPU, measured here (PyTorch, 8192³, the mean
# of 10 after 3 warm-ups), and the f32 one without TF32, as cmha runs f32.
say "GEMM ceilings (PyTorch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null))"
read -r CEIL_BF16 CEIL_F32 < <(timeout 120 "$PY" - <<'PYEOF' 2>>"$LOG"
import torch
torch.backends.cuda.matmul.allow_tf32 = False
def tflops(dtype, n=8192):
    a = torch.randn(n, n, device="cuda", dtype=dtype); b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3): a @ b
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10): a @ b
    e.record(); torch.cuda.synchronize()
    return 2 * n ** 3 * 10 / (s.elapsed_time(e) / 1000) / 1e12
print(f"{tflops(torch.bfloat16):.1f} {tflops(torch.float32):.1f}")
PYEOF
)
say "bf16 GEMM ceiling ${CEIL_BF16:-?} TFLOP/s, f32 (no TF32) ${CEIL_F32:-?} TFLOP/s"

say "training steps: cmha vs PyTorch on the same model, batch and GPU"
printf 'model\tdtype\tframework\tunits/s\tstep ms\tMFU %%\tvs torch\tpool growths\n' >"$OUT/bench.tsv"
bench_pair() {  # LABEL RECIPE OVERRIDES...
  local label=$1 recipe=$2
  shift 2
  for bf16 in false true; do
    local dtype=f32
    [ "$bf16" = true ] && dtype=bf16
    local c p
    c=$(timeout 150 "$CMHA" bench "$recipe" --device cuda --steps 10 --warmup 3 train.bf16=$bf16 "$@" 2>>"$LOG" | tail -1)
    p=$(timeout 150 "$PY" "$ROOT/tests/bench/pytorch_transformer_bench.py" "$recipe" --device cuda --steps 10 \
      --warmup 3 $([ "$bf16" = true ] && echo --bf16) $(printf -- '--set %s ' "$@") 2>>"$LOG" | tail -1)
    "$PY" - "$label" "$dtype" "$c" "$p" "${CEIL_BF16:-0}" >>"$OUT/bench.tsv" <<'PYEOF'
import json, sys
label, dtype, cj, pj, ceiling = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
def load(line):
    try:
        return json.loads(line)
    except Exception:
        return None
c, p = load(cj), load(pj)
flop = (c or {}).get("gemm_tflop_per_step", 0.0)  # the same model's GEMM work on both sides
def row(r, name):
    if r is None:
        return f"{label}\t{dtype}\t{name}\t(failed: see check.log)\t\t\t\t"
    ms = r["step_ms_median"]
    mfu = 100 * flop / (ms / 1000) / ceiling if ceiling and ms else 0
    return f"{label}\t{dtype}\t{r['framework']}\t{r['units_per_s']:.0f} {r['unit']}\t{ms:.1f}\t{mfu:.1f}"
ratio = f"{c['units_per_s'] / p['units_per_s']:.2f}" if c and p else ""
print(row(c, "cmha") + f"\t{ratio}\t{(c or {}).get('gpu_pool_growths_timed', '')}")
print(row(p, "pytorch") + "\t\t")
PYEOF
  done
}
# transformer-base (d 512, 6+6 layers) at ~25k target tokens a step; DeiT-B3 at 128 images of 224².
wmt="bench.batch_size=768 bench.src_len=32 bench.tgt_len=33"
bench_pair transformer-base-concat "$ROOT/recipes/wmt14_en_de/concat_dk512.yaml" $wmt
bench_pair transformer-base-collab-dk128 "$ROOT/recipes/wmt14_en_de/collaborative_dk128.yaml" $wmt
bench_pair deit-b3-concat "$ROOT/recipes/deit_b3_imagenet/concat_dk768.yaml" bench.batch_size=128 model.drop_path=0
bench_pair deit-b3-collab-dk192 "$ROOT/recipes/deit_b3_imagenet/collaborative_dk192.yaml" bench.batch_size=128 model.drop_path=0
column -t -s $'\t' "$OUT/bench.tsv" | tee -a "$LOG"
say "done in $(($(date +%s) - started)) s; results in $OUT"
