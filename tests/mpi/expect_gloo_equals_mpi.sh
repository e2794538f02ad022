#!/bin/sh
# usage: expect_gloo_equals_mpi.sh CMHA DIR MPIRUN...
# The Fashion-MNIST ViT recipe shrunk to a few updates on 2 ranks, once under
# mpirun (the mpi backend) and once under torchrun-style variables (gloo, no
# MPI): the checkpoints must be identical, byte for byte (a sum over 2 ranks
# is the same whoever adds it).
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
tiny="train.max_updates=3 train.max_epochs=0 train.log_every=1 model.depth=1 model.d_model=16 model.ffn_dim=16
      model.attention.heads=2 model.attention.key_dim=8 data.batch_size=8 lr.warmup=1 lr.warmup_epochs=0"
recipe="$here/../../recipes/local/fashion_mnist_vit.yaml"
# shellcheck disable=SC2086
timeout 100 "$@" "$cmha" train "$recipe" $tiny train.save_dir="$dir/mpi" >"$dir.mpi.log" 2>&1 ||
  { cat "$dir.mpi.log"; fail "mpirun cmha train failed"; }
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 100 "$here/torchrun_like.sh" 2 "$cmha" train "$recipe" $tiny train.save_dir="$dir/gloo" \
  >"$dir.gloo.log" 2>&1 || { cat "$dir.gloo.log"; fail "torchrun-style cmha train failed"; }
grep -q "data parallel: 2 ranks (gloo)" "$dir.gloo.log" || { cat "$dir.gloo.log"; fail "the torchrun-style run did not use gloo"; }
# Every tensor's bytes (the metadata names each run's directory).
python3 - "$dir/mpi/checkpoint_3.safetensors" "$dir/gloo/checkpoint_3.safetensors" <<'PY' || fail "the 2-rank checkpoints of mpi and gloo differ"
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
echo "ok: mpi and gloo checkpoints after 3 updates are identical"
