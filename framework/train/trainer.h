#pragma once
// The training loop: micro-batches accumulated into updates, gradients
// all-reduced through the communicator and averaged by the global number of
// units, non-finite updates skipped, clipping, the optimiser
// (optim/optimizer.h), LR schedule, EMA, validation, best/last checkpoints,
// early stopping, metrics.jsonl and a progress line. A run resumes
// bit-identically from its latest checkpoint.
#include <functional>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "train/recipe.h"
#include "train/task.h"

namespace cmha::train {

struct TrainerHooks {
  std::function<bool()> stop_requested;  // polled once per update (Ctrl-C); any rank's request stops all
  bool resume = false;                   // continue from the latest checkpoint in train.save_dir
};

struct TrainSummary {
  int64_t updates = 0, epochs = 0, skipped_updates = 0;
  bool interrupted = false, early_stopped = false;
  std::map<std::string, double> last_validation;
  std::string last_checkpoint;
};

class Trainer {
 public:
  Trainer(const Recipe& recipe, Task& task, dist::Communicator& comm, TrainerHooks hooks = {});
  ~Trainer();
  TrainSummary run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The checkpoint of the highest update in `dir` (checkpoint_<update>.safetensors), or "".
std::string latest_checkpoint(const std::string& dir);

}  // namespace cmha::train
