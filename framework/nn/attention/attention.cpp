#include "nn/attention/attention.h"

#include <limits>

#include "autograd/ops.h"
#include "backend/kernels.h"

namespace cmha::nn {

Attention::Attention(const AttentionConfig& cfg, int64_t d_model) : cfg_(cfg) {
  if (cfg_.key_dim == 0) cfg_.key_dim = d_model;
  if (cfg_.value_dim == 0) cfg_.value_dim = d_model;
  CMHA_CHECK(cfg_.heads > 0, "attention.heads must be positive, got " + std::to_string(cfg_.heads));
  CMHA_CHECK(cfg_.value_dim % cfg_.heads == 0, "attention.value_dim (" + std::to_string(cfg_.value_dim) +
                                                   ") must be divisible by attention.heads (" +
                                                   std::to_string(cfg_.heads) + ")");
  CMHA_CHECK(cfg_.dropout >= 0.0f && cfg_.dropout < 1.0f,
             "attention.dropout must be in [0, 1), got " + std::to_string(cfg_.dropout));
  attn_drop_ = register_module("attn_drop", std::make_shared<Dropout>(cfg_.dropout));
}

Tensor Attention::merge_heads(const Tensor& heads) const {
  // [B, H, Tq, dv] -> [B, Tq, H, dv] -> [B, Tq, H·dv] -> [B, Tq, D]
  Tensor x = heads.permute({0, 2, 1, 3});
  x = x.reshape({x.size(0), x.size(1), cfg_.value_dim});
  return out_proj->forward(x);
}

Tensor split_heads(const Tensor& x, int64_t heads) {
  // [B, T, H·d] -> [B, T, H, d] -> [B, H, T, d]
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

std::vector<Tensor> project_stacked(const Tensor& x, const std::vector<Projection>& projections) {
  std::vector<Tensor> weights, biases;
  std::vector<int64_t> widths;
  bool any_bias = false;
  for (const Projection& p : projections) {
    weights.push_back(p.weight);
    widths.push_back(p.weight.size(0));
    any_bias = any_bias || p.bias.defined();
  }
  if (any_bias)
    for (const Projection& p : projections)  // a map without bias adds zeros
      biases.push_back(p.bias.defined() ? p.bias : Tensor::zeros({p.weight.size(0)}, DType::f32, p.weight.device()));
  Tensor out = linear(x, concat(weights, 0), any_bias ? concat(biases, 0) : Tensor());  // [..., Σ n_i]
  return split(out, widths, -1);
}

Tensor attention_weights(Tensor scores, const AttentionMask& mask, int64_t key_offset, const Dropout& drop,
                         const HeadMixing& mixing) {
  const int64_t B = scores.size(0), H = scores.size(1), Tq = scores.size(2), Tk = scores.size(3);
  if (mixing.logits.defined())  // [H, H] @ [B, H, Tq·Tk] -> [B, H, Tq·Tk]
    scores = matmul(mixing.logits, scores.reshape({B, H, Tq * Tk})).view({B, H, Tq, Tk});
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (mask.key_padding.defined()) {
    CMHA_CHECK(mask.key_padding.dim() == 2 && mask.key_padding.size(0) == B && mask.key_padding.size(1) == Tk,
               "attention: key padding mask " + mask.key_padding.describe() + " does not match batch " +
                   std::to_string(B) + " × keys " + std::to_string(Tk));
    scores = masked_fill(scores, mask.key_padding.view({B, 1, 1, Tk}), neg_inf);
  }
  if (mask.causal) {
    // key j is hidden from query i when j > i + key_offset
    Tensor future = Tensor::empty({Tq, Tk}, DType::b8, scores.device());
    CMHA_KERNEL(future.device(), mask.causal)(future, key_offset);
    scores = masked_fill(scores, future, neg_inf);
  }
  Tensor probs = softmax(scores, -1);
  if (mixing.weights.defined())
    probs = matmul(mixing.weights, probs.reshape({B, H, Tq * Tk})).view({B, H, Tq, Tk});
  return drop.forward(probs);
}

}  // namespace cmha::nn
