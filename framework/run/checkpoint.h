#pragma once
// Checkpoints: ONE safetensors file holding the weights under their dotted
// names (readable by PyTorch and Hugging Face tools), the optimiser state
// ("optimizer.exp_avg.<name>", ...), the EMA weights ("ema.<name>"), and in
// the metadata the resolved recipe and the trainer state as JSON. One file
// means one atomic rename: a crash never leaves a half-written checkpoint.
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/tensor.h"

namespace cmha::run {

struct Checkpoint {
  std::map<std::string, Tensor> weights;
  std::map<std::string, Tensor> optimizer;  // keys without the "optimizer." prefix
  std::map<std::string, Tensor> ema;        // keys without the "ema." prefix
  std::string recipe;                       // resolved YAML (Recipe::dump)
  nlohmann::json trainer = nlohmann::json::object();  // update, epoch, RNG and data state, ...
};

void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Validates the format marker, the recipe and the trainer state; every defect
// is one sentence naming the file.
Checkpoint load_checkpoint(const std::string& path);

// Copies checkpoint weights into `params` (name → tensor): a missing or extra
// tensor or a shape mismatch is an error naming the file and the tensor.
void restore_weights(const std::string& path, const std::map<std::string, Tensor>& source,
                     const std::map<std::string, Tensor>& params);

}  // namespace cmha::run
