// CP-ALS of a BERT-base-sized attention stack (cmha compress's work): 12
// layers, H = 12 heads, D = 768, d_k = 64, each layer's per-head products
// W_Q^(i) W_K^(i)ᵀ decomposed to rank 384 (D_k/2) with exactly 100 ALS
// iterations (tolerance 0), random start, by compress::cp_als_layers on 2
// threads (two layers side by side, one thread each). Target: all 12 layers
// in ≤ 12 s on 2 cores (10 ms per layer-iteration). The weights are synthetic:
// N(0, 1) entries times a spectrum exp(-d/256) over the input dimension d
// that all heads share (heads reading a common subspace, as the paper
// observes), so the error reached is that of a compressible but not low-rank
// stack.
//
// Three runs, each followed by tests/bench/cp_als_numpy.py (the same ALS in
// plain numpy, one layer, 2 threads) in the benchmark venv's interpreter
// (tests/bench/python/bench_python.sh; CMHA_BENCH_PYTHON=debian for Debian's
// /usr/bin/python3 and its numpy on OpenBLAS), so the
// two figures are measured under the same load; then one run of two layers
// one at a time (each on both threads) to show what running layers side by
// side wins, and one layer with the SVD start. The summary prints medians,
// the ratio numpy / cmha per iteration, and where an iteration's time goes.
//
// CP_ALS_BENCH_LAYERS / CP_ALS_BENCH_ITERS override 12 / 100 (quick looks).
//
// Run: OMP_NUM_THREADS=2 build/tests/bench/cp_als_bench   (see tests/bench/README.md)
#include "bench_main.h"
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compress/cp_als.h"
#include "compress/dense_linalg.h"
#include "tensor/rng.h"

using namespace cmha;

