// Cross-entropy against soft targets (class probabilities, e.g. the mixed
// labels of mixup and CutMix), fused with log-softmax and label smoothing.
//
// Label smoothing is folded into the targets as PyTorch does for probability
// targets: q' = (1-ε)·q + ε/C. With lse = log Σ_c exp(z_c) and S = Σ_c q'_c,
//   loss = Σ_c q'_c·(lse - z_c) = S·lse - Σ_c q'_c·z_c
//   d loss/d z_c = S·p_c - q'_c          d loss/d q_c = (1-ε)·(lse - z_c)
// so one pass over a row gives its loss. S is 1 for targets that sum to 1;
// the general form keeps the gradient exact for any non-negative targets.
//
// The class dim is the LAST one: logits [..., C] pair with targets [..., C].
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/cpu/vec_math.h"

namespace cmha {

namespace {

struct SoftCrossEntropySaved {
  Tensor z, q;                      // [N, C] logits and targets, contiguous, detached
  std::vector<float> max, log_sum;  // [N]: lse = max + log_sum, kept apart for precision
  Shape logits_shape;               // [..., C]
};

// The upstream gradient's scale for row i: g is [] (sum, mean) or [N] (none).
float row_scale(const float* pg, int64_t i, Reduction reduction, int64_t n) {
  if (reduction == Reduction::none) return pg[i];
  return reduction == Reduction::mean ? pg[0] / static_cast<float>(n) : pg[0];
}

}  // namespace

Tensor soft_cross_entropy(const Tensor& logits, const Tensor& target, float eps, Reduction reduction) {
  logits.check_dtype(DType::f32, "soft_cross_entropy");
  target.check_dtype(DType::f32, "soft_cross_entropy");
  logits.check_cpu("soft_cross_entropy");
  target.check_cpu("soft_cross_entropy");
  CMHA_CHECK(logits.dim() >= 1 && logits.shape().back() > 0,
             "soft_cross_entropy: logits must be [..., C] with C > 0, got " + logits.describe());
  CMHA_CHECK(target.shape() == logits.shape(), "soft_cross_entropy: target " + target.describe() +
                                                   " does not match logits " + logits.describe() +
                                                   "; soft targets hold one probability per class");
  CMHA_CHECK(eps >= 0.0f && eps <= 1.0f,
             "soft_cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(eps));

  // Shapes: [..., C] -> [N, C] rows.
  const int64_t C = logits.shape().back();
  const Shape row_shape(logits.shape().begin(), logits.shape().end() - 1);
  const int64_t N = shape_numel(row_shape);
  auto saved = std::make_shared<SoftCrossEntropySaved>();
  saved->logits_shape = logits.shape();
  saved->z = logits.detach().contiguous();
  saved->q = target.detach().contiguous();
  saved->max.assign(N, 0.0f);
  saved->log_sum.assign(N, 0.0f);
  const float* pz = saved->z.data<float>();
  const float* pq = saved->q.data<float>();
  const float smooth = eps / static_cast<float>(C);
  std::vector<float> row_loss(N, 0.0f);
#pragma omp parallel for schedule(static) if (N * C >= 32768)
  for (int64_t i = 0; i < N; ++i) {
    const float* z = pz + i * C;
    const float* q = pq + i * C;
    float m = z[0];
#pragma omp simd reduction(max : m)
    for (int64_t c = 1; c < C; ++c) m = std::max(m, z[c]);
    float sum_exp = 0.0f;
#pragma omp simd reduction(+ : sum_exp)
    for (int64_t c = 0; c < C; ++c) sum_exp += cpu::vec::exp(z[c] - m);
    const float log_sum = std::log(sum_exp);
    saved->max[i] = m;
    saved->log_sum[i] = log_sum;
    // lse - z_c = log_sum - (z_c - m): no f32 sum of a large max and a small log.
    float loss = 0.0f;
#pragma omp simd reduction(+ : loss)
    for (int64_t c = 0; c < C; ++c) loss += ((1.0f - eps) * q[c] + smooth) * (log_sum - (z[c] - m));
    row_loss[i] = loss;
  }

  Tensor out;
  if (reduction == Reduction::none) {
    out = Tensor::from_vector(row_loss, row_shape);
  } else {
    double total = 0.0;  // serial, so the result does not depend on the thread count
    for (float l : row_loss) total += l;
    if (reduction == Reduction::mean && N > 0) total /= static_cast<double>(N);
    out = Tensor::scalar(static_cast<float>(total));
  }

  if (autograd::needs_grad({logits, target}))
    autograd::record(out, "soft_cross_entropy", {logits, target}, [saved, eps, reduction, N, C](const Tensor& grad) {
      Tensor g = grad.contiguous();
      const float* pg = g.data<float>();
      const float* z_all = saved->z.data<float>();
      const float* q_all = saved->q.data<float>();
      Tensor dz = Tensor::empty(saved->logits_shape), dq = Tensor::empty(saved->logits_shape);
      float* pdz = dz.data<float>();
      float* pdq = dq.data<float>();
      const float smooth_c = eps / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= 32768)
      for (int64_t i = 0; i < N; ++i) {
        const float scale = row_scale(pg, i, reduction, N);
        const float* z = z_all + i * C;
        const float* q = q_all + i * C;
        const float m = saved->max[i], log_sum = saved->log_sum[i];
        float total_q = 0.0f;  // S = Σ q'
#pragma omp simd reduction(+ : total_q)
        for (int64_t c = 0; c < C; ++c) total_q += (1.0f - eps) * q[c] + smooth_c;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float shifted = (z[c] - m) - log_sum;  // log p_c
          pdz[i * C + c] = (total_q * cpu::vec::exp(shifted) - ((1.0f - eps) * q[c] + smooth_c)) * scale;
          pdq[i * C + c] = -(1.0f - eps) * shifted * scale;
        }
      }
      return std::vector<Tensor>{dz, dq};
    });
  return out;
}

}  // namespace cmha
