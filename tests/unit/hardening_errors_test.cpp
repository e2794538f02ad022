// User mistakes that used to end in "internal error" (exit 1) or a garbled
// sentence: a directory where a checkpoint belongs, a file as the run
// directory, a bad CMHA_CPU_CACHE_MB, an unbounded range printed as an
// integer, a missing include, a NaN. Each is now exit 2 (or cmha::Error) with
// one sentence naming the path or key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run/average.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "run/recipe.h"
#include "run/run_dir.h"
#include "support/check.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "tensor/safetensors.h"
#include "train/trainer.h"
#include "support/source_paths.h"

using namespace cmha;
namespace fs = std::filesystem;
using test::error_of;
using test::run_cmha;
using run::Recipe;

namespace {

using cmha::test::has;

class HardeningErrors : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("hardening_errors"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

}  // namespace

TEST_F(HardeningErrors, EveryCommandNamesADirectoryGivenAsItsCheckpoint) {
  const std::string ckpt = dir_ + "/ckpt.safetensors";
  fs::create_directories(ckpt);
  std::ofstream(dir_ + "/lines.txt") << "hello\n";
  const std::string text = dir_ + "/lines.txt";
  for (const std::string& args : {"info " + ckpt, "average " + ckpt + " " + ckpt + " -o " + dir_ + "/avg.safetensors",
                                  "heads " + ckpt + " --no-plot", "compress " + ckpt + " --key-dim 4 -o " + dir_ + "/c.safetensors",
                                  "eval " + ckpt, "translate " + ckpt + " --input " + text,
                                  "score " + ckpt + " --src " + text + " --tgt " + text}) {
    const test::CommandResult r = run_cmha(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_TRUE(has(r.output, "'" + ckpt + "' is a directory")) << args << ": " << r.output;
    EXPECT_FALSE(has(r.output, "internal error")) << args << ": " << r.output;
  }
}

TEST_F(HardeningErrors, TrainInitFromADirectoryNamesIt) {
  test::write_tiny_fashion_mnist(dir_, 16, 8);
  const std::string init = dir_ + "/init.safetensors";
  fs::create_directories(init);
  const test::CommandResult r = run_cmha("train --threads 1 " + test::tiny_run(dir_, dir_ + "/run") +
                                         " train.max_updates=3 train.init_from=" + init);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "'" + init + "' is a directory")) << r.output;
}

TEST_F(HardeningErrors, AFileAsTheRunDirectoryIsNamed) {
  test::write_tiny_fashion_mnist(dir_, 16, 8);
  const std::string file = dir_ + "/not_a_dir";
  std::ofstream(file) << "x\n";
  const test::CommandResult r = run_cmha("train --threads 1 " + test::tiny_run(dir_, file) + " train.max_updates=3");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "train.save_dir '" + file + "' is a file, not a directory")) << r.output;
  EXPECT_FALSE(has(r.output, "internal error")) << r.output;
  // Below a file: not a directory either.
  const test::CommandResult below = run_cmha("train --threads 1 " + test::tiny_run(dir_, file + "/run") + " train.max_updates=3");
  EXPECT_EQ(below.code, 2) << below.output;
  EXPECT_TRUE(has(below.output, file + "/run")) << below.output;
  EXPECT_FALSE(has(below.output, "internal error")) << below.output;
}

TEST_F(HardeningErrors, ABadCpuCacheSizeIsNamed) {
  const std::string ckpt = dir_ + "/c.safetensors";
  run::Checkpoint c;
  c.weights["w"] = Tensor::ones({2});
  run::save_checkpoint(ckpt, c);
  for (const char* bad : {"lots", "-1", "99999999999999999999999", "12MB"}) {
    ::setenv("CMHA_CPU_CACHE_MB", bad, 1);
    const test::CommandResult r = run_cmha("info " + ckpt);
    ::unsetenv("CMHA_CPU_CACHE_MB");
    EXPECT_EQ(r.code, 2) << bad << ": " << r.output;
    EXPECT_TRUE(has(r.output, std::string("CMHA_CPU_CACHE_MB='") + bad + "'")) << r.output;
    EXPECT_FALSE(has(r.output, "internal error")) << r.output;
  }
}

TEST(RecipeHardening, AnUnboundedRangeIsPrintedAsAtLeast) {
  const std::string e = error_of([] { Recipe::parse("", "r.yaml", {"train.max_updates=-1"}); });
  EXPECT_TRUE(has(e, "train.max_updates = -1 is out of range: at least 0")) << e;
  EXPECT_FALSE(has(e, "-9223372036854775808")) << e;
  const std::string bounded = error_of([] { Recipe::parse("", "r.yaml", {"model.d_model=0"}); });
  EXPECT_TRUE(has(bounded, "model.d_model = 0 is out of range: [1, 1048576]")) << bounded;
}

TEST(RecipeHardening, AMissingIncludeNamesTheIncludingFileAndLine) {
  const std::string dir = test::temp_dir("recipe_include");
  std::ofstream(dir + "/main.yaml") << "model:\n  d_model: 64\ninclude: presets/nope.yaml\n";
  const std::string e = error_of([&] { Recipe::load(dir + "/main.yaml"); });
  EXPECT_TRUE(has(e, dir + "/main.yaml:3: include: ")) << e;
  EXPECT_TRUE(has(e, "presets/nope.yaml' does not exist")) << e;
  fs::create_directories(dir + "/presets/nope.yaml");
  const std::string d = error_of([&] { Recipe::load(dir + "/main.yaml"); });
  EXPECT_TRUE(has(d, dir + "/main.yaml:3: include: ") && has(d, "is a directory")) << d;
  fs::remove_all(dir);
}

