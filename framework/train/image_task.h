#pragma once
// Image classification with a vision transformer on IDX data (MNIST,
// Fashion-MNIST): images normalised by data.mean/data.std, shuffled per
// epoch by the counter-based generator, batches of data.batch_size.
#include "data/idx.h"
#include "nn/vit.h"
#include "train/recipe.h"
#include "train/task.h"

namespace cmha::train {

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

 private:
  // images [N, rows, cols] -> normalised [B, 1, rows, cols] for the given sample indices
  Tensor batch_images(const Tensor& images, const std::vector<int64_t>& idx) const;
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
