#include "eval/classification.h"

#include "autograd/engine.h"
#include "autograd/ops.h"
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
  loss_sum_ += cross_entropy(logits, labels, 0.0f, -100, Reduction::sum).item();
  const Tensor z = logits.contiguous();
  const float* pz = z.data<float>();
  const auto y = labels.to_i64_vector();
  const int64_t B = logits.size(0), C = logits.size(1);
  for (int64_t b = 0; b < B; ++b) {
    const float target = pz[b * C + y[b]];
    int64_t better = 0;  // classes scoring above the true one
    for (int64_t c = 0; c < C; ++c) better += pz[b * C + c] > target;
    top1_ += better == 0;
    top5_ += better < 5;
  }
  samples_ += B;
}

ClassificationScores ClassificationMeter::scores() const {
  ClassificationScores s;
  s.samples = samples_;
  if (samples_ == 0) return s;
  const double n = static_cast<double>(samples_);
  s.loss = loss_sum_ / n;
  s.top1 = 100.0 * static_cast<double>(top1_) / n;
  s.top5 = 100.0 * static_cast<double>(top5_) / n;
  return s;
}

}  // namespace cmha::eval
