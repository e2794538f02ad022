#pragma once
// Kernel-table entries: embedding (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
// (The op converts i32 ids to one owned contiguous i64 copy and range-checks it
// with index.find_out_of_range, so the kernels see i64 ids in [0, V) only.)
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct EmbeddingKernels {
  // out[p, :] = weight[ids[p], :] (row gather). weight: contiguous f32 [V, D];
  // ids: contiguous i64 of N elements, each in [0, V); out: contiguous f32 of
  // N·D elements ([..., D]), preallocated.
  void (*forward)(const Tensor& weight, const Tensor& ids, const Tensor& out) = nullptr;
  // grad_w[v, :] += Σ over positions p with ids[p] == v of grad_out[p, :]
  // (scatter-add), each row summed in position order whatever the thread
  // count (deterministic). grad_out: contiguous f32 of N·D elements; ids: as
  // for forward; grad_w: contiguous f32 [V, D], preallocated (zeroed by the
  // caller for a plain gradient).
  void (*backward)(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_w) = nullptr;
};

}  // namespace cmha::backend
