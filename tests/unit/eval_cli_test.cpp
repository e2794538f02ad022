// cmha eval and the image task's final evaluation (results.json) on a tiny
// synthetic data set, and the errors eval reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/idx.h"
#include "data/image.h"
#include "run/checkpoint.h"
#include "run/recipe.h"
#include "run/run_results.h"
#include "support/check.h"
#include "support/text.h"
#include "support/tiny_images.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {
using cmha::test::has;

// A checkpoint whose recipe is the default one with `overrides`, and no weights.
std::string weightless_checkpoint(const std::string& dir, const std::string& recipe_yaml) {
  run::Checkpoint c;
  c.recipe = run::Recipe::parse(recipe_yaml).dump();
  const std::string path = dir + "/weightless.safetensors";
  run::save_checkpoint(path, c);
  return path;
}
}  // namespace

TEST(EvalCli, ScoresTheBestCheckpointAsTheFinalEvaluationDid) {
  const std::string dir = test::temp_dir("eval_cli");
  test::write_tiny_fashion_mnist(dir, 64, 30);
  const std::string run = dir + "/run";
  test::CommandResult r =
      test::run_cmha("train --threads 1 " + test::tiny_run(dir, run) + " train.max_epochs=2 train.ema_decay=0.9 "
                     "train.best_metric=top1 train.best_mode=max");
  ASSERT_EQ(r.code, 0) << r.output;
  // cmha train wrote the final evaluation of checkpoint_best and of the EMA weights.
  const nlohmann::json results = run::read_run_results(run);
  EXPECT_EQ(results.at("checkpoint"), "checkpoint_best.safetensors");
  EXPECT_EQ(results.at("samples"), 30);
  for (const char* k : {"top1", "top5", "loss", "ema_top1", "ema_top5", "ema_loss"})
    EXPECT_TRUE(results.contains(k) && results[k].is_number()) << k << " in " << results.dump();

  r = test::run_cmha("eval --json " + run + "/checkpoint_best.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json best = nlohmann::json::parse(r.output);
  EXPECT_DOUBLE_EQ(best.at("top1").get<double>(), results.at("top1").get<double>());
  EXPECT_NEAR(best.at("loss").get<double>(), results.at("loss").get<double>(), 1e-6);
  EXPECT_EQ(best.at("weights"), "model");

  r = test::run_cmha("eval --ema --json " + run + "/checkpoint_8.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.output).at("top1").get<double>(), results.at("ema_top1").get<double>());

  r = test::run_cmha("eval " + run + "/checkpoint_8.safetensors --batch-size 7");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "| 30 samples | top1 ")) << r.output;
  EXPECT_TRUE(has(r.output, "| top5 ")) << r.output;
  // top-1's bootstrap interval; the tiny run's test split is its validation split (data.valid_is_test).
  EXPECT_TRUE(has(r.output, "eval | test split (" + dir + "/t10k-images-idx3-ubyte.gz) | top1 95% CI [")) << r.output;
  EXPECT_TRUE(has(r.output, "1000 resamples, seed 12345)")) << r.output;
  const nlohmann::json with_ci = nlohmann::json::parse(test::run_cmha("eval --json " + run + "/checkpoint_8.safetensors").output);
  EXPECT_LE(with_ci.at("top1_ci95").at(0).get<double>(), with_ci.at("top1").get<double>());
  EXPECT_GE(with_ci.at("top1_ci95").at(1).get<double>(), with_ci.at("top1").get<double>());
  EXPECT_EQ(with_ci.at("split"), "test");

  // Two checkpoints: both on the same images, and McNemar's exact test.
  r = test::run_cmha("eval --json " + run + "/checkpoint_best.safetensors " + run + "/checkpoint_8.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json pair = nlohmann::json::parse(r.output);
  const nlohmann::json& mc = pair.at("mcnemar");
  EXPECT_EQ(mc.at("both_right").get<int>() + mc.at("only_first").get<int>() + mc.at("only_second").get<int>() +
                mc.at("both_wrong").get<int>(),
            30);
  EXPECT_NEAR((mc.at("both_right").get<int>() + mc.at("only_first").get<int>()) * 100.0 / 30, pair.at("top1"), 1e-9);
  EXPECT_NEAR((mc.at("both_right").get<int>() + mc.at("only_second").get<int>()) * 100.0 / 30,
              pair.at("compared").at("top1"), 1e-9);
  EXPECT_GT(mc.at("p_value").get<double>(), 0.0);
  EXPECT_LE(mc.at("p_value").get<double>(), 1.0);
  r = test::run_cmha("eval " + run + "/checkpoint_8.safetensors " + run + "/checkpoint_8.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "mcnemar | both right ")) << r.output;
  EXPECT_TRUE(has(r.output, "| only the first 0 | only the second 0 | both wrong ")) << r.output;
  EXPECT_TRUE(has(r.output, "p = 1.0000 (exact, two-sided)")) << r.output;
  r = test::run_cmha("eval " + run + "/checkpoint_8.safetensors " + run + "/checkpoint_8.safetensors " + run +
                     "/checkpoint_best.safetensors");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "takes one checkpoint, or two to compare, got 3")) << r.output;
  r = test::run_cmha("eval " + run + "/checkpoint_8.safetensors --split test data.test_images=");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "has no test split in its recipe")) << r.output;

  // The same test images as an ImageFolder (class folders "0".."9") score the same.
  const data::IdxBytes pixels = data::read_idx_u8(dir + "/t10k-images-idx3-ubyte.gz", 3);
  const data::IdxBytes labels = data::read_idx_u8(dir + "/t10k-labels-idx1-ubyte.gz", 1);
  for (int64_t i = 0; i < 30; ++i) {
    const fs::path cls = fs::path(dir) / "folder" / std::to_string(labels.values[i]);
    fs::create_directories(cls);
    data::Image im(28, 28, 1);
    std::copy_n(pixels.values.begin() + i * 784, 784, im.pixels.begin());
    data::write_file((cls / (std::to_string(i) + ".png")).string(), data::encode_png(im));
  }
  r = test::run_cmha("eval --json --data " + dir + "/folder " + run + "/checkpoint_best.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.output).at("top1").get<double>(), best.at("top1").get<double>());
  EXPECT_NEAR(nlohmann::json::parse(r.output).at("loss").get<double>(), best.at("loss").get<double>(), 1e-5);

  // The folder does not fit the model: 7 classes for a 10-class head.
  for (const char* c : {"7", "8", "9"}) fs::remove_all(fs::path(dir) / "folder" / c);
  r = test::run_cmha("eval --data " + dir + "/folder " + run + "/checkpoint_8.safetensors");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "folder' has 7 class folders but the model of")) << r.output;
  EXPECT_TRUE(has(r.output, "has model.num_classes 10")) << r.output;
  // Labels beyond the model's classes.
  data::write_idx_u8(dir + "/many-labels.gz", {30}, std::vector<uint8_t>(30, 12), true);
  r = test::run_cmha("eval " + run + "/checkpoint_8.safetensors data.valid_labels=" + dir + "/many-labels.gz");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "many-labels.gz")) << r.output;
  fs::remove_all(dir);
}

