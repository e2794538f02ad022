#pragma once
// Classification scores accumulated over batches: mean cross-entropy (no
// label smoothing), top-1 and top-5 accuracy in percent. Shared by the image
// task's validation, its final evaluation and `cmha eval`.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::eval {

struct ClassificationScores {
  double loss = 0, top1 = 0, top5 = 0;  // mean loss; accuracies in percent
  int64_t samples = 0;
  std::vector<uint8_t> top1_correct;    // per sample, in the loader's order: 1 where top-1 is right
  nlohmann::json to_json() const;       // {"top1", "top5", "loss", "samples"}
};

class ClassificationMeter {
 public:
  // logits [B, C] (f32), labels [B] (i64): adds the batch. A sample counts for
  // top-k when fewer than k classes score strictly above its label (so ties
  // favour the label, and with C < 5 classes top-5 is 100 %).
  void add(const Tensor& logits, const Tensor& labels);
  ClassificationScores scores() const;

 private:
  double loss_sum_ = 0;
  int64_t top1_ = 0, top5_ = 0, samples_ = 0;
  std::vector<uint8_t> top1_correct_;
};

}  // namespace cmha::eval
