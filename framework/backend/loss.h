#pragma once
// Kernel-table entries: loss (see backend/kernels.h). Each entry's comment says
// what it computes, the dtypes and layouts it accepts, and who allocates what.
//
// Both cross-entropies work on rows: logits z [N, C] (classes last), one loss
// per row. A row keeps log Σ_c exp(z_c) as two numbers, max_c z_c and
// log_sum = log Σ_c exp(z_c - max), never their f32 sum: at |z| ~ 500 that sum
// would lose the digits a softmax near 1 or a small loss needs. Forward writes
// them, backward reads them back.
//
// The upstream gradient g of a row loss: g is [N] (`per_row`, reduction none)
// or one element (sum, mean); row i's scale is (per_row ? g[i] : g[0]) / denom,
// denom being 1 for none and sum, the mean's divisor for mean.
#include <cstdint>

#include "tensor/tensor.h"

namespace cmha::backend {

// What count_targets found: the rows that are not ignored, and the first row
// whose target is neither ignore_index nor a class (bad_row = -1: none).
struct TargetCount {
  int64_t count = 0;
  int64_t bad_row = -1;
  int64_t bad_value = 0;  // that row's target
};
// count_targets' answer, once read on the host: found = {count, bad_row, bad_value}.
inline TargetCount target_count_of(const int64_t* found) { return {found[0], found[1], found[1] < 0 ? 0 : found[2]}; }

struct LossKernels {
  // Scans target [N] (contiguous i64) in row order: counts the rows with
  // target != ignore_index, stopping at the first row whose target is not
  // ignore_index and outside [0, classes). Writes {count, bad_row, bad_value}
  // (bad_row -1: none) to found, i64 [3] on target's device, preallocated
  // (target_count_of reads it): no host wait until it is read.
  void (*count_targets)(const Tensor& target, int64_t classes, int64_t ignore_index, const Tensor& found) = nullptr;
  // correct[] = the rows i with target[i] != ignore_index and pred[i] ==
  // target[i] (top-1 accuracy's count, kept on the device by the trainer until
  // its log cadence). pred, target: contiguous i64 of one numel; correct: i64
  // [] on their device, preallocated.
  void (*count_correct)(const Tensor& pred, const Tensor& target, int64_t ignore_index, const Tensor& correct) = nullptr;

  // Label-smoothed cross-entropy (lse = log Σ exp z, t = target[i]):
  //   row_loss[i] = (1-ε)·(lse - z_t) + ε·(lse - mean_c z_c)
  // and max[i], log_sum[i] as above; rows with t == ignore_index get 0 in all
  // three. z: contiguous f32 [..., C] holding N rows; target: contiguous i64
  // [N], every target ignore_index or in [0, C) (count_targets checked);
  // row_loss, max, log_sum: contiguous f32 of N elements, preallocated.
  void (*cross_entropy_forward)(const Tensor& z, const Tensor& target, const Tensor& row_loss, const Tensor& max,
                                const Tensor& log_sum, float eps, int64_t ignore_index) = nullptr;
  // dz[i, c] = (softmax(z_i)_c - ε/C - (1-ε)·[c == t]) · scale_i, 0 on ignored
  // rows. z, target, max, log_sum: what forward read and wrote; g: contiguous
  // f32, [N] when per_row else one element; dz: contiguous f32 of z's shape,
  // preallocated.
  void (*cross_entropy_backward)(const Tensor& z, const Tensor& target, const Tensor& max, const Tensor& log_sum,
                                 const Tensor& g, const Tensor& dz, float eps, int64_t ignore_index, bool per_row,
                                 float denom) = nullptr;

  // Soft-target cross-entropy with the smoothing folded into the targets,
  // q' = (1-ε)·q + ε/C:  row_loss[i] = Σ_c q'_c·(lse - z_c), and max, log_sum.
  // z, q: contiguous f32 [..., C] holding N rows; row_loss, max, log_sum:
  // contiguous f32 of N elements, preallocated.
  void (*soft_cross_entropy_forward)(const Tensor& z, const Tensor& q, const Tensor& row_loss, const Tensor& max,
                                     const Tensor& log_sum, float eps) = nullptr;
  // With S = Σ_c q'_c: dz[i, c] = (S·p_c - q'_c)·scale_i and
  // dq[i, c] = -(1-ε)·log p_c·scale_i. z, q, max, log_sum: what forward read
  // and wrote; g as for cross_entropy_backward; dz, dq: contiguous f32 of z's
  // shape, preallocated.
  void (*soft_cross_entropy_backward)(const Tensor& z, const Tensor& q, const Tensor& max, const Tensor& log_sum,
                                      const Tensor& g, const Tensor& dz, const Tensor& dq, float eps, bool per_row,
                                      float denom) = nullptr;

  // out[0] = f32(Σ_i row_loss[i] / divisor), summed in f64 in index order (so
  // the result does not depend on the thread count); divisor 0 gives 0 (a mean
  // over no rows). row_loss: contiguous f32; out: one f32 element, preallocated.
  void (*reduce_rows)(const Tensor& row_loss, const Tensor& out, double divisor) = nullptr;
};

}  // namespace cmha::backend
