// CUDA kernels: copies, fills and casts (entries of backend/copy.h).
//
// Every conversion gives the CPU's bits (backend/cpu/copy.cpp converts
// through double with store_from_double): bf16/f16 round to nearest even with
// the CPU's NaN bits, i64 goes to floats through double (two roundings, as
// the CPU), and floats or i64 go to i32/i64 as x86 truncates (NaN and values
// out of range give INT_MIN).
#include <cmath>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/element_bits.h"
#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {

namespace {

// ---- element conversions -------------------------------------------------------

template <typename T>
constexpr bool is_float_element = std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

__device__ __forceinline__ float element_to_float(float v) { return v; }
__device__ __forceinline__ float element_to_float(bf16 v) { return bf16_bits_to_float(v.bits); }
__device__ __forceinline__ float element_to_float(f16 v) { return f16_bits_to_float(v.bits); }

// A float value (exact as a double) stored as D: the CPU's store_from_double.
template <typename D>
__device__ __forceinline__ D from_float(float f) {
  if constexpr (std::is_same_v<D, float>) return f;
  else if constexpr (std::is_same_v<D, bf16>) return bf16{float_to_bf16_bits(f)};
  else if constexpr (std::is_same_v<D, f16>) return f16{float_to_f16_bits(f)};
  else if constexpr (std::is_same_v<D, int32_t>) return double_to_i32_x86(f);
  else if constexpr (std::is_same_v<D, int64_t>) return double_to_i64_x86(f);
  else return static_cast<uint8_t>(f != 0.0f ? 1 : 0);  // NaN is true, as on the CPU
}

// A double (an integer element's value) stored as D. The intrinsics pin the
// roundings: double to float, then float to bf16/f16, as the CPU does.
template <typename D>
__device__ __forceinline__ D from_double(double d) {
  if constexpr (std::is_same_v<D, float>) return __double2float_rn(d);
  else if constexpr (std::is_same_v<D, bf16>) return bf16{float_to_bf16_bits(__double2float_rn(d))};
  else if constexpr (std::is_same_v<D, f16>) return f16{float_to_f16_bits(__double2float_rn(d))};
  else if constexpr (std::is_same_v<D, int32_t>) return double_to_i32_x86(d);
  else if constexpr (std::is_same_v<D, int64_t>) return double_to_i64_x86(d);
  else return static_cast<uint8_t>(d != 0.0 ? 1 : 0);
}

// v as the CPU's convert<D>(v): exact when the types are equal.
template <typename D, typename S>
__device__ __forceinline__ D convert(S v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else if constexpr (is_float_element<S>) return from_float<D>(element_to_float(v));
  else if constexpr (std::is_same_v<S, uint8_t>) return from_float<D>(v != 0 ? 1.0f : 0.0f);
  else if constexpr (std::is_same_v<S, int32_t>) return from_double<D>(__int2double_rn(v));  // exact
  else return from_double<D>(__ll2double_rn(v));                                               // i64: rounds
}

// ---- copy -----------------------------------------------------------------------

template <typename D, typename S>
__global__ void copy_contiguous_kernel(D* dst, const S* src, int64_t n) {
  CMHA_GRID_STRIDE(i, n) dst[i] = convert<D>(src[i]);
}

// geometry operand 0: dst, operand 1: src (stride 0 where it broadcasts).
template <typename D, typename S>
__global__ void copy_strided_kernel(D* dst, const S* src, StridedGeometry<2> g, int64_t n) {
  CMHA_GRID_STRIDE(i, n) {
    int64_t at[2];
    g.offsets(i, at);
    dst[at[0]] = convert<D>(src[at[1]]);
  }
}

void copy(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const StridedGeometry<2> g =
      strided_geometry<2>(dst.shape(), {dst.strides(), broadcast_strides(src, dst.shape())}, "copy");
  // One run of consecutive elements on both sides (after merging dims).
  const bool contiguous = g.dims == 0 || (g.dims == 1 && g.strides[0][0] == 1 && g.strides[1][0] == 1);
  if (contiguous && dst.dtype() == src.dtype()) {
    // Device to device on the stream, bytes as they are.
    cuda_copy_to_device(dst.raw_data(), src.raw_data(), dst.nbytes(), dst.device().index);
    return;
  }
  const cudaStream_t stream = launch_stream(dst);
  dispatch_element_type(dst.dtype(), [&](auto d_tag) {
    using D = decltype(d_tag);
    dispatch_element_type(src.dtype(), [&](auto s_tag) {
      using S = decltype(s_tag);
      D* d = static_cast<D*>(dst.raw_data());
      const S* s = static_cast<const S*>(src.raw_data());
      if (contiguous) copy_contiguous_kernel<D, S><<<blocks_for(n), kThreads, 0, stream>>>(d, s, n);
      else copy_strided_kernel<D, S><<<blocks_for(n), kThreads, 0, stream>>>(d, s, g, n);
    });
  });
  check_launch("copy.copy");
}

// ---- fill -----------------------------------------------------------------------

// U: an unsigned integer as wide as the element; `bits` the value's bytes.
template <typename U>
__global__ void fill_strided_kernel(U* dst, StridedGeometry<1> g, int64_t n, U bits) {
  CMHA_GRID_STRIDE(i, n) {
    int64_t at[1];
    g.offsets(i, at);
    dst[at[0]] = bits;
  }
}

template <typename U>
void fill_as(const Tensor& dst, double value, const StridedGeometry<1>& g, int64_t n) {
  const U bits = static_cast<U>(element_bits(dst.dtype(), value));
  fill_strided_kernel<U><<<blocks_for(n), kThreads, 0, launch_stream(dst)>>>(static_cast<U*>(dst.raw_data()), g, n,
                                                                             bits);
  check_launch("copy.fill");
}

void fill(const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const StridedGeometry<1> g = strided_geometry<1>(dst.shape(), {dst.strides()}, "fill");
  // All-zero bits are 0 in every dtype (not -0.0): one memset when contiguous.
  if (value == 0.0 && !std::signbit(value) && dst.is_contiguous()) {
    cuda_check(cudaMemsetAsync(dst.raw_data(), 0, dst.nbytes(), launch_stream(dst)), "cudaMemsetAsync",
               "copy.fill: cannot zero " + dst.describe());
    return;
  }
  switch (dtype_size(dst.dtype())) {
    case 1: return fill_as<uint8_t>(dst, value, g, n);
    case 2: return fill_as<uint16_t>(dst, value, g, n);
    case 4: return fill_as<uint32_t>(dst, value, g, n);
    default: return fill_as<uint64_t>(dst, value, g, n);
  }
}

// ---- iota -----------------------------------------------------------------------

// dst[i] = i as the CPU stores it: store_from_double(double(i)).
template <typename T>
__global__ void iota_kernel(T* dst, int64_t n) {
  CMHA_GRID_STRIDE(i, n) dst[i] = from_double<T>(__ll2double_rn(i));
}

void iota(const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const cudaStream_t stream = launch_stream(dst);
  dispatch_element_type(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    iota_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst.raw_data()), n);
  });
  check_launch("copy.iota");
}

// ---- transfer -------------------------------------------------------------------

// Host <-> this device, bytes as they are; to the host waits for the stream
// (the caller reads the bytes next).
void transfer(const Tensor& dst, const Tensor& src) {
  CMHA_CHECK(dst.device().is_cpu() != src.device().is_cpu(),
             "copy.transfer: exactly one of " + dst.describe() + " and " + src.describe() + " must be on the CPU");
  CMHA_CHECK(dst.dtype() == src.dtype() && dst.shape() == src.shape() && dst.is_contiguous() && src.is_contiguous(),
             "copy.transfer: " + src.describe() + " -> " + dst.describe() +
                 " needs one dtype, one shape and contiguous tensors");
  if (dst.nbytes() == 0) return;
  if (dst.device().is_cpu()) cuda_copy_to_host(dst.raw_data(), src.raw_data(), dst.nbytes(), src.device().index);
  else cuda_copy_to_device(dst.raw_data(), src.raw_data(), dst.nbytes(), dst.device().index);
}

}  // namespace

backend::CopyKernels copy_kernels() { return {.copy = copy, .fill = fill, .iota = iota, .transfer = transfer}; }

}  // namespace cmha::cuda
