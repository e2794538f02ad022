// CPU kernels: softmax (entries of backend/softmax.h): softmax and
// log_softmax along any dim, forward and backward.
// The tensor is seen as [outer, n, inner] with the reduced dim (size n) in the
// middle. inner == 1 (the last dim) is the common case: each row of n
// contiguous values is reduced with vector lanes along the row. Otherwise a
// block of up to kColumnsPerTask neighbouring columns is walked down the n rows
// together, with the lanes across the columns, so no transpose is needed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backend/cpu/element.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

namespace cmha::cpu {

namespace {

using Geometry = backend::SoftmaxGeometry;

constexpr int64_t kColumnsPerTask = 64;  // columns per task when the dim is not last

// ---- forward ----

// The largest of n values (-inf for none; NaN-blind, as the sums carry NaN).
template <typename X>
float row_max(const X* x, int64_t n) {
  if constexpr (std::is_same_v<X, float>) {
    return vec::row_max(x, n);
  } else {
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) m = std::max(m, ld(x[j]));
    return m;
  }
}

template <typename X, typename Y>
void forward_rows(const X* x, Y* y, const Geometry& s, bool log) {
  const int64_t rows = s.outer, n = s.n;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const X* xr = x + r * n;
    Y* yr = y + r * n;
    const float m = row_max(xr, n);  // subtracting it keeps exp from overflowing
    float sum = 0.0f;
    if (log) {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) sum += vec::exp(ld(xr[j]) - m);
      const float log_sum = std::log(sum);
      // (x - m) - log Σ, not x - (m + log Σ): m may be large and would round.
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) st(yr[j], (ld(xr[j]) - m) - log_sum);
    } else if constexpr (!std::is_same_v<Y, float>) {
      // A bf16 y cannot hold e^(x-m) before the division (two roundings):
      // the exponentials are taken twice instead.
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) sum += vec::exp(ld(xr[j]) - m);
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) st(yr[j], vec::exp(ld(xr[j]) - m) * inv);
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) {
        const float e = vec::exp(ld(xr[j]) - m);
        yr[j] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
    }
  }
}

template <typename X, typename Y>
void forward_columns(const X* x, Y* y, const Geometry& s, bool log) {
  const int64_t blocks = (s.inner + kColumnsPerTask - 1) / kColumnsPerTask, tasks = s.outer * blocks;
#pragma omp parallel for schedule(static) if (tasks > 1 && s.outer * s.n * s.inner >= kParallelMin)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t o = task / blocks, j0 = (task % blocks) * kColumnsPerTask;
    const int64_t w = std::min(kColumnsPerTask, s.inner - j0);
    const int64_t base = o * s.n * s.inner + j0;
    float m[kColumnsPerTask], sum[kColumnsPerTask];
    std::fill(m, m + w, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + w, 0.0f);
    for (int64_t k = 0; k < s.n; ++k) {
      const X* xr = x + base + k * s.inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) m[j] = ld(xr[j]) > m[j] ? ld(xr[j]) : m[j];
    }
    // The exponentials go to y only when y is f32 (a bf16 y would round them
    // before the division): otherwise they are taken again below.
    constexpr bool kKeepExp = std::is_same_v<Y, float>;
    for (int64_t k = 0; k < s.n; ++k) {
      const X* xr = x + base + k * s.inner;
      Y* yr = y + base + k * s.inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        const float e = vec::exp(ld(xr[j]) - m[j]);
        if constexpr (kKeepExp) {
          if (!log) yr[j] = e;
        }
        sum[j] += e;
      }
    }
    if (log) {
      for (int64_t j = 0; j < w; ++j) sum[j] = std::log(sum[j]);
      for (int64_t k = 0; k < s.n; ++k) {
        const X* xr = x + base + k * s.inner;
        Y* yr = y + base + k * s.inner;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) st(yr[j], (ld(xr[j]) - m[j]) - sum[j]);
      }
    } else {
      for (int64_t j = 0; j < w; ++j) sum[j] = 1.0f / sum[j];
      for (int64_t k = 0; k < s.n; ++k) {
        const X* xr = x + base + k * s.inner;
        Y* yr = y + base + k * s.inner;
        if constexpr (kKeepExp) {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) yr[j] *= sum[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) st(yr[j], vec::exp(ld(xr[j]) - m[j]) * sum[j]);
        }
      }
    }
  }
}

// ---- backward ----
// softmax:     dx = y · (g - Σ g·y)
// log_softmax: dx = g - softmax · Σ g,  softmax = e^y

template <typename Y, typename G, typename DX>
void backward_rows(const Y* y, const G* g, DX* dx, const Geometry& s, bool log) {
  const int64_t rows = s.outer, n = s.n;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const Y* yr = y + r * n;
    const G* gr = g + r * n;
    DX* dr = dx + r * n;
    float acc = 0.0f;
    if (log) {
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < n; ++j) acc += ld(gr[j]);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) st(dr[j], ld(gr[j]) - vec::exp(ld(yr[j])) * acc);
    } else {
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < n; ++j) acc += ld(gr[j]) * ld(yr[j]);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) st(dr[j], ld(yr[j]) * (ld(gr[j]) - acc));
    }
  }
}

template <typename Y, typename G, typename DX>
void backward_columns(const Y* y, const G* g, DX* dx, const Geometry& s, bool log) {
  const int64_t blocks = (s.inner + kColumnsPerTask - 1) / kColumnsPerTask, tasks = s.outer * blocks;
#pragma omp parallel for schedule(static) if (tasks > 1 && s.outer * s.n * s.inner >= kParallelMin)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t o = task / blocks, j0 = (task % blocks) * kColumnsPerTask;
    const int64_t w = std::min(kColumnsPerTask, s.inner - j0);
    const int64_t base = o * s.n * s.inner + j0;
    float acc[kColumnsPerTask];
    std::fill(acc, acc + w, 0.0f);
    for (int64_t k = 0; k < s.n; ++k) {
      const Y* yr = y + base + k * s.inner;
      const G* gr = g + base + k * s.inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] += log ? ld(gr[j]) : ld(gr[j]) * ld(yr[j]);
    }
    for (int64_t k = 0; k < s.n; ++k) {
      const Y* yr = y + base + k * s.inner;
      const G* gr = g + base + k * s.inner;
      DX* dr = dx + base + k * s.inner;
      if (log) {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) st(dr[j], ld(gr[j]) - vec::exp(ld(yr[j])) * acc[j]);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) st(dr[j], ld(yr[j]) * (ld(gr[j]) - acc[j]));
      }
    }
  }
}

void forward(const Tensor& x, const Tensor& y, const Geometry& s, bool log) {
  with_float_types(x, y, "softmax", [&](auto tx, auto ty) {
    const auto* px = x.data<decltype(tx)>("softmax");
    auto* py = y.data<decltype(ty)>("softmax");
    if (s.inner == 1) forward_rows(px, py, s, log);
    else forward_columns(px, py, s, log);
  });
}

void backward(const Tensor& y, const Tensor& g, const Tensor& dx, const Geometry& s, bool log) {
  with_float_types(y, g, dx, "softmax backward", [&](auto ty, auto tg, auto td) {
    const auto* py = y.data<decltype(ty)>("softmax backward");
    const auto* pg = g.data<decltype(tg)>("softmax backward");
    auto* pd = dx.data<decltype(td)>("softmax backward");
    if (s.inner == 1) backward_rows(py, pg, pd, s, log);
    else backward_columns(py, pg, pd, s, log);
  });
}

}  // namespace

backend::SoftmaxKernels softmax_kernels() {
  backend::SoftmaxKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cpu
