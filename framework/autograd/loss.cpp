// Cross-entropy fused with log-softmax and label smoothing.
//
// With lse = log Σ_c exp(z_c), PyTorch's definition
//   loss = (1-ε)·(-log p_t) + (ε/C)·Σ_c (-log p_c)
// becomes loss = (1-ε)·(lse - z_t) + ε·(lse - mean_c z_c), so one pass over a
// row gives its loss, and d loss/d z_c = p_c - (1-ε)·[c == t] - ε/C.
//
// The class dim is the LAST one: logits [..., C] pair with target [...]
// (PyTorch puts it at dim 1 for more than two dims).
//
// exp is cpu::vec::exp, so the per-class loops vectorise; log runs once a row.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/cpu/vec_math.h"

namespace cmha {

namespace {

struct CrossEntropySaved {
  Tensor z;                     // [N, C] logits, contiguous, detached
  // log Σ exp z = max + log_sum per row, kept apart: at |z| ~ 500 their f32
  // sum would lose the digits that a softmax near 1 or a small loss needs.
  std::vector<float> max, log_sum;  // [N] each (unused for ignored rows)
  std::vector<int64_t> target;  // [N]
  Shape logits_shape;           // [..., C]
  int64_t count = 0;            // rows not ignored
};

// d loss / d z for every row, scaled by the upstream gradient g ([] or [N]).
Tensor cross_entropy_backward(const CrossEntropySaved& s, const Tensor& grad, float eps, int64_t ignore_index,
                              Reduction reduction) {
  const int64_t C = s.logits_shape.back();
  const int64_t N = static_cast<int64_t>(s.target.size());
  Tensor g = grad.contiguous();
  const float* pg = g.data<float>();
  const float* pz = s.z.data<float>();
  Tensor dz = Tensor::empty(s.logits_shape);
  float* pd = dz.data<float>();
  // Mean with every row ignored returned 0 (a constant), so its gradient is 0.
  const float denom = reduction == Reduction::mean ? static_cast<float>(s.count) : 1.0f;
  const float smooth = eps / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= 32768)
  for (int64_t i = 0; i < N; ++i) {
    float* d = pd + i * C;
    const int64_t t = s.target[i];
    if (t == ignore_index || s.count == 0) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) d[c] = 0.0f;
      continue;
    }
    const float scale = (reduction == Reduction::none ? pg[i] : pg[0]) / denom;
    const float* z = pz + i * C;
    const float m = s.max[i], log_sum = s.log_sum[i];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) d[c] = (cpu::vec::exp((z[c] - m) - log_sum) - smooth) * scale;
    d[t] -= (1.0f - eps) * scale;
  }
  return dz;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, float eps, int64_t ignore_index,
                     Reduction reduction) {
  logits.check_dtype(DType::f32, "cross_entropy");
  logits.check_cpu("cross_entropy");
  target.check_cpu("cross_entropy");
  CMHA_CHECK(target.dtype() == DType::i32 || target.dtype() == DType::i64,
             "cross_entropy: target must be i32 or i64, got " + target.describe());
  CMHA_CHECK(logits.dim() >= 1 && logits.shape().back() > 0,
             "cross_entropy: logits must be [..., C] with C > 0, got " + logits.describe());
  const Shape row_shape(logits.shape().begin(), logits.shape().end() - 1);
  CMHA_CHECK(target.shape() == row_shape, "cross_entropy: target " + target.describe() + " does not match logits " +
                                              logits.describe() + "; expected target shape " + shape_str(row_shape));
  CMHA_CHECK(eps >= 0.0f && eps <= 1.0f,
             "cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(eps));

  // Shapes: logits [..., C] -> z [N, C], target [...] -> [N].
  const int64_t C = logits.shape().back();
  const int64_t N = shape_numel(row_shape);
  auto saved = std::make_shared<CrossEntropySaved>();
  saved->logits_shape = logits.shape();
  saved->target = target.to_i64_vector();
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = saved->target[i];
    if (t == ignore_index) continue;
    CMHA_CHECK(t >= 0 && t < C, "cross_entropy: target " + std::to_string(t) + " in row " + std::to_string(i) +
                                    " is out of range for " + std::to_string(C) + " classes (ignore_index is " +
                                    std::to_string(ignore_index) + ")");
    ++saved->count;
  }
  saved->z = logits.detach().contiguous();
  saved->max.assign(N, 0.0f);
  saved->log_sum.assign(N, 0.0f);

  std::vector<float> row_loss(N, 0.0f);
  const float* pz = saved->z.data<float>();
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (N * C >= 32768)
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = saved->target[i];
    if (t == ignore_index) continue;
    const float* z = pz + i * C;
    float m = z[0];
#pragma omp simd reduction(max : m)
    for (int64_t c = 1; c < C; ++c) m = std::max(m, z[c]);
    float sum_exp = 0.0f, sum_shifted = 0.0f;  // Σ exp(z - m), Σ (z - m)
#pragma omp simd reduction(+ : sum_exp, sum_shifted)
    for (int64_t c = 0; c < C; ++c) {
      sum_exp += cpu::vec::exp(z[c] - m);
      sum_shifted += z[c] - m;
    }
    const float log_sum = std::log(sum_exp);
    saved->max[i] = m;
    saved->log_sum[i] = log_sum;
    // lse - z_t = log_sum - (z_t - m), lse - mean z = log_sum - mean (z - m).
    row_loss[i] = (1.0f - eps) * (log_sum - (z[t] - m)) + eps * (log_sum - sum_shifted * inv_c);
  }

  Tensor out;
  if (reduction == Reduction::none) {
    out = Tensor::from_vector(row_loss, row_shape);  // ignored rows hold 0, as in PyTorch
  } else {
    double total = 0.0;  // summed serially so the result does not depend on the thread count
    for (float l : row_loss) total += l;
    // PyTorch's mean over zero non-ignored rows is 0/0 = nan; we return 0 so a
    // batch made only of padding does not poison the running loss.
    if (reduction == Reduction::mean) total = saved->count > 0 ? total / static_cast<double>(saved->count) : 0.0;
    out = Tensor::scalar(static_cast<float>(total));
  }

  if (autograd::needs_grad({logits}))
    autograd::record(out, "cross_entropy", {logits}, [saved, eps, ignore_index, reduction](const Tensor& g) {
      return std::vector<Tensor>{cross_entropy_backward(*saved, g, eps, ignore_index, reduction)};
    });
  return out;
}

}  // namespace cmha
