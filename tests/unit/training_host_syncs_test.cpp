// Issue 33: a training step on the asynchronous emulated GPU
// (CMHA_EMULATE_CUDA=async, tensor/emulated_stream.h) makes no host wait
// between log lines. Losses, target counts and correct predictions stay on
// the device (train/update_tally.h), the range checks of ids and targets
// write their answers there (autograd/deferred_checks.h), the gradients are
// clipped there and the optimiser's step is gated there (optim/clip.h); the
// log line (train.log_every) reads them all with a few named waits.
//
// The count: the emulator's host waits at each update's gradient exchange,
// differenced (tests/support/host_sync_counts.h; the same count on 2
// data-parallel ranks: tests/mpi/host_syncs_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "distributed/communicator.h"
#include "nn/layers.h"
#include "run/recipe.h"
#include "support/check.h"
#include "support/emulated_cuda.h"
#include "support/files.h"
#include "support/host_sync_counts.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "tensor/emulated_stream.h"
#include "train/task_factory.h"
#include "train/trainer.h"
#include "support/source_paths.h"

namespace cmha {
namespace {

using Causes = test::HostWaitsByCause;

using cmha::test::AsyncEmulated;

// The emulator's waits by cause at each update's exchange, in update order.
std::vector<Causes> train_counting_waits(const run::Recipe& recipe) {
  Generator init_gen(static_cast<uint64_t>(recipe.integer("train.seed")));
  const std::unique_ptr<train::Task> task = train::make_task(recipe, init_gen, 0, 1);
  distributed::SingleCommunicator comm;
  std::vector<Causes> at_exchange;
  train::TrainerHooks hooks;
  hooks.stop_requested = [&] {
    at_exchange.push_back(emulated_host_syncs_by_cause());
    return false;
  };
  train::Trainer(recipe, *task, comm, hooks).run();
  return at_exchange;
}

void expect_waits_only_at_log_lines(const run::Recipe& recipe, const std::string& what) {
  test::expect_waits_only_at_log_lines(train_counting_waits(recipe), what);
}

const char* const kSteady = "train.max_updates=7 train.log_every=3 train.save_every=0 train.validate_every=0 "
                            "train.device=cuda";

using cmha::test::words;

TEST(TrainingHostSyncs, TranslationStepsWaitOnlyAtLogLines) {
  const std::string dir = test::toy_dir("host_syncs_translation");
  AsyncEmulated on;
  for (const char* attention : {"concat", "collaborative"})
    for (const char* bf16 : {"false", "true"})
      for (const char* update_freq : {"1", "2"}) {
        std::vector<std::string> o = words(kSteady);
        o.push_back("data.max_tokens=100");  // ~30 batches: 7 updates of 2 stay in the first epoch
        o.push_back(std::string("model.attention.type=") + attention);
        o.push_back(std::string("train.bf16=") + bf16);
        o.push_back(std::string("train.update_freq=") + update_freq);
        o.push_back("train.save_dir=" + dir + "/run_" + attention + bf16 + update_freq);
        expect_waits_only_at_log_lines(test::toy_recipe(dir, o), std::string(attention) + " bf16 " + bf16 +
                                                                     " update_freq " + update_freq);
      }
}

TEST(TrainingHostSyncs, VitStepsWaitOnlyAtLogLines) {
  const std::string dir = test::temp_dir("host_syncs_vit");
  test::write_tiny_fashion_mnist(dir, 240, 16);  // 15 batches of 16: 7 updates of 2 stay in the first epoch
  AsyncEmulated on;
  for (const char* bf16 : {"false", "true"})
    for (const char* update_freq : {"1", "2"}) {
      std::vector<std::string> o = words(test::tiny_vit_overrides(dir, dir + "/run") + " " + kSteady);
      o.push_back("train.max_epochs=0");
      o.push_back(std::string("train.bf16=") + bf16);
      o.push_back(std::string("train.update_freq=") + update_freq);
      o.push_back("train.save_dir=" + dir + "/run_" + bf16 + update_freq);
      expect_waits_only_at_log_lines(
          run::Recipe::load(std::string(CMHA_SOURCE_DIR) + "/recipes/local/fashion_mnist_vit.yaml", o),
          std::string("vit bf16 ") + bf16 + " update_freq " + update_freq);
    }
}

// A task that embeds two ids a batch through a [5, 3] table on the emulated
// GPU; the batch numbered `bad` (from 0, over the run) holds the id 9.
class IdTask : public train::Task {
 public:
  explicit IdTask(int64_t bad) : bad_(bad) {
    Generator g(1);
    model_ = std::make_shared<nn::Embedding>(5, 3, g);
    model_->to(Device::cuda(0));
  }
  nn::Module& model() override { return *model_; }
  const char* unit_name() const override { return "tokens"; }
  void start_epoch(int64_t) override { pos_ = 0; }
  bool has_next_batch() const override { return pos_ < 20; }
  train::BatchLoss next_batch_loss() override {
    const int64_t id = served_++ == bad_ ? 9 : 2;
    ++pos_;
    const Tensor ids = Tensor::from_vector_i64({1, id}, {2}).to(Device::cuda(0));
    return {sum(model_->forward(ids)), 2, 0.0, Tensor()};
  }
  int64_t batches_per_epoch() const override { return 20; }
  std::map<std::string, double> validate() override { return {{"loss", 1.0}}; }
  nlohmann::json data_state() const override { return {{"pos", pos_}}; }
  void restore_data_state(const nlohmann::json& s) override { pos_ = s.at("pos"); }

 private:
  std::shared_ptr<nn::Embedding> model_;
  int64_t bad_, pos_ = 0, served_ = 0;
};

// An id out of range on the GPU: its check's answer is read at the next log
// line (or checkpoint, validation, end), and the error is the embedding's
// one sentence naming the id, the table and the batch; no checkpoint holds
// the update.
TEST(TrainingHostSyncs, AnIdOutOfRangeIsReportedAtTheLogLineNamingItsBatch) {
  const std::string dir = test::temp_dir("host_syncs_bad_id");
  AsyncEmulated on;
  IdTask task(/*bad=*/7);  // update 4's second batch
  distributed::SingleCommunicator comm;
  const run::Recipe recipe = run::Recipe::parse(
      "optim: {name: adam, lr: 0.01}\nlr: {schedule: constant, warmup: 0}\n"
      "train: {save_dir: " + dir + ", max_updates: 9, max_epochs: 0, log_every: 3, update_freq: 2, device: cuda}\n");
  std::vector<Causes> at;
  train::TrainerHooks hooks;
  hooks.stop_requested = [&] {
    at.push_back(emulated_host_syncs_by_cause());
    return false;
  };
  const std::string e = test::error_of([&] { train::Trainer(recipe, task, comm, hooks).run(); });
  const auto has = [&](const char* part) { return e.find(part) != std::string::npos; };
  EXPECT_TRUE(has("embedding: id 9 at position [1] is out of range for a vocabulary of 5 (weight ") &&
              has(", in update 4's batch 2") && e.find('\n') == std::string::npos)
      << e;
  EXPECT_EQ(at.size(), 6u);  // the error came at update 6's log line, not before
  EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint_6.safetensors"));
}

}  // namespace
}  // namespace cmha
