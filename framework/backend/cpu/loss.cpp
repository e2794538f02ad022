// CPU kernels: loss (entries of backend/loss.h), cross-entropies fused with
// log-softmax and label smoothing.
//
// Hard targets: with lse = log Σ_c exp(z_c), PyTorch's definition
//   loss = (1-ε)·(-log p_t) + (ε/C)·Σ_c (-log p_c)
// becomes loss = (1-ε)·(lse - z_t) + ε·(lse - mean_c z_c), so one pass over a
// row gives its loss, and d loss/d z_c = p_c - (1-ε)·[c == t] - ε/C.
//
// Soft targets q, smoothed to q' = (1-ε)·q + ε/C; with S = Σ_c q'_c,
//   loss = Σ_c q'_c·(lse - z_c) = S·lse - Σ_c q'_c·z_c
//   d loss/d z_c = S·p_c - q'_c          d loss/d q_c = (1-ε)·(lse - z_c)
// S is 1 for targets that sum to 1; the general form keeps the gradient exact
// for any non-negative targets.
//
// exp is cpu::vec::exp, so the per-class loops vectorise; log runs once a row.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

namespace cmha::cpu {

namespace {

void count_targets(const Tensor& target, int64_t classes, int64_t ignore_index, const Tensor& found) {
  const int64_t* pt = target.data<int64_t>("cross_entropy");
  int64_t* pf = found.data<int64_t>("cross_entropy");
  const int64_t N = target.numel();
  int64_t count = 0, bad_row = -1, bad_value = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = pt[i];
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes) {
      bad_row = i;
      bad_value = t;
      break;
    }
    ++count;
  }
  pf[0] = count;
  pf[1] = bad_row;
  pf[2] = bad_value;
}

void count_correct(const Tensor& pred, const Tensor& target, int64_t ignore_index, const Tensor& correct) {
  const int64_t* pp = pred.data<int64_t>("count_correct");
  const int64_t* pt = target.data<int64_t>("count_correct");
  const int64_t N = target.numel();
  int64_t n = 0;
  for (int64_t i = 0; i < N; ++i) n += pt[i] != ignore_index && pp[i] == pt[i];
  *correct.data<int64_t>("count_correct") = n;
}

void cross_entropy_forward(const Tensor& zt, const Tensor& target, const Tensor& row_loss_t, const Tensor& max_t,
                           const Tensor& log_sum_t, float eps, int64_t ignore_index) {
  const int64_t N = target.numel();
  const int64_t C = zt.shape().back();
  const float* pz = zt.data<float>("cross_entropy");
  const int64_t* pt = target.data<int64_t>("cross_entropy");
  float* row_loss = row_loss_t.data<float>("cross_entropy");
  float* pmax = max_t.data<float>("cross_entropy");
  float* plog_sum = log_sum_t.data<float>("cross_entropy");
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = pt[i];
    // A target out of range (its check deferred: autograd/deferred_checks.h) counts as ignored.
    if (t == ignore_index || t < 0 || t >= C) {
      row_loss[i] = 0.0f;
      pmax[i] = 0.0f;
      plog_sum[i] = 0.0f;
      continue;
    }
    const float* z = pz + i * C;
    const float m = vec::row_max(z, C);
    float sum_exp = 0.0f, sum_shifted = 0.0f;  // Σ exp(z - m), Σ (z - m)
#pragma omp simd reduction(+ : sum_exp, sum_shifted)
    for (int64_t c = 0; c < C; ++c) {
      sum_exp += vec::exp(z[c] - m);
      sum_shifted += z[c] - m;
    }
    const float log_sum = std::log(sum_exp);
    pmax[i] = m;
    plog_sum[i] = log_sum;
    // lse - z_t = log_sum - (z_t - m), lse - mean z = log_sum - mean (z - m).
    row_loss[i] = (1.0f - eps) * (log_sum - (z[t] - m)) + eps * (log_sum - sum_shifted * inv_c);
  }
}

void cross_entropy_backward(const Tensor& zt, const Tensor& target, const Tensor& max_t, const Tensor& log_sum_t,
                            const Tensor& g, const Tensor& dz, float eps, int64_t ignore_index, bool per_row,
                            float denom) {
  const int64_t N = target.numel();
  const int64_t C = zt.shape().back();
  const float* pg = g.data<float>("cross_entropy backward");
  const float* pz = zt.data<float>("cross_entropy backward");
  const int64_t* pt = target.data<int64_t>("cross_entropy backward");
  const float* pmax = max_t.data<float>("cross_entropy backward");
  const float* plog_sum = log_sum_t.data<float>("cross_entropy backward");
  float* pd = dz.data<float>("cross_entropy backward");
  const float smooth = eps / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    float* d = pd + i * C;
    const int64_t t = pt[i];
    // (A mean with every row ignored returned 0, a constant: every row is
    // ignored then, so its gradient is 0 too.)
    if (t == ignore_index || t < 0 || t >= C) {  // out of range: as in the forward pass
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) d[c] = 0.0f;
      continue;
    }
    const float scale = (per_row ? pg[i] : pg[0]) / denom;
    const float* z = pz + i * C;
    const float m = pmax[i], log_sum = plog_sum[i];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) d[c] = (vec::exp((z[c] - m) - log_sum) - smooth) * scale;
    d[t] -= (1.0f - eps) * scale;
  }
}

