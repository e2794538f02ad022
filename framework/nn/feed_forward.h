#pragma once
#include <string>

#include "nn/layers.h"

namespace cmha::nn {

// Position-wise feed-forward: fc2(dropout(act(fc1(x)))).
class FeedForward : public Module {
 public:
  FeedForward(int64_t dim, int64_t hidden, const std::string& activation, float activation_dropout,
              Generator& init_gen);
  Tensor forward(const Tensor& x) const;  // [..., dim] -> [..., dim]
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<Dropout> drop;
  bool gelu_activation;
};

}  // namespace cmha::nn
