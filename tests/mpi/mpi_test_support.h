#pragma once
// The MPI test executable (run by ctest under `mpirun -np 2`): the world
// communicator every test shares, and a regression task sharded over ranks
// as the real tasks shard theirs.
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "nn/layers.h"
#include "run/recipe.h"
#include "train/task.h"

namespace cmha::mpitest {

distributed::Communicator& world();
// Where the world's tensors live (CMHA_TEST_DEVICE, default cpu): the
// emulated-CUDA variants (CMHA_EMULATE_CUDA=async, CMHA_TEST_DEVICE=cuda)
// train there and pass the collectives device memory.
Device world_device();

// A directory every rank sees: rank 0's fresh temporary directory.
std::string shared_temp_dir(const std::string& tag);

// y = tanh(x·W1)·w2 + noise on 64 samples; each epoch a seeded permutation
// dealt round-robin to `world` ranks in batches of `batch` (so 2 ranks ×
// batch B see, batch by batch, the same samples as 1 rank × batch 2B). The
// model and its batches on world_device().
class ShardedRegressionTask : public train::Task {
 public:
  ShardedRegressionTask(int rank, int world, int64_t batch);
  nn::Module& model() override;
  const char* unit_name() const override { return "samples"; }
  void start_epoch(int64_t epoch) override;
  bool has_next_batch() const override { return position_ < static_cast<int64_t>(order_.size()); }
  train::BatchLoss next_batch_loss() override;
  int64_t batches_per_epoch() const override;
  std::map<std::string, double> validate() override;
  nlohmann::json data_state() const override;
  void restore_data_state(const nlohmann::json& state) override;

 private:
  struct Net;
  std::shared_ptr<Net> net_;
  Tensor x_, y_;  // [64, 8], [64, 1]
  int rank_, world_;
  int64_t batch_, epoch_ = 0, position_ = 0;
  std::vector<int64_t> order_;  // this rank's samples of epoch_
};

// The recipe of the data-parallel tests: Adam, a constant rate, `epochs` epochs, run dir `dir`,
// buckets of 52 bytes (three for the four parameters).
run::Recipe regression_recipe(const std::string& dir, int64_t epochs, const std::string& extra = "");

}  // namespace cmha::mpitest
