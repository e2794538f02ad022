// CUDA kernels: softmax (entries of backend/softmax.h), softmax and
// log_softmax over the middle dim of [outer, n, inner], forward and backward.
//
// A "line" is the n elements of one (o, j), j < inner, at stride inner. Two
// layouts of the work:
// - group per line (a warp, or a block for lines over kWarpRowMax): the
//   common inner == 1 case (rows), and inner > 1 with too few lines to fill
//   the GPU one thread each;
// - thread per line (inner > 1 and many lines): a thread walks its line down
//   the n rows, neighbouring threads on neighbouring columns (coalesced), in
//   the CPU's order.
// Sums are f32 as the CPU's, in a fixed order per layout; the layout and the
// group depend on the shape only.
#include <cmath>

#include "backend/cuda/kernel_table.h"
#include "backend/cuda/row_reduce.cuh"

namespace cmha::cuda {

namespace {

using Geometry = backend::SoftmaxGeometry;

// Lines at least this many give every line its own thread (when inner > 1).
constexpr int64_t kThreadLinesMin = 4096;

// The offset of line l's first element in [outer, n, inner].
__device__ __forceinline__ int64_t line_base(int64_t l, int64_t n, int64_t inner) {
  return inner == 1 ? l * n : (l / inner) * n * inner + l % inner;
}

// ---- forward ----

// x, y (and in the backward y, g, dx): f32 or bf16 each, f32 arithmetic.
template <int kGroup, typename X, typename Y>
__global__ void __launch_bounds__(kRowBlock<kGroup>) forward_group_kernel(const X* x, Y* y, int64_t lines, int64_t n, int64_t inner, bool log) {
  using Group = RowGroup<kGroup>;
  __shared__ float scratch[32];
  CMHA_ROWS(l, lines, Group) {
    const int64_t base = line_base(l, n, inner);
    const X* xl = x + base;
    Y* yl = y + base;
    // The max keeps exp from overflowing; NaN is skipped here as by the CPU's.
    float m = -INFINITY;
    for (int64_t k = Group::lane(); k < n; k += kGroup) m = fmaxf(m, ld(xl[k * inner]));
    m = Group::max(m, scratch);
    float sum = 0.0f;
    for (int64_t k = Group::lane(); k < n; k += kGroup) sum += expf(ld(xl[k * inner]) - m);
    sum = Group::sum(sum, scratch);
    if (log) {
      // (x - m) - log Σ, not x - (m + log Σ): m may be large and would round.
      const float log_sum = logf(sum);
      for (int64_t k = Group::lane(); k < n; k += kGroup) st(yl[k * inner], (ld(xl[k * inner]) - m) - log_sum);
    } else {
      const float inv = 1.0f / sum;
      for (int64_t k = Group::lane(); k < n; k += kGroup) st(yl[k * inner], expf(ld(xl[k * inner]) - m) * inv);
    }
  }
}

template <typename X, typename Y>
__global__ void forward_thread_kernel(const X* x, Y* y, int64_t lines, int64_t n, int64_t inner, bool log) {
  CMHA_GRID_STRIDE(l, lines) {
    const int64_t base = line_base(l, n, inner);
    const X* xl = x + base;
    Y* yl = y + base;
    float m = -INFINITY;
    for (int64_t k = 0; k < n; ++k) m = fmaxf(m, ld(xl[k * inner]));
    float sum = 0.0f;
    for (int64_t k = 0; k < n; ++k) sum += expf(ld(xl[k * inner]) - m);
    if (log) {
      const float log_sum = logf(sum);
      for (int64_t k = 0; k < n; ++k) st(yl[k * inner], (ld(xl[k * inner]) - m) - log_sum);
    } else {
      const float inv = 1.0f / sum;
      for (int64_t k = 0; k < n; ++k) st(yl[k * inner], expf(ld(xl[k * inner]) - m) * inv);
    }
  }
}

// ---- backward ----
// softmax:     dx = y · (g - Σ g·y)
// log_softmax: dx = g - e^y · Σ g

template <int kGroup, typename Y, typename G, typename DX>
__global__ void __launch_bounds__(kRowBlock<kGroup>) backward_group_kernel(const Y* y, const G* g, DX* dx, int64_t lines, int64_t n, int64_t inner,
                                      bool log) {
  using Group = RowGroup<kGroup>;
  __shared__ float scratch[32];
  CMHA_ROWS(l, lines, Group) {
    const int64_t base = line_base(l, n, inner);
    const Y* yl = y + base;
    const G* gl = g + base;
    DX* dl = dx + base;
    float acc = 0.0f;
    for (int64_t k = Group::lane(); k < n; k += kGroup)
      acc += log ? ld(gl[k * inner]) : ld(gl[k * inner]) * ld(yl[k * inner]);
    acc = Group::sum(acc, scratch);
    for (int64_t k = Group::lane(); k < n; k += kGroup) {
      const int64_t e = k * inner;
      st(dl[e], log ? ld(gl[e]) - expf(ld(yl[e])) * acc : ld(yl[e]) * (ld(gl[e]) - acc));
    }
  }
}

template <typename Y, typename G, typename DX>
__global__ void backward_thread_kernel(const Y* y, const G* g, DX* dx, int64_t lines, int64_t n, int64_t inner,
                                       bool log) {
  CMHA_GRID_STRIDE(l, lines) {
    const int64_t base = line_base(l, n, inner);
    const Y* yl = y + base;
    const G* gl = g + base;
    DX* dl = dx + base;
    float acc = 0.0f;
    for (int64_t k = 0; k < n; ++k) acc += log ? ld(gl[k * inner]) : ld(gl[k * inner]) * ld(yl[k * inner]);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t e = k * inner;
      st(dl[e], log ? ld(gl[e]) - expf(ld(yl[e])) * acc : ld(yl[e]) * (ld(gl[e]) - acc));
    }
  }
}

bool thread_per_line(const Geometry& s) { return s.inner > 1 && s.outer * s.inner >= kThreadLinesMin; }

void forward(const Tensor& x, const Tensor& y, const Geometry& s, bool log) {
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.n == 0) return;
  const cudaStream_t stream = launch_stream(x);
  with_float_types(x, y, "softmax.forward", [&](auto tx, auto ty) {
    using X = decltype(tx);
    using Y = decltype(ty);
    const auto* px = static_cast<const X*>(x.raw_data());
    auto* py = static_cast<Y*>(y.raw_data());
    if (thread_per_line(s)) {
      forward_thread_kernel<X, Y><<<blocks_for(lines), kThreads, 0, stream>>>(px, py, lines, s.n, s.inner, log);
      check_launch("softmax.forward lines");
      return;
    }
    with_row_group(s.n, [&](auto group) {
      constexpr int G = decltype(group)::value;
      forward_group_kernel<G, X, Y>
          <<<row_blocks<G>(lines), row_threads<G>(), 0, stream>>>(px, py, lines, s.n, s.inner, log);
      check_launch("softmax.forward rows");
    });
  });
}

