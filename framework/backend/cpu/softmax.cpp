// CPU kernels: softmax (entries of backend/softmax.h): softmax and
// log_softmax along any dim, forward and backward.
// The tensor is seen as [outer, n, inner] with the reduced dim (size n) in the
// middle. inner == 1 (the last dim) is the common case: each row of n
// contiguous values is reduced with vector lanes along the row. Otherwise a
// block of up to kBlock neighbouring columns is walked down the n rows
// together, with the lanes across the columns, so no transpose is needed.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

namespace cmha::cpu {

namespace {

using Geometry = backend::SoftmaxGeometry;

constexpr int64_t kBlock = 64;  // columns per task when the dim is not last

// ---- forward ----

void forward_rows(const float* x, float* y, const Geometry& s, bool log) {
  const int64_t rows = s.outer, n = s.n;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float m = vec::row_max(xr, n);  // subtracting it keeps exp from overflowing
    float sum = 0.0f;
    if (log) {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) sum += vec::exp(xr[j] - m);
      const float log_sum = std::log(sum);
      // (x - m) - log Σ, not x - (m + log Σ): m may be large and would round.
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) - log_sum;
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) {
        const float e = vec::exp(xr[j] - m);
        yr[j] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
    }
  }
}

void forward_columns(const float* x, float* y, const Geometry& s, bool log) {
  const int64_t blocks = (s.inner + kBlock - 1) / kBlock, tasks = s.outer * blocks;
#pragma omp parallel for schedule(static) if (tasks > 1 && s.outer * s.n * s.inner >= kParallelMin)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t o = task / blocks, j0 = (task % blocks) * kBlock;
    const int64_t w = std::min(kBlock, s.inner - j0);
    const int64_t base = o * s.n * s.inner + j0;
    float m[kBlock], sum[kBlock];
    std::fill(m, m + w, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + w, 0.0f);
    for (int64_t k = 0; k < s.n; ++k) {
      const float* xr = x + base + k * s.inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) m[j] = xr[j] > m[j] ? xr[j] : m[j];
    }
    for (int64_t k = 0; k < s.n; ++k) {
      const float* xr = x + base + k * s.inner;
      float* yr = y + base + k * s.inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        const float e = vec::exp(xr[j] - m[j]);
        if (!log) yr[j] = e;
        sum[j] += e;
      }
    }
    if (log) {
      for (int64_t j = 0; j < w; ++j) sum[j] = std::log(sum[j]);
      for (int64_t k = 0; k < s.n; ++k) {
        const float* xr = x + base + k * s.inner;
        float* yr = y + base + k * s.inner;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) yr[j] = (xr[j] - m[j]) - sum[j];
      }
    } else {
      for (int64_t j = 0; j < w; ++j) sum[j] = 1.0f / sum[j];
      for (int64_t k = 0; k < s.n; ++k) {
        float* yr = y + base + k * s.inner;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) yr[j] *= sum[j];
      }
    }
  }
}

// ---- backward ----
// softmax:     dx = y · (g - Σ g·y)
// log_softmax: dx = g - softmax · Σ g,  softmax = e^y

void backward_rows(const float* y, const float* g, float* dx, const Geometry& s, bool log) {
  const int64_t rows = s.outer, n = s.n;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * n;
    const float* gr = g + r * n;
    float* dr = dx + r * n;
    float acc = 0.0f;
    if (log) {
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < n; ++j) acc += gr[j];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dr[j] = gr[j] - vec::exp(yr[j]) * acc;
    } else {
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < n; ++j) acc += gr[j] * yr[j];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dr[j] = yr[j] * (gr[j] - acc);
    }
  }
}

void backward_columns(const float* y, const float* g, float* dx, const Geometry& s, bool log) {
  const int64_t blocks = (s.inner + kBlock - 1) / kBlock, tasks = s.outer * blocks;
#pragma omp parallel for schedule(static) if (tasks > 1 && s.outer * s.n * s.inner >= kParallelMin)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t o = task / blocks, j0 = (task % blocks) * kBlock;
    const int64_t w = std::min(kBlock, s.inner - j0);
    const int64_t base = o * s.n * s.inner + j0;
    float acc[kBlock];
    std::fill(acc, acc + w, 0.0f);
    for (int64_t k = 0; k < s.n; ++k) {
      const float* yr = y + base + k * s.inner;
      const float* gr = g + base + k * s.inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] += log ? gr[j] : gr[j] * yr[j];
    }
    for (int64_t k = 0; k < s.n; ++k) {
      const float* yr = y + base + k * s.inner;
      const float* gr = g + base + k * s.inner;
      float* dr = dx + base + k * s.inner;
      if (log) {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) dr[j] = gr[j] - vec::exp(yr[j]) * acc[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) dr[j] = yr[j] * (gr[j] - acc[j]);
      }
    }
  }
}

void forward(const Tensor& x, const Tensor& y, const Geometry& s, bool log) {
  if (s.inner == 1) forward_rows(x.data<float>(), y.data<float>(), s, log);
  else forward_columns(x.data<float>(), y.data<float>(), s, log);
}

void backward(const Tensor& y, const Tensor& g, const Tensor& dx, const Geometry& s, bool log) {
  if (s.inner == 1) backward_rows(y.data<float>(), g.data<float>(), dx.data<float>(), s, log);
  else backward_columns(y.data<float>(), g.data<float>(), dx.data<float>(), s, log);
}

}  // namespace

backend::SoftmaxKernels softmax_kernels() {
  backend::SoftmaxKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cpu
