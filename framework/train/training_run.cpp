#include "train/training_run.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>

#include "compress/head_telemetry.h"
#include "run/budget.h"
#include "run/device.h"
#include "run/model_config.h"
#include "run/run_results.h"
#include "tensor/rng.h"
#include "train/progress.h"
#include "train/task_factory.h"
#include "train/trainer.h"

namespace cmha::train {

namespace {

// "All cores" shared by the ranks on this machine, within the cores this rank is bound to
// (OpenMP's default count follows the binding; mpirun binds 2 ranks to a core each).
void set_threads(const run::Recipe& recipe, long long given, const distributed::Communicator& comm) {
  long long t = given > 0 ? given : recipe.integer("train.threads");
  if (t == 0 && comm.local_size() > 1 && !std::getenv("OMP_NUM_THREADS"))
    t = std::max<long long>(1, std::min<long long>(omp_get_max_threads(), std::thread::hardware_concurrency() /
                                                                              comm.local_size()));
  if (t > 0) omp_set_num_threads(static_cast<int>(t));
}

// The run's first lines, wrapped at their fields on a terminal like the trainer's (train/progress.h).
void print_header(const run::Recipe& recipe, const std::string& name, const Task& task, int ranks, Device device) {
  const std::vector<std::string> fields = {
      "cmha train: " + name,
      recipe.string("model.kind") + ", " + std::to_string(const_cast<Task&>(task).model().num_parameters()) +
          " parameters, attention " + recipe.string("model.attention.type"),
      std::to_string(ranks) + " ranks × " + std::to_string(omp_get_max_threads()) + " threads",
      "on " + run::describe_device(device), "run dir " + recipe.string("train.save_dir")};
  const size_t width = stderr_is_interactive() ? static_cast<size_t>(terminal_width() - 1) : 0;
  for (const std::string& line : wrap_fields(fields, width)) std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

bool run_training(const run::Recipe& recipe, const TrainingRunOptions& options, distributed::Communicator& comm) {
  const std::string dir = recipe.string("train.save_dir");
  // Rank 0 alone writes the run directory; it holds it until the process ends (the final evaluation included).
  std::optional<run::RunDirLock> run_dir;
  run::check_save_dir(dir);  // every rank: a file where the run directory or a folder above it belongs
  if (comm.is_main()) run_dir.emplace(run::claim_run_directory(dir, options.start));
  set_threads(recipe, options.threads, comm);
  const Device device = run::recipe_device(recipe);  // an unusable device fails here, before any data preparation
  run::check_schedule_before_data(recipe, comm.size());

  Generator init_gen(static_cast<uint64_t>(recipe.integer("train.seed")));
  const std::unique_ptr<Task> task = make_task(recipe, init_gen, comm.rank(), comm.size());
  if (comm.is_main()) print_header(recipe, options.recipe_name, *task, comm.size(), device);
  TrainerHooks hooks;
  hooks.resume = options.start == run::RunStart::resume;
  hooks.stop_requested = options.stop_requested;
  if (recipe.boolean("train.head_telemetry"))
    hooks.telemetry_row = [](nn::Module& m) { return compress::head_telemetry(m); };
  Trainer trainer(recipe, *task, comm, hooks);
  const TrainSummary s = trainer.run();  // it prints the closing summary line
  if (s.interrupted) return false;
  if (comm.is_main()) {
    nlohmann::json results = task->final_evaluation(dir);
    // The model's budget beside its scores, so that a sweep can plot one against the other.
    if (!results.empty()) {
      const nlohmann::ordered_json budget = run::budget_json(run::model_budget(recipe, task->model()));
      for (const auto& [k, v] : budget.items()) results[k] = v;
    }
    if (!results.empty()) {
      run::write_run_results(dir, results);
      std::fprintf(stderr, "cmha train: results %s → %s\n", results.dump().c_str(), run::run_results_path(dir).c_str());
    }
  }
  return true;
}

}  // namespace cmha::train
