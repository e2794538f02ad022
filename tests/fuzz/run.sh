#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz in build-fuzz/ (clang, with
# AddressSanitizer and UBSan; the library instrumented too) and runs each
# TARGET for SECONDS on a scratch copy of its seed corpus tests/fuzz/<TARGET>/,
# so the tree stays clean; as many targets at once as there are cores
# (CMHA_FUZZ_JOBS), each one process of one thread. Prints executions, exec/s and crashes per target;
# exits 1 when any target crashed (a crash, sanitizer report, leak, timeout
# of one input past 10 s or an allocation past 2 GiB), 2 on bad arguments.
#
#   tests/fuzz/run.sh 30                      # every target, 30 s each (CI)
#   tests/fuzz/run.sh 600 recipe idx          # two of them
#   CMHA_FUZZ_FLAGS=-runs=1000000 tests/fuzz/run.sh 1800 bleu   # 1 M executions or 30 min
#
# Crashing inputs stay in build-fuzz/fuzz-crashes/<TARGET>/, the full output in
# build-fuzz/fuzz-logs/<TARGET>.log; reproduce one with
#   build-fuzz/fuzz/fuzz_<TARGET> build-fuzz/fuzz-crashes/<TARGET>/crash-...
# Installs clang, libFuzzer and libomp from Debian when missing (as root).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${CMHA_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
ALL_TARGETS="safetensors recipe idx image corpus token_cache bleu"
PACKAGES="clang libclang-rt-14-dev libomp-dev"

say() { printf 'fuzz: %s\n' "$*"; }
usage() {
  echo "usage: tests/fuzz/run.sh SECONDS [TARGET...]   (targets: $ALL_TARGETS)" >&2
  exit 2
}

[ $# -ge 1 ] || usage
case "$1" in '' | *[!0-9]* | 0) say "SECONDS must be a positive whole number, not '$1'" >&2; usage ;; esac
SECONDS_EACH=$1
shift
TARGETS=${*:-$ALL_TARGETS}
for t in $TARGETS; do
  case " $ALL_TARGETS " in *" $t "*) ;; *) say "unknown target '$t'" >&2; usage ;; esac
done

# ---- clang and libFuzzer ---------------------------------------------------------
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  [ "$(id -u)" -eq 0 ] || { say "missing Debian packages:$missing (apt-get install$missing, as root)" >&2; exit 1; }
  apt_log=${TMPDIR:-/tmp}/cmha-fuzz-apt.log
  say "installing Debian packages:$missing (log: $apt_log)"
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086
  if ! { apt-get update && apt-get install -y --no-install-recommends $missing; } >"$apt_log" 2>&1; then
    tail -n 20 "$apt_log" >&2
    say "apt-get install$missing failed" >&2
    exit 1
  fi
fi

# ---- build -------------------------------------------------------------------------
if ! grep -q '^CMHA_FUZZ:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  say "configuring $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMHA_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    -DCMHA_CUDA=OFF -DCMHA_MPI=OFF -DCMHA_BUILD_TESTS=OFF -DCMHA_BUILD_BENCH=OFF -DCMHA_UNITY_BUILD=ON \
    "${launcher[@]}" >/dev/null
fi
start=$(date +%s)
say "building in $BUILD (log: $BUILD/fuzz-logs/build.log)"
mkdir -p "$BUILD/fuzz-logs"
build_start=$(date +%s)
# shellcheck disable=SC2046
if ! cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target $(printf 'fuzz_%s ' $TARGETS) \
  >"$BUILD/fuzz-logs/build.log" 2>&1; then
  tail -n 40 "$BUILD/fuzz-logs/build.log" >&2
  say "the build failed" >&2
  exit 1
fi
say "built in $(($(date +%s) - build_start)) s"

# ---- run -------------------------------------------------------------------------
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/cmha-fuzz-corpus.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
export OMP_NUM_THREADS=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
stat_of() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

# One target: its exit status in $SCRATCH/<TARGET>.rc.
fuzz_one() {
  local t=$1 rc=0 dict=()
  [ -f "$ROOT/tests/fuzz/$t.dict" ] && dict=("-dict=$ROOT/tests/fuzz/$t.dict")
  # shellcheck disable=SC2086
  "$BUILD/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$BUILD/fuzz-crashes/$t/" "${dict[@]}" ${CMHA_FUZZ_FLAGS:-} \
    "$SCRATCH/$t" >"$BUILD/fuzz-logs/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$SCRATCH/$t.rc"
}

JOBS=${CMHA_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
declare -A before
running=0
for t in $TARGETS; do
  mkdir -p "$SCRATCH/$t" "$BUILD/fuzz-crashes/$t"
  cp "$ROOT/tests/fuzz/$t/"* "$SCRATCH/$t/"
  before[$t]=$(find "$BUILD/fuzz-crashes/$t" -type f | wc -l)
  if [ "$running" -ge "$JOBS" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

failed=""
printf 'fuzz: %-12s %12s %9s %7s %8s  %s\n' target executions exec/s "new" crashes "peak RSS"
for t in $TARGETS; do
  log="$BUILD/fuzz-logs/$t.log"
  rc=$(cat "$SCRATCH/$t.rc")
  crashes=$(($(find "$BUILD/fuzz-crashes/$t" -type f | wc -l) - before[$t]))
  [ "$rc" -eq 0 ] || [ "$crashes" -gt 0 ] || crashes=1  # died before writing its input
  printf 'fuzz: %-12s %12s %9s %7s %8s  %s MB\n' "$t" "$(stat_of number_of_executed_units "$log")" \
    "$(stat_of average_exec_per_sec "$log")" "$(stat_of new_units_added "$log")" "$crashes" \
    "$(stat_of peak_rss_mb "$log")"
  if [ "$crashes" -gt 0 ]; then
    failed="$failed $t"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error:|artifact_prefix|Test unit written)' "$log" | head -n 6 |
      sed 's/^/fuzz:   /'
    say "  full output: $log"
  fi
done
took="build and runs took $(($(date +%s) - start)) s"
if [ -n "$failed" ]; then
  say "crashes in:$failed (inputs in $BUILD/fuzz-crashes/); $took"
  exit 1
fi
say "no crashes; $took"