void soft_cross_entropy_forward(const Tensor& zt, const Tensor& qt, const Tensor& row_loss_t, const Tensor& max_t,
                                const Tensor& log_sum_t, float eps) {
  const int64_t N = row_loss_t.numel();
  const int64_t C = zt.shape().back();
  const float* pz = zt.data<float>("soft_cross_entropy");
  const float* pq = qt.data<float>("soft_cross_entropy");
  float* row_loss = row_loss_t.data<float>("soft_cross_entropy");
  float* pmax = max_t.data<float>("soft_cross_entropy");
  float* plog_sum = log_sum_t.data<float>("soft_cross_entropy");
  const float smooth = eps / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    const float* z = pz + i * C;
    const float* q = pq + i * C;
    const float m = vec::row_max(z, C);
    float sum_exp = 0.0f;
#pragma omp simd reduction(+ : sum_exp)
    for (int64_t c = 0; c < C; ++c) sum_exp += vec::exp(z[c] - m);
    const float log_sum = std::log(sum_exp);
    pmax[i] = m;
    plog_sum[i] = log_sum;
    // lse - z_c = log_sum - (z_c - m): no f32 sum of a large max and a small log.
    float loss = 0.0f;
#pragma omp simd reduction(+ : loss)
    for (int64_t c = 0; c < C; ++c) loss += ((1.0f - eps) * q[c] + smooth) * (log_sum - (z[c] - m));
    row_loss[i] = loss;
  }
}

void soft_cross_entropy_backward(const Tensor& zt, const Tensor& qt, const Tensor& max_t, const Tensor& log_sum_t,
                                 const Tensor& g, const Tensor& dz, const Tensor& dq, float eps, bool per_row,
                                 float denom) {
  const int64_t N = max_t.numel();
  const int64_t C = zt.shape().back();
  const float* pg = g.data<float>("soft_cross_entropy backward");
  const float* z_all = zt.data<float>("soft_cross_entropy backward");
  const float* q_all = qt.data<float>("soft_cross_entropy backward");
  const float* pmax = max_t.data<float>("soft_cross_entropy backward");
  const float* plog_sum = log_sum_t.data<float>("soft_cross_entropy backward");
  float* pdz = dz.data<float>("soft_cross_entropy backward");
  float* pdq = dq.data<float>("soft_cross_entropy backward");
  const float smooth_c = eps / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    const float scale = (per_row ? pg[i] : pg[0]) / denom;
    const float* z = z_all + i * C;
    const float* q = q_all + i * C;
    const float m = pmax[i], log_sum = plog_sum[i];
    float total_q = 0.0f;  // S = Σ q'
#pragma omp simd reduction(+ : total_q)
    for (int64_t c = 0; c < C; ++c) total_q += (1.0f - eps) * q[c] + smooth_c;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const float shifted = (z[c] - m) - log_sum;  // log p_c
      pdz[i * C + c] = (total_q * vec::exp(shifted) - ((1.0f - eps) * q[c] + smooth_c)) * scale;
      pdq[i * C + c] = -(1.0f - eps) * shifted * scale;
    }
  }
}

void reduce_rows(const Tensor& row_loss, const Tensor& out, double divisor) {
  const float* pl = row_loss.data<float>("loss reduction");
  const int64_t N = row_loss.numel();
  double total = 0.0;  // summed serially so the result does not depend on the thread count
  for (int64_t i = 0; i < N; ++i) total += pl[i];
  total = divisor != 0.0 ? total / divisor : 0.0;
  out.data<float>("loss reduction")[0] = static_cast<float>(total);
}

}  // namespace

backend::LossKernels loss_kernels() {
  backend::LossKernels k;
  k.count_targets = count_targets;
  k.count_correct = count_correct;
  k.cross_entropy_forward = cross_entropy_forward;
  k.cross_entropy_backward = cross_entropy_backward;
  k.soft_cross_entropy_forward = soft_cross_entropy_forward;
  k.soft_cross_entropy_backward = soft_cross_entropy_backward;
  k.reduce_rows = reduce_rows;
  return k;
}

}  // namespace cmha::cpu
