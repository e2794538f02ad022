#!/usr/bin/env bash
# The one GPU check of cmha: run on a machine with an NVIDIA GPU from the
# repository root, with gpu-bundle/ made by tests/gpu/make_bundle.sh (the
# device tool: run(command="tests/gpu/check.sh", carry=["gpu-bundle"],
# timeout_s=480)). ONE global deadline (CHECK_DEADLINE_S, default 420 s):
# each part gets what is left, at most its own cap, and the summary table is
# printed at the end whatever finished (also when the deadline or a signal
# cuts a part short). In order:
#   1. the libraries: cmha info --devices names each CUDA library cmha opens
#      (cudart, cuBLASLt, cuDNN, NCCL, nvrtc) with its file and version; a
#      missing one stops the check at once, named;
#   2. the parity suite: every kernel-table entry GPU vs CPU, whole training
#      runs of every attention type and the ViT, the pool after warm-up
#      (parity.log, parity.xml);
#   3. the GPU's GEMM ceilings (PyTorch, measured: bf16, f32, TF32);
#   4. bf16 training steps of transformer-base concat and collaborative and
#      DeiT-B3, PyTorch beside each on the same GPU (bench.tsv);
#   5. the same in f32 (MFU against the measured f32 ceiling, or TF32's when
#      train.tf32 is set);
#   6. fused (cuDNN SDPA) against unfused attention and decoding, if time is left.
# Results, logs and the table go to $OUT (or /tmp/cmha-gpu).
#
#   tests/gpu/check.sh [--parity-only]     (--parity-only: parts 1 and 2)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PARITY_ONLY=0
[ "${1:-}" = "--parity-only" ] && PARITY_ONLY=1
OUT=${OUT:-/tmp/cmha-gpu}
mkdir -p "$OUT"
LOG=$OUT/check.log
: >"$LOG"
say() { printf 'check: %s\n' "$*" | tee -a "$LOG"; }
started=$(date +%s)
DEADLINE_S=${CHECK_DEADLINE_S:-420}
left() { echo $((DEADLINE_S - ($(date +%s) - started))); }
# The seconds a part may run: at most its cap, at most what is left less 10 s for the table.
budget() {
  local l=$(($(left) - 10))
  [ "$l" -gt "$1" ] && l=$1
  echo "$l"
}
# part CAP COMMAND...: runs it under its budget; 125 when no time is left for it.
part() {
  local b
  b=$(budget "$1")
  shift
  [ "$b" -ge 5 ] || return 125
  timeout -k 3 "$b" "$@"
}
SUMMARY=$OUT/summary.tsv
printf 'part\tresult\tdetail\n' >"$SUMMARY"
row() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >>"$SUMMARY"; }
result_of() {  # RC -> ok | failed (rc N) | cut by the deadline | not run (no time left)
  case $1 in
    0) echo ok ;;
    124 | 137) echo "cut by the deadline" ;;
    125) echo "not run (no time left)" ;;
    *) echo "failed (rc $1)" ;;
  esac
}
# A tab-separated file as aligned columns (awk: a bare image has no column(1)).
aligned() {
  awk -F'\t' '{ for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }
                 if (NF > n) n = NF }
               END { for (r = 1; r <= NR; r++) { line = ""
                       for (i = 1; i <= n; i++) line = line sprintf("%-" w[i] "s  ", cell[r, i])
                       sub(/ +$/, "", line); print line } }' "$1"
}
print_table() {
  echo
  say "summary after $(($(date +%s) - started)) s of $DEADLINE_S:"
  aligned "$SUMMARY" | tee -a "$LOG"
  if [ -f "$OUT/bench.tsv" ] && [ "$(wc -l <"$OUT/bench.tsv")" -gt 1 ]; then
    aligned "$OUT/bench.tsv" | tee -a "$LOG"
  fi
  say "results in $OUT"
}
trap print_table EXIT
trap 'exit 130' INT TERM

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
PY=$(command -v python3 || true)
# CUDA's libraries, from the toolkit (/usr/local/cuda) or only from pip wheels
# (site-packages/nvidia/<lib>/lib, as PyTorch installs cudart, cuBLAS, cuDNN,
# NCCL and nvrtc): cmha links cudart (the loader must find it) and opens the
# rest itself, searching the same folders (tensor/shared_library.h).
WHEEL_LIBS=$( (
  [ -n "$PY" ] && "$PY" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
  ls -d /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages /usr/lib/python3/dist-packages 2>/dev/null
) | sort -u | while read -r site; do ls -d "$site"/nvidia/*/lib 2>/dev/null; done | tr '\n' ':')
export LD_LIBRARY_PATH="$STAGE/lib:/usr/local/cuda/lib64:${WHEEL_LIBS}${LD_LIBRARY_PATH:-}"

# ---- 1. the machine and its libraries -----------------------------------------------------
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG" ||
  say "no nvidia-smi here"
part 60 "$CMHA" info --devices >"$OUT/devices.txt" 2>&1
rc=$?
tee -a "$LOG" <"$OUT/devices.txt"
missing=$(sed -n 's/^  \([A-Za-z]*\): not loaded.*/\1/p' "$OUT/devices.txt" | tr '\n' ' ')
if [ $rc -ne 0 ] || [ -n "$missing" ]; then
  # cmha links cudart: without it the command itself does not start.
  grep -q 'libcudart' "$OUT/devices.txt" && [ $rc -ne 0 ] && missing="cudart $missing"
  row libraries "missing: ${missing:-cmha info failed (rc $rc)}" "see devices.txt"
  say "stopping: a CUDA library cmha needs is missing: ${missing:-cmha info --devices failed (rc $rc)}"
  exit 3
fi
row libraries ok "$(grep -c ': /' "$OUT/devices.txt") loaded (devices.txt)"

# ---- 2. parity ---------------------------------------------------------------------------
say "parity suite"
part 200 "$BIN_DIR/tests/cmha_tests" --gtest_filter='CudaParity*:CudaRuntime*:NcclOneGpu*:FusedAttentionPlan*' \
  --gtest_output="xml:$OUT/parity.xml" >"$OUT/parity.log" 2>&1
rc=$?
grep -E '^\[  (FAILED|PASSED|SKIPPED) |tests ran' "$OUT/parity.log" | tee -a "$LOG"
row parity "$(result_of $rc)" "$(grep -cE '^\[       OK' "$OUT/parity.log") passed, $(grep -cE '^\[  FAILED  \] [A-Za-z]' "$OUT/parity.log") failed, $(grep -cE '^\[  SKIPPED \] [A-Za-z]' "$OUT/parity.log") skipped"
[ $rc -eq 0 ] || { say "parity suite: rc $rc, failures follow"; grep -B2 -A12 'Failure' "$OUT/parity.log" | head -150 | tee -a "$LOG"; }

if [ $PARITY_ONLY -eq 1 ]; then
  exit $rc
fi

# ---- 3. GEMM ceilings ----------------------------------------------------------------------
# Measured here (PyTorch, 8192³, the mean of 10 after 3 warm-ups): bf16, f32
# without TF32 (cmha's default: train.tf32=false) and with it.
TORCH=$([ -n "$PY" ] && "$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
if [ -z "$TORCH" ]; then
  # Without PyTorch there is no reference and no ceiling: cmha's own figures only.
  say "no python3 with PyTorch here: no GEMM ceilings and no PyTorch column"
  row ceilings "not run (no PyTorch)" ""
  PY=""
else
say "GEMM ceilings (PyTorch $TORCH)"
ceilings=$(part 60 "$PY" - <<'PYEOF' 2>>"$LOG"
import torch
def tflops(dtype, tf32=False, n=8192):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype); b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3): a @ b
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10): a @ b
    e.record(); torch.cuda.synchronize()
    return 2 * n ** 3 * 10 / (s.elapsed_time(e) / 1000) / 1e12
