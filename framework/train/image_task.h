#pragma once
// Image classification with a vision transformer on IDX data (MNIST,
// Fashion-MNIST): images normalised by data.mean/data.std, shuffled per
// epoch by the counter-based generator, batches of data.batch_size.
#include "data/idx.h"
#include "eval/classification.h"
#include "nn/vit.h"
#include "train/recipe.h"
#include "train/task.h"

namespace cmha::train {

// IDX images [N, rows, cols] must match the model's grey image_size and its
// labels model.num_classes; otherwise an error naming `images_path`.
void check_idx_split(const data::LabelledImages& split, const nn::VitConfig& cfg, const std::string& images_path);
// images [N, rows, cols] -> normalised (x - mean) / std as [B, 1, rows, cols] for the given samples.
Tensor normalised_idx_batch(const Tensor& images, const std::vector<int64_t>& idx, float mean, float std);
// Top-1/top-5/loss of `model` (switched to eval mode) on a whole IDX split, in batches.
eval::ClassificationScores evaluate_idx(nn::VisionTransformer& model, const data::LabelledImages& split, float mean,
                                        float std, int64_t batch_size);

class ImageClassificationTask : public Task {
 public:
  ImageClassificationTask(const Recipe& recipe, Generator& init_gen, int rank = 0, int world = 1);
  nn::Module& model() override { return *model_; }
  const char* unit_name() const override { return "samples"; }
  void start_epoch(int64_t epoch) override;
  bool has_next_batch() const override { return position_ < static_cast<int64_t>(order_.size()); }
  BatchLoss next_batch_loss() override;
  int64_t batches_per_epoch() const override;
  std::map<std::string, double> validate() override;
  nlohmann::json data_state() const override;
  void restore_data_state(const nlohmann::json& state) override;
  // checkpoint_best (the latest checkpoint when there is none) on the
  // validation split: {"top1", "top5", "loss", "samples", "checkpoint"}, plus
  // "ema_top1", "ema_top5", "ema_loss", "ema_checkpoint" for the EMA weights
  // of the latest checkpoint when the run kept them. Leaves those weights in
  // the model.
  nlohmann::json final_evaluation(const std::string& run_dir) override;

 private:
  std::shared_ptr<nn::VisionTransformer> model_;
  data::LabelledImages train_, valid_;
  int64_t batch_size_;
  float mean_, std_, label_smoothing_;
  uint64_t seed_;
  int rank_, world_;
  int64_t epoch_ = -1, position_ = 0;
  std::vector<int64_t> order_;  // this rank's sample order for the epoch
};

}  // namespace cmha::train
