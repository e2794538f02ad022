// Memory bandwidth of cmha's element-wise and normalisation ops, forward +
// backward, against a plain copy measured in the same run.
//
// Each op runs on an f32 tensor [R, C] (4096x1024 = 16 MiB, which may sit in
// the last-level cache, and 8192x4096 = 128 MiB, which cannot). Bytes are the
// minimal traffic of the op, n = R*C elements of 4 bytes:
//   copy        read x, write y                          2n      (reference)
//   clone       Tensor::clone: allocation + copy          2n      (reference)
//   add         fwd: read a, b, write y = 3n; bwd: read g, write da, db = 3n
//               (each leaf must own its gradient, so g is written out twice)
//   softmax     fwd: read x, write y = 2n;   bwd: read y, g, write dx = 3n
//   layer_norm  fwd: read x, write y = 2n;   bwd: read x, g, write dx = 3n
//               (weight and bias [C] and their gradients: negligible)
//   gelu        fwd: read x, write y = 2n;   bwd: read x, g, write dx = 3n
//   dropout     fwd: read x, write y = 2n;   bwd: read g, write dx = 2n
//               (the mask can be regenerated from the counter-based RNG, so
//               the minimum stores none; p = 0.1, training)
// An op step is y = op(x); y.backward(g); x.zero_grad() (and its parameters').
// copy is std::memcpy split over the threads into a preallocated buffer: what
// the memory system gives. clone shows what allocating a fresh output costs.
//
// Every benchmark iteration runs every side once (copy, clone and each op),
// the order rotating, each timed separately, so a slow spell of the machine
// hits all of them; the headline is the summary table printed at the end:
// medians over every timed iteration, with the op's fwd+bwd GB/s as a share
// of the copy GB/s measured in the same iteration.
//
// Run: build-bench/tests/bench/bandwidth_bench [--benchmark_repetitions=N]
// (default 3 repetitions; see tests/bench/README.md).
#include "bench_main.h"
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "autograd/ops.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

using namespace cmha;

namespace {

struct Size {
  int64_t rows, cols;
};
const Size kSizes[] = {{4096, 1024}, {8192, 4096}};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One measured thing: its minimal bytes per forward and per backward, in
// units of n*4 bytes, and a step that times its forward and backward.
struct Side {
  const char* name;
  double fwd_units, bwd_units;
  std::function<void(double& fwd, double& bwd)> run;
};

struct Sample {
  double fwd, bwd, copy;  // seconds; copy = the copy side of the same iteration
};
// (size index, threads, side name) -> samples.
std::map<std::tuple<int, int, std::string>, std::vector<Sample>> g_samples;
std::vector<std::string> g_side_order;
std::map<std::string, std::pair<double, double>> g_units;  // name -> (fwd, bwd) units

void parallel_copy(float* dst, const float* src, int64_t n) {
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
    if (hi > lo) std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo) * sizeof(float));
  }
}

