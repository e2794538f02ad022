#include "eval/classification.h"

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"
#include "tensor/error.h"

namespace cmha::eval {

nlohmann::json ClassificationScores::to_json() const {
  return {{"top1", top1}, {"top5", top5}, {"loss", loss}, {"samples", samples}};
}

void ClassificationMeter::add(const Tensor& logits, const Tensor& labels) {
  CMHA_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0),
             "classification scores need logits [B, C] and labels [B], got " + logits.describe() + " and " +
                 labels.describe());
  autograd::NoGradGuard no_grad;
  // (The cross-entropy also checks that every label is a class of the logits.)
  const Tensor y_dev = labels.to(logits.device());  // a loader's labels are on the CPU
  loss_sum_ += cross_entropy(logits, y_dev, 0.0f, -100, Reduction::sum).item();
  const Device dev = common_device("classification scores", {logits, y_dev});
  const Tensor z = logits.detach().contiguous().to(DType::f32);
  const Tensor y = y_dev.to(DType::i64).contiguous();
  Tensor rank = Tensor::empty({logits.size(0)}, DType::i64, dev);  // [B]: classes scoring above the true one
  CMHA_KERNEL(dev, reduce.target_rank)(z, y, rank);
  for (int64_t better : rank.to_i64_vector()) {
    top1_ += better == 0;
    top1_correct_.push_back(better == 0);
    top5_ += better < 5;
  }
  samples_ += logits.size(0);
}

ClassificationScores ClassificationMeter::scores() const {
  ClassificationScores s;
  s.samples = samples_;
  s.top1_correct = top1_correct_;
  if (samples_ == 0) return s;
  const double n = static_cast<double>(samples_);
  s.loss = loss_sum_ / n;
  s.top1 = 100.0 * static_cast<double>(top1_) / n;
  s.top5 = 100.0 * static_cast<double>(top5_) / n;
  return s;
}

}  // namespace cmha::eval
