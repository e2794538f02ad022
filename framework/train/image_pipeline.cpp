#include "train/image_pipeline.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/shard_dataset.h"
#include "run/device.h"
#include "tensor/error.h"

namespace cmha::train {

namespace {

// data.channel_mean / channel_std, or the scalar data.mean / data.std for every channel.
std::vector<float> per_channel(const run::Recipe& r, const std::string& list_key, const std::string& scalar_key,
                               int64_t channels) {
  const std::vector<double> list = r.reals(list_key);
  if (list.empty()) return std::vector<float>(static_cast<size_t>(channels), static_cast<float>(r.real(scalar_key)));
  CMHA_CHECK(static_cast<int64_t>(list.size()) == channels,
             list_key + " has " + std::to_string(list.size()) + " values (" + r.origin(list_key) +
                 ") but model.channels is " + std::to_string(channels));
  return std::vector<float>(list.begin(), list.end());
}

std::pair<float, float> range_of(const run::Recipe& r, const std::string& key) {
  const std::vector<double> v = r.reals(key);
  CMHA_CHECK(v.size() == 2 && v[0] > 0 && v[0] <= v[1],
             key + " (" + r.origin(key) + ") must be two positive numbers [low, high] with low <= high");
  return {static_cast<float>(v[0]), static_cast<float>(v[1])};
}

}  // namespace

namespace {

bool same_source(const std::string& a, const std::string& b) {
  std::error_code ec;
  return a == b || std::filesystem::equivalent(a, b, ec);
}

}  // namespace

ImageData make_image_data(const run::Recipe& r) {
  const int64_t classes = r.integer("model.num_classes"), channels = r.integer("model.channels");
  CMHA_CHECK(channels == 1 || channels == 3, "model.channels " + std::to_string(channels) +
                                                 ": image data is grey (1) or RGB (3)");
  const data::ColorMode mode = channels == 3 ? data::ColorMode::rgb : data::ColorMode::grey;
  const int64_t holdout = r.integer("data.holdout");
  const bool idx = r.string("data.format") == "idx";
  ImageData d;
  std::string valid_key, valid_path, test_key, test_path;
  if (idx) {
    valid_key = "data.valid_images", valid_path = r.string(valid_key);
    test_key = "data.test_images", test_path = r.string(test_key);
    d.train = std::make_shared<data::IdxImageDataset>(r.string("data.train_images"), r.string("data.train_labels"),
                                                      mode, classes);
    if (holdout == 0)
      d.valid = std::make_shared<data::IdxImageDataset>(valid_path, r.string("data.valid_labels"), mode, classes);
    if (!test_path.empty())
      d.test = std::make_shared<data::IdxImageDataset>(test_path, r.string("data.test_labels"), mode, classes);
  } else {
    const std::string format = r.string("data.format");
    const std::string root = r.string("data.root");
    CMHA_CHECK(!root.empty(), "data.format is " + format + " but data.root is not set");
    const std::string train_dir = (std::filesystem::path(root) / r.string("data.train_dir")).string();
    valid_key = "data.valid_dir", valid_path = (std::filesystem::path(root) / r.string(valid_key)).string();
    test_key = "data.test_dir";
    if (!r.string(test_key).empty()) test_path = (std::filesystem::path(root) / r.string(test_key)).string();
    const int64_t max_pixels = r.integer("data.max_image_pixels");
    if (format == "shards") {
      // A shard set is read sequentially, shard by shard: a held-out subset of it would read at random.
      CMHA_CHECK(holdout == 0, "data.holdout picks validation images out of the training images, which shards "
                               "cannot serve in order: pack a validation split (cmha pack) as data.valid_dir");
      const int64_t buffer = r.integer("data.shuffle_buffer"), max_side = r.integer("data.shard_max_side");
      auto train = std::make_shared<data::ShardDataset>(train_dir, mode, classes, max_pixels, buffer);
      // What the recipe says it trains on must be what was packed; labels are class indices.
      const auto check_packing = [&](const data::ShardDataset& s, const std::string& dir) {
        CMHA_CHECK(s.info().max_side == max_side, "data.shard_max_side is " + std::to_string(max_side) +
                                                      " but the shards of " + dir + " were packed with --max-side " +
                                                      std::to_string(s.info().max_side));
      };
      check_packing(*train, train_dir);
      const auto open_like_train = [&](const std::string& dir) {
        auto split = std::make_shared<data::ShardDataset>(dir, mode, classes, max_pixels, buffer);
        check_packing(*split, dir);
        CMHA_CHECK(train->info().classes == split->info().classes,
                   dir + " has " + std::to_string(split->num_classes()) + " classes that differ from the " +
                       std::to_string(train->num_classes()) + " of " + train_dir);
        return split;
      };
      d.valid = open_like_train(valid_path);
      if (!test_path.empty()) d.test = open_like_train(test_path);
      d.train = std::move(train);
    } else {
      auto train = std::make_shared<data::ImageFolderDataset>(train_dir, mode, classes, max_pixels);
      // Labels are folder indices: different folders would silently mislabel.
      const auto open_like_train = [&](const std::string& dir) {
        auto split = std::make_shared<data::ImageFolderDataset>(dir, mode, classes, max_pixels);
        CMHA_CHECK(train->classes() == split->classes(), dir + " has " + std::to_string(split->num_classes()) +
                                                             " class folders that differ from the " +
                                                             std::to_string(train->num_classes()) + " of " + train_dir);
        return split;
      };
      if (holdout == 0) d.valid = open_like_train(valid_path);
      if (!test_path.empty()) d.test = open_like_train(test_path);
      d.train = std::move(train);
    }
  }
  if (holdout > 0) {
    const data::HoldoutSplit split =
        data::holdout_split(d.train->size(), holdout, static_cast<uint64_t>(r.integer("data.holdout_seed")));
    d.valid = std::make_shared<data::ImageSubset>(d.train, split.held_out);
    d.train = std::make_shared<data::ImageSubset>(d.train, split.kept);
    d.valid_source = "data.holdout " + std::to_string(holdout) + " training images (data.holdout_seed " +
                     std::to_string(r.integer("data.holdout_seed")) + ")";
  } else {
    d.valid_source = valid_path;
    CMHA_CHECK(test_path.empty() || !same_source(valid_path, test_path) || r.boolean("data.valid_is_test"),
               valid_key + " and " + test_key + " are the same ('" + test_path +
                   "'): checkpoint_best would be chosen on the test split; hold out training images instead "
                   "(data.holdout: 5000) or set data.valid_is_test: true to accept it");
  }
  d.test_source = test_path;
  return d;
}

data::ImageLoaderOptions image_loader_options(const run::Recipe& r, bool training) {
  data::ImageLoaderOptions o;
  const int64_t channels = r.integer("model.channels");
  o.training = training;
  o.batch_size = r.integer("data.batch_size");
  o.drop_last = r.boolean("data.drop_last");
  o.repeats = training ? static_cast<int>(r.integer("data.repeated_aug")) : 1;
  o.workers = static_cast<int>(r.integer("data.workers"));
  o.prefetch = static_cast<int>(r.integer("data.prefetch"));
  // A bad member of a shard is skipped and counted, never fatal (data/shard_dataset.h).
  o.skip_bad_images = r.boolean("data.skip_bad_images") || r.string("data.format") == "shards";
  o.pin_memory = !run::recipe_device(r).is_cpu();  // batches bound for a GPU

  data::ImageTransformOptions& t = o.transform;
  t.image_size = r.integer("model.image_size");
  t.mean = per_channel(r, "data.channel_mean", "data.mean", channels);
  t.std = per_channel(r, "data.channel_std", "data.std", channels);
  for (float s : t.std) CMHA_CHECK(s > 0, "data.channel_std: every std must be positive");
  const int64_t eval_resize = r.integer("data.eval_resize");
  // DeiT's eval_crop_ratio 0.875 (256 for 224) for photos; IDX digits are already the model's size.
  const bool photos = r.string("data.format") != "idx";
  t.eval_resize = eval_resize > 0 ? eval_resize : photos ? static_cast<int64_t>(t.image_size / 0.875) : t.image_size;
  CMHA_CHECK(t.eval_resize >= t.image_size, "data.eval_resize " + std::to_string(t.eval_resize) +
                                                " is smaller than model.image_size " + std::to_string(t.image_size));
  std::tie(t.crop_scale_lo, t.crop_scale_hi) = range_of(r, "data.train_crop_scale");
  std::tie(t.crop_ratio_lo, t.crop_ratio_hi) = range_of(r, "data.train_crop_ratio");
  t.random_resized_crop = r.boolean("data.random_resized_crop");
  t.hflip = r.boolean("data.hflip");
  const std::string ra = r.string("data.rand_augment");
  t.rand_augment = !ra.empty();
  if (t.rand_augment) {
    t.rand_augment_config = data::parse_rand_augment(ra);
    for (int c = 0; c < 3; ++c)  // timm fills with the mean colour
      t.rand_augment_config.fill[c] =
          static_cast<uint8_t>(std::min(255.0f, std::nearbyint(255.0f * t.mean[channels == 3 ? c : 0])));
  }
  t.random_erasing = static_cast<float>(r.real("data.random_erasing"));

  o.mixup.mixup_alpha = static_cast<float>(r.real("data.mixup"));
  o.mixup.cutmix_alpha = static_cast<float>(r.real("data.cutmix"));
  o.mixup.prob = static_cast<float>(r.real("data.mixup_prob"));
  o.mixup.switch_prob = static_cast<float>(r.real("data.mixup_switch_prob"));
  o.mixup.label_smoothing = static_cast<float>(r.real("train.label_smoothing"));
  return o;
}

}  // namespace cmha::train
