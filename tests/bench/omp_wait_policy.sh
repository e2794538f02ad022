#!/usr/bin/env bash
# Time per OpenMP parallel region under libgomp's wait policies, the way the
# trainer uses them: 300 short regions (64 Ki floats) with a little serial
# host work between them. Run it once on an idle machine and once while
# something else holds a core (e.g. a build): the default policy spins
# ~300 000 times before sleeping, which a busy core turns into milliseconds.
# cmha's compute commands run with GOMP_SPINCOUNT=10000 (cli/main.cpp).
#
#   tests/bench/omp_wait_policy.sh [ROUNDS]
set -euo pipefail
rounds=${1:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/regions.c" <<'C'
#include <omp.h>
#include <stdio.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
  static float a[1 << 16];
  const int regions = 300;
  const double t0 = now();
  for (int r = 0; r < regions; r++) {
#pragma omp parallel for
    for (int i = 0; i < (1 << 16); i++) a[i] = a[i] * 0.5f + 1.0f;
    volatile double s = 0;
    for (int k = 0; k < 200000; k++) s += k * 1e-9;  /* the host's bookkeeping between kernels */
  }
  printf("%.3f\n", (now() - t0) * 1000 / regions);
  return 0;
}
C
gcc -O2 -fopenmp "$dir/regions.c" -o "$dir/regions"
printf '%-28s %s\n' policy "ms per region (${rounds} interleaved runs)"
declare -A results
for ((i = 0; i < rounds; i++)); do
  results[default]+="$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$dir/regions") "
  results[spincount10000]+="$(env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=10000 "$dir/regions") "
  results[passive]+="$(env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=PASSIVE "$dir/regions") "
  results[active]+="$(env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=ACTIVE "$dir/regions") "
done
for p in default spincount10000 passive active; do printf '%-28s %s\n' "$p" "${results[$p]}"; done