// Args: size index, threads.
void BM_Bandwidth(benchmark::State& state) {
  const int zi = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const auto [R, C] = kSizes[zi];
  const int64_t n = R * C;
  omp_set_num_threads(threads);

  Generator init(42);
  auto randn = [&](const cmha::Shape& s) {
    Tensor t = Tensor::empty(s);
    normal_(t, init);
    return t;
  };
  Tensor x = randn({R, C}), x2 = randn({R, C}), g = randn({R, C});
  Tensor ln_w = randn({C}), ln_b = randn({C});
  x.set_requires_grad(true);
  x2.set_requires_grad(true);
  ln_w.set_requires_grad(true);
  ln_b.set_requires_grad(true);
  Tensor copy_dst = Tensor::zeros({R, C});
  Generator drop_gen(7);

  // Runs y = f(); y.backward(g); then drops the leaves' gradients.
  auto op_step = [&](const std::function<Tensor()>& f, std::vector<Tensor*> leaves) {
    return [&, f, leaves](double& fwd, double& bwd) {
      auto t0 = Clock::now();
      Tensor y = f();
      fwd = seconds_since(t0);
      t0 = Clock::now();
      y.backward(g);
      for (Tensor* l : leaves) l->zero_grad();
      bwd = seconds_since(t0);
    };
  };
  std::vector<Side> sides = {
      {"copy", 2, 0,
       [&](double& fwd, double& bwd) {
         auto t0 = Clock::now();
         parallel_copy(copy_dst.data<float>(), g.data<float>(), n);
         fwd = seconds_since(t0);
         bwd = 0;
       }},
      {"clone", 2, 0,
       [&](double& fwd, double& bwd) {
         auto t0 = Clock::now();
         Tensor c = g.clone();
         benchmark::DoNotOptimize(c.raw_data());
         fwd = seconds_since(t0);
         bwd = 0;
       }},
      {"add", 3, 3, op_step([&] { return add(x, x2); }, {&x, &x2})},
      {"softmax", 2, 3, op_step([&] { return softmax(x, -1); }, {&x})},
      {"layer_norm", 2, 3, op_step([&] { return layer_norm(x, ln_w, ln_b); }, {&x, &ln_w, &ln_b})},
      {"gelu", 2, 3, op_step([&] { return gelu(x); }, {&x})},
      {"dropout", 2, 2, op_step([&] { return dropout(x, 0.1f, true, drop_gen); }, {&x})},
  };
  if (g_side_order.empty())
    for (const Side& s : sides) {
      g_side_order.push_back(s.name);
      g_units[s.name] = {s.fwd_units, s.bwd_units};
    }

  // Warm-up: first touch of buffers, the OpenMP pool.
  for (Side& s : sides) {
    double a, b;
    s.run(a, b);
  }

  const double unit = static_cast<double>(n) * sizeof(float);
  std::vector<double> total(sides.size(), 0.0);
  size_t first = 0;
  for (auto _ : state) {
    std::vector<double> fwd(sides.size()), bwd(sides.size());
    for (size_t i = 0; i < sides.size(); ++i) {
      const size_t k = (first + i) % sides.size();
      sides[k].run(fwd[k], bwd[k]);
    }
    first = (first + 1) % sides.size();
    for (size_t k = 0; k < sides.size(); ++k) {
      g_samples[{zi, threads, sides[k].name}].push_back({fwd[k], bwd[k], fwd[0]});
      total[k] += fwd[k] + bwd[k];
    }
  }
  const double iters = static_cast<double>(state.iterations());
  for (size_t k = 0; k < sides.size(); ++k)
    state.counters[std::string(sides[k].name) + "_GBs"] =
        (sides[k].fwd_units + sides[k].bwd_units) * unit * iters / total[k] * 1e-9;
  state.SetLabel(std::to_string(R) + "x" + std::to_string(C) + " f32");
}

void register_all() {
  for (int threads : {1, 2})
    for (int zi = 0; zi < 2; ++zi)
      benchmark::RegisterBenchmark("bandwidth", BM_Bandwidth)
          ->Args({zi, threads})
          ->ArgNames({"size", "threads"})
          ->Iterations(zi == 0 ? 10 : 2)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void print_summary() {
  std::printf(
      "\n== Bandwidth summary: op forward+backward vs copy, f32 ==\n"
      "GB/s = minimal bytes (see the top of bandwidth_bench.cpp) / time, medians over every timed iteration;\n"
      "%%copy = median over iterations of (fwd+bwd GB/s) / (copy GB/s of the same iteration). Target: >= 50%%.\n"
      "fwd ms, bwd ms: median times of one forward, one backward (+ zero_grad).\n\n");
  std::printf("%-10s %-10s %3s %4s %9s %9s %9s %9s %9s %7s\n", "op", "size", "thr", "n", "fwd GB/s", "bwd GB/s",
              "f+b GB/s", "fwd ms", "bwd ms", "%copy");
  for (int zi = 0; zi < 2; ++zi)
    for (int threads : {1, 2})
      for (const std::string& name : g_side_order) {
        auto it = g_samples.find({zi, threads, name});
        if (it == g_samples.end() || it->second.empty()) continue;
        const auto [R, C] = kSizes[zi];
        const double unit = static_cast<double>(R * C) * sizeof(float) * 1e-9;
        const double uf = g_units[name].first * unit, ub = g_units[name].second * unit;
        std::vector<double> f, b, fb, pct, tf, tb;
        for (const Sample& s : it->second) {
          f.push_back(uf / s.fwd);
          if (s.bwd > 0) b.push_back(ub / s.bwd);
          fb.push_back((uf + ub) / (s.fwd + s.bwd));
          pct.push_back(100.0 * (uf + ub) / (s.fwd + s.bwd) / (2 * unit / s.copy));
          tf.push_back(s.fwd * 1e3);
          tb.push_back(s.bwd * 1e3);
        }
        char size[32];
        std::snprintf(size, sizeof size, "%ldx%ld", static_cast<long>(R), static_cast<long>(C));
        const double p = median(pct);
        char bwd_gbs[16] = "-";
        if (!b.empty()) std::snprintf(bwd_gbs, sizeof bwd_gbs, "%.2f", median(b));
        std::printf("%-10s %-10s %3d %4zu %9.2f %9s %9.2f %9.2f %9.2f %6.1f%%%s\n", name.c_str(), size, threads,
                    it->second.size(), median(f), bwd_gbs, median(fb), median(tf), median(tb), p,
                    (name != "copy" && name != "clone" && p < 50.0) ? "  < 50%" : "");
      }
}

}  // namespace

int main(int argc, char** argv) { return cmha::bench::run_main(argc, argv, register_all, print_summary); }
