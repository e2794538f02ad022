#pragma once
// Kernel-table entries: attention (see backend/kernels.h). Each entry's comment
// says what it computes, the dtypes and layouts it accepts, and who allocates
// what.
//
// Collaborative attention (Cordonnier et al. 2020) scores head h as
//   s_h = scale · (Q̃ ⊙ m_h) K̃ᵀ + scale · b_h
// with shared queries Q̃ [Tq, D̃k], shared keys K̃ [Tk, D̃k], the mixing row
// m_h [D̃k] and head h's content bias b_h [Tk] (one column of the keys GEMM).
// The layer's keys GEMM already yields K_aug = [K̃, b] of width D̃k + H; with
// per-head queries Q_h = [scale · Q̃ ⊙ m_h, scale · e_h] (e_h one-hot over the
// H bias columns), s_h = Q_h · K_augᵀ: every head's scores in one GEMM against
// the one shared key tensor (no per-head keys, no broadcast bias add), and the
// same layout cuDNN's fused attention takes as multi-query attention.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

struct AttentionKernels {
  // out[n, h, t, d] = scale · q[n, t, d] · mixing[h, d] for d < D̃k and
  // out[n, h, t, D̃k + j] = scale · (h == j) for j < H.
  // q: contiguous f32 [N, Tq, D̃k]; mixing: contiguous f32 [H, D̃k]; out:
  // contiguous f32 [N, H, Tq, D̃k + H], preallocated by the caller.
  void (*collaborative_queries)(const Tensor& q, const Tensor& mixing, const Tensor& out, float scale) = nullptr;
  // The backward pass of collaborative_queries for the upstream gradient g
  // (contiguous f32 [N, H, Tq, D̃k + H]; its bias columns have no inputs):
  //   dq[n, t, d] = scale · Σ_h g[n, h, t, d] · mixing[h, d]
  //   dmixing[h, d] = scale · Σ_{n, t} g[n, h, t, d] · q[n, t, d]
  // summed in f32 in a fixed order (heads in order for dq; for dmixing, rows
  // n·Tq + t in fixed chunks whose sums are added in order), so the result
  // depends on the data and the shape only. dq ([N, Tq, D̃k]) and dmixing
  // ([H, D̃k]): contiguous f32, preallocated; either may be undefined (not
  // wanted).
  void (*collaborative_queries_backward)(const Tensor& q, const Tensor& mixing, const Tensor& g, const Tensor& dq,
                                         const Tensor& dmixing, float scale) = nullptr;
};

}  // namespace cmha::backend
