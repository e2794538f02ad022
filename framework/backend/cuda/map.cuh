#pragma once
// Element-wise maps over contiguous tensors for the CUDA kernels that apply a
// function element by element (activations, unary arithmetic), as
// backend/cpu/map.h for the CPU: f32 arithmetic on f32 or bf16 elements (each
// tensor its own). F is a functor with a __device__ operator() (nvcc's device
// lambdas need --extended-lambda, which cmha does not use).
#include <cstdint>

#include "backend/cuda/common.cuh"

namespace cmha::cuda {

template <typename A, typename O, typename F>
__global__ void map1_kernel(const A* a, O* out, int64_t n, F f) {
  CMHA_GRID_STRIDE(i, n) st(out[i], f(ld(a[i])));
}

template <typename A, typename B, typename O, typename F>
__global__ void map2_kernel(const A* a, const B* b, O* out, int64_t n, F f) {
  CMHA_GRID_STRIDE(i, n) st(out[i], f(ld(a[i]), ld(b[i])));
}

// out[i] = f(a[i]); a, out contiguous, of one shape, f32 or bf16 (`kernel` names the entry).
template <typename F>
void map1(const Tensor& a, const Tensor& out, F f, const char* kernel) {
  const int64_t n = out.numel();
  if (n == 0) return;
  with_float_types(a, out, kernel, [&](auto ta, auto to) {
    using A = decltype(ta);
    using O = decltype(to);
    map1_kernel<A, O, F><<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(
        static_cast<const A*>(a.raw_data()), static_cast<O*>(out.raw_data()), n, f);
  });
  check_launch(kernel);
}

// out[i] = f(a[i], b[i]); a, b, out contiguous, of one shape, f32 or bf16.
template <typename F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f, const char* kernel) {
  const int64_t n = out.numel();
  if (n == 0) return;
  with_float_types(a, b, out, kernel, [&](auto ta, auto tb, auto to) {
    using A = decltype(ta);
    using B = decltype(tb);
    using O = decltype(to);
    map2_kernel<A, B, O, F><<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(
        static_cast<const A*>(a.raw_data()), static_cast<const B*>(b.raw_data()), static_cast<O*>(out.raw_data()),
        n, f);
  });
  check_launch(kernel);
}

}  // namespace cmha::cuda