TEST(EvalCli, Errors) {
  const std::string dir = test::temp_dir("eval_cli_errors");
  test::CommandResult r = test::run_cmha("eval " + dir + "/missing.safetensors");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "missing.safetensors' does not exist")) << r.output;

  r = test::run_cmha("eval");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "cmha eval needs a checkpoint")) << r.output;

  const std::string translation = weightless_checkpoint(dir, "train: {task: translation}\n");
  r = test::run_cmha("eval " + translation);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "is a translation model; score it with 'cmha translate' and 'cmha bleu'")) << r.output;

  const std::string wrong_kind =
      weightless_checkpoint(dir, "train: {task: image_classification}\nmodel: {kind: transformer}\n");
  r = test::run_cmha("eval " + wrong_kind);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "is a transformer for image_classification, not an image classifier")) << r.output;

  const std::string vit = weightless_checkpoint(dir, "train: {task: image_classification}\nmodel: {kind: vit}\n");
  r = test::run_cmha("eval --ema " + vit);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "holds no EMA weights")) << r.output;
  r = test::run_cmha("eval " + vit + " model.depth=2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "cmha eval takes only data.* overrides")) << r.output;
  r = test::run_cmha("eval " + vit + " --bogus");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "unknown option '--bogus' for 'cmha eval'")) << r.output;
  fs::remove_all(dir);
}
