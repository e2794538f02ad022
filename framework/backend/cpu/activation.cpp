// CPU kernels: activation (entries of backend/activation.h). ReLU and GELU
// (exact erf form and the tanh approximation): one vectorised pass forward,
// one backward.
#include <cmath>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/map.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

namespace cmha::cpu {

namespace {

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
  exp_neg_half_x2 = vec::exp_nonpositive_ftz(-az * az);
  const float tail = 0.5f * exp_neg_half_x2 * vec::erfcx(az);
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
  const float e = vec::exp_nonpositive_ftz(-std::fabs(v));
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

void relu(const Tensor& x, const Tensor& y) {
  // `x < 0 ? 0 : x` keeps NaN, as torch.relu does.
  map1(x, y, [](float v) { return v < 0.0f ? 0.0f : v; });
}

void relu_backward(const Tensor& y, const Tensor& g, const Tensor& dx) {
  map2(y, g, dx, [](float yv, float gv) { return yv > 0.0f ? gv : 0.0f; });
}

void gelu(const Tensor& x, const Tensor& y, bool tanh_approximation) {
  if (tanh_approximation) map1(x, y, [](float v) { return gelu_tanh(v); });
  else map1(x, y, [](float v) { return gelu_erf(v); });
}

void gelu_backward(const Tensor& x, const Tensor& g, const Tensor& dx, bool tanh_approximation) {
  if (tanh_approximation) map2(x, g, dx, [](float v, float gv) { return gv * gelu_tanh_grad(v); });
  else map2(x, g, dx, [](float v, float gv) { return gv * gelu_erf_grad(v); });
}

}  // namespace

backend::ActivationKernels activation_kernels() {
  backend::ActivationKernels k;
  k.relu = relu;
  k.relu_backward = relu_backward;
  k.gelu = gelu;
  k.gelu_backward = gelu_backward;
  return k;
}

}  // namespace cmha::cpu
