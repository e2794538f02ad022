// Element-wise arithmetic with NumPy broadcasting, forward and backward.
#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/cpu/strided.h"

namespace cmha {

namespace {

// out[i] = f(a[i], b[i]) over the broadcast shape of a and b (both f32).
template <typename F>
Tensor binary_kernel(const Tensor& a, const Tensor& b, const char* op, F f) {
  a.check_dtype(DType::f32, op);
  b.check_dtype(DType::f32, op);
  a.check_cpu(op);
  b.check_cpu(op);
  const Shape out_shape = cpu::broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(out_shape);
  float* o = out.data<float>();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const int64_t n = out.numel();
  if (a.shape() == out_shape && b.shape() == out_shape && a.is_contiguous() && b.is_contiguous()) {
#pragma omp parallel for simd schedule(static) if (n >= 32768)
    for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i], pb[i]);
    return out;
  }
  const Shape so = out.strides();
  const Shape sa = cpu::broadcast_strides(a, out_shape), sb = cpu::broadcast_strides(b, out_shape);
  cpu::for_each_row<3>(out_shape, {&so, &sa, &sb},
                       [&](const std::array<int64_t, 3>& base, int64_t len, const std::array<int64_t, 3>& step) {
                         float* op_ = o + base[0];
                         const float* ap = pa + base[1];
                         const float* bp = pb + base[2];
                         if (step[1] == 1 && step[2] == 1) {
#pragma omp simd
                           for (int64_t i = 0; i < len; ++i) op_[i] = f(ap[i], bp[i]);
                         } else if (step[1] == 1 && step[2] == 0) {
                           const float bv = bp[0];
#pragma omp simd
                           for (int64_t i = 0; i < len; ++i) op_[i] = f(ap[i], bv);
                         } else {
                           for (int64_t i = 0; i < len; ++i) op_[i] = f(ap[i * step[1]], bp[i * step[2]]);
                         }
                       });
  return out;
}

// out[i] = f(a[i]) (f32); a may be strided.
template <typename F>
Tensor unary_kernel(const Tensor& a, const char* op, F f) {
  a.check_dtype(DType::f32, op);
  a.check_cpu(op);
  Tensor ac = a.is_contiguous() ? a : a.detach().contiguous();
  Tensor out = Tensor::empty(a.shape());
  const float* pa = ac.data<float>();
  float* o = out.data<float>();
  const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static) if (n >= 32768)
  for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i]);
  return out;
}

}  // namespace

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  CMHA_CHECK(lead >= 0, "sum_to: cannot reduce " + x.describe() + " to the larger shape " + shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
  Tensor r = dims.empty() ? x : sum(x, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(a, b, "add", [](float x, float y) { return x + y; });
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record(out, "add", {a, b}, [sa, sb](const Tensor& g) {
      return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(a, b, "sub", [](float x, float y) { return x - y; });
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record(out, "sub", {a, b}, [sa, sb](const Tensor& g) {
      return std::vector<Tensor>{sum_to(g, sa), sum_to(neg(g), sb)};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(a, b, "mul", [](float x, float y) { return x * y; });
  if (autograd::needs_grad({a, b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::record(out, "mul", {a, b}, [a, b, ga, gb](const Tensor& g) {
      return std::vector<Tensor>{ga ? sum_to(mul(g, b), a.shape()) : Tensor(),
                                 gb ? sum_to(mul(g, a), b.shape()) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel(a, b, "div", [](float x, float y) { return x / y; });
  if (autograd::needs_grad({a, b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::record(out, "div", {a, b}, [a, b, out_ = out.detach(), ga, gb](const Tensor& g) {
      // d(a/b)/db = -(a/b)/b
      return std::vector<Tensor>{ga ? sum_to(div(g, b), a.shape()) : Tensor(),
                                 gb ? sum_to(neg(div(mul(g, out_), b)), b.shape()) : Tensor()};
    });
  }
  return out;
}

Tensor add_scalar(const Tensor& a, float s) {
  Tensor out = unary_kernel(a, "add_scalar", [s](float x) { return x + s; });
  if (autograd::needs_grad({a}))
    autograd::record(out, "add_scalar", {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return out;
}

Tensor mul_scalar(const Tensor& a, float s) {
  Tensor out = unary_kernel(a, "mul_scalar", [s](float x) { return x * s; });
  if (autograd::needs_grad({a}))
    autograd::record(out, "mul_scalar", {a}, [s](const Tensor& g) { return std::vector<Tensor>{mul_scalar(g, s)}; });
  return out;
}

Tensor neg(const Tensor& a) {
  Tensor out = unary_kernel(a, "neg", [](float x) { return -x; });
  if (autograd::needs_grad({a}))
    autograd::record(out, "neg", {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
  return out;
}

Tensor exp(const Tensor& a) {
  Tensor out = unary_kernel(a, "exp", [](float x) { return std::exp(x); });
  if (autograd::needs_grad({a}))
    autograd::record(out, "exp", {a}, [y = out.detach()](const Tensor& g) { return std::vector<Tensor>{mul(g, y)}; });
  return out;
}

Tensor log(const Tensor& a) {
  Tensor out = unary_kernel(a, "log", [](float x) { return std::log(x); });
  if (autograd::needs_grad({a}))
    autograd::record(out, "log", {a}, [a](const Tensor& g) { return std::vector<Tensor>{div(g, a.detach())}; });
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary_kernel(a, "sqrt", [](float x) { return std::sqrt(x); });
  if (autograd::needs_grad({a}))
    autograd::record(out, "sqrt", {a}, [y = out.detach()](const Tensor& g) {
      return std::vector<Tensor>{div(mul_scalar(g, 0.5f), y)};
    });
  return out;
}

Tensor pow_scalar(const Tensor& a, float e) {
  Tensor out = unary_kernel(a, "pow_scalar", [e](float x) { return std::pow(x, e); });
  if (autograd::needs_grad({a}))
    autograd::record(out, "pow_scalar", {a}, [a, e](const Tensor& g) {
      Tensor d = unary_kernel(a.detach(), "pow_scalar backward", [e](float x) { return e * std::pow(x, e - 1.0f); });
      return std::vector<Tensor>{mul(g, d)};
    });
  return out;
}

Tensor tanh(const Tensor& a) {
  Tensor out = unary_kernel(a, "tanh", [](float x) { return std::tanh(x); });
  if (autograd::needs_grad({a}))
    autograd::record(out, "tanh", {a}, [y = out.detach()](const Tensor& g) {
      Tensor d = unary_kernel(y, "tanh backward", [](float t) { return 1.0f - t * t; });
      return std::vector<Tensor>{mul(g, d)};
    });
  return out;
}

}  // namespace cmha