namespace {

constexpr int64_t kHeads = 12, kDim = 768, kKeyDim = 768, kRank = 384, kThreads = 2, kRuns = 3;

int64_t env_or(const char* name, int64_t fallback) {
  const char* s = std::getenv(name);
  return s && *s ? std::atoll(s) : fallback;
}
const int64_t kLayers = env_or("CP_ALS_BENCH_LAYERS", 12), kIters = env_or("CP_ALS_BENCH_ITERS", 100);

compress::HeadProducts synthetic_layer(uint64_t seed) {
  Generator gen(seed);
  Tensor q = Tensor::empty({kKeyDim, kDim}), k = Tensor::empty({kKeyDim, kDim});
  normal_(q, gen);
  normal_(k, gen);
  for (Tensor* t : {&q, &k})
    for (int64_t j = 0; j < kKeyDim; ++j)
      for (int64_t d = 0; d < kDim; ++d) t->data<float>()[j * kDim + d] *= std::exp(-static_cast<float>(d) / 256.0f);
  return compress::make_head_products(q, k, kHeads, "bench");
}

compress::CpOptions options(const std::string& init) {
  compress::CpOptions o;
  o.rank = kRank;
  o.max_iters = kIters;
  o.tol = 0;
  o.init = init;
  return o;
}

struct StackRun {
  double seconds = 0;  // wall
  int64_t iterations = 0;
  std::vector<double> errors;
  compress::CpSeconds sections;  // summed over the layers (each on its own thread)
  double ms_per_iteration() const { return 1e3 * seconds / static_cast<double>(std::max<int64_t>(iterations, 1)); }
};

struct Summary {
  std::vector<StackRun> side_by_side;  // one per run
  StackRun one_at_a_time;
  std::vector<double> numpy_ms, numpy_errors;
  std::string numpy_missing, numpy_which;  // the reference's first line: interpreter, numpy, BLAS
  double svd_layer_seconds = 0, svd_layer_error = 0;
} g_summary;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const std::vector<compress::HeadProducts>& stack() {
  static const std::vector<compress::HeadProducts> layers = [] {
    std::vector<compress::HeadProducts> out;
    for (int64_t l = 0; l < kLayers; ++l) out.push_back(synthetic_layer(100 + static_cast<uint64_t>(l)));
    return out;
  }();
  return layers;
}

StackRun run_layers(const std::vector<compress::HeadProducts>& layers, bool side_by_side) {
  const compress::CpOptions o = options("random");
  StackRun run;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<compress::CpResult> results;
  if (side_by_side) {
    results = compress::cp_als_layers(layers, o);
  } else {
    for (const auto& x : layers) results.push_back(compress::cp_als(x, o));
  }
  run.seconds = seconds_since(t0);
  for (const auto& r : results) {
    run.errors.push_back(r.error);
    run.iterations += r.iterations;
    run.sections += r.seconds;
  }
  return run;
}

void BM_Stack(benchmark::State& state) {
  omp_set_num_threads(kThreads);
  const auto& layers = stack();
  for (auto _ : state) g_summary.side_by_side.push_back(run_layers(layers, true));
  state.counters["ms_per_iteration"] = g_summary.side_by_side.back().ms_per_iteration();
}

void BM_OneAtATime(benchmark::State& state) {
  omp_set_num_threads(kThreads);
  const std::vector<compress::HeadProducts> two(stack().begin(), stack().begin() + std::min<int64_t>(2, kLayers));
  for (auto _ : state) g_summary.one_at_a_time = run_layers(two, false);
  state.counters["ms_per_iteration"] = g_summary.one_at_a_time.ms_per_iteration();
}

// The numpy reference, one layer, on the same 2 threads: its own line parsed
// ("... N ms per iteration (median M), relative error E"). Without this
// program's OMP_WAIT_POLICY=passive: under it numpy's OpenBLAS LAPACK calls
// (dpotrf, the R × R inverses) run 10× slower (88 ms per iteration, not 42).
void BM_Numpy(benchmark::State& state) {
  for (auto _ : state) {
    const std::string cmd = "py=$(" CMHA_SOURCE_DIR "/tests/bench/python/bench_python.sh) && "
                            "env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 \"$py\" "
                            CMHA_SOURCE_DIR "/tests/bench/cp_als_numpy.py " + std::to_string(kIters) + " 1 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    const int rc = p ? pclose(p) : -1;
    double ms = 0, median = 0, err = 0;
    int iters = 0;
    const size_t at = out.find("numpy cp_als:");
    if (rc != 0 || at == std::string::npos ||
        std::sscanf(out.c_str() + at,
                    "numpy cp_als: %d iterations, %lf ms per iteration (median %lf), relative error %lf", &iters, &ms,
                    &median, &err) != 4) {
      g_summary.numpy_missing = out.empty() ? "no output" : out.substr(0, 300);
      state.SkipWithError("the numpy reference did not run (needs tests/bench/python/make_venv.sh's venv, or "
                          "CMHA_BENCH_PYTHON=debian with python3-numpy)");
      return;
    }
    const size_t first_line = out.find('\n');
    g_summary.numpy_which = out.substr(0, std::min(at, first_line));
    g_summary.numpy_ms.push_back(ms);
    g_summary.numpy_errors.push_back(err);
    state.counters["ms_per_iteration"] = ms;
  }
}

void BM_OneLayerSvdStart(benchmark::State& state) {
  omp_set_num_threads(kThreads);
  const compress::HeadProducts& x = stack().front();
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    g_summary.svd_layer_error = compress::cp_als(x, options("svd")).error;
    g_summary.svd_layer_seconds = seconds_since(t0);
  }
}

