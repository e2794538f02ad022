#pragma once
// Element-wise maps over contiguous f32 tensors for the CUDA kernels that
// apply a function element by element (activations, unary arithmetic), as
// backend/cpu/map.h for the CPU. F is a functor with a __device__
// operator() (nvcc's device lambdas need --extended-lambda, which cmha does
// not use).
#include <cstdint>

#include "backend/cuda/common.cuh"

namespace cmha::cuda {

template <typename F>
__global__ void map1_kernel(const float* a, float* out, int64_t n, F f) {
  CMHA_GRID_STRIDE(i, n) out[i] = f(a[i]);
}

template <typename F>
__global__ void map2_kernel(const float* a, const float* b, float* out,
                            int64_t n, F f) {
  CMHA_GRID_STRIDE(i, n) out[i] = f(a[i], b[i]);
}

// out[i] = f(a[i]); a, out contiguous f32 of one shape (`kernel` names the entry).
template <typename F>
void map1(const Tensor& a, const Tensor& out, F f, const char* kernel) {
  const int64_t n = out.numel();
  if (n == 0) return;
  map1_kernel<F><<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(static_cast<const float*>(a.raw_data()),
                                                                      static_cast<float*>(out.raw_data()), n, f);
  check_launch(kernel);
}

// out[i] = f(a[i], b[i]); a, b, out contiguous f32 of one shape.
template <typename F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f, const char* kernel) {
  const int64_t n = out.numel();
  if (n == 0) return;
  map2_kernel<F><<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(static_cast<const float*>(a.raw_data()),
                                                                      static_cast<const float*>(b.raw_data()),
                                                                      static_cast<float*>(out.raw_data()), n, f);
  check_launch(kernel);
}

}  // namespace cmha::cuda
