#pragma once
// Kernel-table entries: mask (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct MaskKernels {
  // The causal attention mask: out[i, j] = j > i + key_offset (key j is hidden
  // from query i; key_offset counts the keys already in a decoding cache).
  // out: contiguous b8 [Tq, Tk], preallocated by the caller.
  void (*causal)(const Tensor& out, int64_t key_offset) = nullptr;
};

}  // namespace cmha::backend