void register_all() {
  // Interleaved: cmha, numpy, cmha, numpy, … so both see the same load.
  for (int64_t r = 1; r <= kRuns; ++r) {
    const std::string n = std::to_string(r);
    benchmark::RegisterBenchmark(("cp_als/stack_side_by_side/run" + n).c_str(), BM_Stack)
        ->Iterations(1)->Repetitions(1)->Unit(benchmark::kSecond)->UseRealTime();
    benchmark::RegisterBenchmark(("cp_als/numpy_one_layer/run" + n).c_str(), BM_Numpy)
        ->Iterations(1)->Repetitions(1)->Unit(benchmark::kSecond)->UseRealTime();
  }
  benchmark::RegisterBenchmark("cp_als/two_layers_one_at_a_time", BM_OneAtATime)
      ->Iterations(1)->Repetitions(1)->Unit(benchmark::kSecond)->UseRealTime();
  benchmark::RegisterBenchmark("cp_als/one_layer/svd_start", BM_OneLayerSvdStart)
      ->Iterations(1)->Repetitions(1)->Unit(benchmark::kSecond)->UseRealTime();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void print_sections(const StackRun& r, const char* what) {
  const compress::CpSeconds& s = r.sections;
  const double per = 1e3 / static_cast<double>(std::max<int64_t>(r.iterations, 1));
  std::printf("  %s, ms per layer-iteration on its thread (share):\n", what);
  const std::pair<const char*, double> parts[] = {
      {"MTTKRP row scalings, mixing sums", s.mttkrp}, {"R x R normal equations", s.solve},
      {"GEMM MTTKRP * N^-1", s.factor_gemm},         {"GEMM W W^T * Y", s.project_gemm},
      {"GEMM Grams", s.gram_gemm},                    {"normalisation", s.normalise},
      {"error", s.error}};
  for (const auto& [name, sec] : parts)
    std::printf("    %-34s %6.2f  (%4.1f %%)\n", name, per * sec, 100.0 * sec / std::max(s.total(), 1e-300));
  std::printf("    %-34s %6.2f\n", "all", per * s.total());
}

void print_summary() {
  const auto& runs = g_summary.side_by_side;
  if (runs.empty()) return;
  std::vector<double> wall, per_it;
  for (const auto& r : runs) wall.push_back(r.seconds), per_it.push_back(r.ms_per_iteration());
  double lo = 1e300, hi = 0, mean = 0;
  for (double e : runs.back().errors) lo = std::min(lo, e), hi = std::max(hi, e), mean += e;
  mean /= static_cast<double>(runs.back().errors.size());
  std::printf("\nCP-ALS, %lld layers (H %lld, D %lld, d_k %lld) to rank %lld, %lld iterations each, %lld threads, "
              "%zu runs:\n",
              (long long)kLayers, (long long)kHeads, (long long)kDim, (long long)(kKeyDim / kHeads), (long long)kRank,
              (long long)kIters, (long long)kThreads, runs.size());
  std::printf("  BLAS/LAPACK: %s\n", compress::blas_description().c_str());
  std::printf("  layers side by side: median %.2f s for the stack (target <= %.1f s), %.2f ms per layer-iteration "
              "(runs:",
              median(wall), 0.01 * static_cast<double>(kLayers * kIters), median(per_it));
  for (double m : per_it) std::printf(" %.2f", m);
  std::printf("); relative error mean %.4f, min %.4f, max %.4f\n", mean, lo, hi);
  if (!g_summary.numpy_ms.empty()) {
    const double np = median(g_summary.numpy_ms);
    std::printf("  numpy, one layer (%s): median %.2f ms per iteration (runs:", g_summary.numpy_which.c_str(), np);
    for (double m : g_summary.numpy_ms) std::printf(" %.2f", m);
    std::printf("), relative error %.4f; numpy / cmha = %.2fx (target >= 1.5x)\n", g_summary.numpy_errors.back(),
                np / median(per_it));
  } else if (!g_summary.numpy_missing.empty()) {
    std::printf("  numpy reference not run: %s\n", g_summary.numpy_missing.c_str());
  }
  const StackRun& one = g_summary.one_at_a_time;
  if (one.iterations > 0)
    std::printf("  %zu layers one at a time (each on %lld threads): %.2f ms per layer-iteration, relative error %.4f\n",
                one.errors.size(), (long long)kThreads, one.ms_per_iteration(), one.errors.front());
  print_sections(runs.back(), "side by side, last run");
  if (one.iterations > 0) print_sections(one, "one at a time");
  if (g_summary.svd_layer_seconds > 0)
    std::printf("  svd start, one layer: %.1f s, relative error %.4f\n", g_summary.svd_layer_seconds,
                g_summary.svd_layer_error);
}

}  // namespace

int main(int argc, char** argv) { return cmha::bench::run_main(argc, argv, register_all, print_summary); }
