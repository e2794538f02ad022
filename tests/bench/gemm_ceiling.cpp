// The machine's GEMM ceilings as cmha reaches them: one large square matmul
// ([N, N] · [N, N], N = 2048 unless given) through cmha's oneDNN primitive
// (cpu::matmul_into, outputs preallocated), in f32 and in bf16 (bf16 inputs
// and output, f32 accumulation: what a bf16 linear layer runs), on T threads.
// The step table (step_table_vs_pytorch.py) divides each side's GEMM flops
// per step by its step time and by this ceiling: the step's "MFU".
//
//   build/tests/bench/gemm_ceiling [threads] [N]
//
// One JSON line per dtype: GFLOP/s at the median and the fastest of at least
// 5 timed calls (and at least 1 s of them), after 2 untimed ones.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/onednn.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

using namespace cmha;

namespace {

void measure(DType dtype, const char* name, int threads, int64_t n) {
  Generator gen(7);
  Tensor a = Tensor::empty({n, n}), b = Tensor::empty({n, n});
  normal_(a, gen);
  normal_(b, gen);
  a = a.to(dtype);
  b = b.to(dtype);
  const Tensor c = Tensor::empty({n, n}, dtype);
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::vector<double> gflops;
  double spent = 0.0;
  for (int i = 0; i < 2 || (i < 200 && (gflops.size() < 5 || spent < 1.0)); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    cpu::matmul_into(a, b, Tensor(), c);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i < 2) continue;  // the primitive's creation and the first touch of the pages
    gflops.push_back(flops / s * 1e-9);
    spent += s;
  }
  std::sort(gflops.begin(), gflops.end());
  std::printf("{\"gemm\": \"onednn %s\", \"threads\": %d, \"n\": %lld, \"calls\": %zu, \"gflop_s_median\": %.1f, "
              "\"gflop_s_max\": %.1f}\n",
              name, threads, static_cast<long long>(n), gflops.size(), gflops[gflops.size() / 2], gflops.back());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 2048;
  if (threads < 1 || threads > 4096 || n < 16 || n > 16384) {
    std::fprintf(stderr, "gemm_ceiling: usage: gemm_ceiling [threads 1..4096] [N 16..16384]\n");
    return 2;
  }
  omp_set_num_threads(threads);
  measure(DType::f32, "f32", threads, n);
  measure(DType::bf16, "bf16", threads, n);
  return 0;
}
