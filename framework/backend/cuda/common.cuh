#pragma once
// What every CUDA kernel file of backend/cuda/ shares: the stream a tensor's
// work goes on, launch geometry and checks, element loads and stores of every
// dtype, strided index arithmetic and block reductions.
//
// Conventions of the CUDA kernels:
// - Every launch goes on the device's one compute stream (launch_stream),
//   never the legacy default stream, and is followed by check_launch.
// - Loops are grid-stride over int64 indices: any size, including 0 (no
//   launch) and more than 2^31 elements.
// - Reductions accumulate in the type the CPU kernel documents (double for
//   sum/layer-norm statistics, f32 elsewhere) and in a fixed order per
//   launch geometry, so a result depends on the data and the shape only.
// - A kernel never synchronises; an entry that returns a host value copies
//   it back with cuda_copy_to_host, which waits for the stream.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <initializer_list>

#include "backend/element_types.h"
#include "tensor/cuda_runtime.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace cmha::cuda {

// ---- streams and launches ----------------------------------------------------

// The stream of `device`, made the current device first (a kernel launches on
// the current device, whose stream it must be).
inline cudaStream_t launch_stream(Device device) {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device.index)
    cuda_check(cudaSetDevice(device.index), "cudaSetDevice", "cannot use " + device.str());
  return static_cast<cudaStream_t>(cuda_stream(device.index));
}
inline cudaStream_t launch_stream(const Tensor& t) { return launch_stream(t.device()); }

// A bad launch (configuration, missing image for this GPU) is an error naming
// the kernel; a fault inside a kernel surfaces at the next synchronisation.
inline void check_launch(const char* kernel) {
  cuda_check(cudaGetLastError(), kernel, std::string("the CUDA kernel ") + kernel + " did not launch");
}

constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n elements: enough to fill any GPU
// (2^16 blocks of 256 threads), never more than the work.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

#define CMHA_GRID_STRIDE(i, n)                                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// ---- tensors handed to kernels ---------------------------------------------------

// The elements of `t` for a kernel: t must be a contiguous tensor of dtype T
// on a CUDA device (the contract of most entries), else an error naming `op`.
template <typename T>
T* device_data(const Tensor& t, const char* op) {
  t.check_dtype(dtype_of<T>(), op);
  CMHA_CHECK(!t.device().is_cpu(), std::string(op) + ": " + t.describe() + " is not on a CUDA device");
  CMHA_CHECK(t.is_contiguous(), std::string(op) + ": " + t.describe() + " must be contiguous");
  return static_cast<T*>(t.raw_data());
}

// ---- elements of every dtype ---------------------------------------------------

// bf16 and f16 are stored as cmha::bf16/f16 (uint16 bits). The conversions
// round as the CPU's (tensor/dtype.h): to nearest even, NaN stays NaN.
__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// NaN is converted explicitly, as x86 (F16C, AVX512-FP16) does it: the sign
// and the top payload bits kept, the quiet bit set. (The PTX conversions may
// return a canonical NaN instead, which would break bit-for-bit casts.)
__device__ __forceinline__ float f16_bits_to_float(uint16_t bits) {
  if ((bits & 0x7fffu) > 0x7c00u)
    return __uint_as_float((static_cast<uint32_t>(bits & 0x8000u) << 16) | 0x7fc00000u |
                           (static_cast<uint32_t>(bits & 0x03ffu) << 13));
  __half_raw r;
  r.x = bits;
  return __half2float(__half(r));
}
__device__ __forceinline__ uint16_t float_to_f16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x03ffu));
  const __half_raw r = __half_raw(__float2half_rn(f));
  return r.x;
}

// The floating element types the float kernels compute in f32 (f32 and bf16,
// as backend/cpu/element.h): a kernel templated on its element types reads
// through ld() and writes through st(), so one kernel serves f32, bf16 and
// mixed tensors, rounding as the CPU does.
__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ float ld(bf16 v) { return bf16_bits_to_float(v.bits); }
__device__ __forceinline__ void st(float& d, float v) { d = v; }
__device__ __forceinline__ void st(bf16& d, float v) { d.bits = float_to_bf16_bits(v); }

// The dispatch on each tensor's dtype is the devices' shared one.
using backend::with_float_type;
using backend::with_float_types;

// double -> integer as the CPU's static_cast compiles on x86 (cvttsd2si):
// truncation toward zero, and NaN or a value out of range gives the
// "integer indefinite" INT_MIN (the PTX conversion would saturate, NaN to 0).
__device__ __forceinline__ int32_t double_to_i32_x86(double v) {
  return v > -2147483649.0 && v < 2147483648.0 ? __double2int_rz(v) : INT32_MIN;
}
__device__ __forceinline__ int64_t double_to_i64_x86(double v) {
  return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? __double2ll_rz(v) : INT64_MIN;
}

