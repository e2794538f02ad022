// CUDA kernels: index (entries of backend/index.h): the index range check,
// masked_fill, gather and its scatter-add backward. Everything but the
// backward moves elements as bytes (an unsigned integer as wide as the
// dtype), so results are the CPU's bit for bit; the backward sums each line
// along `dim` in index order, as the CPU does, so it is bit for bit too.
#include <climits>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/element_bits.h"
#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {

namespace {

// Calls f(U{}) with U the unsigned integer as wide as one element of `dtype`.
template <typename F>
void dispatch_width(DType dtype, F&& f) {
  switch (dtype_size(dtype)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

// ---- find_out_of_range ------------------------------------------------------------

// first[0] = min over bad positions i (idx[i] outside [0, limit)), or stays
// ULLONG_MAX. A minimum does not depend on the order the threads reach it.
// Each thread's positions rise, so its first bad one is its minimum.
__global__ void first_out_of_range_kernel(const int64_t* idx, int64_t n, int64_t limit, unsigned long long* first) {
  unsigned long long mine = ULLONG_MAX;
  CMHA_GRID_STRIDE(i, n) {
    const int64_t v = idx[i];
    if (v < 0 || v >= limit) {
      mine = static_cast<unsigned long long>(i);
      break;
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, mine, offset);
    mine = other < mine ? other : mine;
  }
  if (threadIdx.x % 32 == 0 && mine != ULLONG_MAX) atomicMin(first, mine);
}

// found[1] = idx[found[0]] when a bad position was found, else 0 (found[0]
// all ones: -1 as an i64).
__global__ void out_of_range_value_kernel(const int64_t* idx, unsigned long long* found) {
  found[1] = found[0] != ULLONG_MAX ? static_cast<unsigned long long>(idx[found[0]]) : 0;
}

// Into found, on the device: the host reads it when it checks (autograd/deferred_checks.h).
void find_out_of_range(const Tensor& idx, int64_t limit, const Tensor& found) {
  idx.check_dtype(DType::i64, "index check");
  CMHA_CHECK(found.dtype() == DType::i64 && found.numel() == 2 && found.device() == idx.device(),
             "index check: found " + found.describe() + " must be i64 [2] on " + idx.device().str());
  const int64_t n = idx.numel();
  // [position, value], position all ones until a bad element is found.
  auto* pf = static_cast<unsigned long long*>(found.raw_data());
  const auto* pi = static_cast<const int64_t*>(idx.raw_data());
  const cudaStream_t stream = launch_stream(idx);
  cuda_check(cudaMemsetAsync(pf, 0xff, 2 * sizeof(int64_t), stream), "cudaMemsetAsync", "index check");
  if (n > 0) {
    first_out_of_range_kernel<<<blocks_for(n), kThreads, 0, stream>>>(pi, n, limit, pf);
    check_launch("index.find_out_of_range");
  }
  out_of_range_value_kernel<<<1, 1, 0, stream>>>(pi, pf);
  check_launch("index.find_out_of_range");
}

// ---- masked_fill ------------------------------------------------------------------

// out (contiguous, x's shape) = mask ? fill : x; geometry operand 0: x,
// operand 1: mask (stride 0 where it broadcasts).
template <typename U>
__global__ void masked_fill_kernel(const U* x, const uint8_t* mask, U* out, StridedGeometry<2> g, int64_t n, U fill) {
  CMHA_GRID_STRIDE(i, n) {
    int64_t at[2];
    g.offsets(i, at);
    out[i] = mask[at[1]] != 0 ? fill : x[at[0]];
  }
}

void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& out, double value) {
  mask.check_dtype(DType::b8, "masked_fill");
  const int64_t n = x.numel();
  if (n == 0) return;
  const StridedGeometry<2> g =
      strided_geometry<2>(x.shape(), {x.strides(), broadcast_strides(mask, x.shape())}, "masked_fill");
  const uint64_t bits = element_bits(x.dtype(), value);  // the CPU's conversion of value
  const cudaStream_t stream = launch_stream(out);
  dispatch_width(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    masked_fill_kernel<U><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const U*>(x.raw_data()), static_cast<const uint8_t*>(mask.raw_data()),
        static_cast<U*>(out.raw_data()), g, n, static_cast<U>(bits));
  });
  check_launch("index.masked_fill");
}

