#!/usr/bin/env bash
# Start-up of the translation pipeline on a WMT14-size corpus: the time until
# the first update and each rank's peak memory when RANKS ranks resume a run
# whose SentencePiece model and token caches exist, for two builds of cmha
# side by side (OLD: one that reads and hashes the raw corpus at every start,
# e.g. main before issue 30; NEW: this tree's). It also times the one-time
# cache build of each (one rank: SentencePiece training and encoding).
#
#   tests/bench/text_startup_bench.sh OLD_CMHA NEW_CMHA [RANKS] [OLD_RANKS] [PAIRS]
#   tests/bench/text_startup_bench.sh - NEW_CMHA ...       # this tree's side only
#
# KEEP_BUILDS=1 reuses the one-time builds an earlier run left (the caches of
# both sides have the same format). RANKS (and OLD_RANKS) may list several counts, e.g. 8,1: after one cache
# build a side, each count is resumed, old then new.
#
# The corpus: work/local_en_de/train.{en,de} (data/prepare_local_en_de.sh)
# repeated to PAIRS pairs (default 4 500 000, WMT14 en-de's size) in a seeded
# shuffle, written once to work/startup_bench/ (git-ignored). The model is the
# local recipe's vocabulary with a 1+1-layer d_model 64 body, so the first
# update costs little beside the start-up; one CPU thread per rank; ranks
# start torchrun-style (Gloo) on this machine. OLD_RANKS (default RANKS) can
# be lower: the old start holds the corpus in every rank (about 1.5 GB each
# here), more than a shared machine may spare for 8.
#
# Each rank's peak RSS is printed beside the same run's on a 3 000-pair corpus
# (the local dev split), whose difference is what the corpus adds.
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD=$1 NEW=$(realpath "$2")
[ "$OLD" = - ] || OLD=$(realpath "$OLD")
RANKS=${3:-8} OLD_RANKS=${4:-${3:-8}} PAIRS=${5:-4500000}
WORK=work/startup_bench
mkdir -p "$WORK"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
[ -s work/local_en_de/train.en ] || { echo "run data/prepare_local_en_de.sh first" >&2; exit 2; }

if [ ! -s "$WORK/train$PAIRS.de" ]; then
  python3 - "$PAIRS" "$WORK/train$PAIRS" <<'PY'
import random, sys
pairs, out = int(sys.argv[1]), sys.argv[2]
en = open("work/local_en_de/train.en", encoding="utf-8").read().splitlines()
de = open("work/local_en_de/train.de", encoding="utf-8").read().splitlines()
assert len(en) == len(de)
order = [i % len(en) for i in range(pairs)]
random.Random(30).shuffle(order)
with open(out + ".en", "w", encoding="utf-8") as fe, open(out + ".de", "w", encoding="utf-8") as fd:
    for i in order:
        fe.write(en[i] + "\n")
        fd.write(de[i] + "\n")
PY
fi
echo "corpus: $(wc -l <"$WORK/train$PAIRS.en") pairs, $(du -m "$WORK/train$PAIRS.en" | cut -f1) + $(du -m "$WORK/train$PAIRS.de" | cut -f1) MB"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), load before: $(uptime | sed 's/.*load average: //')"

tiny=(model.d_model=64 model.ffn_dim=128 model.encoder_layers=1 model.decoder_layers=1 model.attention.key_dim=32
      train.bf16=false train.log_every=1 train.save_every=1 train.validate_every=1000 train.validate_epoch_ends=false
      data.test_prefix= eval.valid_bleu=false lr.warmup=0)
recipe=recipes/local/en_de_transformer_small.yaml

# run BIN DIR PREFIX RANKS UPDATES [--resume]: prints each rank's line of text_startup_rank.py
run() {
  local bin=$1 dir=$2 prefix=$3 ranks=$4 updates=$5
  shift 5
  MASTER_PORT=$((29500 + RANDOM % 1000)) tests/mpi/torchrun_like.sh "$ranks" tests/bench/text_startup_rank.py \
    "$bin" train "$recipe" "$@" "${tiny[@]}" train.save_dir="$dir" data.train_prefix="$prefix" \
    train.max_updates="$updates" --threads 1
}

# copy_run FROM TO: a run directory copied, its token caches (a GB at 4.5 M pairs, never written by a
# resume) hard-linked.
copy_run() {
  mkdir "$2"
  for f in "$1"/* "$1"/.[!.]*; do
    [ -e "$f" ] || continue
    if [ "$(basename "$f")" = cache ]; then cp -al "$f" "$2/"; else cp -a "$f" "$2/"; fi
  done
}

sides="old new"
[ "$OLD" = - ] && sides=new
bin_of() { if [ "$1" = new ]; then echo "$NEW"; else echo "$OLD"; fi; }
# First both sides' one-time builds, then the resumes of each rank count, old and new one after the other.
for side in $sides; do
  bin=$(bin_of $side)
  if [ -n "${KEEP_BUILDS:-}" ] && [ -d "$WORK/run_$side.built" ] && [ -d "$WORK/small_$side.built" ]; then
    echo "== $side ($bin): the one-time build of an earlier run kept (KEEP_BUILDS)"
    continue
  fi
  rm -rf "$WORK/run_$side" "$WORK/small_$side" "$WORK/run_$side.built" "$WORK/small_$side.built"
  echo "== $side ($bin)"
  /usr/bin/time -f "$side one-time build (1 rank, SentencePiece + caches): %e s, peak RSS %M KB" \
    "$bin" train "$recipe" "${tiny[@]}" train.save_dir="$WORK/run_$side" data.train_prefix="$WORK/train$PAIRS" \
    train.max_updates=1 --threads 2 >/dev/null 2>"$WORK/build_$side.log" || { cat "$WORK/build_$side.log"; exit 1; }
  tail -1 "$WORK/build_$side.log"
  "$bin" train "$recipe" "${tiny[@]}" train.save_dir="$WORK/small_$side" data.train_prefix=work/local_en_de/dev \
    train.max_updates=1 --threads 1 >/dev/null 2>&1
  # Each resume starts from the checkpoint of update 1 (a copy: the resume saves update 2 over it).
  mv "$WORK/run_$side" "$WORK/run_$side.built"
  mv "$WORK/small_$side" "$WORK/small_$side.built"
done
echo "load before the resumes: $(uptime | sed 's/.*load average: //')"
for count in $(echo "$RANKS,$OLD_RANKS" | tr , '\n' | awk '!seen[$0]++'); do
  for side in $sides; do
    ranks=$RANKS
    [ "$side" = old ] && ranks=$OLD_RANKS
    case ",$ranks," in *",$count,"*) ;; *) continue ;; esac
    bin=$(bin_of $side)
    rm -rf "$WORK/run_$side" "$WORK/small_$side"
    copy_run "$WORK/run_$side.built" "$WORK/run_$side"
    copy_run "$WORK/small_$side.built" "$WORK/small_$side"
    echo "$side resume, $count ranks, $PAIRS pairs:"
    run "$bin" "$WORK/run_$side" "$WORK/train$PAIRS" "$count" 2 --resume | sort -V
    echo "$side resume, $count ranks, 3 000 pairs (the baseline):"
    run "$bin" "$WORK/small_$side" work/local_en_de/dev "$count" 2 --resume | sort -V
  done
done
echo "load after: $(uptime | sed 's/.*load average: //')"
