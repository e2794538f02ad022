#pragma once
// The per-element arithmetic of the CUDA optimiser steps and uniform fill
// (backend/cuda/optim.cu, random.cu), evaluated on the host operation for
// operation: std::fma where the kernels call __fmaf_rn, and every other
// product and sum rounded on its own.
//
// The CUDA kernels fuse exactly where the CPU build (g++ -O3 -march=native,
// whose default -ffp-contract=fast contracts a·b + c across statements) was
// seen to fuse. tests/unit/cpu_fused_arithmetic_test.cpp checks, on every
// machine, that the CPU kernels still give these bits; the GPU parity tests
// check the CUDA kernels against them, and against the CPU bit for bit where
// the CPU build matches them.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/optim.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace cmha::test::fused {

// x rounded to f32 as a value of its own: the volatile store keeps g++ from
// fusing a product into the sum that uses it (it contracts across
// statements, so a named temporary is not enough).
inline float rounded(float x) {
  volatile float v = x;
  return v;
}
inline float mul(float a, float b) { return rounded(a * b); }
inline float add(float a, float b) { return rounded(a + b); }
inline float div(float a, float b) { return rounded(a / b); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }

// backend/cuda/optim.cu's adam_step_kernel on one element.
inline void adam_element(float& p, float g, float& m, float& v, const backend::AdamStep& s) {
  const float grad = s.l2 != 0.0f ? fma(s.l2, p, g) : g;
  const float p_shrunk = s.shrink != 1.0f ? mul(p, s.shrink) : p;
  m = fma(m, s.beta1, mul(s.one_minus_beta1, grad));
  v = fma(v, s.beta2, mul(mul(s.one_minus_beta2, grad), grad));
  const float denom = add(div(rounded(std::sqrt(v)), s.bias2_sqrt), s.eps);
  p = add(p_shrunk, div(mul(s.neg_step_size, m), denom));
}

// sgd_step_kernel on one element; `buffer` null: no momentum.
inline void sgd_element(float& p, float g, float* buffer, const backend::SgdStep& s) {
  float d = s.weight_decay != 0.0f ? fma(s.weight_decay, p, g) : g;
  if (buffer != nullptr) {
    *buffer = s.first ? d : fma(*buffer, s.momentum, mul(s.one_minus_dampening, d));
    d = s.nesterov ? fma(s.momentum, *buffer, d) : *buffer;
  }
  p = fma(s.neg_lr, d, p);
}

// ema_update_kernel on one element.
inline float ema_element(float shadow, float param, float decay, float one_minus_decay) {
  return fma(shadow, decay, mul(one_minus_decay, param));
}

// uniform_kernel's element i.
inline float uniform_element(int64_t i, std::array<uint32_t, 2> key, uint64_t first, float low, float high) {
  const auto r = philox_block(first + static_cast<uint64_t>(i) / 4, key);
  return fma(add(high, -low), uint_to_unit(r[static_cast<size_t>(i % 4)]), low);
}

// Whether two f32 tensors hold the same bytes (shapes equal).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.to(Device::cpu()).contiguous(), cb = b.to(Device::cpu()).contiguous();
  return ca.shape() == cb.shape() && ca.dtype() == cb.dtype() &&
         (ca.nbytes() == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0);
}

}  // namespace cmha::test::fused
