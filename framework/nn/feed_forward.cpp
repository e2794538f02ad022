#include "nn/feed_forward.h"

#include "autograd/ops.h"

namespace cmha::nn {

FeedForward::FeedForward(int64_t dim, int64_t hidden, const std::string& activation, float activation_dropout,
                         Generator& init_gen) {
  CMHA_CHECK(activation == "relu" || activation == "gelu",
             "feed-forward activation must be 'relu' or 'gelu', got '" + activation + "'");
  gelu_activation = activation == "gelu";
  fc1 = register_module("fc1", std::make_shared<Linear>(dim, hidden, true, init_gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, dim, true, init_gen));
  drop = register_module("drop", std::make_shared<Dropout>(activation_dropout));
}

Tensor FeedForward::forward(const Tensor& x) const {
  Tensor h = fc1->forward(x);  // [..., hidden]
  h = gelu_activation ? gelu(h) : relu(h);
  return fc2->forward(drop->forward(h));
}

}  // namespace cmha::nn
