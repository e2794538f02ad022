#pragma once
// Kernel-table entries: activation (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct ActivationKernels {
  // Every tensor here is f32 or bf16, each on its own (bf16 activations under
  // train.bf16), with f32 arithmetic and one rounding on the store.
  // y = relu(x) = x < 0 ? 0 : x (NaN stays NaN, as torch.relu). x, y
  // contiguous, of one shape; y preallocated by the caller.
  void (*relu)(const Tensor& x, const Tensor& y) = nullptr;
  // dx = y > 0 ? g : 0, given the forward's output y. y, g, dx contiguous, of
  // one shape; dx preallocated by the caller.
  void (*relu_backward)(const Tensor& y, const Tensor& g, const Tensor& dx) = nullptr;
  // y = gelu(x): x·Φ(x) (exact, erf form), or with tanh_approximation
  // x·(1 + tanh(√(2/π)(x + 0.044715x³)))/2. x, y contiguous, of one shape;
  // y preallocated by the caller.
  void (*gelu)(const Tensor& x, const Tensor& y, bool tanh_approximation) = nullptr;
  // dx = g · gelu'(x) for the same form as the forward. x, g, dx contiguous,
  // of one shape; dx preallocated by the caller.
  void (*gelu_backward)(const Tensor& x, const Tensor& g, const Tensor& dx, bool tanh_approximation) = nullptr;
};

}  // namespace cmha::backend
