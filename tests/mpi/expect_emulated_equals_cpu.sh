#!/bin/sh
# usage: expect_emulated_equals_cpu.sh CMHA DIR
# The Fashion-MNIST ViT recipe shrunk to a few updates on 2 ranks under
# torchrun-style variables, once on the CPU (gloo) and once on the
# asynchronous emulated GPU (CMHA_EMULATE_CUDA=async, train.device=cuda: the
# emulated-nccl backend, its all-reduces on the comm stream): the checkpoints
# must be identical, byte for byte: in f32; with a bf16 gradient exchange and
# 2 micro-batches an update; and with bf16 autocast too.
set -u
cmha=$1
dir=$2
shift 2
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir"
tiny="train.max_updates=3 train.max_epochs=0 train.log_every=1 model.depth=1 model.d_model=16 model.ffn_dim=16
      model.attention.heads=2 model.attention.key_dim=8 data.batch_size=8 lr.warmup=1 lr.warmup_epochs=0"
recipe="$here/../../recipes/local/fashion_mnist_vit.yaml"
for variant in f32 bf16_exchange bf16; do
  case $variant in
    f32) extra="" ;;
    bf16_exchange) extra="train.dist_grad_dtype=bf16 train.update_freq=2 train.dist_bucket_mb=0.005" ;;
    bf16) extra="train.bf16=true train.dist_grad_dtype=bf16 train.update_freq=2" ;;
  esac
  # shellcheck disable=SC2086
  env -u CMHA_EMULATE_CUDA OMP_NUM_THREADS=1 timeout 100 "$here/torchrun_like.sh" 2 "$cmha" train "$recipe" $tiny \
    $extra train.device=cpu \
    train.save_dir="$dir/cpu_$variant" >"$dir/cpu_$variant.log" 2>&1 ||
    { cat "$dir/cpu_$variant.log"; fail "the $variant CPU run failed"; }
  # shellcheck disable=SC2086
  CMHA_EMULATE_CUDA=async OMP_NUM_THREADS=1 timeout 100 "$here/torchrun_like.sh" 2 "$cmha" train "$recipe" $tiny \
    $extra train.device=cuda train.save_dir="$dir/emulated_$variant" >"$dir/emulated_$variant.log" 2>&1 ||
    { cat "$dir/emulated_$variant.log"; fail "the $variant run on the emulated GPU failed"; }
  grep -q "data parallel: 2 ranks (emulated-nccl)" "$dir/emulated_$variant.log" ||
    { cat "$dir/emulated_$variant.log"; fail "the emulated GPU's run did not use emulated-nccl"; }
  # Every tensor's bytes (the metadata names each run's directory).
  python3 - "$dir/cpu_$variant/checkpoint_3.safetensors" "$dir/emulated_$variant/checkpoint_3.safetensors" <<'PY' \
    || fail "the $variant checkpoints of the CPU and of the emulated GPU differ"
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return header, raw[8 + n:]
(ha, da), (hb, db) = tensors(sys.argv[1]), tensors(sys.argv[2])
if ha != hb or da != db:
    diff = [k for k in ha if k not in hb or da[ha[k]["data_offsets"][0]:ha[k]["data_offsets"][1]] != db[hb[k]["data_offsets"][0]:hb[k]["data_offsets"][1]]]
    print("tensors that differ:", diff[:10])
    sys.exit(1)
print(len(ha), "tensors identical")
PY
done
echo "ok: 2-rank checkpoints after 3 updates are identical on the CPU and on the emulated GPU (f32, bf16 exchange, bf16)"
