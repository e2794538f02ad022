// Issue 19, item 6: a diverging run (an absurd learning rate) never writes
// non-finite weights, and its stop message says what is really on disk: no
// checkpoint yet, or the newest one (which holds finite weights).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "distributed/communicator.h"
#include "run/run_dir.h"
#include "support/check.h"
#include "support/text.h"
#include "support/toy_translation.h"
#include "tensor/safetensors.h"
#include "train/trainer.h"
#include "train/translation_task.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

// The error that training `r` stops with ("(no error)" when it finishes).
std::string train_error(const run::Recipe& r, bool resume = false) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Generator g(3);
  train::TranslationTask task(r, g);
  distributed::SingleCommunicator comm;
  train::TrainerHooks hooks;
  hooks.resume = resume;
  const std::string message = test::error_of([&] { train::Trainer(r, task, comm, hooks).run(); });
  omp_set_num_threads(threads);
  return message;
}

// Every checkpoint_<n> of `run` holds only finite f32 values.
void expect_finite_checkpoints(const std::string& run) {
  for (const auto& e : fs::directory_iterator(run)) {
    if (e.path().extension() != ".safetensors") continue;
    const SafetensorsFile f = load_safetensors(e.path().string());
    for (const auto& [name, t] : f.tensors) {
      if (t.dtype() != DType::f32) continue;
      const Tensor c = t.contiguous();
      const float* p = c.data<float>();
      for (int64_t i = 0; i < c.numel(); ++i) ASSERT_TRUE(std::isfinite(p[i])) << e.path() << " " << name;
    }
  }
}

}  // namespace

TEST(DivergingRun, NoCheckpointYetIsWhatTheStopMessageSays) {
  const std::string dir = test::toy_dir("diverge_fresh");
  // An infinite step: the weights are non-finite after the first update.
  const std::string message = train_error(
      test::toy_recipe(dir, {"optim.lr=1e300", "lr.schedule=constant", "lr.warmup=0", "train.save_every=1", "train.max_updates=6"}));
  EXPECT_TRUE(has(message, "no checkpoint has been saved yet")) << message;
  EXPECT_FALSE(has(message, "intact")) << message;
  EXPECT_TRUE(run::latest_checkpoint(dir + "/run").empty());
  expect_finite_checkpoints(dir + "/run");
  fs::remove_all(dir);
}

TEST(DivergingRun, TheNewestFiniteCheckpointIsNamedAndNothingNonFiniteIsWritten) {
  const std::string dir = test::toy_dir("diverge_resumed");
  ASSERT_EQ(train_error(test::toy_recipe(dir, {"train.save_every=1", "train.max_updates=3"})), "(no error)");
  const std::string message = train_error(
      test::toy_recipe(dir, {"optim.lr=1e300", "lr.schedule=constant", "lr.warmup=0", "train.save_every=1", "train.max_updates=8"}),
      /*resume=*/true);
  EXPECT_TRUE(has(message, "non-finite")) << message;
  EXPECT_TRUE(has(message, "the newest checkpoint, '" + dir + "/run/checkpoint_3.safetensors' (update 3)")) << message;
  EXPECT_EQ(run::latest_checkpoint(dir + "/run"), dir + "/run/checkpoint_3.safetensors");
  expect_finite_checkpoints(dir + "/run");
  fs::remove_all(dir);
}
