#pragma once
// The one place that switches on model.kind: which task trains each model
// kind, and how `cmha train` (a Task) and `cmha bench` (a BenchModel) build
// it. A new model kind is one row of model_kinds() (task_factory.cpp) and its
// keys in run/options.cpp.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/recipe.h"
#include "tensor/device.h"
#include "tensor/rng.h"
#include "train/bench.h"
#include "train/task.h"

namespace cmha::train {

struct ModelKind {
  const char* name;  // model.kind
  const char* task;  // the train.task that trains it
  std::unique_ptr<Task> (*make_task)(const run::Recipe& recipe, Generator& init_gen, int rank, int world);
  BenchModel (*make_bench)(const run::Recipe& recipe, Generator& init_gen, Generator& data_gen, Device device);
  // One checkpoint scored as the task's final evaluation scores a run (the
  // test split of its recipe), writing what it makes (hypotheses) into
  // out_dir; and the score that leads (cmha compress --finetune's table).
  nlohmann::json (*score_checkpoint)(const std::string& checkpoint, const std::string& out_dir);
  const char* metric;
};

const std::vector<ModelKind>& model_kinds();
// The row of `name`; an unknown name is an error listing the known ones.
const ModelKind& model_kind(const std::string& name);

// The recipe's task for its model: model.kind and train.task must be a row's
// pair (an error naming both otherwise). Rank `rank` of `world` reads its share
// of the data.
std::unique_ptr<Task> make_task(const run::Recipe& recipe, Generator& init_gen, int rank, int world);

}  // namespace cmha::train
