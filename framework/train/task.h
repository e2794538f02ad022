#pragma once
// What the trainer trains: a task owns the model and its data, and turns the
// next micro-batch into a summed loss. The trainer owns everything else
// (optimiser, schedule, accumulation, checkpoints, logs).
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/module.h"

namespace cmha::train {

struct BatchLoss {
  Tensor loss_sum;     // [] summed over the batch's units (the trainer divides by the global unit count)
  int64_t units = 0;   // target tokens or samples in this micro-batch
  double correct = 0;  // optional: correctly predicted units (top-1 accuracy)
  // Optional, added to `correct`: the count on the loss's device (i64 [],
  // count_correct in autograd/ops.h), which the trainer reads with the losses
  // at its log cadence, so that a GPU step never waits for the predictions.
  Tensor correct_count;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual nn::Module& model() = 0;
  // "tokens" or "samples": what units count.
  virtual const char* unit_name() const = 0;
  // Starts (or restarts) an epoch: the shuffle of `epoch` for this seed.
  virtual void start_epoch(int64_t epoch) = 0;
  // False when the epoch's training batches are used up.
  virtual bool has_next_batch() const = 0;
  virtual BatchLoss next_batch_loss() = 0;
  virtual int64_t batches_per_epoch() const = 0;
  // Validation metrics ("loss", "top1", "perplexity", ...), model in eval mode; losses in
  // nats per unit, accuracies in percent ("top1": % of units predicted right).
  virtual std::map<std::string, double> validate() = 0;
  // The data position, saved in checkpoints so a resume continues exactly.
  virtual nlohmann::json data_state() const = 0;
  virtual void restore_data_state(const nlohmann::json& state) = 0;
  // After a finished run (rank 0): the run's headline evaluation, e.g. average
  // the last checkpoints and score the test split (BLEU, top-1). `cmha train`
  // prints it and writes it to <save_dir>/results.json, which `cmha sweep`
  // reads. Empty = the task has none.
  virtual nlohmann::json final_evaluation(const std::string& run_dir) {
    (void)run_dir;
    return nlohmann::json::object();
  }
};

}  // namespace cmha::train
