#pragma once
// The one interface of cmha's optimisers (Adam, AdamW, SGD): what the trainer,
// its checkpoints and `cmha bench` need of an optimiser, so that none of them
// branches on which one it is. make_optimizer() is the only place that maps a
// name to a class; a new optimiser implements this interface and adds one
// line there (and its name to optim.name's allowed values in run/options.cpp).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::optim {

// One parameter and whether weight decay applies to it (biases and norm
// gains are usually excluded).
struct OptimParam {
  Tensor tensor;  // f32 leaf; its .grad() is read at each step
  bool weight_decay = true;
};

// Every tensor with weight decay on (an optimiser built from plain tensors).
std::vector<OptimParam> all_with_weight_decay(const std::vector<Tensor>& tensors);

// An optimiser's state as checkpoints store it.
struct OptimizerState {
  // "<kind>.<parameter name>" → tensor: exp_avg.<name> and exp_avg_sq.<name>
  // (Adam, AdamW), momentum_buffer.<name> (SGD, once the parameter has one).
  std::map<std::string, Tensor> tensors;
  // Updates applied to each parameter, by name (Adam, AdamW); empty for an
  // optimiser that keeps no count.
  std::map<std::string, int64_t> steps;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<OptimParam> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;

  // "adam", "adamw", "sgd" (optim.name).
  virtual const char* name() const = 0;
  // One update of every parameter that has a gradient (the others, and their
  // state, are left as they are). In place, through the kernel table.
  // `gate` (backend/optim.h; undefined: none) is the gradients' norm as
  // clip_grad_norm_on_device wrote it on the device: when it is not finite
  // the kernels change no parameter and no moment, while the host, which
  // never reads it, still counts the step (Adam's bias correction goes on).
  virtual void step(const Tensor& gate = Tensor()) = 0;
  // The learning rate of the next steps (schedules set it before each step).
  virtual void set_lr(double lr) = 0;
  virtual double lr() const = 0;

  // The state to save, its names built from `names` (one per parameter, in
  // params() order). The tensors are the optimiser's own, not copies.
  virtual OptimizerState state_dict(const std::vector<std::string>& names) const = 0;
  // Restores what state_dict() saved (names as there). `source` names where
  // the state comes from in errors, e.g. "checkpoint 'run/checkpoint_5.safetensors'".
  virtual void load_state_dict(const OptimizerState& state, const std::vector<std::string>& names,
                               const std::string& source) = 0;

  // Drops every parameter's gradient.
  void zero_grad();
  const std::vector<OptimParam>& params() const { return params_; }

 protected:
  std::vector<OptimParam> params_;
};

// The recipe's optim.* keys that choose and configure an optimiser (doubles,
// as PyTorch's Python floats).
struct OptimizerOptions {
  std::string name = "adam";                // adam, adamw or sgd
  double lr = 1e-3;
  std::vector<double> betas = {0.9, 0.999};  // Adam, AdamW: two numbers
  double eps = 1e-8;                        // Adam, AdamW
  double momentum = 0.0;                    // SGD
  bool nesterov = false;                    // SGD
  double weight_decay = 0.0;                // L2 for adam and sgd, decoupled for adamw
};

// The optimiser `options.name` over `params`; an unknown name is an error
// listing the known ones.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, std::vector<OptimParam> params);

}  // namespace cmha::optim
