#pragma once
// Stochastic gradient descent with momentum, matching torch.optim.SGD
// (PyTorch's single-tensor path) step for step:
//   g ← g + wd·p                               (weight decay, L2)
//   b ← g at the first step, then b ← μ·b + (1 - dampening)·g
//   g ← g + μ·b (nesterov)  or  g ← b
//   p ← p - lr·g
// Without momentum (μ = 0) there is no buffer and p ← p - lr·(g + wd·p).
#include <cstdint>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace cmha::optim {

// Doubles, as PyTorch's Python floats; each derived scalar is rounded to f32
// once, where PyTorch rounds it.
struct SgdOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;  // in [0, 1] (torch does not check; other values make no sense)
  double weight_decay = 0.0;
  bool nesterov = false;   // needs momentum > 0 and dampening 0, as in torch
};

// One parameter and whether weight decay applies to it; the tensor is an
// f32 CPU leaf.
using SgdParam = OptimParam;

// Per-parameter state, the same as PyTorch's (checkpoints save it).
struct SgdState {
  // Undefined until the first step that gives the parameter a gradient with
  // momentum on (then a copy of that step's gradient, as in torch). A
  // checkpoint saves it only when defined.
  Tensor momentum_buffer;
};

class SGD : public Optimizer {
 public:
  SGD(const std::vector<Tensor>& params, SgdOptions options = {});
  SGD(std::vector<SgdParam> params, SgdOptions options = {});

  const char* name() const override { return "sgd"; }
  // One update of every parameter that has a gradient (the others, and their
  // state, are left as they are). In place, parallel over elements.
  void step(const Tensor& gate = Tensor()) override;
  // The learning rate of the next steps (schedules set it before each step).
  void set_lr(double lr) override { options_.lr = lr; }
  double lr() const override { return options_.lr; }
  // momentum_buffer.<name> of every parameter that has a buffer; no step counts.
  OptimizerState state_dict(const std::vector<std::string>& names) const override;
  // Copies of the buffers there; a parameter without one keeps none.
  void load_state_dict(const OptimizerState& state, const std::vector<std::string>& names,
                       const std::string& source) override;

  const SgdOptions& options() const { return options_; }
  // Indexed like params(); mutable so a checkpoint can restore it.
  std::vector<SgdState>& state() { return state_; }
  const std::vector<SgdState>& state() const { return state_; }

 private:
  SgdOptions options_;
  std::vector<SgdState> state_;
};

}  // namespace cmha::optim
