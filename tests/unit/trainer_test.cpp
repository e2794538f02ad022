// The trainer on a tiny regression task: non-finite updates are skipped and
// counted, repeated ones stop the run with the last good checkpoint intact;
// averaging is the mean of the tensors; every checkpoint load error is clear.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "nn/layers.h"
#include "run/average.h"
#include "run/checkpoint.h"
#include "run/run_dir.h"
#include "support/check.h"
#include "support/regression_task.h"
#include "train/trainer.h"

using namespace cmha;
using test::error_of;
using namespace cmha::train;
using namespace cmha::run;
namespace fs = std::filesystem;
using test::RegressionTask;

namespace {

Recipe regression_recipe(const std::string& dir, const std::string& extra = "",
                         const std::vector<std::string>& overrides = {}) {
  return Recipe::parse("optim: {name: adam, lr: 0.05, betas: [0.9, 0.999], eps: 1e-8}\n"
                       "lr: {schedule: constant, warmup: 0}\n"
                       "train: {save_dir: " + dir + ", max_epochs: 5, log_every: 100, max_nonfinite: 3}\n" + extra,
                       "<recipe>", overrides);
}

}  // namespace

TEST(Trainer, LossFallsAndCheckpointsAreWritten) {
  const std::string dir = test::temp_dir("trainer_basic");
  RegressionTask task;
  distributed::SingleCommunicator comm;
  Recipe r = regression_recipe(dir);
  const double before = task.validate().at("loss");
  TrainSummary s = Trainer(r, task, comm).run();
  EXPECT_EQ(s.updates, 20);
  EXPECT_EQ(s.epochs, 5);
  EXPECT_LT(s.last_validation.at("loss"), before * 0.5);
  EXPECT_TRUE(fs::exists(dir + "/checkpoint_20.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint_best.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/checkpoint_4.safetensors"));  // pruned: keep_last 3
  EXPECT_EQ(latest_checkpoint(dir), dir + "/checkpoint_20.safetensors");
  fs::remove_all(dir);
}

TEST(Trainer, ValidatesEveryNUpdatesAndAtEpochEndsUnlessTurnedOff) {
  const std::string dir = test::temp_dir("trainer_validations");
  distributed::SingleCommunicator comm;
  {  // 5 epochs of 4 updates: epoch ends 4, 8, ... 20 and updates 6, 12, 18
    RegressionTask task;
    Trainer(regression_recipe(dir, "", {"train.validate_every=6"}), task, comm).run();
    EXPECT_EQ(task.validations, 8);
  }
  fs::remove_all(dir);
  {
    RegressionTask task;
    TrainSummary s = Trainer(regression_recipe(dir, "", {"train.validate_every=6", "train.validate_epoch_ends=false"}), task, comm).run();
    EXPECT_EQ(task.validations, 3);
    EXPECT_EQ(s.updates, 20);
    EXPECT_TRUE(fs::exists(dir + "/checkpoint_best.safetensors"));
  }
  fs::remove_all(dir);
  RegressionTask task;
  EXPECT_EQ(error_of([&] { Trainer(regression_recipe(dir, "", {"train.validate_epoch_ends=false"}), task, comm); }),
            "train.validate_epoch_ends is false and train.validate_every is 0: the run would never validate");
  fs::remove_all(dir);
}

TEST(Trainer, NonFiniteUpdatesAreSkippedAndCounted) {
  const std::string dir = test::temp_dir("trainer_nan");
  RegressionTask task({1, 6});
  distributed::SingleCommunicator comm;
  TrainSummary s = Trainer(regression_recipe(dir), task, comm).run();
  EXPECT_EQ(s.skipped_updates, 2);
  // The skip is decided on the device (the optimiser's gate: optim/clip.h), so
  // the host counts a skipped update as one of the run's 20 (5 epochs of 4);
  // it changed no weight.
  EXPECT_EQ(s.updates, 20);
  for (auto& p : task.model().parameters())
    for (float v : p.to_float_vector()) EXPECT_TRUE(std::isfinite(v));
  fs::remove_all(dir);
}

