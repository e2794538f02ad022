#pragma once
// Head importance (Michel, Levy & Neubig 2019, "Are sixteen heads really
// better than one?"): for every head of every attention layer, how much the
// validation loss grows when that head alone is masked (nn/head_mask.h).
#include <functional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace cmha::eval {

struct LayerImportance {
  std::string place;            // "encoder"
  int64_t layer = 0;
  std::string type;             // the layer's attention type
  std::vector<double> loss;     // the loss with head h alone masked
  std::vector<double> increase; // loss[h] - the unmasked loss
};

struct HeadImportance {
  double base_loss = 0;
  std::vector<LayerImportance> layers;
};

// Masks each head of `model` in turn (any earlier mask is cleared) and
// calls `loss` (the validation loss of the model as it is now); `on_head`
// hears of each head done (it may throw to stop).
HeadImportance head_importance(nn::Module& model, const std::function<double()>& loss,
                               const std::function<void(const LayerImportance&, int64_t head)>& on_head = {});

}  // namespace cmha::eval
