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

struct ImageData {
  std::shared_ptr<const data::ImageDataset> train, valid;
};

// Opens both splits; their class counts must equal model.num_classes
// (IDX: labels must be below it), else an error naming the folder or file.
ImageData make_image_data(const run::Recipe& recipe);

// The loader options of the train (training = true) or validation split.
data::ImageLoaderOptions image_loader_options(const run::Recipe& recipe, bool training);

}  // namespace cmha::train