TEST(RecipeHardening, NanAndInfinityAreRefusedForEveryRealKey) {
  for (const char* v : {"nan", ".nan", "NaN", ".inf", "-.inf", "inf", "1e999"}) {
    const std::string e = error_of([&] { Recipe::parse("", "r.yaml", {std::string("optim.lr=") + v}); });
    EXPECT_TRUE(has(e, "optim.lr")) << v << ": " << e;
    EXPECT_NE(e, "(no error)") << v;
  }
  const std::string in_file = error_of([] { Recipe::parse("optim:\n  lr: .nan\n", "r.yaml"); });
  EXPECT_TRUE(has(in_file, "r.yaml:2: optim.lr = .nan is not a finite number")) << in_file;
  const std::string list = error_of([] { Recipe::parse("", "r.yaml", {"optim.betas=[0.9, .nan]"}); });
  EXPECT_TRUE(has(list, "optim.betas")) << list;
}

TEST_F(HardeningErrors, ACheckpointNumberPastInt64IsSkippedNotThrown) {
  std::ofstream(dir_ + "/checkpoint_99999999999999999999.safetensors") << "x";
  std::ofstream(dir_ + "/checkpoint_7.safetensors") << "x";
  std::vector<std::string> found;
  EXPECT_EQ(error_of([&] { found = run::update_checkpoints(dir_); }), "(no error)");
  EXPECT_EQ(found, (std::vector<std::string>{dir_ + "/checkpoint_7.safetensors"}));
}

TEST_F(HardeningErrors, AFilesystemRefusalIsASentenceNamingThePath) {
  // cmha sweep creates -o with std::filesystem: its error reaches main as a filesystem_error.
  const std::string file = dir_ + "/taken";
  std::ofstream(file) << "x\n";
  const test::CommandResult r = run_cmha("sweep " + std::string(CMHA_SOURCE_DIR) +
                                         "/recipes/local/fashion_mnist_vit.yaml --grid optim.lr=0.1 --metric top1 -o " + file);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "cmha: cannot create directories '" + file + "': ")) << r.output;
  EXPECT_FALSE(has(r.output, "internal error")) << r.output;
}

TEST_F(HardeningErrors, ResumingFromACheckpointWithABrokenTrainerStateNamesIt) {
  test::write_tiny_fashion_mnist(dir_, 16, 8);
  const std::string run = dir_ + "/run";
  const std::string args = "train --threads 1 " + test::tiny_run(dir_, run) + " train.max_updates=3";
  ASSERT_EQ(run_cmha(args).code, 0);
  const std::string latest = run::latest_checkpoint(run);
  ASSERT_FALSE(latest.empty());
  SafetensorsFile f = load_safetensors(latest);
  nlohmann::json trainer = nlohmann::json::parse(f.metadata.at("trainer"));
  trainer["update"] = "three";  // a string where a number belongs
  f.metadata["trainer"] = trainer.dump();
  save_safetensors(latest, f.tensors, f.metadata);
  const test::CommandResult r = run_cmha(args + " train.max_updates=4 --resume");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "checkpoint '" + latest + "': the trainer state is incomplete or corrupt")) << r.output;
  EXPECT_FALSE(has(r.output, "internal error")) << r.output;
}

TEST(RecipeHardening, AKeyThatIsNotANameIsRefusedNamingTheLine) {
  const std::string e = error_of([] { Recipe::parse("model:\n  ? [a, b]\n  : 1\n", "r.yaml"); });
  EXPECT_TRUE(has(e, "r.yaml:2: a recipe key must be a plain name")) << e;
}

// A schedule that cannot work is named before the data is prepared: the local
// recipe's warmup of 400 updates past a 20-update run used to be reported only
// after its SentencePiece model had been trained (24 s on the real corpus).
TEST_F(HardeningErrors, AWarmupPastTheCosineIsNamedBeforeAnyDataPreparation) {
  test::write_toy_corpus(dir_ + "/train", 50, 1);
  test::write_toy_corpus(dir_ + "/valid", 10, 2);
  const std::string run = dir_ + "/run";
  const test::CommandResult r =
      run_cmha("train --threads 1 " + std::string(CMHA_SOURCE_DIR) + "/recipes/local/en_de_transformer_small.yaml" +
               " train.save_dir=" + run + " data.train_prefix=" + dir_ + "/train data.valid_prefix=" + dir_ +
               "/valid data.test_prefix= model.vocab_size=100 train.max_updates=20");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "warmup 400 exceeds the schedule's total length 20")) << r.output;
  EXPECT_FALSE(has(r.output, "SentencePiece")) << r.output;
  EXPECT_FALSE(fs::exists(run + "/spm.model")) << r.output;
  // Where the cosine's length is the epochs' updates, only the trainer can tell.
  const std::string toy = test::toy_dir("schedule_early");
  EXPECT_NO_THROW(run::check_schedule_before_data(
      test::toy_recipe(toy, {"lr.schedule=cosine", "lr.warmup=400", "train.max_updates=0", "train.max_epochs=1"}), 1));
  EXPECT_THROW(run::check_schedule_before_data(
                   test::toy_recipe(toy, {"lr.schedule=cosine", "lr.warmup=400", "train.max_updates=20"}), 1),
               Error);
  fs::remove_all(toy);
}
