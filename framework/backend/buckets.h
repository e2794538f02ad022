#pragma once
// Kernel-table entries: buckets (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
//
// A bucket (train/gradient_buckets.cpp) is one contiguous 1-D f32 tensor on
// the parameters' device: the gradients of its parameters one after another,
// then one flag per parameter (1 where this rank had a gradient), summed over
// the ranks by one collective. The caller allocates buckets and gradients.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct BucketsKernels {
  // Packs one gradient: bucket[offset + j] = grad[j] for j < grad.numel() and
  // bucket[flag] = 1; an undefined grad writes `numel` zeros at offset and
  // bucket[flag] = 0. grad: contiguous f32; bucket: contiguous f32 on its device.
  void (*pack)(const Tensor& grad, const Tensor& bucket, int64_t offset, int64_t numel, int64_t flag) = nullptr;
  // Unpacks one gradient: grad[j] = bucket[offset + j]·scale for j < grad.numel();
  // grad: contiguous f32, preallocated; bucket as for pack.
  void (*unpack)(const Tensor& bucket, int64_t offset, const Tensor& grad, float scale) = nullptr;
  // x ← x·scale for every element, in place (one rank: the gradient averaging); x contiguous f32.
  void (*scale)(const Tensor& x, float scale) = nullptr;
};

}  // namespace cmha::backend
