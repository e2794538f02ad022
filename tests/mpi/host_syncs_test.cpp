// Issue 33 on 2 data-parallel ranks: a training step on the asynchronous
// emulated GPU (CMHA_EMULATE_CUDA=async, CMHA_TEST_DEVICE=cuda under
// tests/mpi/torchrun_like.sh: the emulated-nccl backend) makes no host wait
// between log lines, on either rank, for every model kind, in f32 (with an
// f32 or a bf16 gradient exchange) and in bf16, with update_freq 2. The gradient buckets' all-reduces run on the comm
// stream, ordered by events; the counts and the stop flag cross on the host.
//
// The count, as tests/unit/training_host_syncs_test.cpp counts one rank:
// the emulator's host waits at each update's gradient exchange (the trainer
// polls the stop hook there), differenced. The waits from update u's
// exchange to update u+1's are update u's clipping, step and log line (when
// u is a logging update) and update u+1's forward and backward passes.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "mpi_test_support.h"
#include "support/check.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "tensor/emulated_stream.h"
#include "train/task_factory.h"
#include "train/trainer.h"

using namespace cmha;
using namespace cmha::mpitest;

namespace {

using Causes = std::map<std::string, uint64_t>;

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

uint64_t total(const Causes& c) {
  uint64_t n = 0;
  for (const auto& [cause, k] : c) n += k;
  return n;
}

Causes difference(const Causes& later, const Causes& earlier) {
  Causes d;
  for (const auto& [cause, n] : later) {
    const auto before = earlier.find(cause);
    const uint64_t k = n - (before == earlier.end() ? 0 : before->second);
    if (k > 0) d[cause] = k;
  }
  return d;
}

std::string describe(const Causes& c) {
  std::string s;
  for (const auto& [cause, n] : c) s += (s.empty() ? "" : ", ") + cause + " " + std::to_string(n);
  return s.empty() ? "none" : s;
}

// Updates 1..7 of 2 micro-batches with a log line every 3 (updates 3 and 6),
// no checkpoint or validation before the end: from update 2 on, each
// non-logging update waits 0 times on this rank; a logging update's waits are
// copies to the host, at most one per dtype read (the checks' answers and
// the counts in i64, the losses in f32).
void expect_waits_only_at_log_lines(const run::Recipe& recipe, const std::string& what) {
  const std::string who = what + " on rank " + std::to_string(world().rank());
  const std::vector<Causes> at = train_counting_waits(recipe, 14);
  ASSERT_EQ(at.size(), 7u) << who;
  for (size_t u = 1; u + 1 < at.size(); ++u) {  // update u+1's waits (0-based u: update 1 is at[0])
    const int64_t update = static_cast<int64_t>(u) + 1;
    const Causes waits = difference(at[u + 1], at[u]);
    if (update % 3 != 0) {
      EXPECT_EQ(total(waits), 0u) << who << ": update " << update << " waited: " << describe(waits);
    } else {
      EXPECT_LE(total(waits), 3u) << who << ": log line at update " << update << ": " << describe(waits);
      for (const auto& [cause, n] : waits) EXPECT_EQ(cause, "copy to host") << who << ": " << describe(waits);
    }
  }
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

const std::vector<std::string> kSteady = {"train.max_updates=7",    "train.log_every=3",   "train.save_every=0",
                                          "train.validate_every=0", "train.device=cuda",   "train.update_freq=2",
                                          "train.max_epochs=0",
                                          // buckets of 10 KB: several all-reduces a step, overlapping the backward pass
                                          "train.dist_bucket_mb=0.01"};

// oneDNN 2.x has no bf16 matmul on a CPU without AVX-512: bf16 cannot train there, on either device.
bool cpu_runs_bf16() {
  try {
    matmul(Tensor::ones({2, 2}, DType::bf16), Tensor::ones({2, 2}, DType::bf16));
    return true;
  } catch (const Error&) {
    return false;
  }
}

// f32; f32 with the gradients all-reduced in bf16; bf16 autocast and a bf16 exchange.
struct Precision {
  const char* name;
  std::vector<std::string> overrides;
};
const std::vector<Precision> kPrecisions = {
    {"f32", {"train.bf16=false", "train.dist_grad_dtype=f32"}},
    {"f32, bf16 exchange", {"train.bf16=false", "train.dist_grad_dtype=bf16"}},
    {"bf16", {"train.bf16=true", "train.dist_grad_dtype=bf16"}}};

bool skip_bf16(const Precision& p, const std::string& what) {
  if (std::string(p.name) != "bf16" || cpu_runs_bf16()) return false;
  std::printf("[ SKIPPED  ] %s: this CPU's oneDNN has no bf16 matmul (it needs AVX-512)\n", what.c_str());
  return true;
}

void require_emulated_world() {
  if (!cuda_emulated_async() || world_device().is_cpu())
    GTEST_SKIP() << "needs the asynchronous emulated GPU: CMHA_EMULATE_CUDA=async and CMHA_TEST_DEVICE=cuda "
                    "(ctest's gloo_emulated_HostSyncs sets both)";
  ASSERT_STREQ(world().backend(), "emulated-nccl");
}

TEST(DataParallelHostSyncs, TranslationStepsWaitOnlyAtLogLines) {
  require_emulated_world();
  if (testing::Test::IsSkipped() || testing::Test::HasFatalFailure()) return;
  // Rank 0's corpus; rank 1 waits for rank 0's SentencePiece model (the task does).
  const std::string dir = world().all_gather_bytes(world().is_main() ? test::toy_dir("dp_host_syncs") : "").at(0);
  int run = 0;
  for (const char* attention : {"concat", "collaborative"})
    for (const Precision& p : kPrecisions) {
      const std::string what = std::string(attention) + ", " + p.name;
      if (skip_bf16(p, what)) continue;
      std::vector<std::string> o = kSteady;
      o.push_back("data.max_tokens=80");  // ~18 batches a rank: 7 updates of 2 stay in the first epoch
      o.push_back(std::string("model.attention.type=") + attention);
      o.insert(o.end(), p.overrides.begin(), p.overrides.end());
      o.push_back("train.save_dir=" + dir + "/run_" + std::to_string(run++));
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
  int run = 0;
  for (const Precision& p : kPrecisions) {
    const std::string what = std::string("vit, ") + p.name;
    if (skip_bf16(p, what)) continue;
    std::vector<std::string> o = words(test::tiny_vit_overrides(dir, dir + "/run"));
    o.insert(o.end(), kSteady.begin(), kSteady.end());
    o.insert(o.end(), p.overrides.begin(), p.overrides.end());
    o.push_back("train.save_dir=" + dir + "/run_" + std::to_string(run++));
    expect_waits_only_at_log_lines(
        run::Recipe::load(std::string(CMHA_SOURCE_DIR) + "/recipes/local/fashion_mnist_vit.yaml", o), what);
  }
}

}  // namespace
