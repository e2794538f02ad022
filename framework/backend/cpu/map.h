#pragma once
// Element-wise maps over contiguous f32 tensors, the one loop of the CPU
// kernels that apply a function element by element (activations, unary
// arithmetic): vectorised, split across threads above kParallelMin.
#include <cstdint>

#include "backend/cpu/parallel.h"
#include "tensor/tensor.h"

namespace cmha::cpu {

// out[i] = f(a[i]); a, out contiguous f32 of one shape.
template <typename F>
void map1(const Tensor& a, const Tensor& out, F f) {
  const float* pa = a.data<float>();
  float* po = out.data<float>();
  const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i]);
}

// out[i] = f(a[i], b[i]); a, b, out contiguous f32 of one shape.
template <typename F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
}

}  // namespace cmha::cpu