print(f"{tflops(torch.bfloat16):.1f} {tflops(torch.float32):.1f} {tflops(torch.float32, tf32=True):.1f}")
PYEOF
)
rc=$?
read -r CEIL_BF16 CEIL_F32 CEIL_TF32 <<<"$ceilings"
row ceilings "$(result_of $rc)" "bf16 ${CEIL_BF16:-?}, f32 ${CEIL_F32:-?}, TF32 ${CEIL_TF32:-?} TFLOP/s"
say "GEMM ceilings: bf16 ${CEIL_BF16:-?}, f32 (no TF32) ${CEIL_F32:-?}, TF32 ${CEIL_TF32:-?} TFLOP/s"
fi

# ---- 4, 5. training steps: bf16 first, then f32 ------------------------------------------------
printf 'model\tdtype\tframework\tunits/s\tstep ms\tMFU %%\tvs torch\tpool growths\thost syncs/step\n' >"$OUT/bench.tsv"
bench_one() {  # LABEL DTYPE RECIPE OVERRIDES...
  local label=$1 dtype=$2 recipe=$3
  shift 3
  local bf16=false ceiling=${CEIL_F32:-0}
  [ "$dtype" = bf16 ] && bf16=true && ceiling=${CEIL_BF16:-0}
  case " $* " in *" train.tf32=true "*) [ "$dtype" = f32 ] && ceiling=${CEIL_TF32:-0} ;; esac
  local c p rc_c rc_p
  c=$(part 60 "$CMHA" bench "$recipe" --device cuda --steps 10 --warmup 3 train.bf16=$bf16 "$@" 2>>"$LOG" | tail -1)
  rc_c=$?  # pipefail: cmha's status
  if [ -z "$PY" ]; then  # no PyTorch: cmha's JSON line as it printed it
    row "$label $dtype" "cmha $(result_of $rc_c), pytorch not run (no PyTorch)" ""
    printf '%s\t%s\tcmha\t%s\n' "$label" "$dtype" "${c:-(failed or cut: see check.log)}" >>"$OUT/bench.tsv"
    return
  fi
  p=$(part 60 "$PY" "$ROOT/tests/bench/pytorch_transformer_bench.py" "$recipe" --device cuda --steps 10 \
    --warmup 3 $([ "$bf16" = true ] && echo --bf16) $(printf -- '--set %s ' "$@") 2>>"$LOG" | tail -1)
  rc_p=$?
  row "$label $dtype" "cmha $(result_of $rc_c), pytorch $(result_of $rc_p)" ""
  "$PY" - "$label" "$dtype" "$c" "$p" "$ceiling" >>"$OUT/bench.tsv" <<'PYEOF'
