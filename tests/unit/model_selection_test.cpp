// Honest model selection (issue 31, item 8): checkpoint_best is chosen on a
// validation split that is not the test split. Training images held out as
// the validation split (data.holdout, seeded), a test split scored once by
// the final evaluation, and a validation source that is the test source
// refused unless data.valid_is_test says so.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "data/image_dataset.h"
#include "support/check.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "tensor/rng.h"
#include "train/image_pipeline.h"
#include "run/recipe.h"
#include "train/translation_task.h"
#include "support/source_paths.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

run::Recipe tiny_image_recipe(const std::string& data, const std::vector<std::string>& data_overrides) {
  std::vector<std::string> o{"data.train_images=" + data + "/train-images-idx3-ubyte.gz",
                             "data.train_labels=" + data + "/train-labels-idx1-ubyte.gz",
                             "data.valid_images=" + data + "/t10k-images-idx3-ubyte.gz",
                             "data.valid_labels=" + data + "/t10k-labels-idx1-ubyte.gz"};
  o.insert(o.end(), data_overrides.begin(), data_overrides.end());
  return run::Recipe::parse(
      "train: {task: image_classification}\n"
      "model: {kind: vit, image_size: 28, patch_size: 7, channels: 1, num_classes: 10}\n",
      "tiny", o);
}

}  // namespace

TEST(ModelSelection, HoldoutDrawsAFixedSubsetBySeed) {
  const data::HoldoutSplit a = data::holdout_split(100, 20, 0);
  ASSERT_EQ(a.held_out.size(), 20u);
  ASSERT_EQ(a.kept.size(), 80u);
  std::set<int64_t> all(a.held_out.begin(), a.held_out.end());
  all.insert(a.kept.begin(), a.kept.end());
  EXPECT_EQ(all.size(), 100u);  // disjoint, and together every index
  EXPECT_TRUE(std::is_sorted(a.held_out.begin(), a.held_out.end()));
  EXPECT_TRUE(std::is_sorted(a.kept.begin(), a.kept.end()));
  EXPECT_EQ(data::holdout_split(100, 20, 0).held_out, a.held_out);  // the same seed, the same images
  EXPECT_NE(data::holdout_split(100, 20, 1).held_out, a.held_out);
  // Not simply the first or last images.
  EXPECT_LT(a.held_out.front(), 20);
  EXPECT_GT(a.held_out.back(), 80);
  EXPECT_NE(a.held_out.back(), 19);
  EXPECT_TRUE(has(test::error_of([] { data::holdout_split(10, 10, 0); }),
                  "data.holdout 10 must leave training images: the training split has 10"));
}

TEST(ModelSelection, HeldOutTrainingImagesAreTheValidationSplitAndTheTestSplitIsSeparate) {
  const std::string dir = test::temp_dir("model_selection");
  test::write_tiny_fashion_mnist(dir, 40, 12);
  const train::ImageData d = train::make_image_data(tiny_image_recipe(
      dir, {"data.holdout=8", "data.holdout_seed=3", "data.test_images=" + dir + "/t10k-images-idx3-ubyte.gz",
            "data.test_labels=" + dir + "/t10k-labels-idx1-ubyte.gz"}));
  EXPECT_EQ(d.train->size(), 32);
  EXPECT_EQ(d.valid->size(), 8);
  ASSERT_TRUE(d.test);
  EXPECT_EQ(d.test->size(), 12);
  EXPECT_EQ(d.valid_source, "data.holdout 8 training images (data.holdout_seed 3)");
  EXPECT_EQ(d.test_source, dir + "/t10k-images-idx3-ubyte.gz");
  // The held-out images are training images the training split no longer has.
  const data::HoldoutSplit split = data::holdout_split(40, 8, 3);
  EXPECT_EQ(d.valid->describe(0), dir + "/train-images-idx3-ubyte.gz image " + std::to_string(split.held_out[0]));
  for (int64_t i = 0; i < d.train->size(); ++i) EXPECT_NE(d.train->describe(i), d.valid->describe(0));
  // No test split: the final evaluation scores the validation split.
  EXPECT_FALSE(train::make_image_data(tiny_image_recipe(dir, {})).test);
  fs::remove_all(dir);
}

TEST(ModelSelection, AValidationSplitThatIsTheTestSplitIsRefusedUnlessAKeySaysSo) {
  const std::string dir = test::temp_dir("model_selection_same");
  test::write_tiny_fashion_mnist(dir, 20, 10);
  const std::vector<std::string> same{"data.test_images=" + dir + "/t10k-images-idx3-ubyte.gz",
                                      "data.test_labels=" + dir + "/t10k-labels-idx1-ubyte.gz"};
  const std::string err = test::error_of([&] { train::make_image_data(tiny_image_recipe(dir, same)); });
  EXPECT_TRUE(has(err, "data.valid_images and data.test_images are the same ('" + dir + "/t10k-images-idx3-ubyte.gz')"))
      << err;
  EXPECT_TRUE(has(err, "data.valid_is_test: true")) << err;
  std::vector<std::string> allowed = same;
  allowed.push_back("data.valid_is_test=true");
  EXPECT_EQ(train::make_image_data(tiny_image_recipe(dir, allowed)).test->size(), 10);
  fs::remove_all(dir);
}

TEST(ModelSelection, TranslationRefusesATestCorpusThatIsTheValidationCorpus) {
  const std::string dir = test::toy_dir("model_selection_translation");
  Generator g(1);
  const std::string err = test::error_of(
      [&] { train::TranslationTask(test::toy_recipe(dir, {"data.test_prefix=" + dir + "/valid"}), g); });
  EXPECT_TRUE(has(err, "data.valid_prefix and data.test_prefix are the same corpus")) << err;
  EXPECT_NO_THROW(
      train::TranslationTask(test::toy_recipe(dir, {"data.test_prefix=" + dir + "/valid", "data.valid_is_test=true"}), g));
  fs::remove_all(dir);
}

TEST(ModelSelection, ShippedImageRecipesSelectOnHeldOutTrainingImages) {
  for (const char* path : {"recipes/local/fashion_mnist_vit.yaml", "recipes/local/fashion_mnist_vit_concat.yaml"}) {
    const run::Recipe r = run::Recipe::load(std::string(CMHA_SOURCE_DIR) + "/" + path);
    EXPECT_EQ(r.integer("data.holdout"), 5000) << path;
    EXPECT_EQ(r.string("data.test_images"), "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") << path;
    EXPECT_FALSE(r.boolean("data.valid_is_test")) << path;
  }
  const run::Recipe deit =
      run::Recipe::load(std::string(CMHA_SOURCE_DIR) + "/recipes/deit_b3_imagenet/concat_dk768.yaml");
  EXPECT_EQ(deit.integer("data.holdout"), 10000);
  EXPECT_EQ(deit.string("data.test_dir"), "val");
  // With Debian's dataset-fashion-mnist: 55 000 training, 5 000 validation and 10 000 test images.
  if (!fs::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const train::ImageData d = train::make_image_data(
      run::Recipe::load(std::string(CMHA_SOURCE_DIR) + "/recipes/local/fashion_mnist_vit.yaml"));
  EXPECT_EQ(d.train->size(), 55000);
  EXPECT_EQ(d.valid->size(), 5000);
  EXPECT_EQ(d.test->size(), 10000);
}