// Element i of a buffer of `dtype`, as double (exact for every dtype but i64
// beyond 2^53, which the copies move without this path), and the store back.
__device__ __forceinline__ double load_as_double(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::f16: return f16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::b8: return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
    case DType::u8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0.0;
}
__device__ __forceinline__ void store_from_double(void* p, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = float_to_bf16_bits(static_cast<float>(v)); return;
    case DType::f16: static_cast<uint16_t*>(p)[i] = float_to_f16_bits(static_cast<float>(v)); return;
    case DType::i32: static_cast<int32_t*>(p)[i] = double_to_i32_x86(v); return;
    case DType::i64: static_cast<int64_t*>(p)[i] = double_to_i64_x86(v); return;
    case DType::b8: static_cast<uint8_t*>(p)[i] = v != 0.0 ? 1 : 0; return;
    case DType::u8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(double_to_i32_x86(v)); return;  // x86's low byte
  }
}

// Calls f(T{}) with T the type that stores one element of `dtype` on the
// device (bf16 and f16 as cmha::bf16/f16, b8 as uint8_t), so that a host
// entry can launch a kernel templated on its element types. u8 (image
// batches, which reach the GPU by transfer and leave image.prepare as f32)
// has no element kernels here: an error naming the dtype.
template <typename F>
void dispatch_element_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16{});
    case DType::f16: return f(f16{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::b8: return f(uint8_t{});
    case DType::u8: throw Error("CUDA copy/convert kernels take no u8 tensors (image batches go through image.prepare)");
  }
}

// ---- strided index arithmetic --------------------------------------------------

constexpr int kMaxDims = 8;

// The geometry of K operands walked over one shape: sizes of the walked
// shape, and each operand's element strides in it (0 where it broadcasts).
// Passed to kernels by value (a few hundred bytes of kernel parameters).
template <int K>
struct StridedGeometry {
  int dims = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[K][kMaxDims] = {};

  // The element offsets of linear index i (row-major over sizes) in each operand.
  __device__ __forceinline__ void offsets(int64_t i, int64_t (&out)[K]) const {
#pragma unroll
    for (int k = 0; k < K; ++k) out[k] = 0;
    for (int d = dims - 1; d >= 0; --d) {
      const int64_t idx = i % sizes[d];
      i /= sizes[d];
#pragma unroll
      for (int k = 0; k < K; ++k) out[k] += idx * strides[k][d];
    }
  }
};

// The geometry of operands with the given strides over `shape` (each strides
// vector as long as shape). Dimensions of size 1 are dropped and neighbours
// that are contiguous in every operand merged, so most views need one or two
// dims; more than kMaxDims left is an error naming `op`.
template <int K>
StridedGeometry<K> strided_geometry(const Shape& shape, const std::array<Shape, K>& strides, const char* op) {
  StridedGeometry<K> g;
  int64_t sizes[64];
  int64_t st[K][64];
  int n = 0;
  CMHA_CHECK(shape.size() <= 64, std::string(op) + ": more than 64 dimensions");
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = n > 0;
    for (int k = 0; k < K && merge; ++k) merge = st[k][n - 1] == strides[k][d] * shape[d];
    if (merge) {
      sizes[n - 1] *= shape[d];
      for (int k = 0; k < K; ++k) st[k][n - 1] = strides[k][d];
      continue;
    }
    sizes[n] = shape[d];
    for (int k = 0; k < K; ++k) st[k][n] = strides[k][d];
    ++n;
  }
  CMHA_CHECK(n <= kMaxDims, std::string(op) + ": the CUDA kernels walk at most 8 non-mergeable dimensions, this view has " +
                                std::to_string(n) + " (make it contiguous first)");
  g.dims = n;
  for (int d = 0; d < n; ++d) {
    g.sizes[d] = sizes[d];
    for (int k = 0; k < K; ++k) g.strides[k][d] = st[k][d];
  }
  return g;
}

// ---- block reductions ------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <typename T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024),
// returned to every thread. The order of the additions depends only on
// blockDim.x, so a result is reproducible. `scratch` holds 32 values.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}
// The maximum over the block, as block_sum (NaN propagates through fmax only
// when every value is NaN: callers that must see a NaN check for it).
template <typename T>
__device__ __forceinline__ T block_max(T v, T* scratch, T lowest) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : lowest;
  return warp_max(v);
}

}  // namespace cmha::cuda
