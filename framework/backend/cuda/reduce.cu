// CUDA kernels: reduce (entries of backend/reduce.h).
//
// sum: x is seen as [kept, reduced] through two strided geometries (each
// merged to as few dims as the view allows), out[o] = Σ_j x[o, j] in double.
// Two layouts of the work, chosen from the strides:
// - rows: the reduced elements are the nearer in memory (row sums): a warp
//   per output, its lanes along the reduction (coalesced);
// - columns: the kept elements are the nearer (bias gradients: leading dims
//   reduced): a thread per output walking its reduced elements in order, the
//   threads along the outputs (coalesced). With one chunk this is the CPU's
//   order exactly.
// Few outputs over many elements split each reduction into S fixed chunks:
// partial sums in double, [S, kept], then a second pass adds them in chunk
// order. S and the chunk length depend on the shape only, so the result does
// not depend on the GPU or the launch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cuda/kernel_table.h"
#include "backend/cuda/row_reduce.cuh"

namespace cmha::cuda {

namespace {

// The offset of linear index i in a one-operand geometry; most views merge
// to at most one dim, which needs no division.
__device__ __forceinline__ int64_t offset_of(const StridedGeometry<1>& g, int64_t i) {
  if (g.dims == 0) return 0;
  if (g.dims == 1) return i * g.strides[0][0];
  int64_t off[1];
  g.offsets(i, off);
  return off[0];
}

// ---- sum ----

// How one sum is split: S chunks of L reduced elements per output.
struct SumSplit {
  int64_t chunks = 1, length = 0;
};
// Chunks of at least min_length elements, as many as it takes to have about
// `target` work items over all outputs (and never fewer than one).
SumSplit split_sum(int64_t outputs, int64_t reduced, int64_t min_length, int64_t target) {
  SumSplit s;
  if (reduced == 0) return s;  // one empty chunk: the outputs are 0
  int64_t chunks = std::min((reduced + min_length - 1) / min_length, std::max<int64_t>(1, target / outputs));
  chunks = std::max<int64_t>(1, chunks);
  s.length = (reduced + chunks - 1) / chunks;
  s.chunks = (reduced + s.length - 1) / s.length;
  return s;
}

// Work item w = (chunk c, output o), o fastest: the chunk's double sum goes to
// out[o] when there is one chunk, else to partial[c * outputs + o].
__device__ __forceinline__ void store_sum(double acc, int64_t w, int64_t chunks, float* out, double* partial) {
  if (chunks == 1) out[w] = static_cast<float>(acc);
  else partial[w] = acc;
}

// A thread per work item, walking its chunk in order.
// x f32 or bf16 (a bf16 layer's bias gradient); the sums are double, out f32.
template <typename X>
__global__ void sum_columns_kernel(const X* x, StridedGeometry<1> kept, StridedGeometry<1> red, int64_t outputs,
                                   int64_t reduced, SumSplit split, float* out, double* partial) {
  CMHA_GRID_STRIDE(w, outputs * split.chunks) {
    const int64_t o = w % outputs, c = w / outputs;
    const X* xo = x + offset_of(kept, o);
    const int64_t j0 = c * split.length, j1 = std::min(reduced, j0 + split.length);
    double acc = 0.0;
    for (int64_t j = j0; j < j1; ++j) acc += ld(xo[offset_of(red, j)]);
    store_sum(acc, w, split.chunks, out, partial);
  }
}

// A warp per work item, its lanes along the chunk, then a warp sum.
template <typename X>
__global__ void __launch_bounds__(kRowBlock<32>) sum_rows_kernel(const X* x, StridedGeometry<1> kept, StridedGeometry<1> red, int64_t outputs,
                                int64_t reduced, SumSplit split, float* out, double* partial) {
  using Group = RowGroup<32>;
  CMHA_ROWS(w, outputs * split.chunks, Group) {
    const int64_t o = w % outputs, c = w / outputs;
    const X* xo = x + offset_of(kept, o);
    const int64_t j0 = c * split.length, j1 = std::min(reduced, j0 + split.length);
    double acc = 0.0;
    for (int64_t j = j0 + Group::lane(); j < j1; j += 32) acc += ld(xo[offset_of(red, j)]);
    acc = Group::sum(acc, static_cast<double*>(nullptr));
    if (Group::lane() == 0) store_sum(acc, w, split.chunks, out, partial);
  }
}

// out[o] = Σ_c partial[c, o], in chunk order.
__global__ void sum_chunks_kernel(const double* partial, int64_t outputs, int64_t chunks, float* out) {
  CMHA_GRID_STRIDE(o, outputs) {
    double acc = 0.0;
    for (int64_t c = 0; c < chunks; ++c) acc += partial[c * outputs + o];
    out[o] = static_cast<float>(acc);
  }
}

// The smallest stride among the dims of size > 1 (max when there are none).
int64_t min_stride(const StridedGeometry<1>& g) {
  int64_t m = std::numeric_limits<int64_t>::max();
  for (int d = 0; d < g.dims; ++d) m = std::min(m, g.strides[0][d] < 0 ? -g.strides[0][d] : g.strides[0][d]);
  return m;
}

void sum(const Tensor& x, const std::vector<int64_t>& reduced_dims, const Tensor& out) {
  // x [..] -> kept dims (in order) and reduced dims, each with x's strides.
  Shape kept_shape, kept_strides, red_shape, red_strides;
  for (int64_t i = 0, k = 0; i < x.dim(); ++i) {
    const bool is_reduced = k < static_cast<int64_t>(reduced_dims.size()) && reduced_dims[k] == i;
    (is_reduced ? red_shape : kept_shape).push_back(x.shape()[i]);
    (is_reduced ? red_strides : kept_strides).push_back(x.strides()[i]);
    if (is_reduced) ++k;
  }
  int64_t outputs = 1, reduced = 1;
  for (int64_t s : kept_shape) outputs *= s;
  for (int64_t s : red_shape) reduced *= s;
  if (outputs == 0) return;
  const StridedGeometry<1> kept = strided_geometry<1>(kept_shape, {kept_strides}, "reduce.sum");
  const StridedGeometry<1> red = strided_geometry<1>(red_shape, {red_strides}, "reduce.sum");
  // Rows when the reduction runs along the smaller stride (and has more than
  // a few elements: a warp over 7 would idle most lanes).
  const bool rows = red.dims > 0 && reduced >= 32 && min_stride(red) < min_stride(kept);
  // Rows: chunks of ≥ 32·16 elements, about 2^12 warps. Columns: chunks of
  // ≥ 64, about 2^16 threads.
  const SumSplit split = rows ? split_sum(outputs, reduced, 512, 4096) : split_sum(outputs, reduced, 64, 65536);
  const cudaStream_t stream = launch_stream(x);
  Tensor partial;  // [chunks, outputs] doubles (held as i64 of the same width)
  if (split.chunks > 1) partial = Tensor::empty({split.chunks * outputs}, DType::i64, x.device());
  double* pp = split.chunks > 1 ? static_cast<double*>(partial.raw_data()) : nullptr;
  auto* po = static_cast<float*>(out.raw_data());
  const int64_t work = outputs * split.chunks;
  with_float_type(x.dtype(), "reduce.sum", [&](auto tx) {
    using X = decltype(tx);
    const auto* px = static_cast<const X*>(x.raw_data());
    if (rows) {
      sum_rows_kernel<X><<<row_blocks<32>(work), row_threads<32>(), 0, stream>>>(px, kept, red, outputs, reduced,
                                                                                 split, po, pp);
      check_launch("reduce.sum rows");
    } else {
      sum_columns_kernel<X><<<blocks_for(work), kThreads, 0, stream>>>(px, kept, red, outputs, reduced, split, po, pp);
      check_launch("reduce.sum columns");
    }
  });
  if (split.chunks > 1) {
    sum_chunks_kernel<<<blocks_for(outputs), kThreads, 0, stream>>>(pp, outputs, split.chunks, po);
    check_launch("reduce.sum chunks");
  }
}

// ---- max ----

// Whether candidate (v, i) beats the best so far (best, bi): NaN above every
// number, then the larger value, then (equal values, ±0 included, or two
// NaNs) the smaller index. A strict total order, so a warp's tree gives the
// CPU's scan: the first occurrence of the maximum, or of the first NaN.
__device__ __forceinline__ bool beats(float v, int64_t i, float best, int64_t bi) {
  const bool vn = isnan(v), bn = isnan(best);
  if (vn != bn) return vn;
  if (vn || v == best) return i < bi;
  return v > best;
}

// A thread per output, scanning its n elements in order.
__global__ void max_scan_kernel(const float* x, StridedGeometry<1> kept, int64_t n, int64_t stride, int64_t outputs,
                                float* values, int64_t* indices) {
  CMHA_GRID_STRIDE(o, outputs) {
    const float* row = x + offset_of(kept, o);
    float best = row[0];
    int64_t bi = 0;
    for (int64_t i = 1; i < n; ++i) {
      const float v = row[i * stride];
      if (beats(v, i, best, bi)) {
        best = v;
        bi = i;
      }
    }
    values[o] = best;
    indices[o] = bi;
  }
}

// A warp per output (n ≥ 32): each lane scans i ≡ lane (mod 32), then the
// lanes' bests are combined by `beats`.
__global__ void __launch_bounds__(kRowBlock<32>) max_warp_kernel(const float* x, StridedGeometry<1> kept, int64_t n, int64_t stride, int64_t outputs,
                                float* values, int64_t* indices) {
  using Group = RowGroup<32>;
  CMHA_ROWS(o, outputs, Group) {
    const float* row = x + offset_of(kept, o);
    const int lane = Group::lane();
    float best = row[lane * stride];
    int64_t bi = lane;
    for (int64_t i = lane + 32; i < n; i += 32) {
      const float v = row[i * stride];
      if (beats(v, i, best, bi)) {
        best = v;
        bi = i;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, best, offset);
      const int64_t i = __shfl_xor_sync(0xffffffffu, bi, offset);
      if (beats(v, i, best, bi)) {
        best = v;
        bi = i;
      }
    }
    if (lane == 0) {
      values[o] = best;
      indices[o] = bi;
    }
  }
}

void max(const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices) {
  // x [..., n, ...] -> kept dims (x without `dim`) and the n elements along it.
  Shape kept_shape, kept_strides;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != dim) {
      kept_shape.push_back(x.shape()[i]);
      kept_strides.push_back(x.strides()[i]);
    }
  const int64_t n = x.shape()[dim], stride = x.strides()[dim], outputs = values.numel();
  if (outputs == 0) return;
  const StridedGeometry<1> kept = strided_geometry<1>(kept_shape, {kept_strides}, "reduce.max");
  const cudaStream_t stream = launch_stream(x);
  const auto* px = static_cast<const float*>(x.raw_data());
  auto* pv = static_cast<float*>(values.raw_data());
  auto* pi = static_cast<int64_t*>(indices.raw_data());
  // A warp per output when the row is long and runs along the smallest stride
  // (its lanes then read neighbours); otherwise a thread per output.
  const int64_t abs_stride = stride < 0 ? -stride : stride;
  if (n >= 64 && abs_stride < min_stride(kept)) {
    max_warp_kernel<<<row_blocks<32>(outputs), row_threads<32>(), 0, stream>>>(px, kept, n, stride, outputs, pv, pi);
    check_launch("reduce.max warp");
  } else {
    max_scan_kernel<<<blocks_for(outputs), kThreads, 0, stream>>>(px, kept, n, stride, outputs, pv, pi);
    check_launch("reduce.max scan");
  }
}

// ---- max_backward ----

// Operands 0: g, 1: indices, 2: dx, walked over g's shape (dx's with `dim`
// of size 1); dx's element of g's is `dim_stride`·index further on.
__global__ void max_backward_kernel(const float* g, const int64_t* indices, float* dx, StridedGeometry<3> geo,
                                    int64_t dim_stride, int64_t n) {
  CMHA_GRID_STRIDE(i, n) {
    int64_t off[3];
    geo.offsets(i, off);
    dx[off[2] + indices[off[1]] * dim_stride] += g[off[0]];
  }
}

void max_backward(const Tensor& g, const Tensor& indices, int64_t dim, const Tensor& dx) {
  const int64_t n = g.numel();
  if (n == 0) return;
  // dx is contiguous: its strides are the running products of its sizes.
  Shape dx_strides(dx.dim());
  int64_t running = 1;
  for (int64_t d = dx.dim() - 1; d >= 0; --d) {
    dx_strides[d] = running;
    running *= dx.shape()[d];
  }
  const int64_t dim_stride = dx_strides[dim];
  const StridedGeometry<3> geo =
      strided_geometry<3>(g.shape(), {g.strides(), indices.strides(), dx_strides}, "reduce.max_backward");
  // Each (g element) owns one dx element: no two threads add to the same one.
  max_backward_kernel<<<blocks_for(n), kThreads, 0, launch_stream(dx)>>>(
      static_cast<const float*>(g.raw_data()), static_cast<const int64_t*>(indices.raw_data()),
      static_cast<float*>(dx.raw_data()), geo, dim_stride, n);
  check_launch("reduce.max_backward");
}

// ---- target_rank ----

// A warp per row: the classes scoring strictly above the target's.
__global__ void __launch_bounds__(kRowBlock<32>) target_rank_kernel(const float* z, const int64_t* target, int64_t* rank, int64_t rows,
                                   int64_t classes) {
  using Group = RowGroup<32>;
  CMHA_ROWS(b, rows, Group) {
    const float* row = z + b * classes;
    const float t = row[target[b]];
    long long better = 0;
    for (int64_t c = Group::lane(); c < classes; c += 32) better += row[c] > t;
    better = Group::sum(better, static_cast<long long*>(nullptr));
    if (Group::lane() == 0) rank[b] = better;
  }
}

void target_rank(const Tensor& z, const Tensor& target, const Tensor& rank) {
  const int64_t rows = z.size(0), classes = z.size(1);
  if (rows == 0) return;
  target_rank_kernel<<<row_blocks<32>(rows), row_threads<32>(), 0, launch_stream(z)>>>(
      static_cast<const float*>(z.raw_data()), static_cast<const int64_t*>(target.raw_data()),
      static_cast<int64_t*>(rank.raw_data()), rows, classes);
  check_launch("reduce.target_rank");
}

}  // namespace

backend::ReduceKernels reduce_kernels() {
  backend::ReduceKernels k;
  k.sum = sum;
  k.max = max;
  k.max_backward = max_backward;
  k.target_rank = target_rank;
  return k;
}

}  // namespace cmha::cuda
