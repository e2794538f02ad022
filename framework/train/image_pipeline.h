#pragma once
// The image data of a recipe (the `data.` keys): the train and validation
// datasets and the loader options for each. The image task builds its loaders
// from these:
//   ImageData d = make_image_data(recipe);
//   data::ImageLoader train(d.train, image_loader_options(recipe, true), seed, rank, world);
//   data::ImageLoader valid(d.valid, image_loader_options(recipe, false), seed, rank, world);
// data.format idx: data.train_images/train_labels, valid_images/valid_labels;
// data.format image_folder: <data.root>/train/<class>/..., <data.root>/val/<class>/...
// data.format shards: <data.root>/train/ and <data.root>/val/ hold shards (cmha pack, data/shard_dataset.h)
#include <memory>

#include "data/image_dataset.h"
#include "data/image_loader.h"
#include "run/recipe.h"

namespace cmha::train {

// With data.holdout N, the validation split is N training images drawn by
// data.holdout_seed and training sees the others; data.test_images (IDX) or
// data.test_dir (ImageFolder) is the test split the final evaluation scores
// once. A validation split read from the test split's file or folder is
// refused unless data.valid_is_test says so.
struct ImageData {
  std::shared_ptr<const data::ImageDataset> train, valid;
  std::shared_ptr<const data::ImageDataset> test;  // null without a test split
  std::string valid_source, test_source;            // what each split is, for results.json
};

// Opens the splits; their class counts must equal model.num_classes
// (IDX: labels must be below it), else an error naming the folder or file.
ImageData make_image_data(const run::Recipe& recipe);

// The loader options of the train (training = true) or validation split.
data::ImageLoaderOptions image_loader_options(const run::Recipe& recipe, bool training);

}  // namespace cmha::train