TEST(Trainer, RepeatedNonFiniteUpdatesStopWithTheLastGoodCheckpointIntact) {
  const std::string dir = test::temp_dir("trainer_nan_stop");
  RegressionTask task({4, 5, 6, 7, 8, 9});  // the second epoch goes bad
  distributed::SingleCommunicator comm;
  const std::string msg = error_of([&] { Trainer(regression_recipe(dir), task, comm).run(); });
  EXPECT_NE(msg.find("3 non-finite updates in a row"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
  Checkpoint good = load_checkpoint(dir + "/checkpoint_4.safetensors");
  for (auto& [n, t] : good.weights)
    for (float v : t.to_float_vector()) EXPECT_TRUE(std::isfinite(v)) << n;
  fs::remove_all(dir);
}

TEST(Trainer, AveragingIsTheMeanOfTheTensors) {
  const std::string dir = test::temp_dir("trainer_avg");
  Checkpoint a, b;
  a.weights["w"] = Tensor::from_vector({1, 2, 3}, {3});
  b.weights["w"] = Tensor::from_vector({3, 6, -3}, {3});
  a.recipe = b.recipe = "model: {d_model: 8}\n";
  a.trainer["update"] = 1;
  b.trainer["update"] = 2;
  b.optimizer["exp_avg.w"] = Tensor::ones({3});
  save_checkpoint(dir + "/a.safetensors", a);
  save_checkpoint(dir + "/b.safetensors", b);
  Checkpoint avg = average_checkpoints({dir + "/a.safetensors", dir + "/b.safetensors"});
  EXPECT_EQ(avg.weights.at("w").to_float_vector(), (std::vector<float>{2, 4, 0}));
  EXPECT_TRUE(avg.optimizer.empty());
  EXPECT_EQ(avg.trainer.at("update"), 2);
  Checkpoint c = b;
  c.weights["w"] = Tensor::ones({4});
  save_checkpoint(dir + "/c.safetensors", c);
  EXPECT_NE(error_of([&] { average_checkpoints({dir + "/a.safetensors", dir + "/c.safetensors"}); }).find("tensor 'w' is [4]"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Trainer, EveryCheckpointLoadErrorIsOneClearSentence) {
  const std::string dir = test::temp_dir("trainer_load");
  RegressionTask task;
  distributed::SingleCommunicator comm;
  Trainer(regression_recipe(dir, ""), task, comm).run();
  const std::string good = dir + "/checkpoint_20.safetensors";
  // Truncated: the last bytes are gone.
  const auto size = fs::file_size(good);
  fs::copy_file(good, dir + "/trunc.safetensors");
  fs::resize_file(dir + "/trunc.safetensors", size - 10);
  EXPECT_NE(error_of([&] { load_checkpoint(dir + "/trunc.safetensors"); }).find("truncated"), std::string::npos);
  // Not a cmha checkpoint: plain safetensors without the metadata.
  save_safetensors(dir + "/plain.safetensors", {{"weight", Tensor::zeros({1, 4})}});
  EXPECT_NE(error_of([&] { load_checkpoint(dir + "/plain.safetensors"); }).find("is not a cmha checkpoint"),
            std::string::npos);
  // Missing tensor, extra tensor, wrong shape.
  Checkpoint c = load_checkpoint(good);
  std::map<std::string, Tensor> params{{"weight", Tensor::zeros({1, 4})}, {"bias", Tensor::zeros({1})}};
  auto missing = c.weights;
  missing.erase("bias");
  EXPECT_EQ(error_of([&] { restore_weights("x.safetensors", missing, params); }),
            "checkpoint 'x.safetensors' has no tensor 'bias' that the model needs");
  auto extra = c.weights;
  extra["extra"] = Tensor::zeros({2});
  EXPECT_EQ(error_of([&] { restore_weights("x.safetensors", extra, params); }),
            "checkpoint 'x.safetensors' holds tensor 'extra' that the model does not have");
  auto wrong = c.weights;
  wrong["weight"] = Tensor::zeros({4, 1});
  EXPECT_EQ(error_of([&] { restore_weights("x.safetensors", wrong, params); }),
            "checkpoint 'x.safetensors': tensor 'weight' is [4, 1] but the model expects [1, 4]");
  // Resuming with a different architecture.
  RegressionTask other;
  const std::string arch = error_of([&] {
    Trainer(regression_recipe(dir, "model: {d_model: 7}\n"), other, comm, TrainerHooks{nullptr, true}).run();
  });
  EXPECT_NE(arch.find("different model architecture"), std::string::npos) << arch;
  fs::remove_all(dir);
}

TEST(Trainer, Bf16AutocastTrainsToo) {
  const std::string dir = test::temp_dir("trainer_bf16");
  RegressionTask task;
  distributed::SingleCommunicator comm;
  const double before = task.validate().at("loss");
  TrainSummary s = Trainer(regression_recipe(dir, "") , task, comm).run();
  fs::remove_all(dir);
  RegressionTask task16;
  TrainSummary s16 = Trainer(Recipe::parse("optim: {name: adam, lr: 0.05, betas: [0.9, 0.999], eps: 1e-8}\n"
                                           "lr: {schedule: constant, warmup: 0}\n"
                                           "train: {save_dir: " + dir + ", max_epochs: 5, log_every: 100, bf16: true}\n"),
                             task16, comm).run();
  EXPECT_LT(s16.last_validation.at("loss"), before * 0.5);
  EXPECT_NE(s16.last_validation.at("loss"), s.last_validation.at("loss"));  // the arithmetic did change
  EXPECT_NEAR(s16.last_validation.at("loss"), s.last_validation.at("loss"), 0.1 * before);
  fs::remove_all(dir);
}

TEST(Trainer, SgdWithMomentumTrainsAndResumesBitIdentically) {
  const std::string dir = test::temp_dir("trainer_sgd");
  distributed::SingleCommunicator comm;
  auto recipe = [&](const std::string& run, int epochs) {
    return Recipe::parse("optim: {name: sgd, lr: 0.02, momentum: 0.9, nesterov: true}\n"
                         "lr: {schedule: constant, warmup: 0}\n"
                         "train: {save_dir: " + dir + run + ", max_epochs: " + std::to_string(epochs) +
                         ", log_every: 100}\n");
  };
  RegressionTask full;
  const double before = full.validate().at("loss");
  TrainSummary s = Trainer(recipe("/full", 5), full, comm).run();
  EXPECT_LT(s.last_validation.at("loss"), before * 0.5);
  RegressionTask first, second;
  Trainer(recipe("/split", 2), first, comm).run();
  Trainer(recipe("/split", 5), second, comm, TrainerHooks{nullptr, true}).run();
  for (auto& [name, p] : full.model().named_parameters())
    EXPECT_EQ(p.to_float_vector(), second.model().state_dict().at(name).to_float_vector()) << name;
  fs::remove_all(dir);
}

TEST(Trainer, InitFromStartsFromTheWeightsWithAFreshOptimiserAndSchedule) {
  const std::string dir = test::temp_dir("trainer_init_from");
  distributed::SingleCommunicator comm;
  RegressionTask trained;
  Trainer(regression_recipe(dir + "/a"), trained, comm).run();
  const std::string ckpt = dir + "/a/checkpoint_20.safetensors";
  // lr 0: the fine-tune leaves the weights as loaded, so they must equal the checkpoint's.
  RegressionTask tuned;
  const Recipe r = Recipe::parse("optim: {name: adam, lr: 0.0}\nlr: {schedule: constant, warmup: 0}\n"
                                 "train: {save_dir: " + dir + "/b, max_epochs: 1, log_every: 100, init_from: " +
                                 ckpt + "}\n");
  const TrainSummary s = Trainer(r, tuned, comm).run();
  EXPECT_EQ(s.updates, 4);  // counted afresh, not from the checkpoint's 20
  for (auto& [name, p] : trained.model().named_parameters())
    EXPECT_EQ(p.to_float_vector(), tuned.model().state_dict().at(name).to_float_vector()) << name;
  const Checkpoint b = load_checkpoint(dir + "/b/checkpoint_4.safetensors");
  EXPECT_EQ(b.trainer.at("optimizer_steps").at("weight").get<int64_t>(), 4);  // fresh Adam state

  RegressionTask other;
  const std::string missing = error_of([&] {
    Trainer(Recipe::parse("train: {save_dir: " + dir + "/c, init_from: " + dir + "/nope.safetensors}\n"), other, comm)
        .run();
  });
  EXPECT_NE(missing.find("train.init_from: checkpoint '" + dir + "/nope.safetensors' does not exist"),
            std::string::npos) << missing;
  const std::string arch = error_of([&] {
    Trainer(Recipe::parse("model: {d_model: 7}\ntrain: {save_dir: " + dir + "/d, max_epochs: 1, init_from: " + ckpt +
                          "}\n"), other, comm).run();
  });
  EXPECT_NE(arch.find("different model architecture"), std::string::npos) << arch;
  fs::remove_all(dir);
}
