// CP-ALS of a BERT-base-sized attention stack (cmha compress's work): 12
// layers, H = 12 heads, D = 768, d_k = 64, each layer's per-head products
// W_Q^(i) W_K^(i)ᵀ decomposed to rank 384 (D_k/2) with exactly 100 ALS
// iterations (tolerance 0), random start. Target: all 12 layers in ≤ 60 s on
// 2 cores. The weights are synthetic: N(0, 1) entries times a spectrum
// exp(-d/256) over the input dimension d that all heads share (heads reading
// a common subspace, as the paper observes), so the error reached is that of
// a compressible but not low-rank stack.
//
// Prints the wall time of the stack, the time per ALS iteration and the
// relative errors reached; one repetition (it is a minute long). A second
// line times one layer with the SVD start (LAPACK's eigensolver of the two
// 768 × 768 unfolding Grams) to show what that start adds.
//
// Run: build-bench/tests/bench/cp_als_bench   (see tests/bench/README.md)
#include "bench_main.h"
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "compress/cp_als.h"
#include "tensor/rng.h"

using namespace cmha;

namespace {

constexpr int64_t kLayers = 12, kHeads = 12, kDim = 768, kKeyDim = 768, kRank = 384, kIters = 100;

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

struct Summary {
  double stack_seconds = 0, svd_layer_seconds = 0, svd_layer_error = 0;
  std::vector<double> errors;
  int64_t iterations = 0;
} g_summary;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_StackRandomStart(benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  std::vector<compress::HeadProducts> layers;
  for (int64_t l = 0; l < kLayers; ++l) layers.push_back(synthetic_layer(100 + l));
  compress::CpOptions o;
  o.rank = kRank;
  o.max_iters = kIters;
  o.tol = 0;
  o.init = "random";
  for (auto _ : state) {
    g_summary.errors.clear();
    g_summary.iterations = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& x : layers) {
      const compress::CpResult r = compress::cp_als(x, o);
      g_summary.errors.push_back(r.error);
      g_summary.iterations += r.iterations;
    }
    g_summary.stack_seconds = seconds_since(t0);
  }
}

void BM_OneLayerSvdStart(benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  const compress::HeadProducts x = synthetic_layer(100);
  compress::CpOptions o;
  o.rank = kRank;
  o.max_iters = kIters;
  o.tol = 0;
  o.init = "svd";
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    g_summary.svd_layer_error = compress::cp_als(x, o).error;
    g_summary.svd_layer_seconds = seconds_since(t0);
  }
}

void register_all() {
  benchmark::RegisterBenchmark("cp_als/bert_base_stack/random_start/threads", BM_StackRandomStart)
      ->Arg(2)->Iterations(1)->Repetitions(1)->Unit(benchmark::kSecond)->UseRealTime();
  benchmark::RegisterBenchmark("cp_als/one_layer/svd_start/threads", BM_OneLayerSvdStart)
      ->Arg(2)->Iterations(1)->Repetitions(1)->Unit(benchmark::kSecond)->UseRealTime();
}

void print_summary() {
  if (g_summary.errors.empty()) return;
  double lo = 1e300, hi = 0, mean = 0;
  for (double e : g_summary.errors) lo = std::min(lo, e), hi = std::max(hi, e), mean += e;
  mean /= static_cast<double>(g_summary.errors.size());
  std::printf("\nCP-ALS, %lld layers (H %lld, D %lld, d_k %lld) to rank %lld, %lld iterations each, 2 threads:\n",
              (long long)kLayers, (long long)kHeads, (long long)kDim, (long long)(kKeyDim / kHeads), (long long)kRank,
              (long long)kIters);
  std::printf("  random start: %.1f s for the stack (target <= 60 s), %.1f ms per iteration; relative error "
              "mean %.4f, min %.4f, max %.4f\n",
              g_summary.stack_seconds, 1e3 * g_summary.stack_seconds / static_cast<double>(g_summary.iterations), mean,
              lo, hi);
  if (g_summary.svd_layer_seconds > 0)
    std::printf("  svd start, one layer: %.1f s, relative error %.4f\n", g_summary.svd_layer_seconds,
                g_summary.svd_layer_error);
}

}  // namespace

int main(int argc, char** argv) { return cmha::bench::run_main(argc, argv, register_all, print_summary); }
