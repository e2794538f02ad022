// CPU kernels: elementwise (entries of backend/elementwise.h).
// Each op is its own instantiation of the templated loops below: the op enum
// is switched on once per call, never per element.
#include <array>
#include <cmath>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/map.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/strided.h"

namespace cmha::cpu {

namespace {

using backend::BinaryOp;
using backend::UnaryOp;

// out[i] = f(a[i], b[i]) over the broadcast shape of a and b (each f32 or
// bf16, out too; f32 arithmetic).
template <typename F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  with_float_types(a, b, out, "binary", [&](auto ta, auto tb, auto to) {
    using A = decltype(ta);
    using B = decltype(tb);
    using O = decltype(to);
    const Shape& out_shape = out.shape();
    O* o = out.data<O>("binary");
    const A* pa = a.data<A>("binary");
    const B* pb = b.data<B>("binary");
    const int64_t n = out.numel();
    if (a.shape() == out_shape && b.shape() == out_shape && a.is_contiguous() && b.is_contiguous()) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
      for (int64_t i = 0; i < n; ++i) st(o[i], f(ld(pa[i]), ld(pb[i])));
      return;
    }
    const Shape so = out.strides();
    const Shape sa = broadcast_strides(a, out_shape), sb = broadcast_strides(b, out_shape);
    for_each_row<3>(out_shape, {&so, &sa, &sb},
                    [&](const std::array<int64_t, 3>& base, int64_t len, const std::array<int64_t, 3>& step) {
                      O* op_ = o + base[0];
                      const A* ap = pa + base[1];
                      const B* bp = pb + base[2];
                      if (step[1] == 1 && step[2] == 1) {
#pragma omp simd
                        for (int64_t i = 0; i < len; ++i) st(op_[i], f(ld(ap[i]), ld(bp[i])));
                      } else if (step[1] == 1 && step[2] == 0) {
                        const float bv = ld(bp[0]);
#pragma omp simd
                        for (int64_t i = 0; i < len; ++i) st(op_[i], f(ld(ap[i]), bv));
                      } else {
                        for (int64_t i = 0; i < len; ++i) st(op_[i], f(ld(ap[i * step[1]]), ld(bp[i * step[2]])));
                      }
                    });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::add: return binary_loop(a, b, out, [](float x, float y) { return x + y; });
    case BinaryOp::sub: return binary_loop(a, b, out, [](float x, float y) { return x - y; });
    case BinaryOp::mul: return binary_loop(a, b, out, [](float x, float y) { return x * y; });
    case BinaryOp::div: return binary_loop(a, b, out, [](float x, float y) { return x / y; });
  }
}

void unary(UnaryOp op, const Tensor& a, const Tensor& out, float s) {
  switch (op) {
    case UnaryOp::add_scalar: return map1(a, out, [s](float x) { return x + s; });
    case UnaryOp::mul_scalar: return map1(a, out, [s](float x) { return x * s; });
    case UnaryOp::neg: return map1(a, out, [](float x) { return -x; });
    case UnaryOp::exp: return map1(a, out, [](float x) { return std::exp(x); });
    case UnaryOp::log: return map1(a, out, [](float x) { return std::log(x); });
    case UnaryOp::sqrt: return map1(a, out, [](float x) { return std::sqrt(x); });
    case UnaryOp::pow_scalar: return map1(a, out, [e = s](float x) { return std::pow(x, e); });
    case UnaryOp::tanh: return map1(a, out, [](float x) { return std::tanh(x); });
    case UnaryOp::pow_scalar_grad:
      return map1(a, out, [e = s](float x) { return e * std::pow(x, e - 1.0f); });
    case UnaryOp::tanh_grad: return map1(a, out, [](float t) { return 1.0f - t * t; });
  }
}

}  // namespace

backend::ElementwiseKernels elementwise_kernels() {
  backend::ElementwiseKernels k;
  k.binary = binary;
  k.unary = unary;
  return k;
}

}  // namespace cmha::cpu