import json, sys
label, dtype, cj, pj, ceiling = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5] or 0)
def load(line):
    try:
        return json.loads(line)
    except Exception:
        return None
c, p = load(cj), load(pj)
flop = (c or {}).get("gemm_tflop_per_step", 0.0)  # the same model's GEMM work on both sides
def row(r, name):
    if r is None:
        return f"{label}\t{dtype}\t{name}\t(failed or cut: see check.log)\t\t"
    ms = r["step_ms_median"]
    mfu = 100 * flop / (ms / 1000) / ceiling if ceiling and ms else 0
    return f"{label}\t{dtype}\t{r['framework']}\t{r['units_per_s']:.0f} {r['unit']}\t{ms:.1f}\t{mfu:.1f}"
ratio = f"{c['units_per_s'] / p['units_per_s']:.2f}" if c and p else ""
print(row(c, "cmha") + f"\t{ratio}\t{(c or {}).get('gpu_pool_growths_timed', '')}\t{(c or {}).get('host_syncs_per_step', '')}")
print(row(p, "pytorch") + "\t\t\t")
PYEOF
}
# transformer-base (d 512, 6+6 layers) at ~25k target tokens a step; DeiT-B3 at 128 images of 224².
wmt="bench.batch_size=768 bench.src_len=32 bench.tgt_len=33"
for dtype in bf16 f32; do
  say "training steps ($dtype): cmha vs PyTorch on the same model, batch and GPU"
  bench_one transformer-base-concat $dtype "$ROOT/recipes/wmt14_en_de/concat_dk512.yaml" $wmt
  bench_one transformer-base-collab-dk128 $dtype "$ROOT/recipes/wmt14_en_de/collaborative_dk128.yaml" $wmt
  bench_one deit-b3-concat $dtype "$ROOT/recipes/deit_b3_imagenet/concat_dk768.yaml" bench.batch_size=128 model.drop_path=0
done

# ---- 6. fused attention and decoding, with what time is left ---------------------------------
if [ -x "$BIN_DIR/tests/fused_attention_bench" ]; then
  say "fused vs unfused attention, and GPU decoding"
  part 90 "$BIN_DIR/tests/fused_attention_bench" --iters 5 --decode-sentences 64 >"$OUT/fused_attention.txt" 2>>"$LOG"
  rc=$?
  row fused-attention "$(result_of $rc)" "fused_attention.txt"
  tee -a "$LOG" <"$OUT/fused_attention.txt"
else
  row fused-attention "not in the bundle" "rebuild it with tests/gpu/make_bundle.sh"
fi
