#pragma once
// The training loop: micro-batches accumulated into updates, gradients
// all-reduced through the communicator and averaged by the global number of
// units, non-finite updates skipped, clipping, the optimiser
// (optim/optimizer.h), LR schedule, EMA, validation, best/last checkpoints,
// early stopping, metrics.jsonl (run/metrics_log.h) and the progress
// display (train/progress.h). A run resumes
// bit-identically from its latest checkpoint.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "run/recipe.h"
#include "train/task.h"

namespace cmha::train {

struct TrainerHooks {
  std::function<bool()> stop_requested;  // polled once per update (Ctrl-C); any rank's request stops all
  bool resume = false;                   // continue from the latest checkpoint in train.save_dir
  // Rank 0, after each validation and every train.head_telemetry_every
  // updates: the fields of one more metrics row of split "heads"
  // (train/training_run.cpp: compress::head_telemetry under
  // train.head_telemetry); an empty object writes none. The row gets the
  // update, the epoch and its own cost in "seconds".
  std::function<nlohmann::json(nn::Module& model)> telemetry_row;
};

struct TrainSummary {
  int64_t updates = 0, epochs = 0, skipped_updates = 0;
  bool interrupted = false, early_stopped = false;
  bool mid_epoch = false;   // the last update was not followed by an epoch's end
  std::map<std::string, double> last_validation;
  std::string last_checkpoint;
  double seconds = 0;       // wall time of this session
  double units_per_s = 0;   // training throughput of this session (validation and checkpoints left out)
  std::string unit;         // "tokens" or "samples"
  double best = NAN;        // the best validation value of best_metric so far (NaN: none yet)
  std::string best_metric;
  double peak_rss_mb = 0;   // the process's peak resident memory at the end (this rank)
  double peak_tensor_mb = 0;  // the most CPU tensor memory held at once (peak_cpu_tensor_mb)
};

// The run's closing line as fields: "cmha train: N updates in T", epochs,
// throughput, the best validation metric, skipped updates, last checkpoint.
// Trainer::run prints it.
std::vector<std::string> summary_fields(const TrainSummary& s);

class Trainer {
 public:
  Trainer(const run::Recipe& recipe, Task& task, distributed::Communicator& comm, TrainerHooks hooks = {});
  ~Trainer();
  TrainSummary run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cmha::train
