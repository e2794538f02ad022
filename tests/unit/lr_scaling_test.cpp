// DeiT's learning-rate conventions in a recipe: optim.lr scaled by the global
// batch over optim.lr_scale_batch, and a warmup counted in epochs.
#include <gtest/gtest.h>

#include "run/model_config.h"
#include "run/recipe.h"
#include "support/check.h"
#include "tensor/error.h"

using namespace cmha;
using namespace cmha::run;
using cmha::test::error_of;

namespace {
Recipe image_recipe(const std::vector<std::string>& overrides) {
  return Recipe::parse("train: {task: image_classification}\nmodel: {kind: vit}\n", "r.yaml", overrides);
}
}  // namespace

TEST(LrScaling, GlobalBatchOverReference) {
  // DeiT: 5e-4 at batch 512; 256 per process × 2 accumulated × 2 processes = 1024 → 1e-3.
  const Recipe r = image_recipe({"optim.lr=5e-4", "optim.lr_scale_batch=512", "data.batch_size=256",
                                 "train.update_freq=2"});
  EXPECT_DOUBLE_EQ(peak_lr(r, 2), 1e-3);
  EXPECT_DOUBLE_EQ(peak_lr(r, 1), 5e-4);
  // Off by default: optim.lr as written.
  EXPECT_DOUBLE_EQ(peak_lr(image_recipe({"optim.lr=5e-4", "data.batch_size=256"}), 4), 5e-4);
}

TEST(LrScaling, NeedsABatchInSamples) {
  // A translation batch is counted in tokens: the key is refused where the recipe is read.
  EXPECT_EQ(error_of([] { Recipe::parse("optim: {lr_scale_batch: 512}\n", "r.yaml"); }),
            "r.yaml:1: optim.lr_scale_batch is read only by train.task image_classification, and this recipe's "
            "train.task is translation (the default): remove it, as nothing would read it");
}

TEST(LrScaling, WarmupInEpochs) {
  EXPECT_EQ(warmup_length(image_recipe({"lr.warmup=300"}), 100), 300);  // lr.warmup in updates
  EXPECT_EQ(warmup_length(image_recipe({"lr.warmup=300", "lr.warmup_epochs=5"}), 1251), 6255);
  EXPECT_EQ(warmup_length(image_recipe({"lr.warmup_epochs=0.5"}), 469), 235);  // rounded
  EXPECT_EQ(warmup_length(image_recipe({"lr.warmup_epochs=5", "lr.per_epoch=true"}), 1251), 5);
  EXPECT_THROW(warmup_length(image_recipe({"lr.warmup_epochs=2.5", "lr.per_epoch=true"}), 10), Error);
}
