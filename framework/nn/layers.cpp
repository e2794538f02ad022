#include "nn/layers.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/init.h"

namespace cmha::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, Generator& init_gen) {
  weight = register_parameter("weight", Tensor::empty({out, in}));
  init::xavier_uniform_(weight, init_gen);
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}));
}

Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }

Embedding::Embedding(int64_t vocab, int64_t dim, Generator& init_gen) {
  weight = register_parameter("weight", Tensor::empty({vocab, dim}));
  init::normal_(weight, init_gen, 0.0f, 1.0f / std::sqrt(static_cast<float>(dim)));
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

LayerNorm::LayerNorm(int64_t dim, float eps, bool affine) : eps(eps) {
  if (affine) {
    weight = register_parameter("weight", Tensor::ones({dim}));
    bias = register_parameter("bias", Tensor::zeros({dim}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

Tensor Dropout::forward(const Tensor& x) const {
  if (!is_training() || p == 0.0f) return x;
  return dropout(x, p, true, generator("Dropout"));
}

Tensor DropPath::forward(const Tensor& x) const {
  if (!is_training() || p == 0.0f) return x;
  // One keep/drop decision per sample: a [B, 1, ..., 1] mask scaled by 1/(1-p).
  Shape mask_shape(x.dim(), 1);
  mask_shape[0] = x.size(0);
  Tensor scale = dropout(Tensor::ones(mask_shape, DType::f32, x.device()), p, true, generator("DropPath"));
  return mul(x, scale);
}

}  // namespace cmha::nn
