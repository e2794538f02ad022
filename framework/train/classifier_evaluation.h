#pragma once
// Scoring image classifiers restored from checkpoints (cmha eval, and
// cmha heads --importance): the model with its recipe, the images to score
// (a split of that recipe, or a folder given by the user), and the scores of
// one checkpoint or of two compared on the same images.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/image_dataset.h"
#include "eval/accuracy_tests.h"
#include "eval/classification.h"
#include "nn/head_mask.h"
#include "nn/vit.h"
#include "run/recipe.h"

namespace cmha::train {

struct LoadedClassifier {
  run::Recipe recipe;  // the checkpoint's, with the overrides applied
  std::unique_ptr<nn::VisionTransformer> model;
};

// The vision transformer of checkpoint `path` (its EMA weights with `ema`),
// its recipe with `overrides` (data.* keys). A translation checkpoint, or one
// without EMA weights when `ema` is asked, is refused in one sentence.
LoadedClassifier load_classifier(const std::string& path, const std::vector<std::string>& overrides = {},
                                 bool ema = false);

struct ScoredImages {
  std::shared_ptr<const data::ImageDataset> dataset;
  std::string split;  // "test", "valid" or "folder"
  std::string name;   // where the images come from, for the report
};

// The images to score the classifier of `recipe` (from `checkpoint`) on:
// `folder` when given (a cmha pack shard set or an ImageFolder tree with the
// model's number of class folders), else the recipe's `split` ("test" or
// "valid"; empty: test when the recipe has a test split, else valid).
ScoredImages open_scored_images(const run::Recipe& recipe, const std::string& checkpoint, const std::string& folder,
                                const std::string& split);

struct ClassifierEvaluationRequest {
  std::vector<std::string> checkpoints;  // one, or two to compare
  std::vector<std::string> overrides;    // data.* keys of the first checkpoint's recipe
  std::string folder, split;             // as open_scored_images takes them
  bool ema = false;                      // score the EMA weights
  std::vector<nn::HeadMaskItem> mask;    // heads silenced in every model scored
  int64_t batch_size = 0;                // 0: the recipe's data.batch_size
  int64_t threads = 0;                   // 0: the recipe's train.threads
};

struct ClassifierEvaluation {
  ScoredImages images;
  eval::ClassificationScores first;
  eval::AccuracyInterval first_interval;  // top-1's bootstrap 95 % interval
  // With two checkpoints: the second on the same images in the same order,
  // and the exact McNemar test between the two.
  std::optional<eval::ClassificationScores> second;
  std::optional<eval::AccuracyInterval> second_interval;
  std::optional<eval::McNemarTest> mcnemar;
};

ClassifierEvaluation evaluate_checkpoints(ClassifierEvaluationRequest request);

}  // namespace cmha::train