// ---- gather -----------------------------------------------------------------------

// out[p] (contiguous, index's shape) = x at p's coordinates with coordinate
// `dim` replaced by index[p]. Geometry over index's shape, operand 0: index,
// operand 1: x with its stride along dim zeroed (added back as
// index[p]·x_dim_stride).
template <typename U>
__global__ void gather_kernel(const U* x, const int64_t* index, U* out, StridedGeometry<2> g, int64_t x_dim_stride,
                              int64_t n) {
  CMHA_GRID_STRIDE(i, n) {
    int64_t at[2];
    g.offsets(i, at);
    out[i] = x[at[1] + index[at[0]] * x_dim_stride];
  }
}

void gather(const Tensor& x, const Tensor& index, const Tensor& out, int64_t d) {
  index.check_dtype(DType::i64, "gather");
  const int64_t n = index.numel();
  if (n == 0) return;
  Shape x_strides = x.strides();
  const int64_t x_dim_stride = x_strides[d];
  x_strides[d] = 0;
  const StridedGeometry<2> g = strided_geometry<2>(index.shape(), {index.strides(), x_strides}, "gather");
  const cudaStream_t stream = launch_stream(out);
  dispatch_width(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    gather_kernel<U><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const U*>(x.raw_data()),
                                                             static_cast<const int64_t*>(index.raw_data()),
                                                             static_cast<U*>(out.raw_data()), g, x_dim_stride, n);
  });
  check_launch("index.gather");
}

// One thread owns each line along `dim` (every coordinate but dim fixed):
// the line of index reads and writes only the grad_x line with the same
// other coordinates, so lines never collide, and the thread adds its line in
// index order, as the CPU does (the same f32 additions in the same order).
// Geometry over index's shape with dim dropped, operands 0: grad, 1: index,
// 2: grad_x; `step` are their strides along dim.
__global__ void gather_backward_kernel(const float* grad, const int64_t* index, float* grad_x, StridedGeometry<3> g,
                                       int64_t lines, int64_t len, int64_t grad_step, int64_t index_step,
                                       int64_t grad_x_step) {
  CMHA_GRID_STRIDE(l, lines) {
    int64_t at[3];
    g.offsets(l, at);
    const float* gr = grad + at[0];
    const int64_t* ir = index + at[1];
    float* xr = grad_x + at[2];
    for (int64_t j = 0; j < len; ++j) xr[ir[j * index_step] * grad_x_step] += gr[j * grad_step];
  }
}

void gather_backward(const Tensor& grad, const Tensor& index, const Tensor& grad_x, int64_t d) {
  index.check_dtype(DType::i64, "gather backward");
  const int64_t n = index.numel();
  if (n == 0) return;
  const int64_t len = index.shape()[d], lines = n / len;
  Shape line_shape = index.shape();  // [..., len, ...] -> [..., 1, ...]: one entry per line
  line_shape[d] = 1;
  const StridedGeometry<3> g =
      strided_geometry<3>(line_shape, {grad.strides(), index.strides(), grad_x.strides()}, "gather backward");
  gather_backward_kernel<<<blocks_for(lines), kThreads, 0, launch_stream(grad_x)>>>(
      static_cast<const float*>(grad.raw_data()), static_cast<const int64_t*>(index.raw_data()),
      static_cast<float*>(grad_x.raw_data()), g, lines, len, grad.strides()[d], index.strides()[d],
      grad_x.strides()[d]);
  check_launch("index.gather_backward");
}

}  // namespace

backend::IndexKernels index_kernels() {
  backend::IndexKernels k;
  k.find_out_of_range = find_out_of_range;
  k.masked_fill = masked_fill;
  k.gather = gather;
  k.gather_backward = gather_backward;
  return k;
}

}  // namespace cmha::cuda
