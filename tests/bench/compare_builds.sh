#!/bin/sh
# Compares two builds of cmha on the same work, interleaved: `cmha bench` on
# both recipes/bench recipes and gemm_bench's cmha side, at 1 and 2 threads,
# ROUNDS rounds (default 3) of old, new (then new, old: the order alternates),
# printing each figure and the median new/old ratio. For refactors that must
# not change speed ("within noise"). Take it on a quiet machine (uptime < 1).
#
#   tests/bench/compare_builds.sh OLD_DIR NEW_DIR [ROUNDS]
# where each DIR holds a `cmha` and a `gemm_bench` binary (e.g. build/cmha and
# build/tests/bench/gemm_bench copied side by side). Higher is faster everywhere.
# BENCH_ARGS adds recipe overrides to every `cmha bench`, e.g.
#   BENCH_ARGS=train.bf16=true tests/bench/compare_builds.sh OLD NEW
set -eu
OLD=$1 NEW=$2 ROUNDS=${3:-3}
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bench_tps() {  # binary recipe threads -> tokens/s (cmha bench's JSON)
  # shellcheck disable=SC2086
  "$1/cmha" bench "$2" --threads "$3" ${BENCH_ARGS:-} 2>/dev/null | sed -n 's/.*"tokens_per_s": *\([0-9.e+]*\).*/\1/p'
}
gemm_gflops() {  # binary threads -> geometric mean of cmha's linear fwd+bwd GFLOP/s over gemm_bench's 6 cases
  "$1/gemm_bench" --benchmark_filter="threads:$2" --benchmark_repetitions=1 2>/dev/null |
    awk -v t="$2" '/^[0-9]+x[0-9]+x[0-9]+ / && $3 == t {s += log($5); n++} END {printf "%.1f\n", exp(s / n)}'
}

for threads in 1 2; do
  for work in transformer_small_concat_dk256 transformer_small_collab_dk64 gemm; do
    : >"$tmp/old" ; : >"$tmp/new"
    r=1
    while [ "$r" -le "$ROUNDS" ]; do
      if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
      for side in $order; do
        dir=$OLD; [ "$side" = new ] && dir=$NEW
        if [ "$work" = gemm ]; then v=$(gemm_gflops "$dir" "$threads"); else v=$(bench_tps "$dir" "recipes/bench/$work.yaml" "$threads"); fi
        echo "$v" >>"$tmp/$side"
      done
      r=$((r + 1))
    done
    python3 - "$work" "$threads" "$tmp/old" "$tmp/new" <<'PY'
import statistics, sys
work, threads, old, new = sys.argv[1], sys.argv[2], *[list(map(float, open(p).read().split())) for p in sys.argv[3:]]
unit = "GFLOP/s, geometric mean of 6 cases" if work == "gemm" else "tokens/s"
mo, mn = statistics.median(old), statistics.median(new)
ratio = mn / mo
print(f"{work:32s} threads {threads}: old {old} new {new} ({unit}); median new/old = {ratio:.3f}")
PY
  done
done
