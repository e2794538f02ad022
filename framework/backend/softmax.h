#pragma once
// Kernel-table entries: softmax (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

// A contiguous tensor seen as [outer, n, inner], reduced over the middle dim
// of size n (inner == 1 when that dim is the last).
struct SoftmaxGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};

struct SoftmaxKernels {
  // y = softmax(x), or log_softmax(x) when `log`, over the middle dim of `s`.
  // x, y contiguous, of one shape with outer·n·inner elements, f32 or bf16
  // each (bf16 probabilities of f32 attention scores), sums in f32; y
  // preallocated by the caller.
  void (*forward)(const Tensor& x, const Tensor& y, const SoftmaxGeometry& s, bool log) = nullptr;
  // dx from the forward's output y and the gradient g:
  //   softmax:     dx = y · (g - Σ g·y)
  //   log_softmax: dx = g - e^y · Σ g
  // y, g, dx contiguous, of one shape, f32 or bf16 each; dx preallocated by
  // the caller.
  void (*backward)(const Tensor& y, const Tensor& g, const Tensor& dx, const SoftmaxGeometry& s,
                   bool log) = nullptr;
};

}  // namespace cmha::backend