void backward(const Tensor& y, const Tensor& g, const Tensor& dx, const Geometry& s, bool log) {
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.n == 0) return;
  const cudaStream_t stream = launch_stream(dx);
  with_float_types(y, g, dx, "softmax.backward", [&](auto ty, auto tg, auto td) {
    using Y = decltype(ty);
    using Gr = decltype(tg);
    using DX = decltype(td);
    const auto* py = static_cast<const Y*>(y.raw_data());
    const auto* pg = static_cast<const Gr*>(g.raw_data());
    auto* pd = static_cast<DX*>(dx.raw_data());
    if (thread_per_line(s)) {
      backward_thread_kernel<Y, Gr, DX><<<blocks_for(lines), kThreads, 0, stream>>>(py, pg, pd, lines, s.n, s.inner, log);
      check_launch("softmax.backward lines");
      return;
    }
    with_row_group(s.n, [&](auto group) {
      constexpr int G = decltype(group)::value;
      backward_group_kernel<G, Y, Gr, DX>
          <<<row_blocks<G>(lines), row_threads<G>(), 0, stream>>>(py, pg, pd, lines, s.n, s.inner, log);
      check_launch("softmax.backward rows");
    });
  });
}

}  // namespace

backend::SoftmaxKernels softmax_kernels() {
  backend::SoftmaxKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cuda
