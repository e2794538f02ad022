#pragma once
// What a checkpoint holds, as `cmha info` shows it: its stored tensors, its
// parameter count, the attention of every layer with the sizes resolved, and
// all of it (with the budget, the trainer state and the recipe) as one JSON
// object.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/attention/attention.h"
#include "run/checkpoint.h"
#include "run/recipe.h"

namespace cmha::run {

// Every tensor the file stores, under its name there ("ema.<name>", "optimizer.<state>.<name>").
struct StoredTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
};
std::vector<StoredTensor> stored_tensors(const Checkpoint& c);

// The number of model weights (not optimiser or EMA state).
int64_t parameter_count(const Checkpoint& c);

// One attention layer: the sizes resolved (0 = d_model made explicit).
struct AttentionLayerRow {
  std::string place;
  int64_t layer = 0;
  nn::AttentionConfig attention;
  int64_t key_dim = 0, value_dim = 0;
  bool own = false;  // set by model.<place>.layers
};
std::vector<AttentionLayerRow> attention_layer_rows(const Recipe& r);

// The whole summary, in the order `cmha info` prints it; the recipe typed as
// its keys are; with `tensors`, the stored tensors too.
nlohmann::ordered_json checkpoint_summary_json(const std::string& path, const Checkpoint& c, const Recipe& r,
                                               bool tensors);

}  // namespace cmha::run
