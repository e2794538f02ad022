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
#include <string>

#include "tensor/tensor.h"

namespace cmha::backend {

// One fused scaled-dot-product attention problem (cuDNN's SDPA on CUDA):
//   out[b, h] = softmax(scale · q[b, h] · k[b, h / (Hq/Hk)]ᵀ + masks) · v[b, h / (Hq/Hv)]
// with dropout on the weights. q [B, Hq, Tq, Dqk], k [B, Hk, Tk, Dqk],
// v [B, Hv, Tk, Dv]: bf16 or f16 (all the same), on one CUDA device, each a
// dense view (a permutation of a contiguous tensor: no broadcast, no gaps)
// with its last stride 1 and its first element 16-byte aligned; Hq % Hk ==
// Hq % Hv == 0; Dqk and Dv multiples of 8.
struct FusedAttentionArgs {
  Tensor q, k, v;
  // b8 [B, Tk], true at padding keys, or undefined. Padding must sit at the
  // end of each row (cuDNN takes per-batch key lengths): the entries use the
  // index of each row's first padding key as its length.
  Tensor key_padding;
  float scale = 1.0f;
  bool causal = false;      // top-left: query t sees keys 0 .. t (no decoding cache)
  float dropout = 0.0f;     // on the weights, cuDNN's Philox stream (seed, offset)
  bool training = false;    // the forward saves the softmax statistics for the backward
};

// out: [B, Hq, Tq, Dv] in the dtype of q, with the strides of a contiguous
// [B, Tq, Hq, Dv] tensor permuted to [B, Hq, Tq, Dv] (merge_heads then needs
// no copy). stats: contiguous f32 [B, Hq, Tq, 1] (training only; undefined
// otherwise). Both preallocated by the caller.

struct AttentionKernels {
  // out[n, h, t, d] = scale · q[n, t, d] · mixing[h, d] for d < D̃k and
  // out[n, h, t, D̃k + j] = scale · (h == j) for j < H.
  // q: contiguous [N, Tq, D̃k]; mixing: contiguous f32 [H, D̃k]; out:
  // contiguous [N, H, Tq, D̃k + H], preallocated by the caller. q and out f32
  // or bf16 each (f32 arithmetic).
  void (*collaborative_queries)(const Tensor& q, const Tensor& mixing, const Tensor& out, float scale) = nullptr;
  // The backward pass of collaborative_queries for the upstream gradient g
  // (contiguous [N, H, Tq, D̃k + H], f32 or bf16; its bias columns have no inputs):
  //   dq[n, t, d] = scale · Σ_h g[n, h, t, d] · mixing[h, d]
  //   dmixing[h, d] = scale · Σ_{n, t} g[n, h, t, d] · q[n, t, d]
  // summed in f32 in a fixed order (heads in order for dq; for dmixing, rows
  // n·Tq + t in fixed chunks whose sums are added in order), so the result
  // depends on the data and the shape only. dq ([N, Tq, D̃k], f32 or bf16)
  // and dmixing ([H, D̃k], f32): contiguous, preallocated; either may be undefined (not
  // wanted).
  void (*collaborative_queries_backward)(const Tensor& q, const Tensor& mixing, const Tensor& g, const Tensor& dq,
                                         const Tensor& dmixing, float scale) = nullptr;

  // Fused attention (cuDNN SDPA). fused_prepare decides whether `a` can run
  // fused on its device and, if so, builds (once per shape, layout, mask,
  // dropout and dtype: an LRU cache) the forward graph and, when training,
  // the backward graph. It returns true when both built; `reason` is one
  // sentence either way (why fused, or why not: the CPU table's entry says
  // "CPU: cmha's unfused path"). It never throws for an unsupported problem.
  bool (*fused_prepare)(const FusedAttentionArgs& a, std::string& reason) = nullptr;
  // Runs the forward graph fused_prepare built for `a` (an error if it did
  // not): out and stats as described above FusedAttentionArgs. The dropout
  // mask is drawn from Philox (seed, offset); the backward takes the same pair.
  void (*fused_forward)(const FusedAttentionArgs& a, const Tensor& out, const Tensor& stats, uint64_t seed,
                        uint64_t offset) = nullptr;
  // The backward pass: d_out with out's layout and dtype; dq, dk, dv
  // preallocated with the dtype, shape and strides of q, k, v. dk and dv are
  // summed over the query heads that share a key/value head (in a fixed
  // order: the deterministic algorithm).
  void (*fused_backward)(const FusedAttentionArgs& a, const Tensor& out, const Tensor& stats, const Tensor& d_out,
                         const Tensor& dq, const Tensor& dk, const Tensor& dv, uint64_t seed,
                         uint64_t offset) = nullptr;
};

}  // namespace cmha::backend
