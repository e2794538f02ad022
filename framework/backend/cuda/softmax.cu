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

template <int kGroup>
__global__ void forward_group_kernel(const float* x, float* y, int64_t lines, int64_t n, int64_t inner, bool log) {
  using Group = RowGroup<kGroup>;
  __shared__ float scratch[32];
  CMHA_ROWS(l, lines, Group) {
    const int64_t base = line_base(l, n, inner);
    const float* xl = x + base;
    float* yl = y + base;
    // The max keeps exp from overflowing; NaN is skipped here as by the CPU's.
    float m = -INFINITY;
    for (int64_t k = Group::lane(); k < n; k += kGroup) m = fmaxf(m, xl[k * inner]);
    m = Group::max(m, scratch);
    float sum = 0.0f;
    for (int64_t k = Group::lane(); k < n; k += kGroup) sum += expf(xl[k * inner] - m);
    sum = Group::sum(sum, scratch);
    if (log) {
      // (x - m) - log Σ, not x - (m + log Σ): m may be large and would round.
      const float log_sum = logf(sum);
      for (int64_t k = Group::lane(); k < n; k += kGroup) yl[k * inner] = (xl[k * inner] - m) - log_sum;
    } else {
      const float inv = 1.0f / sum;
      for (int64_t k = Group::lane(); k < n; k += kGroup) yl[k * inner] = expf(xl[k * inner] - m) * inv;
    }
  }
}

__global__ void forward_thread_kernel(const float* x, float* y, int64_t lines, int64_t n, int64_t inner, bool log) {
  CMHA_GRID_STRIDE(l, lines) {
    const int64_t base = line_base(l, n, inner);
    const float* xl = x + base;
    float* yl = y + base;
    float m = -INFINITY;
    for (int64_t k = 0; k < n; ++k) m = fmaxf(m, xl[k * inner]);
    float sum = 0.0f;
    for (int64_t k = 0; k < n; ++k) sum += expf(xl[k * inner] - m);
    if (log) {
      const float log_sum = logf(sum);
      for (int64_t k = 0; k < n; ++k) yl[k * inner] = (xl[k * inner] - m) - log_sum;
    } else {
      const float inv = 1.0f / sum;
      for (int64_t k = 0; k < n; ++k) yl[k * inner] = expf(xl[k * inner] - m) * inv;
    }
  }
}

// ---- backward ----
// softmax:     dx = y · (g - Σ g·y)
// log_softmax: dx = g - e^y · Σ g

template <int kGroup>
__global__ void backward_group_kernel(const float* y, const float* g, float* dx, int64_t lines, int64_t n,
                                      int64_t inner, bool log) {
  using Group = RowGroup<kGroup>;
  __shared__ float scratch[32];
  CMHA_ROWS(l, lines, Group) {
    const int64_t base = line_base(l, n, inner);
    const float* yl = y + base;
    const float* gl = g + base;
    float* dl = dx + base;
    float acc = 0.0f;
    for (int64_t k = Group::lane(); k < n; k += kGroup) acc += log ? gl[k * inner] : gl[k * inner] * yl[k * inner];
    acc = Group::sum(acc, scratch);
    for (int64_t k = Group::lane(); k < n; k += kGroup) {
      const int64_t e = k * inner;
      dl[e] = log ? gl[e] - expf(yl[e]) * acc : yl[e] * (gl[e] - acc);
    }
  }
}

__global__ void backward_thread_kernel(const float* y, const float* g, float* dx, int64_t lines, int64_t n,
                                       int64_t inner, bool log) {
  CMHA_GRID_STRIDE(l, lines) {
    const int64_t base = line_base(l, n, inner);
    const float* yl = y + base;
    const float* gl = g + base;
    float* dl = dx + base;
    float acc = 0.0f;
    for (int64_t k = 0; k < n; ++k) acc += log ? gl[k * inner] : gl[k * inner] * yl[k * inner];
    for (int64_t k = 0; k < n; ++k) {
      const int64_t e = k * inner;
      dl[e] = log ? gl[e] - expf(yl[e]) * acc : yl[e] * (gl[e] - acc);
    }
  }
}

bool thread_per_line(const Geometry& s) { return s.inner > 1 && s.outer * s.inner >= kThreadLinesMin; }

void forward(const Tensor& x, const Tensor& y, const Geometry& s, bool log) {
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.n == 0) return;
  const cudaStream_t stream = launch_stream(x);
  const auto* px = static_cast<const float*>(x.raw_data());
  auto* py = static_cast<float*>(y.raw_data());
  if (thread_per_line(s)) {
    forward_thread_kernel<<<blocks_for(lines), kThreads, 0, stream>>>(px, py, lines, s.n, s.inner, log);
    check_launch("softmax.forward lines");
    return;
  }
  with_row_group(s.n, [&](auto group) {
    constexpr int G = decltype(group)::value;
    forward_group_kernel<G><<<row_blocks<G>(lines), row_threads<G>(), 0, stream>>>(px, py, lines, s.n, s.inner, log);
    check_launch("softmax.forward rows");
  });
}

void backward(const Tensor& y, const Tensor& g, const Tensor& dx, const Geometry& s, bool log) {
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.n == 0) return;
  const cudaStream_t stream = launch_stream(dx);
  const auto* py = static_cast<const float*>(y.raw_data());
  const auto* pg = static_cast<const float*>(g.raw_data());
  auto* pd = static_cast<float*>(dx.raw_data());
  if (thread_per_line(s)) {
    backward_thread_kernel<<<blocks_for(lines), kThreads, 0, stream>>>(py, pg, pd, lines, s.n, s.inner, log);
    check_launch("softmax.backward lines");
    return;
  }
  with_row_group(s.n, [&](auto group) {
    constexpr int G = decltype(group)::value;
    backward_group_kernel<G>
        <<<row_blocks<G>(lines), row_threads<G>(), 0, stream>>>(py, pg, pd, lines, s.n, s.inner, log);
    check_launch("softmax.backward rows");
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
