// GEMM throughput of cmha's `linear` op, forward + backward, against raw
// dnnl_sgemm doing the same three GEMMs on the same buffers.
//
// Convention: x[M, K] (M rows, K = in features), W[N, K] (N = out features).
//   forward   y[M, N]  = x · Wᵀ          sgemm('N', 'T', M, N, K)
//   backward  dx[M, K] = g · W           sgemm('N', 'N', M, K, N)
//             dW[N, K] = gᵀ · x          sgemm('T', 'N', N, K, M)
// 3 GEMMs, 6·M·N·K flops per step. cmha's step is the whole autograd round
// trip: y = linear(x, W); y.backward(g); then x and W drop their .grad (as an
// optimiser's zero_grad does), so the graph, the output allocations and the
// leaf-gradient hand-over are measured too.
//
// A third side, "prim", runs cmha's cached oneDNN primitive alone
// (cpu::matmul_into on preallocated outputs): it tells the kernel apart from
// allocation and autograd.
//
// The sides take turns inside every benchmark iteration (the order rotates
// each iteration) and are timed separately, so a slow spell of the machine
// hits all of them; the headline is the summary table printed at the end:
// medians over every timed iteration of every repetition, per shape, bias
// and thread count.
//
// Run: build-bench/tests/bench/gemm_bench [--benchmark_repetitions=N]
// (default 3 repetitions; see tests/bench/README.md).
#include "bench_main.h"
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <oneapi/dnnl/dnnl.h>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "autograd/ops.h"
#include "backend/cpu/onednn.h"
#include "tensor/tensor.h"

using namespace cmha;

namespace {

struct Shape3 {
  int64_t m, n, k;
};
const Shape3 kShapes[] = {{1024, 1024, 1024}, {4096, 2048, 512}, {4096, 512, 2048}};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Per timed iteration: seconds of each side, split forward / backward.
// Sides: 0 = cmha linear + autograd, 1 = dnnl_sgemm, 2 = cmha's oneDNN
// matmul primitive alone (cpu::matmul_into, outputs preallocated).
struct Sample {
  double fwd[3], bwd[3];
  double total(int side) const { return fwd[side] + bwd[side]; }
};
// (shape index, threads, bias) -> samples, gathered over all repetitions.
std::map<std::tuple<int, int, bool>, std::vector<Sample>> g_samples;

Tensor random_f32(const cmha::Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    p[i] = static_cast<float>((s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
  }
  return t;
}

void check(dnnl_status_t st) {
  if (st != dnnl_success) {
    std::fprintf(stderr, "dnnl_sgemm failed: %d\n", static_cast<int>(st));
    std::abort();
  }
}

// Args: shape index, threads, bias (0/1).
void BM_Linear(benchmark::State& state) {
  const int si = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const bool with_bias = state.range(2) != 0;
  const auto [M, N, K] = kShapes[si];
  omp_set_num_threads(threads);

  Tensor x = random_f32({M, K}, 1), w = random_f32({N, K}, 2), g = random_f32({M, N}, 3);
  Tensor b = with_bias ? random_f32({N}, 4) : Tensor();
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  if (with_bias) b.set_requires_grad(true);
  // sgemm's own outputs, preallocated once (the ideal) and touched, as
  // tensors so that they come from the same allocator as cmha's.
  Tensor y_st = Tensor::zeros({M, N}), dx_st = Tensor::zeros({M, K}), dw_st = Tensor::zeros({N, K});
  float* y_s = y_st.data<float>();
  float* dx_s = dx_st.data<float>();
  float* dw_s = dw_st.data<float>();
  std::vector<float> db_s(with_bias ? N : 0);
  // The bare primitive's outputs, preallocated and touched once.
  Tensor y_p = Tensor::zeros({M, N}), dx_p = Tensor::zeros({M, K}), dw_p = Tensor::zeros({N, K});
  Tensor xd = x.detach(), wd = w.detach(), bd = with_bias ? b.detach() : Tensor();
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* gp = g.data<float>();
  const float* bp = with_bias ? b.data<float>() : nullptr;

  auto run_cmha = [&](double& fwd, double& bwd) {
    auto t0 = Clock::now();
    Tensor y = linear(x, w, b);
    fwd = seconds_since(t0);
    t0 = Clock::now();
    y.backward(g);
    x.zero_grad();
    w.zero_grad();
    if (with_bias) b.zero_grad();
    bwd = seconds_since(t0);
  };
  auto run_sgemm = [&](double& fwd, double& bwd) {
    auto t0 = Clock::now();
    if (with_bias) {  // y = bias broadcast, then y += x·Wᵀ
      for (int64_t i = 0; i < M; ++i) std::copy(bp, bp + N, y_s + i * N);
    }
    check(dnnl_sgemm('N', 'T', M, N, K, 1.f, xp, K, wp, K, with_bias ? 1.f : 0.f, y_s, N));
    fwd = seconds_since(t0);
    t0 = Clock::now();
    check(dnnl_sgemm('N', 'N', M, K, N, 1.f, gp, N, wp, K, 0.f, dx_s, K));
    check(dnnl_sgemm('T', 'N', N, K, M, 1.f, gp, N, xp, K, 0.f, dw_s, K));
    if (with_bias) {
      std::fill(db_s.begin(), db_s.end(), 0.f);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) db_s[j] += gp[i * N + j];
    }
    bwd = seconds_since(t0);
  };
  auto run_prim = [&](double& fwd, double& bwd) {
    auto t0 = Clock::now();
    cpu::matmul_into(xd, wd.transpose(0, 1), bd, y_p);
    fwd = seconds_since(t0);
    t0 = Clock::now();
    cpu::matmul_into(g, wd, Tensor(), dx_p);
    cpu::matmul_into(g.transpose(0, 1), xd, Tensor(), dw_p);
    if (with_bias) {
      std::fill(db_s.begin(), db_s.end(), 0.f);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) db_s[j] += gp[i * N + j];
    }
    bwd = seconds_since(t0);
  };
  auto run_side = [&](int side, Sample& s) {
    if (side == 0) run_cmha(s.fwd[0], s.bwd[0]);
    else if (side == 1) run_sgemm(s.fwd[1], s.bwd[1]);
    else run_prim(s.fwd[2], s.bwd[2]);
  };

