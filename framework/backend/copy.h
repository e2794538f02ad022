#pragma once
// Kernel-table entries: copies, fills and casts (see backend/kernels.h).
// Tensor::copy_, fill_, zeros/full/arange and to(Device) run through them.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct CopyKernels {
  // dst[i] = src[i] converted to dst's dtype (exact when the dtypes are equal),
  // over dst's shape. Any dtypes and strides; src broadcasts to dst (NumPy
  // rules: the caller has checked it). Both on this device.
  void (*copy)(const Tensor& dst, const Tensor& src) = nullptr;
  // Every element of dst (any dtype and strides) = value converted to dst's dtype.
  void (*fill)(const Tensor& dst, double value) = nullptr;
  // dst[i] = i for a contiguous 1-d dst of any dtype.
  void (*iota)(const Tensor& dst) = nullptr;
  // Copies bytes between host memory and this device's memory, either way:
  // dst and src contiguous, one dtype, one shape, exactly one of them on the
  // CPU. Empty in the CPU table (host to host is `copy`).
  void (*transfer)(const Tensor& dst, const Tensor& src) = nullptr;
};

}  // namespace cmha::backend
