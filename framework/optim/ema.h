#pragma once
// Exponential moving average of the weights (Polyak averaging), as timm's
// ModelEmaV2 (DeiT's --model-ema, decay 0.99996): a shadow copy of every
// parameter, updated after each optimiser step with
//   shadow ← decay·shadow + (1 - decay)·param
// in f32, the same operations as timm. Every parameter is averaged, with or
// without a gradient this step. The shadow starts as a copy of the weights.
//
// timm's ModelEmaV2 has no decay warmup; the optional one here is
// TensorFlow's ExponentialMovingAverage(num_updates): the update after n
// earlier updates uses min(decay, (1 + n)/(10 + n)), so early averages do not
// cling to the random initialisation. With it on, a checkpoint must save
// updates() along with the shadow tensors.
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::optim {

struct EmaOptions {
  double decay = 0.9999;  // in [0, 1]; 1 freezes the shadow, 0 copies the weights
  bool warmup = false;    // TensorFlow-style decay warmup (see above)
};

class ExponentialMovingAverage {
 public:
  ExponentialMovingAverage(const std::vector<Tensor>& params, double decay);
  ExponentialMovingAverage(const std::vector<Tensor>& params, EmaOptions options);

  // Folds the current weights into the shadow. In place, parallel over elements.
  // gate: as Optimizer::step's (a non-finite norm leaves the shadow as it is; the update is counted).
  void update(const Tensor& gate = Tensor());
  // The decay the next update() uses.
  double current_decay() const;

  // Exchanges the weights and the shadow, in place: evaluate with the averaged
  // weights, then swap() again to resume training. update() refuses to run
  // while swapped.
  void swap();
  bool swapped() const { return swapped_; }
  // Copies the shadow into `params` (same count and shapes as the tracked
  // parameters), e.g. a separate model for evaluation or export.
  void copy_to(const std::vector<Tensor>& params) const;

  const EmaOptions& options() const { return options_; }
  const std::vector<Tensor>& params() const { return params_; }
  // The shadow tensors, indexed like params(); mutable so a checkpoint can
  // restore them (copy_ into them).
  std::vector<Tensor>& shadow() { return shadow_; }
  const std::vector<Tensor>& shadow() const { return shadow_; }
  // update() calls so far (only the warmup reads it).
  int64_t updates() const { return updates_; }
  void set_updates(int64_t n);

 private:
  EmaOptions options_;
  std::vector<Tensor> params_;
  std::vector<Tensor> shadow_;
  int64_t updates_ = 0;
  bool swapped_ = false;
};

}  // namespace cmha::optim
