#pragma once
// Kernel-table entries: layer_norm (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct LayerNormKernels {
  // Per row of x seen as [rows, D]: mean μ and rstd = 1/√(var + eps) (two-pass,
  // in double), then y = (x - μ)·rstd·weight + bias, and μ, rstd saved per row
  // for the backward. x, y contiguous, of one shape, f32 or bf16 each; weight, bias f32 [D]
  // or undefined (no scale / no shift); mean, rstd f32 [rows]. y, mean and rstd
  // are preallocated by the caller.
  void (*forward)(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                  const Tensor& rstd, float eps) = nullptr;
  // The backward from the forward's x, weight, mean and rstd and the gradient g
  // (contiguous, x's shape, f32 or bf16). With x̂ = (x - μ)·rstd and ĝ = g·weight:
  //   dx = rstd · (ĝ - mean(ĝ) - x̂ · mean(ĝ·x̂)),  dweight = Σ_rows g·x̂,  dbias = Σ_rows g
  // The row sums do not depend on the thread count. Each of dx (x's shape, f32 or bf16),
  // dweight, dbias (f32 [D]) is preallocated by the caller, or undefined when
  // not wanted.
  void (*backward)(const Tensor& x, const Tensor& weight, const Tensor& g, const Tensor& mean, const Tensor& rstd,
                   const Tensor& dx, const Tensor& dweight, const Tensor& dbias) = nullptr;
};

}  // namespace cmha::backend
