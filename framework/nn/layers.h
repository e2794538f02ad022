#pragma once
// The basic layers. Parameter names follow PyTorch (weight, bias).
#include "nn/module.h"

namespace cmha::nn {

// y = x·Wᵀ + b; W [out, in]. Initialised xavier-uniform, bias zero.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias, Generator& init_gen);
  Tensor forward(const Tensor& x) const;  // [..., in] -> [..., out]
  Tensor weight, bias;
};

// Rows of a [V, D] table. Initialised N(0, D^-1/2) as in Vaswani/fairseq.
class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t dim, Generator& init_gen);
  Tensor forward(const Tensor& ids) const;  // ids [...] -> [..., D]
  Tensor weight;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f, bool affine = true);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
  float eps;
};

// Dropout with the module tree's generator; identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(float p) : p(p) {}
  Tensor forward(const Tensor& x) const;
  float p;
};

// Stochastic depth: drops the whole residual branch per sample (dim 0).
class DropPath : public Module {
 public:
  explicit DropPath(float p) : p(p) {}
  Tensor forward(const Tensor& x) const;
  float p;
};

}  // namespace cmha::nn
