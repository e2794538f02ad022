#pragma once
// Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019), matching
// torch.optim.Adam / AdamW (PyTorch's single-tensor path) step for step.
//   m ← β1·m + (1-β1)·g          v ← β2·v + (1-β2)·g²
//   p ← p - lr/(1-β1ᵗ) · m / (√v/√(1-β2ᵗ) + ε)
// Adam folds weight decay into the gradient (g += wd·p); AdamW decays the
// weights directly (p ← p·(1 - lr·wd)) before the update.
#include <cstdint>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace cmha::optim {

// Doubles, as PyTorch's Python floats: each derived scalar is rounded to f32
// once, where PyTorch rounds it, so the updates agree to the last bits.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // true: AdamW
};

// One parameter and whether weight decay applies to it (biases and norm
// gains are usually excluded); the tensor is an f32 CPU leaf.
using AdamParam = OptimParam;

// Per-parameter state, the same as PyTorch's (checkpoints save it).
struct AdamState {
  int64_t step = 0;  // updates applied to this parameter
  Tensor exp_avg;    // m, zeros like the parameter
  Tensor exp_avg_sq; // v, zeros like the parameter
};

class Adam : public Optimizer {
 public:
  Adam(const std::vector<Tensor>& params, AdamOptions options = {});
  Adam(std::vector<AdamParam> params, AdamOptions options = {});

  const char* name() const override { return options_.decoupled_weight_decay ? "adamw" : "adam"; }
  // One update of every parameter that has a gradient (the others, and
  // their state, are left as they are). In place, parallel over elements.
  void step(const Tensor& gate = Tensor()) override;
  // The learning rate of the next steps (schedules set it before each step).
  void set_lr(double lr) override { options_.lr = lr; }
  double lr() const override { return options_.lr; }
  // exp_avg.<name>, exp_avg_sq.<name> and the step count of every parameter.
  OptimizerState state_dict(const std::vector<std::string>& names) const override;
  // Every parameter's moments and step count must be there.
  void load_state_dict(const OptimizerState& state, const std::vector<std::string>& names,
                       const std::string& source) override;

  const AdamOptions& options() const { return options_; }
  // Indexed like params(); mutable so a checkpoint can restore it.
  std::vector<AdamState>& state() { return state_; }
  const std::vector<AdamState>& state() const { return state_; }

 private:
  AdamOptions options_;
  std::vector<AdamState> state_;
};

// Adam with decoupled weight decay (PyTorch's default decay is 1e-2).
class AdamW : public Adam {
 public:
  AdamW(const std::vector<Tensor>& params, AdamOptions options = with_decay(1e-2))
      : Adam(params, decoupled(options)) {}
  AdamW(std::vector<AdamParam> params, AdamOptions options = with_decay(1e-2))
      : Adam(std::move(params), decoupled(options)) {}

  static AdamOptions with_decay(double wd) {
    AdamOptions o;
    o.weight_decay = wd;
    return o;
  }

 private:
  static AdamOptions decoupled(AdamOptions o) {
    o.decoupled_weight_decay = true;
    return o;
  }
};

}  // namespace cmha::optim
