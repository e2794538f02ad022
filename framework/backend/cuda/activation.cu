// CUDA kernels: activation (entries of backend/activation.h). ReLU and its
// backward give the CPU's bits (selects only). GELU follows the CPU's
// formulas term for term (backend/cpu/activation.cpp: the same tail-safe
// Φ and σ, the same overflow-safe backward), with libdevice's expf and
// erfcxf in place of the CPU's polynomial ones: a few ulp apart, and NaN and
// infinities come out where the CPU's do.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"
#include "backend/cuda/map.cuh"

namespace cmha::cuda {

namespace {

constexpr float kSqrtHalf = 0.70710678118654752f;    // 1/√2
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1/√(2π)
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

// Φ(x) = erfc(-x/√2)/2, handing back e^(-x²/2): the tail Φ(-|x|) =
// e^(-x²/2)·erfcx(|x|/√2)/2 has no cancellation for negative x.
__device__ __forceinline__ float normal_cdf(float x, float& exp_neg_half_x2) {
  const float az = fabsf(x) * kSqrtHalf;
  exp_neg_half_x2 = expf(-az * az);
  const float tail = 0.5f * exp_neg_half_x2 * erfcxf(az);
  return x < 0.0f ? tail : 1.0f - tail;
}

// x·σ(v), v = 2√(2/π)(x + 0.044715x³), with σ from e = e^(-|v|) ≤ 1 and
// r = 1/(1 + e): σ = r for v ≥ 0, e·r for v < 0 (nothing overflows).
struct SigmoidParts {
  float e, r, sig;
};
__device__ __forceinline__ SigmoidParts sigmoid_parts(float v) {
  const float e = expf(-fabsf(v));
  const float r = 1.0f / (1.0f + e);
  return {e, r, v < 0.0f ? e * r : r};
}
__device__ __forceinline__ float gelu_tanh_arg(float x) {
  return 2.0f * kSqrt2OverPi * (x + kGeluCubic * x * x * x);
}

struct Relu {
  // `v < 0 ? 0 : v` keeps NaN, as torch.relu does.
  __device__ float operator()(float v) const { return v < 0.0f ? 0.0f : v; }
};
struct ReluBackward {
  __device__ float operator()(float y, float g) const { return y > 0.0f ? g : 0.0f; }
};
// x·Φ(x)
struct GeluErf {
  __device__ float operator()(float x) const {
    float e;
    return x * normal_cdf(x, e);
  }
};
// g · (Φ(x) + x·φ(x)), φ(x) = e^(-x²/2)/√(2π)
struct GeluErfBackward {
  __device__ float operator()(float x, float g) const {
    float e;
    const float cdf = normal_cdf(x, e);
    return g * (cdf + x * kInvSqrt2Pi * e);
  }
};
struct GeluTanh {
  __device__ float operator()(float x) const { return x * sigmoid_parts(gelu_tanh_arg(x)).sig; }
};
// g · (σ + x·v'·σ(1 - σ)), σ(1 - σ) = e·r²; w = e·r²·x multiplied by x one
// factor at a time keeps a 0 for large |x| where x·v' alone would overflow.
struct GeluTanhBackward {
  __device__ float operator()(float x, float g) const {
    const SigmoidParts s = sigmoid_parts(gelu_tanh_arg(x));
    const float w = s.e * s.r * s.r * x;
    return g * (s.sig + 2.0f * kSqrt2OverPi * (w + 3.0f * kGeluCubic * (w * x) * x));
  }
};

void relu(const Tensor& x, const Tensor& y) { map1(x, y, Relu{}, "activation.relu"); }

void relu_backward(const Tensor& y, const Tensor& g, const Tensor& dx) {
  map2(y, g, dx, ReluBackward{}, "activation.relu_backward");
}

void gelu(const Tensor& x, const Tensor& y, bool tanh_approximation) {
  if (tanh_approximation) map1(x, y, GeluTanh{}, "activation.gelu");
  else map1(x, y, GeluErf{}, "activation.gelu");
}

void gelu_backward(const Tensor& x, const Tensor& g, const Tensor& dx, bool tanh_approximation) {
  if (tanh_approximation) map2(x, g, dx, GeluTanhBackward{}, "activation.gelu_backward");
  else map2(x, g, dx, GeluErfBackward{}, "activation.gelu_backward");
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

}  // namespace cmha::cuda
