#pragma once
// Kernel-table entries: reduce (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::backend {

struct ReduceKernels {
  // out = Σ x over the dims `reduced` (wrapped, ascending, no repeats; none
  // is a copy), accumulated in double. x f32 or bf16, any strides; out f32,
  // contiguous, holding the kept dims in their order (with or without the
  // reduced dims as 1s), preallocated by the caller.
  void (*sum)(const Tensor& x, const std::vector<int64_t>& reduced, const Tensor& out) = nullptr;
  // values, indices = the maximum of x along `dim` (wrapped, x.shape()[dim] > 0)
  // and the index of its first occurrence (NaN counts as the largest). x f32,
  // any strides; values f32 and indices i64, contiguous, of x's shape without
  // `dim`, preallocated by the caller.
  void (*max)(const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices) = nullptr;
  // The backward of max: dx[..., indices[...], ...] += g[...] along `dim`.
  // g f32 and indices i64 of dx's shape with `dim` of size 1, any strides; dx
  // f32, contiguous, preallocated (and zero-filled) by the caller.
  void (*max_backward)(const Tensor& g, const Tensor& indices, int64_t dim, const Tensor& dx) = nullptr;
  // The metric of top-k accuracy: rank[b] = how many classes score strictly
  // above the target class in row b (0 is a top-1 hit, < 5 a top-5 hit). z f32
  // contiguous [B, C]; target i64 contiguous [B], each in [0, C) (the caller
  // checks); rank i64 contiguous [B], preallocated by the caller.
  void (*target_rank)(const Tensor& z, const Tensor& target, const Tensor& rank) = nullptr;
};

}  // namespace cmha::backend
