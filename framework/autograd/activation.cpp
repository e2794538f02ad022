// ReLU and GELU (exact erf form and the tanh approximation): one vectorised
// pass forward, one backward.
#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/cpu/vec_math.h"

namespace cmha {

namespace {

constexpr int64_t kParallelMin = 32768;  // below this, waking threads costs more than it saves

// x as a contiguous f32 CPU tensor (a strided view is copied, outside autograd).
Tensor contiguous_f32(const Tensor& x, const char* op) {
  x.check_dtype(DType::f32, op);
  x.check_cpu(op);
  return x.is_contiguous() ? x : x.detach().contiguous();
}

// out[i] = f(a[i]); a contiguous f32.
template <typename F>
Tensor map1(const Tensor& a, F f) {
  Tensor out = Tensor::empty(a.shape());
  const float* pa = a.data<float>();
  float* po = out.data<float>();
  const int64_t n = a.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i]);
  return out;
}

// out[i] = f(a[i], b[i]); a, b contiguous f32 of one shape.
template <typename F>
Tensor map2(const Tensor& a, const Tensor& b, F f) {
  Tensor out = Tensor::empty(a.shape());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t n = a.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
  return out;
}

constexpr float kSqrtHalf = 0.70710678118654752f;   // 1/√2
constexpr float kInvSqrt2Pi = 0.39894228040143268f; // 1/√(2π)
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

// Φ(x) = erfc(-x/√2)/2, the normal CDF, also handing back e^(-x²/2). The
// tail Φ(-|x|) = e^(-x²/2)·erfcx(|x|/√2)/2 has no cancellation, so unlike
// (1 + erf(x/√2))/2 it stays accurate for negative x.
[[gnu::always_inline]] inline float normal_cdf(float x, float& exp_neg_half_x2) {
  const float az = std::fabs(x) * kSqrtHalf;
  // Flushing e^(-x²/2) below 1e-38 drops nothing f32 can show: Φ is then
  // below 1e-39 and φ·x below 1e-30 for any finite x. NaN still comes out
  // through erfcx.
  exp_neg_half_x2 = cpu::vec::exp_nonpositive_ftz(-az * az);
  const float tail = 0.5f * exp_neg_half_x2 * cpu::vec::erfcx(az);
  return x < 0.0f ? tail : 1.0f - tail;
}

// Exact GELU: x·Φ(x), as PyTorch's default.
[[gnu::always_inline]] inline float gelu_erf(float x) {
  float e;
  return x * normal_cdf(x, e);
}
// d/dx x·Φ(x) = Φ(x) + x·φ(x), φ(x) = e^(-x²/2)/√(2π).
[[gnu::always_inline]] inline float gelu_erf_grad(float x) {
  float e;
  const float cdf = normal_cdf(x, e);
  return cdf + x * kInvSqrt2Pi * e;
}

// Tanh GELU: x·(1 + tanh(u))/2 with u = √(2/π)(x + 0.044715x³). Since
// (1 + tanh u)/2 = σ(2u), this is x·σ(v), v = 2u: one exp, and no 1 + tanh
// cancellation for negative x. σ is built from e = e^(-|v|) ≤ 1 and
// r = 1/(1 + e): σ(v) = r for v ≥ 0 and e·r for v < 0, so nothing overflows.
// (e flushes to 0 below 1e-38: x·σ then loses at most 1e-38·|x|, and NaN in x
// still comes out through the products with x.)
struct SigmoidParts {
  float e, r, sig;
};
[[gnu::always_inline]] inline SigmoidParts sigmoid_parts(float v) {
  const float e = cpu::vec::exp_nonpositive_ftz(-std::fabs(v));
  const float r = 1.0f / (1.0f + e);
  return {e, r, v < 0.0f ? e * r : r};
}

[[gnu::always_inline]] inline float gelu_tanh(float x) {
  const float v = 2.0f * kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return x * sigmoid_parts(v).sig;
}
// d/dx x·σ(v) = σ + x·v'·σ(1 - σ). σ(1 - σ) = e·r² (one factor is r, the
// other e·r), without cancellation. For large |x|, e·r² is 0 while x·v'
// (∝ x³) may overflow; multiplying w = e·r²·x by x one factor at a time keeps
// that a 0 instead of inf·0 = NaN. (Clamping x instead would cost speed: g++
// specialises the code after a float clamp per case; see vec_math.h.)
[[gnu::always_inline]] inline float gelu_tanh_grad(float x) {
  const float v = 2.0f * kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const SigmoidParts s = sigmoid_parts(v);
  const float w = s.e * s.r * s.r * x;
  return s.sig + 2.0f * kSqrt2OverPi * (w + 3.0f * kGeluCubic * (w * x) * x);
}

}  // namespace

Tensor relu(const Tensor& x) {
  Tensor xc = contiguous_f32(x, "relu");
  // `x < 0 ? 0 : x` keeps NaN, as torch.relu does.
  Tensor out = map1(xc, [](float v) { return v < 0.0f ? 0.0f : v; });
  if (autograd::needs_grad({x}))
    autograd::record(out, "relu", {x}, [y = out.detach()](const Tensor& g) {
      Tensor gc = g.is_contiguous() ? g : g.contiguous();
      return std::vector<Tensor>{map2(y, gc, [](float yv, float gv) { return yv > 0.0f ? gv : 0.0f; })};
    });
  return out;
}

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  Tensor xc = contiguous_f32(x, "gelu");
  Tensor out = tanh_approximation ? map1(xc, [](float v) { return gelu_tanh(v); })
                                  : map1(xc, [](float v) { return gelu_erf(v); });
  if (autograd::needs_grad({x}))
    autograd::record(out, "gelu", {x}, [xs = xc.detach(), tanh_approximation](const Tensor& g) {
      Tensor gc = g.is_contiguous() ? g : g.contiguous();
      Tensor dx = tanh_approximation ? map2(xs, gc, [](float v, float gv) { return gv * gelu_tanh_grad(v); })
                                     : map2(xs, gc, [](float v, float gv) { return gv * gelu_erf_grad(v); });
      return std::vector<Tensor>{dx};
    });
  return out;
}

}  // namespace cmha
