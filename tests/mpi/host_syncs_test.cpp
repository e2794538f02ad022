// Issue 33 on 2 data-parallel ranks: a training step on the asynchronous
// emulated GPU (CMHA_EMULATE_CUDA=async, CMHA_TEST_DEVICE=cuda under
// tests/mpi/torchrun_like.sh: the emulated-nccl backend) makes no host wait
// between log lines, on either rank, for every model kind, in f32 (with an
// f32 or a bf16 gradient exchange) and in bf16, with update_freq 2. The
// gradient buckets' all-reduces run on the comm stream, ordered by events;
// the counts and the stop flag cross on the host.
//
// The count, as tests/unit/training_host_syncs_test.cpp counts one rank:
// the emulator's host waits at each update's gradient exchange, differenced
// (tests/support/host_sync_counts.h), on each rank.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mpi_test_support.h"
#include "support/check.h"
#include "support/host_sync_counts.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "tensor/emulated_stream.h"
#include "train/task_factory.h"
#include "train/trainer.h"
#include "support/source_paths.h"

using namespace cmha;
using namespace cmha::mpitest;

namespace {

using Causes = test::HostWaitsByCause;

// The emulator's waits by cause at each update's exchange, in update order,
// training `recipe` as this rank of the world.
std::vector<Causes> train_counting_waits(const run::Recipe& recipe, int64_t batches_needed) {
  Generator init_gen(static_cast<uint64_t>(recipe.integer("train.seed")));
  const std::unique_ptr<train::Task> task = train::make_task(recipe, init_gen, world().rank(), world().size());
  // Every update of the count in the first epoch: an epoch's end validates.
  EXPECT_GE(task->batches_per_epoch(), batches_needed) << "rank " << world().rank();
  std::vector<Causes> at_exchange;
  train::TrainerHooks hooks;
  hooks.stop_requested = [&] {
    at_exchange.push_back(emulated_host_syncs_by_cause());
    return false;
  };
  train::Trainer(recipe, *task, world(), hooks).run();
  return at_exchange;
}

void expect_waits_only_at_log_lines(const run::Recipe& recipe, const std::string& what) {
  const std::string who = what + " on rank " + std::to_string(world().rank());
  test::expect_waits_only_at_log_lines(train_counting_waits(recipe, 14), who);  // 7 updates of 2 micro-batches
}

const std::vector<std::string> kSteadyStateRun = {"train.max_updates=7",    "train.log_every=3",   "train.save_every=0",
                                          "train.validate_every=0", "train.device=cuda",   "train.update_freq=2",
                                          "train.max_epochs=0",
                                          // buckets of 10 KB: several all-reduces a step, overlapping the backward pass
                                          "train.dist_bucket_mb=0.01"};

// f32; f32 with the gradients all-reduced in bf16; bf16 autocast and a bf16 exchange.
struct StepPrecision {
  const char* name;
  std::vector<std::string> overrides;
};
const std::vector<StepPrecision> kStepPrecisions = {
    {"f32", {"train.bf16=false", "train.dist_grad_dtype=f32"}},
    {"f32, bf16 exchange", {"train.bf16=false", "train.dist_grad_dtype=bf16"}},
    {"bf16", {"train.bf16=true", "train.dist_grad_dtype=bf16"}}};

void require_emulated_world() {
  if (!cuda_emulated_async() || world_device().is_cpu())
    GTEST_SKIP() << "needs the asynchronous emulated GPU: CMHA_EMULATE_CUDA=async and CMHA_TEST_DEVICE=cuda "
                    "(ctest's gloo_emulated_DataParallelHostSyncs sets both)";
  ASSERT_STREQ(world().backend(), "emulated-nccl");
}

TEST(DataParallelHostSyncs, TranslationStepsWaitOnlyAtLogLines) {
  require_emulated_world();
  if (testing::Test::IsSkipped() || testing::Test::HasFatalFailure()) return;
  // Rank 0's corpus; rank 1 waits for rank 0's SentencePiece model (the task does).
  const std::string dir = world().all_gather_bytes(world().is_main() ? test::toy_dir("dp_host_syncs") : "").at(0);
  int run_index = 0;
  for (const char* attention : {"concat", "collaborative"})
    for (const StepPrecision& p : kStepPrecisions) {
      const std::string what = std::string(attention) + ", " + p.name;
      std::vector<std::string> o = kSteadyStateRun;
      o.push_back("data.max_tokens=80");  // ~18 batches a rank: 7 updates of 2 stay in the first epoch
      o.push_back(std::string("model.attention.type=") + attention);
      o.insert(o.end(), p.overrides.begin(), p.overrides.end());
      o.push_back("train.save_dir=" + dir + "/run_" + std::to_string(run_index++));
      expect_waits_only_at_log_lines(test::toy_recipe(dir, o), what);
    }
}

TEST(DataParallelHostSyncs, VitStepsWaitOnlyAtLogLines) {
  require_emulated_world();
  if (testing::Test::IsSkipped() || testing::Test::HasFatalFailure()) return;
  const std::string dir = shared_temp_dir("dp_host_syncs_vit");
  // 480 images, 240 a rank: 15 batches of 16, 7 updates of 2 stay in the first epoch.
  if (world().is_main()) test::write_tiny_fashion_mnist(dir, 480, 16);
  world().barrier();
  int run_index = 0;
  for (const StepPrecision& p : kStepPrecisions) {
    const std::string what = std::string("vit, ") + p.name;
    std::vector<std::string> o = test::words(test::tiny_vit_overrides(dir, dir + "/run"));
    o.insert(o.end(), kSteadyStateRun.begin(), kSteadyStateRun.end());
    o.insert(o.end(), p.overrides.begin(), p.overrides.end());
    o.push_back("train.save_dir=" + dir + "/run_" + std::to_string(run_index++));
    expect_waits_only_at_log_lines(
        run::Recipe::load(std::string(CMHA_SOURCE_DIR) + "/recipes/local/fashion_mnist_vit.yaml", o), what);
  }
}

}  // namespace
