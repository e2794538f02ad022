// Cross-entropy fused with log-softmax and label smoothing; the loss kernels
// (backend/loss.h, backend/cpu/loss.cpp) hold the formulas.
//
// The class dim is the LAST one: logits [..., C] pair with target [...]
// (PyTorch puts it at dim 1 for more than two dims).
#include <memory>
#include <string>
#include <vector>

#include "autograd/accuracy.h"
#include "autograd/deferred_checks.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha {

namespace {

struct CrossEntropySaved {
  autograd::SavedTensor z;  // [..., C] logits, contiguous, detached (the caller's memory when contiguous)
  Tensor max, log_sum;   // [N] each: lse = max + log_sum, kept apart for precision (0 for ignored rows)
  Tensor target;         // [N] i64, contiguous, owned
  int64_t count = 0;     // rows not ignored
};

}  // namespace

int64_t checked_target_count(const Tensor& target, int64_t classes, int64_t ignore_index, bool count) {
  // {count, bad_row, bad_value} (backend/loss.h), written on the target's device.
  const Tensor found = Tensor::empty({3}, DType::i64, target.device());
  CMHA_KERNEL(target.device(), loss.count_targets)(target, classes, ignore_index, found);
  auto verdict = [classes, ignore_index](const Tensor& answer) {
    const backend::TargetCount counted = backend::target_count_of(answer.data<int64_t>("cross_entropy check"));
    CMHA_CHECK(counted.bad_row < 0, "cross_entropy: target " + std::to_string(counted.bad_value) + " in row " +
                                        std::to_string(counted.bad_row) + " is out of range for " +
                                        std::to_string(classes) + " classes (ignore_index is " +
                                        std::to_string(ignore_index) + ")");
    return counted.count;
  };
  if (count) return verdict(found.to(Device::cpu()));  // the mean's divisor: read now
  autograd::check_now_or_deferred(found, [verdict](const Tensor& answer) { verdict(answer); });
  return -1;
}

Tensor count_correct(const Tensor& pred, const Tensor& target, int64_t ignore_index) {
  const Device dev = common_device("count_correct", {pred, target});
  CMHA_CHECK(pred.numel() == target.numel(), "count_correct: pred " + pred.describe() + " and target " +
                                                  target.describe() + " differ in size");
  const Tensor p = pred.detach().to(DType::i64).contiguous(), t = target.detach().to(DType::i64).contiguous();
  Tensor correct = Tensor::empty({}, DType::i64, dev);
  CMHA_KERNEL(dev, loss.count_correct)(p, t, ignore_index, correct);
  return correct;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, float eps, int64_t ignore_index,
                     Reduction reduction) {
  if (logits.dtype() == DType::bf16)  // bf16 logits (a bf16 head) are read as f32, the gradient returned in bf16
    return cross_entropy(logits.to(DType::f32), target, eps, ignore_index, reduction);
  logits.check_dtype(DType::f32, "cross_entropy");
  const Device dev = common_device("cross_entropy", {logits, target});
  CMHA_CHECK(target.dtype() == DType::i32 || target.dtype() == DType::i64,
             "cross_entropy: target must be i32 or i64, got " + target.describe());
  CMHA_CHECK(logits.dim() >= 1 && logits.shape().back() > 0,
             "cross_entropy: logits must be [..., C] with C > 0, got " + logits.describe());
  const Shape row_shape(logits.shape().begin(), logits.shape().end() - 1);
  CMHA_CHECK(target.shape() == row_shape, "cross_entropy: target " + target.describe() + " does not match logits " +
                                              logits.describe() + "; expected target shape " + shape_str(row_shape));
  CMHA_CHECK(eps >= 0.0f && eps <= 1.0f,
             "cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(eps));

  // Shapes: logits [..., C] -> z [N, C] rows, target [...] -> [N].
  const int64_t C = logits.shape().back();
  const int64_t N = shape_numel(row_shape);
  auto saved = std::make_shared<CrossEntropySaved>();
  // One i64 contiguous copy serves the check, the kernels and backward.
  saved->target = target.to(DType::i64).contiguous();
  if (saved->target.same(target)) saved->target = target.clone();  // the caller may reuse its buffer before backward
  saved->count = checked_target_count(saved->target, C, ignore_index, reduction == Reduction::mean);
  const Tensor z = logits.detach().contiguous();
  saved->max = Tensor::empty({N}, DType::f32, dev);
  saved->log_sum = Tensor::empty({N}, DType::f32, dev);
  Tensor row_loss = Tensor::empty(row_shape, DType::f32, dev);  // ignored rows hold 0, as in PyTorch
  CMHA_KERNEL(dev, loss.cross_entropy_forward)(z, saved->target, row_loss, saved->max, saved->log_sum, eps,
                                               ignore_index);
  saved->z = autograd::SavedTensor(z);

  Tensor out;
  if (reduction == Reduction::none) {
    out = row_loss;
  } else {
    // PyTorch's mean over zero non-ignored rows is 0/0 = nan; we return 0 so a
    // batch made only of padding does not poison the running loss.
    out = Tensor::empty({}, DType::f32, dev);
    const double divisor = reduction == Reduction::mean ? static_cast<double>(saved->count) : 1.0;
    CMHA_KERNEL(dev, loss.reduce_rows)(row_loss, out, divisor);
  }

  if (autograd::needs_grad({logits}))
    autograd::record(out, "cross_entropy", {logits}, [saved, eps, ignore_index, reduction](const Tensor& grad) {
      // d loss / d z for every row, scaled by the upstream gradient ([] or [N]).
      Tensor g = grad.contiguous();
      const Tensor& z = saved->z.get("cross_entropy backward");
      const Device gdev = common_device("cross_entropy backward", {g, z});
      Tensor dz = Tensor::empty(z.shape(), DType::f32, gdev);
      const float denom = reduction == Reduction::mean ? static_cast<float>(saved->count) : 1.0f;
      CMHA_KERNEL(gdev, loss.cross_entropy_backward)(z, saved->target, saved->max, saved->log_sum, g, dz, eps,
                                                     ignore_index, reduction == Reduction::none, denom);
      return std::vector<Tensor>{dz};
    });
  return out;
}

}  // namespace cmha
