#pragma once
// Kernel-table entries: matmul (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
// (linear's bias gradient is the reduce family's sum, its bf16 casts the copy
// family's: matmul needs no other kernel.)
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct MatmulKernels {
  // c = a @ b (+ bias broadcast over the rows of c), accumulated in f32.
  // a[..., M, K], b[..., K, N], c[..., M, N]: the same number of dims (>= 2),
  // batch dims of a and b equal to c's or 1 (broadcast); a and b f32 or bf16,
  // both the same; c f32 or that dtype, preallocated. Any size may be 0 (with
  // K = 0, c must come out all zeros).
  // a and b may be transposed or batch-strided views as long as each has its
  // last two dims dense in one orientation (row- or column-major, leading
  // stride >= the inner size; the ops copy anything else); c is contiguous.
  // bias: undefined, or contiguous f32 [N].
  void (*matmul)(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c) = nullptr;
};

// Whether f32 GEMMs on a GPU may round their inputs to TF32 (10-bit mantissa,
// f32 accumulation) for the tensor cores: several times faster on Ampere and
// Hopper, but results then differ from the CPU's by ~1e-3 relative instead of
// rounding. Off unless a recipe sets train.tf32; the CPU's GEMMs ignore it.
// Process-wide; set once at start-up, before the first GEMM.
void set_f32_matmul_tf32(bool on);
bool f32_matmul_tf32();

}  // namespace cmha::backend
