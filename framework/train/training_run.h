#pragma once
// One `cmha train` run after its recipe is resolved: claims the run directory
// (rank 0), settles the threads and the device, builds the task
// (train/task_factory.h), prints the run's header, trains (train/trainer.h,
// with compress::head_telemetry's rows under train.head_telemetry)
// and, on rank 0, writes the task's final evaluation to results.json.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "distributed/communicator.h"
#include "nn/module.h"
#include "run/recipe.h"
#include "run/run_dir.h"

namespace cmha::train {

struct TrainingRunOptions {
  std::string recipe_name;     // shown in the header ("recipes/local/x.yaml")
  run::RunStart start = run::RunStart::fresh;
  long long threads = -1;      // --threads; ≤ 0: train.threads
  std::function<bool()> stop_requested = [] { return false; };  // polled once per update (Ctrl-C)
};

// False when the run was stopped (stop_requested) after saving its checkpoint.
bool run_training(const run::Recipe& recipe, const TrainingRunOptions& options, distributed::Communicator& comm);

}  // namespace cmha::train
