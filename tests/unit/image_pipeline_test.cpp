// The recipe's data.* keys → image datasets and loader options.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "data/idx.h"
#include "support/check.h"
#include "tensor/error.h"
#include "train/image_pipeline.h"

namespace cmha::train {

using namespace cmha::run;  // recipes, checkpoints, run directories
namespace {

namespace fs = std::filesystem;
using test::error_of;

// The image keys are read only by a ViT image classifier: the recipe says it is one.
Recipe image_recipe(const std::string& yaml) {
  return Recipe::parse(yaml, "<recipe>", {"model.kind=vit", "train.task=image_classification"});
}

const char* kDeit = R"(
model: {kind: vit, image_size: 224, channels: 3, num_classes: 10}
train: {label_smoothing: 0.1}
data:
  format: image_folder
  root: /nowhere
  channel_mean: [0.485, 0.456, 0.406]
  channel_std: [0.229, 0.224, 0.225]
  random_resized_crop: true
  hflip: true
  rand_augment: rand-m9-mstd0.5-inc1
  mixup: 0.8
  cutmix: 1.0
  random_erasing: 0.25
  repeated_aug: 3
  workers: 4
  batch_size: 64
)";

TEST(ImagePipeline, DeitRecipeGivesDeitOptions) {
  const Recipe r = image_recipe(kDeit);
  const data::ImageLoaderOptions t = image_loader_options(r, true);
  EXPECT_EQ(t.batch_size, 64);
  EXPECT_EQ(t.workers, 4);
  EXPECT_EQ(t.repeats, 3);
  EXPECT_EQ(t.transform.image_size, 224);
  EXPECT_EQ(t.transform.eval_resize, 256);
  EXPECT_FLOAT_EQ(t.transform.crop_scale_lo, 0.08f);
  EXPECT_FLOAT_EQ(t.transform.crop_ratio_hi, 4.0f / 3);
  EXPECT_TRUE(t.transform.random_resized_crop);
  EXPECT_TRUE(t.transform.hflip);
  EXPECT_TRUE(t.transform.rand_augment);
  EXPECT_FLOAT_EQ(t.transform.rand_augment_config.magnitude, 9);
  EXPECT_EQ(t.transform.rand_augment_config.fill, (std::array<uint8_t, 3>{124, 116, 104}));
  EXPECT_FLOAT_EQ(t.transform.random_erasing, 0.25f);
  EXPECT_EQ(t.transform.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_FLOAT_EQ(t.mixup.mixup_alpha, 0.8f);
  EXPECT_FLOAT_EQ(t.mixup.cutmix_alpha, 1.0f);
  EXPECT_FLOAT_EQ(t.mixup.label_smoothing, 0.1f);
  const data::ImageLoaderOptions v = image_loader_options(r, false);
  EXPECT_FALSE(v.training);
  EXPECT_EQ(v.repeats, 1);
}

TEST(ImagePipeline, GreyDefaultsUseTheScalarMeanAndStd) {
  const Recipe r = image_recipe("model: {image_size: 28, channels: 1}\ndata: {format: idx}\n");
  const data::ImageLoaderOptions o = image_loader_options(r, true);
  EXPECT_EQ(o.transform.mean, (std::vector<float>{0.2860f}));
  EXPECT_EQ(o.transform.std, (std::vector<float>{0.3530f}));
  // No augmentation unless asked: IDX digits go through unchanged (28 px, no crop, no flip).
  EXPECT_FALSE(o.transform.random_resized_crop);
  EXPECT_FALSE(o.transform.hflip);
  EXPECT_FALSE(o.transform.rand_augment);
  EXPECT_FALSE(o.mixup.enabled());
  EXPECT_EQ(o.transform.eval_resize, 28);
}

TEST(ImagePipeline, BadKeysAreOneSentenceNamingThem) {
  EXPECT_NE(error_of([] {
              image_loader_options(image_recipe("model: {channels: 3}\ndata: {channel_mean: [0.5, 0.5]}\n"), true);
            }).find("data.channel_mean has 2 values"),
            std::string::npos);
  EXPECT_NE(error_of([] { image_loader_options(image_recipe("data: {rand_augment: rand-m9-zz}\n"), true); })
                .find("rand-m9-zz"),
            std::string::npos);
  EXPECT_NE(error_of([] { image_loader_options(image_recipe("data: {train_crop_scale: [0.5]}\n"), true); })
                .find("data.train_crop_scale"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              image_loader_options(image_recipe("model: {image_size: 224}\ndata: {eval_resize: 200}\n"), false);
            }).find("data.eval_resize 200 is smaller than model.image_size 224"),
            std::string::npos);
  EXPECT_EQ(error_of([] { make_image_data(image_recipe("model: {channels: 3}\ndata: {format: image_folder}\n")); }),
            "data.format is image_folder but data.root is not set");
}

TEST(ImagePipeline, ImageFolderSplitsMustHaveTheSameClasses) {
  const fs::path root = fs::temp_directory_path() / ("cmha_pipeline_" + std::to_string(::getpid()));
  fs::remove_all(root);
  data::Image im(4, 4, 3, 77);
  for (const char* dir : {"train/a", "train/b", "val/a", "val/c"}) {
    fs::create_directories(root / dir);
    data::write_file((root / dir / "x.png").string(), data::encode_png(im));
  }
  const std::string yaml = "model: {channels: 3, num_classes: 2}\ndata: {format: image_folder, root: " +
                           root.string() + "}\n";
  EXPECT_NE(error_of([&] { make_image_data(image_recipe(yaml)); }).find("class folders that differ"),
            std::string::npos);
  fs::rename(root / "val/c", root / "val/b");
  const ImageData d = make_image_data(image_recipe(yaml));
  EXPECT_EQ(d.train->size(), 2);
  EXPECT_EQ(d.valid->num_classes(), 2);
  fs::remove_all(root);
}

TEST(ImagePipeline, IdxFormatReadsTheIdxKeys) {
  const fs::path dir = fs::temp_directory_path() / ("cmha_pipeline_idx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  data::write_idx_u8((dir / "i").string(), {2, 3, 3}, std::vector<uint8_t>(18, 5), false);
  data::write_idx_u8((dir / "l").string(), {2}, {0, 1}, false);
  const std::string i = (dir / "i").string(), l = (dir / "l").string();
  const Recipe r = image_recipe("model: {image_size: 3, channels: 1, num_classes: 2}\ndata: {train_images: " + i +
                                 ", train_labels: " + l + ", valid_images: " + i + ", valid_labels: " + l +
                                 ", workers: 0}\n");
  const ImageData d = make_image_data(r);
  EXPECT_EQ(d.train->size(), 2);
  EXPECT_EQ(d.valid->load(1).channels, 1);
  // With the default keys a training batch is the pixels, and the model's input their normalised values.
  data::ImageLoader loader(d.train, image_loader_options(r, true), 1);
  loader.start_epoch(0);
  data::ImageBatch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.images.shape(), (Shape{2, 1, 3, 3}));
  for (float v : b.images.to_float_vector()) EXPECT_EQ(v, 5.0f);
  for (float v : data::model_input(b, Device::cpu()).to_float_vector())
    EXPECT_FLOAT_EQ(v, (5.0f / 255.0f - 0.2860f) / 0.3530f);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cmha::train
