#pragma once
// Image classification with a vision transformer: the recipe's image data
// (train/image_pipeline.h: IDX files or an ImageFolder tree, DeiT transforms,
// mixup/CutMix) through the threaded loader. Mixed batches train against
// their soft targets (label smoothing already folded in by the loader),
// plain ones against their labels with train.label_smoothing.
#include <optional>

#include "data/image_loader.h"
#include "eval/classification.h"
#include "nn/vit.h"
#include "run/recipe.h"
#include "train/task.h"

namespace cmha::train {

// Top-1/top-5/loss of `model` (switched to eval mode) over one pass of `loader`.
eval::ClassificationScores evaluate_classifier(nn::VisionTransformer& model, data::ImageLoader& loader);

// One checkpoint's scores, without its run: top1, top5, loss, samples on its
// recipe's test split (its validation split without one; "split" says
// which), as final_evaluation scores a run's chosen checkpoint.
nlohmann::json score_image_checkpoint(const std::string& checkpoint, const std::string& out_dir);

class ImageClassificationTask : public Task {
 public:
  ImageClassificationTask(const run::Recipe& recipe, Generator& init_gen, int rank = 0, int world = 1);
  nn::Module& model() override { return *model_; }
  const char* unit_name() const override { return "samples"; }
  void start_epoch(int64_t epoch) override;
  bool has_next_batch() const override;
  BatchLoss next_batch_loss() override;
  int64_t batches_per_epoch() const override { return train_->batches_per_epoch(); }
  std::map<std::string, double> validate() override;
  // The loader's state plus the world size, so that a resume on another
  // number of ranks continues at the same global position.
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
  Device device_;  // train.device: the model's, and each batch's once loaded
  // Training is sharded by rank; every rank validates on the whole split.
  std::unique_ptr<data::ImageLoader> train_, valid_, test_;  // test_: null without a test split
  std::string valid_source_, test_source_;
  float label_smoothing_;
  int world_ = 1;
  // On a GPU, the next training batch, taken from the loader and sent while
  // the GPU runs the current one's forward pass; `loader_state` is the
  // loader's state before it was taken (what a checkpoint saves).
  struct BatchAhead {
    nlohmann::json loader_state;
    data::ImageBatch host;
    Tensor images, erase, targets, labels;  // on device_ (images: u8 [B, C, S, S], erase: [B, kEraseFields] i64)
  };
  std::optional<BatchAhead> ahead_;
  BatchAhead take_training_batch();
};

}  // namespace cmha::train
