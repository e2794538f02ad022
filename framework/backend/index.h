#pragma once
// Kernel-table entries: index (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
// (concat and split need no kernel of their own: they are slices and
// Tensor::copy_, i.e. the copy family.)
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

// The first element of an index tensor outside its range (position = -1: none).
struct OutOfRange {
  int64_t position = -1;  // flat, in the index tensor's row-major order
  int64_t value = 0;
};
// find_out_of_range's answer, once read on the host: found = {position, value}.
inline OutOfRange out_of_range_of(const int64_t* found) { return {found[0], found[0] < 0 ? 0 : found[1]}; }

struct IndexKernels {
  // The first element of idx (contiguous i64) outside [0, limit), scanning in
  // order, written to found (i64 [2] on idx's device, preallocated) as
  // {position, value}, position -1 when there is none (out_of_range_of reads
  // it). Writes device memory only, so a GPU check does not make the host wait
  // until its answer is read (autograd/deferred_checks.h).
  void (*find_out_of_range)(const Tensor& idx, int64_t limit, const Tensor& found) = nullptr;

  // out = mask ? value : x elementwise. x: any dtype, any strides; mask: b8,
  // any strides, broadcasting to x's shape (dims aligned at the end, size 1 or
  // equal); out: contiguous, x's shape and dtype, preallocated. value is
  // converted to that dtype (through f32 for bf16/f16; b8: value != 0).
  void (*masked_fill)(const Tensor& x, const Tensor& mask, const Tensor& out, double value) = nullptr;

  // out[..i.., j, ..k..] = x[..i.., index[..i.., j, ..k..], ..k..] along `dim`
  // (torch.gather). x: any dtype, any strides; index: i64 (any strides) of
  // out's shape, every value in [0, x.size(dim)) and every other dim no larger
  // than x's; out: contiguous, x's dtype, preallocated; dim in [0, x.dim()).
  void (*gather)(const Tensor& x, const Tensor& index, const Tensor& out, int64_t dim) = nullptr;
  // Scatter-add, gather's backward: grad_x[..i.., index[p], ..k..] += grad[p].
  // grad: f32, any strides, index's shape; index: as for gather; grad_x:
  // contiguous f32 of x's shape, preallocated and zeroed by the caller. Each
  // line along `dim` is summed in order, so the result is deterministic.
  void (*gather_backward)(const Tensor& grad, const Tensor& index, const Tensor& grad_x, int64_t dim) = nullptr;
};

}  // namespace cmha::backend
