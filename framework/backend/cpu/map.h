#pragma once
// Element-wise maps over contiguous tensors, the one loop of the CPU kernels
// that apply a function element by element (activations, unary arithmetic):
// f32 arithmetic on f32 or bf16 elements (each tensor its own), vectorised,
// split across threads above kParallelMin.
#include <cstdint>

#include "backend/cpu/element.h"
#include "backend/cpu/parallel.h"
#include "tensor/tensor.h"

namespace cmha::cpu {

// out[i] = f(a[i]); a, out contiguous, of one shape, f32 or bf16.
template <typename F>
void map1(const Tensor& a, const Tensor& out, F f, const char* kernel = "map") {
  with_float_types(a, out, kernel, [&](auto ta, auto to) {
    const auto* pa = a.data<decltype(ta)>(kernel);
    auto* po = out.data<decltype(to)>(kernel);
    const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) st(po[i], f(ld(pa[i])));
  });
}

// out[i] = f(a[i], b[i]); a, b, out contiguous, of one shape, f32 or bf16.
template <typename F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f, const char* kernel = "map") {
  with_float_types(a, b, out, kernel, [&](auto ta, auto tb, auto to) {
    const auto* pa = a.data<decltype(ta)>(kernel);
    const auto* pb = b.data<decltype(tb)>(kernel);
    auto* po = out.data<decltype(to)>(kernel);
    const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) st(po[i], f(ld(pa[i]), ld(pb[i])));
  });
}

}  // namespace cmha::cpu
