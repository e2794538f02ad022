#pragma once
#include "nn/attention/attention.h"

namespace cmha::nn {

// Collaborative multi-head attention (Cordonnier, Loukas, Jaggi 2020).
// All heads share W̃_Q, W̃_K ∈ R^{D×D̃k} (query.weight, key.weight: [D̃k, D],
// no bias); head h scores with the mixing row m_h (mixing: [H, D̃k]):
//   score_h(x, y) = scale · (x W̃_Q diag(m_h) W̃_Kᵀ yᵀ + c_h · y)
// where c_h (content_bias.weight: [H, D]) replaces the query bias (the key
// bias cancels in the softmax). Values and output as in concat attention.
// Q/K parameters: (2·D + H)·D̃k. Keys are computed once for all heads; the
// decoding cache holds ONE key tensor [B, Tk, D̃k + H] (keys and content bias).
// Default scale 1/√(d_model/heads), the scale a converted concat layer had.
class CollaborativeAttention : public Attention {
 public:
  CollaborativeAttention(const AttentionConfig& cfg, int64_t d_model, Generator& init_gen);
  Tensor forward(const Tensor& query, const Tensor& source, const AttentionMask& mask,
                 AttentionCache* cache = nullptr) override;
  const char* type() const override { return "collaborative"; }
  // As computed: the shared queries scaled per head (queries · H · D̃k), then
  // every head against the one key tensor with its content bias
  // (2 · queries · keys · H · (D̃k + H)).
  double forward_flops(int64_t queries, int64_t keys) const override {
    const double q = static_cast<double>(queries), k = static_cast<double>(keys);
    const double H = static_cast<double>(cfg_.heads), R = static_cast<double>(cfg_.key_dim);
    return 2.0 * q * static_cast<double>(query_proj->weight.numel()) +
           2.0 * k * static_cast<double>(key_proj->weight.numel() + content_bias->weight.numel()) + q * H * R +
           2.0 * q * k * H * (R + H) + value_flops(queries, keys);
  }
  // ONE key tensor for all heads: D̃k keys and H content biases per position.
  CacheWidth cache_width() const override { return {cfg_.key_dim + cfg_.heads, value_proj->weight.size(0)}; }
  int64_t key_query_parameters() const override {
    return query_proj->num_parameters() + key_proj->num_parameters() + mixing.numel() + content_bias->num_parameters();
  }
  int64_t shared_dim() const { return cfg_.key_dim; }
  void mask_shared_dims(const std::vector<int64_t>& dims) override;
  int64_t shared_dims() const override { return cfg_.key_dim; }
  std::shared_ptr<Linear> query_proj, key_proj, content_bias;
  Tensor mixing;

 private:
  Tensor dim_mask_;  // [D̃k] ones with zeros at the masked shared dimensions; undefined = none
};

}  // namespace cmha::nn