  // Warm up both (primitive creation, first touch of the sgemm buffers).
  {
    Sample s{};
    for (int side = 0; side < 3; ++side) run_side(side, s);
  }

  std::vector<Sample>& samples = g_samples[{si, threads, with_bias}];
  double cmha_total = 0, sgemm_total = 0, prim_total = 0;
  int first = 0;
  for (auto _ : state) {
    Sample s{};
    for (int i = 0; i < 3; ++i) run_side((first + i) % 3, s);  // the order rotates
    first = (first + 1) % 3;
    samples.push_back(s);
    cmha_total += s.total(0);
    sgemm_total += s.total(1);
    prim_total += s.total(2);
  }
  const double flops = 6.0 * M * N * K * static_cast<double>(state.iterations());
  state.counters["cmha_GFLOPs"] = flops / cmha_total * 1e-9;
  state.counters["sgemm_GFLOPs"] = flops / sgemm_total * 1e-9;
  state.counters["prim_GFLOPs"] = flops / prim_total * 1e-9;
  state.counters["ratio"] = sgemm_total / cmha_total;
  state.SetLabel("M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                 (with_bias ? " bias" : " nobias"));
}

void register_all() {
  for (int bias = 0; bias <= 1; ++bias)
    for (int threads : {1, 2})
      for (int si = 0; si < 3; ++si) {
        // Fewer iterations for the big shapes (each step is 25.8 GFLOP).
        const int iters = si == 0 ? 8 : 4;
        benchmark::RegisterBenchmark("linear_fwd_bwd", BM_Linear)
            ->Args({si, threads, bias})
            ->ArgNames({"shape", "threads", "bias"})
            ->Iterations(bias ? iters / 2 : iters)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void print_summary() {
  std::printf(
      "\n== GEMM summary: cmha linear fwd+bwd vs dnnl_sgemm, same 3 GEMMs, same inputs ==\n"
      "x[M,K] W[N,K] (M rows, K in features, N out features): y = x.W^T (MxNxK), dx = g.W (MxKxN),\n"
      "dW = g^T.x (NxKxM); 6*M*N*K flops per step. GFLOP/s: medians over every timed iteration.\n"
      "cmha = linear()+backward()+zero_grad; sgemm = dnnl_sgemm into preallocated outputs;\n"
      "prim = cmha's oneDNN primitive alone (cpu::matmul_into, preallocated outputs).\n"
      "ratio = cmha/sgemm of the medians; paired = median of per-iteration cmha/sgemm;\n"
      "fwd, bwd = paired ratio of the forward GEMM / the two backward GEMMs; prim/sg = paired prim/sgemm.\n\n");
  std::printf("%-15s %-4s %3s %4s %8s %8s %8s %7s %7s %6s %6s %7s\n", "MxNxK", "bias", "thr", "n", "cmha", "sgemm",
              "prim", "ratio", "paired", "fwd", "bwd", "prim/sg");
  for (const auto& [key, samples] : g_samples) {
    const auto [si, threads, bias] = key;
    if (samples.empty()) continue;
    const auto [M, N, K] = kShapes[si];
    const double flops = 6.0 * M * N * K;
    std::vector<double> c, s, p, paired, fwd, bwd, prim;
    for (const Sample& x : samples) {
      c.push_back(flops / x.total(0) * 1e-9);
      s.push_back(flops / x.total(1) * 1e-9);
      p.push_back(flops / x.total(2) * 1e-9);
      paired.push_back(x.total(1) / x.total(0));
      fwd.push_back(x.fwd[1] / x.fwd[0]);
      bwd.push_back(x.bwd[1] / x.bwd[0]);
      prim.push_back(x.total(1) / x.total(2));
    }
    const double mc = median(c), ms = median(s);
    char shape[32];
    std::snprintf(shape, sizeof shape, "%ldx%ldx%ld", static_cast<long>(M), static_cast<long>(N),
                  static_cast<long>(K));
    std::printf("%-15s %-4s %3d %4zu %8.1f %8.1f %8.1f %7.3f %7.3f %6.3f %6.3f %7.3f%s\n", shape,
                bias ? "on" : "off", threads, samples.size(), mc, ms, median(p), mc / ms, median(paired),
                median(fwd), median(bwd), median(prim), mc / ms < 0.90 ? "  < 0.90" : "");
  }
}

}  // namespace

int main(int argc, char** argv) { return cmha::bench::run_main(argc, argv, register_all, print_summary); }
