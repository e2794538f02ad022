// Cross-entropy against soft targets (class probabilities, e.g. the mixed
// labels of mixup and CutMix), fused with log-softmax and label smoothing;
// the loss kernels (backend/loss.h, backend/cpu/loss.cpp) hold the formulas.
//
// Label smoothing is folded into the targets as PyTorch does for probability
// targets: q' = (1-ε)·q + ε/C.
//
// The class dim is the LAST one: logits [..., C] pair with targets [..., C].
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

namespace {

struct SoftCrossEntropySaved {
  autograd::SavedTensor z, q;  // [..., C] logits and targets, contiguous, detached (the caller's memory when contiguous)
  Tensor max, log_sum;   // [N]: lse = max + log_sum, kept apart for precision
};

}  // namespace

Tensor soft_cross_entropy(const Tensor& logits, const Tensor& target, float eps, Reduction reduction) {
  if (logits.dtype() == DType::bf16 || target.dtype() == DType::bf16)  // bf16 heads: read as f32
    return soft_cross_entropy(logits.to(DType::f32), target.to(DType::f32), eps, reduction);
  logits.check_dtype(DType::f32, "soft_cross_entropy");
  target.check_dtype(DType::f32, "soft_cross_entropy");
  const Device dev = common_device("soft_cross_entropy", {logits, target});
  CMHA_CHECK(logits.dim() >= 1 && logits.shape().back() > 0,
             "soft_cross_entropy: logits must be [..., C] with C > 0, got " + logits.describe());
  CMHA_CHECK(target.shape() == logits.shape(), "soft_cross_entropy: target " + target.describe() +
                                                   " does not match logits " + logits.describe() +
                                                   "; soft targets hold one probability per class");
  CMHA_CHECK(eps >= 0.0f && eps <= 1.0f,
             "soft_cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(eps));

  // Shapes: [..., C] -> [N, C] rows.
  const Shape row_shape(logits.shape().begin(), logits.shape().end() - 1);
  const int64_t N = shape_numel(row_shape);
  auto saved = std::make_shared<SoftCrossEntropySaved>();
  const Tensor z = logits.detach().contiguous(), q = target.detach().contiguous();
  saved->max = Tensor::empty({N}, DType::f32, dev);
  saved->log_sum = Tensor::empty({N}, DType::f32, dev);
  Tensor row_loss = Tensor::empty(row_shape, DType::f32, dev);
  CMHA_KERNEL(dev, loss.soft_cross_entropy_forward)(z, q, row_loss, saved->max, saved->log_sum, eps);
  saved->z = autograd::SavedTensor(z);
  saved->q = autograd::SavedTensor(q);

  Tensor out;
  if (reduction == Reduction::none) {
    out = row_loss;
  } else {
    out = Tensor::empty({}, DType::f32, dev);
    const double divisor = reduction == Reduction::mean ? static_cast<double>(N) : 1.0;  // no rows: 0
    CMHA_KERNEL(dev, loss.reduce_rows)(row_loss, out, divisor);
  }

  if (autograd::needs_grad({logits, target}))
    autograd::record(out, "soft_cross_entropy", {logits, target}, [saved, eps, reduction, N](const Tensor& grad) {
      Tensor g = grad.contiguous();  // [] (sum, mean) or [N] (none)
      const Tensor& z = saved->z.get("soft_cross_entropy backward");
      const Tensor& q = saved->q.get("soft_cross_entropy backward");
      const Device gdev = common_device("soft_cross_entropy backward", {g, z});
      Tensor dz = Tensor::empty(z.shape(), DType::f32, gdev);
      Tensor dq = Tensor::empty(z.shape(), DType::f32, gdev);
      const float denom = reduction == Reduction::mean ? static_cast<float>(N) : 1.0f;
      CMHA_KERNEL(gdev, loss.soft_cross_entropy_backward)(z, q, saved->max, saved->log_sum, g, dz, dq,
                                                          eps, reduction == Reduction::none, denom);
      return std::vector<Tensor>{dz, dq};
    });
  return out;
}

}  // namespace cmha
